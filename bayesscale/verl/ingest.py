"""Finished runs -> observation rows: held-out successes/trials, compute, axis sizes.

For each run of a sweep's manifest with status ``succeeded``, read the logs of all its
attempts (``logs.read_logs``), take the held-out metric at the **final** validated step
(``step="best"`` picks the best validated step instead: that selects on the held-out set
and biases success upward, so it warns), and convert:

    acc      = Σ_ds n_ds · acc_ds / Σ_ds n_ds     (n_ds: held-out prompts per data_source)
    trials   = Σ_ds n_ds                          (the run's val_size)
    successes= round(acc · trials)
    compute  = 6 · N · Σ_steps perf/total_num_tokens     (N = params_b · 1e9; FLOPs ≈ 6ND)

Rows carry the manifest's setting and axis columns (``model``, ``algorithm``, ``domain``,
``params_b``, ``n_envs``, ``n_tasks``, ``rollouts``, ``n_worlds``, ``reward``, ``seed``;
``n_envs``/``n_tasks`` count distinct environments and tasks as ``bayesscale count`` does)
plus ``env_ids``, ``task_ids`` (the ids the run trained on), ``run_id``, ``step``,
``val_metric``, ``tokens``. Runs that cannot be used are reported, never silently dropped:
unfinished ones one line per status, unusable finished ones one line each with the reason.

Re-running is idempotent: rows merge into an existing table by ``run_id``; a row equal to
the stored one is left alone, a different one is a conflict (``replace=True`` to take the
new one); rows of runs not read this time are kept.

>>> result = ingest_sweep("sweeps/example")  # doctest: +SKIP
>>> write_observations(result.rows, "obs.csv")  # doctest: +SKIP
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesscale import names
from bayesscale.data.observations import read_table, write_table
from bayesscale.verl import logs
from bayesscale.verl import manifest as mf

FLOPS_PER_PARAM_TOKEN = 6.0
CARRIED = names.RUN_COLUMNS
IDS = (names.ENV_IDS, names.TASK_IDS)  # ids the run trained on (n_envs/n_tasks: distinct ones)
OUTCOME = (names.SUCCESSES, names.TRIALS, names.COMPUTE, names.STEP, names.VAL_METRIC)


class BiasedSelectionWarning(UserWarning):
    """Best-step selection on the held-out set: success is biased upward."""


@dataclass
class Skipped:
    run_id: str
    reason: str
    status: str = mf.SUCCEEDED
    """The run's manifest status (a run that is not ``succeeded`` has not finished well)."""


# what each unfinished status means, and what to do about it
_STATUS_MEANING = {
    mf.PLANNED: "not launched yet",
    mf.PENDING: "submitted, waiting for GPUs",
    mf.RUNNING: "still running",
    mf.FAILED: "failed (launch retries it while its attempts are below --max-attempts)",
    mf.STOPPED: "stopped (launch retries it while its attempts are below --max-attempts)",
}


@dataclass
class IngestResult:
    rows: pd.DataFrame
    skipped: list[Skipped] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)
    sweep_dir: Path | None = None
    messages: dict[str, str] = field(default_factory=dict)
    """``{run_id: manifest message}`` of failed or stopped runs."""
    attempts: dict[str, int] = field(default_factory=dict)
    """``{run_id: attempts made}`` of failed or stopped runs."""

    def by_status(self) -> dict[str, list[str]]:
        """Run ids of the runs that have not succeeded, by manifest status."""
        out: dict[str, list[str]] = {}
        for s in self.skipped:
            if s.status != mf.SUCCEEDED:
                out.setdefault(s.status, []).append(s.run_id)
        return out

    def next_command(self) -> str | None:
        """What to run next for the runs that have not finished, if anything."""
        statuses = self.by_status()
        sweep = self.sweep_dir if self.sweep_dir is not None else "SWEEP"
        where = "--ray-address http://HEAD:8265 (or --local)"
        launch = f"bayesscale launch {sweep} {where}"
        bad = [r for s in mf.FINISHED_BAD for r in statuses.get(s, [])]
        if bad:
            # launch retries a failed run only while its attempts are below --max-attempts:
            # the plain command would not run these again once their attempts are used
            used = max(self.attempts.get(r, 1) for r in bad)
            example = next((r for r in bad if self.messages.get(r)), bad[0])
            why = f" ({example}: {self.messages[example]})" if self.messages.get(example) else ""
            return (
                f"fix what failed{why}, then bayesscale launch {sweep} --max-attempts "
                f"{used + 1} {where}: launch gives a failed run a new attempt only below "
                f"--max-attempts, and these have made {used}"
                + (" (it also starts the runs not launched yet)" if mf.PLANNED in statuses else "")
            )
        if mf.PLANNED in statuses:
            return launch
        if any(s in statuses for s in mf.ACTIVE):
            return (
                f"bayesscale launch {sweep} --ray-address http://HEAD:8265 follows the running "
                "runs; ingest again when they have finished"
            )
        return None

    def report(self) -> str:
        total = len(self.rows) + len(self.skipped)
        lines = [f"ingested {len(self.rows)} of {total} run(s); could not use {len(self.skipped)}"]
        for status, runs in sorted(
            self.by_status().items(), key=lambda kv: mf.STATUSES.index(kv[0])
        ):
            meaning = _STATUS_MEANING.get(status, f"status {status!r}")
            example = next((r for r in runs if self.messages.get(r)), runs[0])
            detail = (
                f"{example}: {self.messages[example]}" if self.messages.get(example) else example
            )
            lines.append(f"  {status:<9} {len(runs):>5} run(s): {meaning} (e.g. {detail})")
        lines += [
            f"  skipped {s.run_id}: {s.reason}" for s in self.skipped if s.status == mf.SUCCEEDED
        ]
        for run, notes in self.notes.items():
            lines += [f"  note {run}: {n}" for n in notes]
        return "\n".join(lines)


def _val_counts(
    sweep_dir: Path, val_path: str, cache: dict[str, dict[str, int]], run: str = ""
) -> dict[str, int]:
    """Held-out tasks per data source of a run's validation file (read once per file)."""
    if val_path not in cache:
        path = mf.absolute(sweep_dir, val_path)
        if not path.is_file():
            raise mf.ManifestError(
                f"{path}: no such file: the held-out tasks of run {run} ({names.VAL_PATH} in "
                f"{sweep_dir / mf.MANIFEST}), written by bayesscale plan; ingest counts the "
                "held-out tasks of each run from it. Restore it, or plan the sweep again"
            )
        frame = pd.read_parquet(path, columns=[names.DATA_SOURCE])
        cache[val_path] = {
            str(k): int(v) for k, v in frame[names.DATA_SOURCE].value_counts().items()
        }
    return cache[val_path]


def _attempt_logs(sweep_dir: Path, run: str, attempt: int) -> list[Path]:
    return [mf.absolute(sweep_dir, mf.attempt_log(run, k)) for k in range(1, attempt + 1)]


def ingest_run(
    row: pd.Series, sweep_dir: Path, counts: dict[str, int], step: str = "final"
) -> tuple[dict | None, str, list[str]]:
    """(observation row or None, reason if None, notes) for one manifest row."""
    run = str(row[names.RUN_ID])
    paths = _attempt_logs(sweep_dir, run, int(row[names.ATTEMPT]))
    current = mf.absolute(sweep_dir, str(row[names.LOG_PATH]))
    if current not in paths:
        paths.append(current)
    if not current.exists():
        return None, f"no log at {current}", []
    log = logs.read_logs(p for p in paths if p.exists())
    notes = list(log.notes)
    validated = {}
    for s, record in sorted(log.steps.items()):
        found = logs.held_out(record)
        if found and all(ds in found for ds in counts):
            validated[s] = found
    if not validated:
        seen = sorted(
            {h.data_source for r in log.steps.values() for h in logs.held_out(r).values()}
        )
        why = f"held-out data_source(s) {sorted(counts)} never all validated at one step"
        if seen:
            why += f" (log has metrics for {seen})"
        else:
            why += " (no val-core/<data_source>/acc|reward/mean@N metric in the log)"
        return None, why, notes
    trials = sum(counts.values())

    def accuracy(found: dict[str, logs.HeldOut]) -> float:
        return sum(counts[ds] * found[ds].value for ds in counts) / trials

    if step == "final":
        chosen = max(validated)
    elif step == "best":
        chosen = max(validated, key=lambda s: (accuracy(validated[s]), s))
        warnings.warn(
            f"run {run}: best-step selection picks step {chosen} by its held-out score, which "
            "biases success upward; use the final step for the law",
            BiasedSelectionWarning,
            stacklevel=2,
        )
    else:
        raise ValueError(f"step must be 'final' or 'best', got {step!r}")
    last = log.last_step
    if last is not None and last > chosen:
        notes.append(f"last validation at step {chosen}, training logged up to step {last}")
    acc = accuracy(validated[chosen])
    if not 0.0 <= acc <= 1.0:
        return (
            None,
            f"held-out score {acc:g} at step {chosen} is not a success rate in [0, 1]",
            notes,
        )
    tokens, with_tokens, n_steps = logs.tokens_through(log, chosen)
    params = row.get(names.PARAMS_B)
    compute = float("nan")
    if with_tokens == 0:
        notes.append(f"no {logs.TOKENS_KEY} logged: compute unknown")
    else:
        if with_tokens < n_steps:
            notes.append(
                f"{logs.TOKENS_KEY} at {with_tokens} of {n_steps} steps: compute is a lower bound"
            )
        if params is not None and not (isinstance(params, float) and math.isnan(params)):
            compute = FLOPS_PER_PARAM_TOKEN * float(params) * 1e9 * tokens
        else:
            notes.append(f"no {names.PARAMS_B}: compute unknown")
    out: dict[str, Any] = {names.RUN_ID: run}
    for column in CARRIED + IDS:
        if column in row.index and not (isinstance(row[column], float) and math.isnan(row[column])):
            out[column] = row[column]
    metrics = sorted({validated[chosen][ds].metric for ds in counts})
    out.update(
        {
            names.SUCCESSES: round(acc * trials),
            names.TRIALS: int(trials),
            names.COMPUTE: compute,
            names.TOKENS: tokens if with_tokens else float("nan"),
            names.STEP: int(chosen),
            names.VAL_METRIC: ";".join(metrics),
        }
    )
    if names.SWEEP_AXIS in row.index and isinstance(row[names.SWEEP_AXIS], str):
        out[names.SWEEP_AXIS] = row[names.SWEEP_AXIS]  # which grid axis or point the run served
    return out, "", notes


def ingest_sweep(sweep_dir: str | Path, step: str = "final") -> IngestResult:
    """Read every finished run of a sweep; report the others with their reason."""
    sweep_dir = Path(sweep_dir).resolve()
    frame = mf.read_manifest(sweep_dir)
    rows, skipped, notes, messages = [], [], {}, {}
    attempts: dict[str, int] = {}
    if names.ENV_IDS not in frame.columns:
        notes[mf.MANIFEST] = [
            f"no {names.ENV_IDS!r}/{names.TASK_IDS!r} columns (planned by an older bayesscale): "
            f"its {names.N_ENVS}/{names.N_TASKS} count ids, not distinct units; "
            "bayesscale count gives the distinct ones"
        ]
    cache: dict[str, dict[str, int]] = {}
    for _, row in frame.iterrows():
        run = str(row[names.RUN_ID])
        status = str(row[names.STATUS])
        if status != mf.SUCCEEDED:
            skipped.append(Skipped(run, f"status {status!r}, not 'succeeded'", status))
            if status in mf.FINISHED_BAD and names.MESSAGE in row.index and row[names.MESSAGE]:
                messages[run] = str(row[names.MESSAGE])
            if status in mf.FINISHED_BAD:
                attempts[run] = int(row[names.ATTEMPT])
            continue
        counts = _val_counts(sweep_dir, str(row[names.VAL_PATH]), cache, run)
        out, why, run_notes = ingest_run(row, sweep_dir, counts, step=step)
        if run_notes:
            notes[run] = run_notes
        if out is None:
            skipped.append(Skipped(run, why))
        else:
            rows.append(out)
    return IngestResult(pd.DataFrame(rows), skipped, notes, sweep_dir, messages, attempts)


def _same(a: object, b: object) -> bool:
    if isinstance(a, int | float | np.number) and isinstance(b, int | float | np.number):
        if math.isnan(float(a)) and math.isnan(float(b)):
            return True
        return bool(np.isclose(float(a), float(b), rtol=1e-9, atol=0.0))
    if pd.isna(a) and pd.isna(b):
        return True
    return str(a) == str(b)


@dataclass
class MergeResult:
    frame: pd.DataFrame
    added: list[str]
    unchanged: list[str]
    replaced: list[str]


def merge_observations(
    existing: pd.DataFrame | None, new: pd.DataFrame, replace: bool = False, source: str = "<obs>"
) -> MergeResult:
    """Merge new rows into an existing table by ``run_id``; never lose or duplicate a run.

    Raises ``ValueError`` naming the run ids whose stored row differs from the new one,
    unless ``replace``; a replaced run keeps its values in columns the new rows lack (ones
    the user added to the table).
    """
    if existing is None or existing.empty:
        return MergeResult(new.reset_index(drop=True), list(new.get(names.RUN_ID, [])), [], [])
    if names.RUN_ID not in existing.columns:
        raise ValueError(
            f"{source}: column {names.RUN_ID!r} is missing; cannot merge ingested runs by run id"
        )
    dup = existing[names.RUN_ID][existing[names.RUN_ID].duplicated()]
    if len(dup):
        raise ValueError(
            f"{source}: column {names.RUN_ID!r}: repeated run id(s) {sorted(set(dup))[:5]}"
        )
    stored = existing.set_index(names.RUN_ID, drop=False)
    added, unchanged, replaced, conflicts = [], [], [], []
    merged = existing.copy()
    for _, row in new.iterrows():
        run = row[names.RUN_ID]
        if run not in stored.index:
            added.append(run)
            continue
        old = stored.loc[run]
        columns = [c for c in new.columns if c in stored.columns]
        differs = [c for c in columns if not _same(old[c], row[c])]
        differs += [c for c in new.columns if c not in stored.columns and not pd.isna(row[c])]
        if not differs:
            unchanged.append(run)
        elif replace:
            replaced.append(run)
        else:
            conflicts.append(f"{run} ({', '.join(differs[:4])})")
    if conflicts:
        raise ValueError(
            f"{source}: {len(conflicts)} run(s) already ingested with different values: "
            f"{'; '.join(conflicts[:5])}. Nothing written; pass --force to take the new rows"
        )
    if replaced:
        merged = merged[~merged[names.RUN_ID].isin(replaced)]
    take = new[new[names.RUN_ID].isin(added + replaced)].copy()
    for column in (c for c in existing.columns if c not in new.columns):
        # a column the user added to the table (a note, say): a replaced run keeps its value
        take[column] = take[names.RUN_ID].map(stored[column])
    merged = pd.concat([merged, take], ignore_index=True)
    return MergeResult(merged, added, unchanged, replaced)


def write_observations(rows: pd.DataFrame, out: str | Path, replace: bool = False) -> MergeResult:
    """Merge ``rows`` into ``out`` (CSV or parquet) and write it atomically."""
    out = Path(out)
    existing = read_table(out)[0] if out.exists() else None
    result = merge_observations(existing, rows, replace=replace, source=str(out))
    if result.added or result.replaced or existing is None:
        write_table(result.frame, out, overwrite=True)
    return result
