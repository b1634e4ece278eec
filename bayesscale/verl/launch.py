"""Launch a planned sweep: Ray's job API (queued against free GPUs) or locally, resumable.

verl does not wait for GPUs: its resource-pool check raises when the cluster is short. So
the launcher queues: each round it reads the cluster's GPU usage from the dashboard
(``/api/cluster_status``) and submits only runs that fit,

    free = min(total − used, total − Σ gpus of this sweep's pending/running runs)

(the second term covers jobs submitted but not yet holding their GPUs), then polls.
Every submission and state change is written to the manifest at once (atomic rewrite).

Resuming is safe: a run already ``succeeded``, ``running`` or ``pending`` is never submitted
again; job ids are deterministic (``bs-<sweep uid>-<run_id>-a<attempt>``), so a run
submitted just before a crash (manifest not yet updated) is found on the cluster and
adopted instead of resubmitted. A ``failed``/``stopped`` run gets a new attempt number and a
new log path (verl's file logger truncates its file), up to ``max_attempts``.

>>> from bayesscale.verl.launch import RayBackend, launch
>>> launch("sweeps/example", RayBackend("http://head:8265"))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from bayesscale import names
from bayesscale.verl import manifest as mf
from bayesscale.verl.commands import LOGGER_ENV, Command, run_command
from bayesscale.verl.sweep import load_sweep_spec

RAY_STATES = {
    "PENDING": mf.PENDING,
    "RUNNING": mf.RUNNING,
    "SUCCEEDED": mf.SUCCEEDED,
    "FAILED": mf.FAILED,
    "STOPPED": mf.STOPPED,
}
DEFAULT_MAX_ATTEMPTS = 3
REASON_CHARS = 300  # the most of a failed run's last output line kept as its manifest message
_ATTEMPT_PREFIX = re.compile(r"^(attempt \d+ \w+: )+")


class LaunchError(RuntimeError):
    """The sweep cannot be launched as asked (cluster unreachable, run too large)."""


class Backend(Protocol):
    """Where runs go: a Ray cluster or this machine."""

    def states(self, job_ids: list[str]) -> dict[str, str]:
        """Manifest status of each known job id (unknown ids are left out)."""
        ...

    def reason(self, job_id: str) -> str:
        """Why a job that ended badly did (its error), as far as the backend knows."""
        ...

    def free_gpus(self, reserved: float) -> float:
        """GPUs a new run may take now, given ``reserved`` GPUs of this sweep's active runs."""
        ...

    def submit(self, job_id: str, command: Command, run_dir: Path) -> str:
        """Start one run; return its manifest status right after."""
        ...


@dataclass
class RayBackend:
    """Ray's job API at the dashboard address (``http://HEAD:8265``).

    ``gpu_resource`` names the resource that counts GPUs (``GPU``; a custom resource on
    clusters that label accelerators differently, or in tests).
    """

    address: str
    gpu_resource: str = "GPU"
    headers: dict[str, str] = field(default_factory=dict)
    submit_tries: int = 5
    status_wait_s: float = 15.0
    _client: Any = None
    _messages: dict[str, str] = field(default_factory=dict)

    def client(self) -> Any:
        if self._client is None:
            from ray.job_submission import JobSubmissionClient

            try:
                self._client = JobSubmissionClient(self.address, headers=self.headers or None)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise LaunchError(f"cannot reach the Ray job API at {self.address}: {exc}") from exc
            except Exception as exc:
                if type(exc).__name__ != "AuthenticationError":  # ray.exceptions' (Ray >= 2.5x)
                    raise
                raise LaunchError(
                    f"the Ray cluster at {self.address} requires an authentication token, and "
                    "none was found or it was not accepted: set RAY_AUTH_TOKEN (or "
                    "RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token) to the cluster's token, or start "
                    "a local head with RAY_AUTH_MODE=disabled"
                ) from exc
        return self._client

    def states(self, job_ids: list[str]) -> dict[str, str]:
        wanted = set(job_ids)
        out = {}
        try:
            jobs = self.client().list_jobs()
        except (OSError, RuntimeError) as exc:
            raise LaunchError(f"cannot list jobs at {self.address}: {exc}") from exc
        for job in jobs:
            sid = getattr(job, "submission_id", None)
            if sid in wanted:
                out[sid] = RAY_STATES.get(
                    str(job.status.value if hasattr(job.status, "value") else job.status), mf.FAILED
                )
                self._messages[sid] = str(getattr(job, "message", "") or "")
        return out

    def reason(self, job_id: str) -> str:
        """Why a job ended badly, as Ray says it (its driver's error), else where to look."""
        said = self._messages.get(job_id, "").strip()
        return _clip(said) if said else f"see `ray job logs {job_id}`"

    def cluster_gpus(self) -> tuple[float, float]:
        """(used, total) of the GPU resource, from the dashboard's cluster status.

        The status is filled in by the head a few seconds after it starts (and after a
        node joins): an answer without any resources is asked again, up to ``status_wait_s``.
        """
        url = self.address.rstrip("/") + "/api/cluster_status"
        deadline = time.monotonic() + self.status_wait_s
        while True:
            try:
                # the job client's own request carries the cluster's auth token when set
                response = self.client()._do_request("GET", "/api/cluster_status")
                if response.status_code != 200:
                    raise OSError(f"HTTP {response.status_code}: {response.text[:200]}")
                payload = response.json()
            except (OSError, ValueError, AttributeError) as exc:
                raise LaunchError(f"cannot read cluster resources from {url}: {exc}") from exc
            usage = (
                (payload.get("data") or {})
                .get("clusterStatus", {})
                .get("loadMetricsReport", {})
                .get("usage", {})
            )
            if self.gpu_resource in usage or (usage and time.monotonic() > deadline):
                used, total = usage.get(self.gpu_resource, (0.0, 0.0))
                return float(used), float(total)
            if time.monotonic() > deadline:
                raise LaunchError(f"{url}: the cluster reports no resources yet; try again")
            time.sleep(0.5)

    def free_gpus(self, reserved: float) -> float:
        used, total = self.cluster_gpus()
        return max(0.0, min(total - used, total - reserved))

    def total_gpus(self) -> float:
        return self.cluster_gpus()[1]

    def submit(self, job_id: str, command: Command, run_dir: Path) -> str:
        # verl's file logger opens $VERL_FILE_LOGGER_PATH without creating its folder
        _log_dir(command, run_dir).mkdir(parents=True, exist_ok=True)
        client = self.client()
        for attempt in range(self.submit_tries):
            try:
                client.submit_job(
                    entrypoint=command.entrypoint(),
                    submission_id=job_id,
                    runtime_env={"env_vars": dict(command.env)},
                    metadata={"bayesscale_job": job_id},
                )
                return mf.PENDING
            except OSError as exc:  # requests' ConnectionError: the head is unreachable
                raise LaunchError(f"submitting {job_id} to {self.address} failed: {exc}") from exc
            except RuntimeError as exc:
                if "already exists" in str(exc):
                    return mf.PENDING  # submitted before a crash: adopt, never duplicate
                if "try again" not in str(exc) or attempt == self.submit_tries - 1:
                    raise LaunchError(
                        f"submitting {job_id} to {self.address} failed: {exc}"
                    ) from exc
                time.sleep(2.0 * (attempt + 1))  # e.g. "No available agent", while a head starts
        raise LaunchError(f"submitting {job_id} to {self.address} failed")


@dataclass
class LocalBackend:
    """Runs one at a time on this machine (``subprocess``), stdout/stderr to the attempt dir."""

    cwd: Path | None = None
    _reasons: dict[str, str] = field(default_factory=dict)

    def states(self, job_ids: list[str]) -> dict[str, str]:
        return {}  # a local run ends inside submit; nothing outlives the launcher

    def reason(self, job_id: str) -> str:
        """Why a run failed: its exit status and the last line it printed."""
        return self._reasons.get(job_id, "")

    def free_gpus(self, reserved: float) -> float:
        return float("inf") if reserved == 0 else 0.0

    def total_gpus(self) -> float:
        return float("inf")

    def submit(self, job_id: str, command: Command, run_dir: Path) -> str:
        log_dir = _log_dir(command, run_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        with (log_dir / "stdout.log").open("wb") as out:
            proc = subprocess.run(
                list(command.argv),
                env={**os.environ, **command.env},
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                check=False,
            )
        if proc.returncode == 0:
            return mf.SUCCEEDED
        last = _last_line(log_dir / "stdout.log")
        self._reasons[job_id] = f"exit status {proc.returncode}" + (f": {last}" if last else "")
        return mf.FAILED


def _last_line(path: Path) -> str:
    """The last non-empty line of a run's output (a traceback's last line is its error)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return _clip(lines[-1]) if lines else ""


def _clip(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 3] + "..."


def check_entrypoint(command: Command, cwd: Path | None = None) -> None:
    """Before a local run: the entrypoint's program exists and, for ``PYTHON -m MODULE``, the
    module's package is importable by that Python, so that a missing verl fails at once, with
    what to do, instead of as every attempt of every run.

    >>> check_entrypoint(Command(("no-such-program-x", "--help"), {}))
    Traceback (most recent call last):
    ...
    bayesscale.verl.launch.LaunchError: the entrypoint's program 'no-such-program-x' is not on PATH nor a file: nothing was run (pass --entrypoint, or set [verl] entrypoint in the sweep spec)
    """
    argv = list(command.argv)
    program = argv[0]
    where = Path(cwd or ".") / program
    found = shutil.which(program) or (where.exists() and os.access(where, os.X_OK))
    if not found:
        raise LaunchError(
            f"the entrypoint's program {program!r} is not on PATH nor a file: nothing was run "
            "(pass --entrypoint, or set [verl] entrypoint in the sweep spec)"
        )
    if "-m" not in argv[1:3]:
        return
    module = argv[argv.index("-m") + 1] if argv.index("-m") + 1 < len(argv) else ""
    package = module.split(".")[0]
    probe = (
        "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)"
    )
    done = subprocess.run(
        [program, "-c", probe, package],
        env={**os.environ, **command.env},
        cwd=cwd,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        hint = " (pip install verl; docs/verl.md)" if package == "verl" else ""
        raise LaunchError(
            f"{program} cannot import {package!r}, so `{program} -m {module}` would fail in every "
            f"run: nothing was run. Install it for that Python{hint}, or pass --entrypoint"
        )


def _log_dir(command: Command, run_dir: Path) -> Path:
    """The attempt's folder: where its verl log (``$VERL_FILE_LOGGER_PATH``) goes."""
    return Path(command.env.get(LOGGER_ENV, run_dir / "x")).parent


@dataclass
class LaunchSummary:
    submitted: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    gave_up: dict[str, str] = field(default_factory=dict)
    """``{run_id: reason}`` of the selected runs that ended failed or stopped with every attempt
    used: launch will not run them again unless --max-attempts is raised."""

    def text(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        return f"submitted {len(self.submitted)} run(s), {len(self.retried)} retried; now: {counts}"


def sweep_uid(sweep_dir: str | Path) -> str:
    report = json.loads((Path(sweep_dir) / mf.PLAN_REPORT).read_text())
    return str(report.get("sweep_uid", "nouid"))[:8]


def job_id_of(uid: str, run: str, attempt: int) -> str:
    """Deterministic job (submission) id of one attempt."""
    return f"bs-{uid}-{run}-a{attempt}"


def _set(frame: pd.DataFrame, i: Any, **values: Any) -> None:
    for key, value in values.items():
        frame.at[i, key] = value
    frame.at[i, names.UPDATED_AT] = mf.now()


def refresh(frame: pd.DataFrame, backend: Backend, uid: str) -> bool:
    """Update pending/running/planned rows from the backend; True when anything changed."""
    ids = {}
    for i, row in frame.iterrows():
        if row[names.STATUS] in (*mf.ACTIVE, mf.PLANNED):
            ids[i] = row[names.JOB_ID] or job_id_of(uid, row[names.RUN_ID], int(row[names.ATTEMPT]))
    if not ids:
        return False
    known = backend.states(list(ids.values()))
    changed = False
    for i, job in ids.items():
        state = known.get(job)
        if state is None:
            if frame.at[i, names.STATUS] in mf.ACTIVE:
                # a local run whose launcher died, or a job the cluster does not know (never
                # submitted before a crash, or the cluster restarted): retry it
                why = (
                    "job not found on the cluster"
                    if isinstance(backend, RayBackend)
                    else "launcher exited during the run"
                )
                _set(frame, i, **{names.STATUS: mf.FAILED, names.MESSAGE: why})
                changed = True
            continue
        if state != frame.at[i, names.STATUS] or frame.at[i, names.JOB_ID] != job:
            said = {names.MESSAGE: backend.reason(job)} if state in mf.FINISHED_BAD else {}
            _set(frame, i, **{names.STATUS: state, names.JOB_ID: job, **said})
            changed = True
    return changed


def retry_failed(frame: pd.DataFrame, max_attempts: int, summary: LaunchSummary) -> bool:
    """Give each failed/stopped run below ``max_attempts`` a new attempt and log path."""
    changed = False
    for i, row in frame.iterrows():
        if row[names.STATUS] in mf.FINISHED_BAD and int(row[names.ATTEMPT]) < max_attempts:
            attempt = int(row[names.ATTEMPT]) + 1
            _set(
                frame,
                i,
                **{
                    names.ATTEMPT: attempt,
                    names.LOG_PATH: mf.attempt_log(row[names.RUN_ID], attempt),
                    names.STATUS: mf.PLANNED,
                    names.JOB_ID: "",
                    # what the last attempt died of, said once (never "attempt 2 failed:
                    # attempt 1 failed")
                    names.MESSAGE: f"attempt {attempt - 1} {row[names.STATUS]}"
                    + (f": {reason}" if (reason := _reason_of(row[names.MESSAGE])) else ""),
                },
            )
            summary.retried.append(str(row[names.RUN_ID]))
            changed = True
    return changed


def _reason_of(message: object) -> str:
    """A run's failure reason without the ``attempt N failed:`` prefixes of earlier retries.

    >>> _reason_of("attempt 2 failed: attempt 1 failed: exit status 1: No module named 'verl'")
    "exit status 1: No module named 'verl'"
    """
    return _ATTEMPT_PREFIX.sub("", str(message or "")).strip()


def launch(
    sweep_dir: str | Path,
    backend: Backend,
    *,
    wait: bool = True,
    poll_s: float = 10.0,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    max_concurrent: int | None = None,
    entrypoint: str | None = None,
    runs: list[str] | None = None,
    timeout_s: float | None = None,
    echo: Callable[[str], None] = lambda _: None,
) -> LaunchSummary:
    """Submit every runnable run of the sweep, queued against free GPUs; poll until all are
    finished (``wait``) or return after one round. Safe to stop and call again."""
    sweep_dir = Path(sweep_dir).resolve()
    spec = load_sweep_spec(sweep_dir / mf.SPEC_COPY)
    uid = sweep_uid(sweep_dir)
    frame = mf.read_manifest(sweep_dir)
    if runs is not None:
        unknown = sorted(set(runs) - set(frame[names.RUN_ID]))
        if unknown:
            raise LaunchError(f"{sweep_dir / mf.MANIFEST}: no run(s) {unknown}")
    selected = set(frame[names.RUN_ID]) if runs is None else set(runs)
    total = getattr(backend, "total_gpus", lambda: float("inf"))()
    too_big = frame[(frame[names.N_GPUS] > total) & frame[names.RUN_ID].isin(selected)]
    if len(too_big):
        raise LaunchError(
            f"run {too_big[names.RUN_ID].iloc[0]!r} needs {too_big[names.N_GPUS].iloc[0]} GPUs; "
            f"the cluster has {total:g} in all"
        )
    todo = frame[frame[names.RUN_ID].isin(selected)]
    if isinstance(backend, LocalBackend) and len(todo):
        # every run shares the entrypoint: one check before any attempt
        first = run_command(
            todo.iloc[0].to_dict(), spec.verl, sweep_dir, project=spec.name, entrypoint=entrypoint
        )
        check_entrypoint(first, backend.cwd)
    summary = LaunchSummary()
    started = time.monotonic()
    while True:
        changed = refresh(frame, backend, uid)
        changed |= retry_failed(frame, max_attempts, summary)
        if changed:
            mf.write_manifest(frame, sweep_dir)
        active = frame[frame[names.STATUS].isin(mf.ACTIVE)]
        free: float | None = None  # asked once per round, only when something waits
        for i, row in frame.iterrows():
            if row[names.STATUS] != mf.PLANNED or row[names.RUN_ID] not in selected:
                continue
            if (
                max_concurrent is not None
                and int(frame[names.STATUS].isin(mf.ACTIVE).sum()) >= max_concurrent
            ):
                break
            need = float(row[names.N_GPUS])
            if free is None:
                free = backend.free_gpus(float(active[names.N_GPUS].sum()))
            if free < need:
                break
            job = job_id_of(uid, str(row[names.RUN_ID]), int(row[names.ATTEMPT]))
            command = run_command(
                row.to_dict(), spec.verl, sweep_dir, project=spec.name, entrypoint=entrypoint
            )
            _set(frame, i, **{names.STATUS: mf.PENDING, names.JOB_ID: job})
            mf.write_manifest(frame, sweep_dir)  # recorded before the job can finish
            echo(f"submit {job} ({need:g} GPU)")
            try:
                state = backend.submit(job, command, sweep_dir / "runs" / str(row[names.RUN_ID]))
            except BaseException:
                if isinstance(backend, LocalBackend):  # it ran part-way: a new attempt next time
                    _set(frame, i, **{names.STATUS: mf.STOPPED, names.MESSAGE: "interrupted"})
                else:  # the job may exist: the next launch adopts it by its id, or resubmits
                    _set(frame, i, **{names.STATUS: mf.PLANNED, names.JOB_ID: ""})
                mf.write_manifest(frame, sweep_dir)
                raise
            said = {names.MESSAGE: backend.reason(job)} if state in mf.FINISHED_BAD else {}
            _set(frame, i, **{names.STATUS: state, **said})
            mf.write_manifest(frame, sweep_dir)
            summary.submitted.append(job)
            free -= need if state in mf.ACTIVE else 0.0
            if state in mf.FINISHED_BAD and isinstance(backend, LocalBackend):
                out = Path(command.env[LOGGER_ENV]).parent / "stdout.log"
                echo(f"{job} {state}; see {out}")
        pending = frame[names.RUN_ID].isin(selected) & (
            frame[names.STATUS].isin(mf.ACTIVE)
            | (frame[names.STATUS] == mf.PLANNED)
            | (frame[names.STATUS].isin(mf.FINISHED_BAD) & (frame[names.ATTEMPT] < max_attempts))
        )
        if not wait or not pending.any():
            break
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            echo(f"stopping after {timeout_s:g} s; run launch again to resume")
            break
        time.sleep(poll_s)
    summary.counts = {str(k): int(v) for k, v in frame[names.STATUS].value_counts().items()}
    summary.gave_up = _gave_up(frame, selected, max_attempts)
    return summary


def _gave_up(frame: pd.DataFrame, selected: set[str], max_attempts: int) -> dict[str, str]:
    """``{run_id: reason}`` of the selected runs failed or stopped with every attempt used."""
    done = frame[
        frame[names.RUN_ID].isin(selected)
        & frame[names.STATUS].isin(mf.FINISHED_BAD)
        & (frame[names.ATTEMPT] >= max_attempts)
    ]
    return {
        str(r[names.RUN_ID]): f"attempt {int(r[names.ATTEMPT])} {r[names.STATUS]}"
        + (f": {reason}" if (reason := _reason_of(r[names.MESSAGE])) else "")
        for _, r in done.iterrows()
    }


def commands_of(sweep_dir: str | Path, entrypoint: str | None = None) -> Mapping[str, Command]:
    """Each run's command for its current attempt (what ``launch`` would submit)."""
    sweep_dir = Path(sweep_dir).resolve()
    spec = load_sweep_spec(sweep_dir / mf.SPEC_COPY)
    frame = mf.read_manifest(sweep_dir)
    return {
        str(row[names.RUN_ID]): run_command(
            row.to_dict(), spec.verl, sweep_dir, project=spec.name, entrypoint=entrypoint
        )
        for _, row in frame.iterrows()
    }
