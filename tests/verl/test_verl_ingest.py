"""Ingest: golden verl logs in a planned sweep -> observation rows, idempotently."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
from verl_testlib import GOLDEN

from bayesscale import names
from bayesscale.verl import manifest as mf
from bayesscale.verl.ingest import BiasedSelectionWarning, ingest_sweep, write_observations


def place(sweep: Path, run: str, golden: list[str], status: str = mf.SUCCEEDED) -> None:
    """Put golden logs into a run's attempt folders and mark the run in the manifest."""
    frame = mf.read_manifest(sweep)
    i = frame.index[frame[names.RUN_ID] == run][0]
    for k, name in enumerate(golden, start=1):
        target = sweep / mf.attempt_log(run, k)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(GOLDEN / name, target)
    frame.at[i, names.STATUS] = status
    frame.at[i, names.ATTEMPT] = len(golden)
    frame.at[i, names.LOG_PATH] = mf.attempt_log(run, len(golden))
    mf.write_manifest(frame, sweep)


def set_val_sources(sweep: Path, sources: dict[str, int]) -> None:
    val = pd.read_parquet(sweep / "data/val.parquet")
    labels = [s for s, n in sources.items() for _ in range(n)]
    val = val.iloc[: len(labels)].copy()
    val[names.DATA_SOURCE] = labels
    val.to_parquet(sweep / "data/val.parquet")


@pytest.fixture
def sweep(small_sweep: Path) -> Path:
    set_val_sources(small_sweep, {"synthetic/arith": 30})
    return small_sweep


def runs(sweep: Path) -> list[str]:
    return list(mf.read_manifest(sweep)[names.RUN_ID])


def test_golden_runs(sweep: Path) -> None:
    r = runs(sweep)
    place(sweep, r[0], ["v09_clean.jsonl"])
    place(sweep, r[1], ["v09_nulls_mean4.jsonl"])
    place(sweep, r[2], ["v06_nan_truncated.jsonl"])
    place(sweep, r[3], ["resume_attempt-1.jsonl", "resume_attempt-2.jsonl"])
    place(sweep, r[4], ["no_validation.jsonl"])
    place(sweep, r[5], ["v09_clean.jsonl"], status=mf.FAILED)
    result = ingest_sweep(sweep)
    rows = result.rows.set_index(names.RUN_ID)
    assert list(rows.index) == r[:4]
    manifest = mf.read_manifest(sweep).set_index(names.RUN_ID)
    clean = rows.loc[r[0]]
    assert (clean[names.SUCCESSES], clean[names.TRIALS], clean[names.STEP]) == (18, 30, 8)
    tokens = sum(100_000 + s for s in range(1, 9))
    assert clean[names.COMPUTE] == pytest.approx(6 * 0.5e9 * tokens)
    for column in (
        names.MODEL,
        names.ALGORITHM,
        names.N_ENVS,
        names.N_TASKS,
        names.ROLLOUTS,
        names.SEED,
        names.N_WORLDS,
    ):
        assert clean[column] == manifest.loc[r[0], column]
    assert rows.loc[r[1], names.VAL_METRIC] == "val-core/synthetic/arith/acc/mean@4"
    assert "lower bound" in " ".join(result.notes[r[1]])
    assert rows.loc[r[2], names.STEP] == 4  # the step-8 line was cut off: last validated is 4
    assert rows.loc[r[2], names.SUCCESSES] == 12
    assert any("training logged up to step 7" in n for n in result.notes[r[2]])
    resumed = rows.loc[r[3]]
    assert resumed[names.STEP] == 8 and resumed[names.SUCCESSES] == 18
    assert resumed[names.TOKENS] == sum(100_000 + s for s in range(1, 5)) + sum(
        200_000 + s for s in range(5, 9)
    )
    skipped = {s.run_id: s.reason for s in result.skipped}
    assert "never all validated" in skipped[r[4]]
    assert "status 'failed'" in skipped[r[5]] and "status 'planned'" in skipped[r[6]]
    report = result.report().splitlines()
    assert report[:3] == [
        "ingested 4 of 40 run(s); could not use 36",
        f"  planned      34 run(s): not launched yet (e.g. {r[6]})",
        "  failed        1 run(s): failed (launch retries it while its attempts are below "
        f"--max-attempts) (e.g. {r[5]})",
    ]
    assert report[3].startswith(f"  skipped {r[4]}: held-out data_source(s)")
    assert mf.MANIFEST not in result.notes  # planned now: env_ids/task_ids present
    for column in (names.ENV_IDS, names.TASK_IDS):  # the ids behind the distinct counts
        assert clean[column] == manifest.loc[r[0], column]


def test_two_sources_weighted_by_held_out_counts(sweep: Path) -> None:
    set_val_sources(sweep, {"org/bench/v2": 20, "gsm8k": 10})
    r = runs(sweep)
    place(sweep, r[0], ["v09_two_sources_reward.jsonl"])
    row = ingest_sweep(sweep).rows.iloc[0]
    assert row[names.TRIALS] == 30
    assert row[names.SUCCESSES] == round(20 * 0.6 + 10 * 0.5)
    assert (
        row[names.VAL_METRIC] == "val-core/gsm8k/reward/mean@1;val-core/org/bench/v2/reward/mean@1"
    )


def test_missing_source_is_reported(sweep: Path) -> None:
    set_val_sources(sweep, {"synthetic/arith": 10, "other": 5})
    place(sweep, runs(sweep)[0], ["v09_clean.jsonl"])
    result = ingest_sweep(sweep)
    assert result.rows.empty
    assert (
        "never all validated" in result.skipped[0].reason
        and "synthetic/arith" in result.skipped[0].reason
    )


def test_best_step_is_flagged(sweep: Path) -> None:
    place(sweep, runs(sweep)[0], ["v09_clean.jsonl"])
    with pytest.warns(BiasedSelectionWarning, match="biases success upward"):
        result = ingest_sweep(sweep, step="best")
    assert result.rows.iloc[0][names.STEP] == 8


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_idempotent_merge(sweep: Path, tmp_path: Path, suffix: str) -> None:
    r = runs(sweep)
    place(sweep, r[0], ["v09_clean.jsonl"])
    out = tmp_path / f"obs{suffix}"
    first = write_observations(ingest_sweep(sweep).rows, out)
    assert first.added == [r[0]]
    again = write_observations(ingest_sweep(sweep).rows, out)
    assert again.added == [] and again.unchanged == [r[0]]
    place(sweep, r[1], ["v09_nulls_mean4.jsonl"])
    third = write_observations(ingest_sweep(sweep).rows, out)
    assert third.added == [r[1]] and third.unchanged == [r[0]]
    table = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert list(table[names.RUN_ID]) == [r[0], r[1]]  # nothing lost or duplicated
    # a run whose log changed is a conflict, not a silent overwrite
    noted = table.assign(note=["rerun?", "ok"])  # a column of the user's own
    if suffix == ".csv":
        noted.to_csv(out, index=False)
    else:
        noted.to_parquet(out, index=False)
    place(sweep, r[0], ["v06_nan_truncated.jsonl"])
    with pytest.raises(ValueError, match=rf"{r[0]} \(successes"):
        write_observations(ingest_sweep(sweep).rows, out)
    replaced = write_observations(ingest_sweep(sweep).rows, out, replace=True)
    assert replaced.replaced == [r[0]]
    table = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert len(table) == 2 and table[names.RUN_ID].is_unique
    assert dict(zip(table[names.RUN_ID], table["note"], strict=True)) == {
        r[0]: "rerun?",
        r[1]: "ok",
    }


def test_rows_load_as_observations(sweep: Path, tmp_path: Path) -> None:
    from bayesscale.data.observations import read_table

    r = runs(sweep)
    for run in r[:4]:
        place(sweep, run, ["v09_clean.jsonl"])
    write_observations(ingest_sweep(sweep).rows, tmp_path / "obs.csv")
    frame, _ = read_table(tmp_path / "obs.csv")
    for column in (
        names.SUCCESSES,
        names.TRIALS,
        names.N_ENVS,
        names.N_TASKS,
        names.ROLLOUTS,
        names.SEED,
    ):
        assert (frame[column] == frame[column].round()).all()
    assert not any(math.isnan(v) for v in frame[names.COMPUTE])


def test_manifest_without_id_columns_says_what_its_counts_are(sweep: Path) -> None:
    """A sweep planned before n_envs/n_tasks counted distinct units: said, not guessed."""
    r = runs(sweep)
    place(sweep, r[0], ["v09_clean.jsonl"])
    frame = mf.read_manifest(sweep).drop(columns=[names.ENV_IDS, names.TASK_IDS])
    mf.write_manifest(frame, sweep)
    result = ingest_sweep(sweep)
    assert names.ENV_IDS not in result.rows.columns
    assert f"  note {mf.MANIFEST}: no 'env_ids'/'task_ids' columns" in result.report()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda f: f.astype({names.N_ENVS: object}).assign(
                **{names.N_ENVS: ["abc", *list(f[names.N_ENVS][1:])]}
            ),
            r"column 'n_envs', row 1 \(file line 2\): must be a whole number >= 1, got 'abc'",
        ),
        (lambda f: f.drop(columns=[names.N_TASKS]), r"missing column\(s\) 'n_tasks'"),
        (
            lambda f: f.assign(**{names.PARAMS_B: -f[names.PARAMS_B]}),
            r"column 'params_b', row 1 \(file line 2\): must be > 0 where given, got -0.5",
        ),
    ],
)
def test_a_corrupt_manifest_is_refused_when_read(sweep: Path, edit, message: str) -> None:
    """ingest (and launch) read the manifest first: a corrupt one stops them, naming the cell."""
    r = runs(sweep)
    place(sweep, r[0], ["v09_clean.jsonl"])
    edit(mf.read_manifest(sweep)).to_csv(sweep / mf.MANIFEST, index=False)
    with pytest.raises(mf.ManifestError, match=message):
        ingest_sweep(sweep)
    (sweep / mf.MANIFEST).write_text("")
    with pytest.raises(mf.ManifestError, match=r"manifest.csv: empty file \(no header row\)"):
        ingest_sweep(sweep)


def test_manifest_errors_name_file_lines_past_blank_lines(sweep: Path) -> None:
    frame = mf.read_manifest(sweep)
    frame.loc[2, names.RUN_ID] = frame.loc[0, names.RUN_ID]
    lines = frame.to_csv(index=False).splitlines()
    (sweep / mf.MANIFEST).write_text("\n".join([*lines[:2], "", *lines[2:]]) + "\n")
    with pytest.raises(
        mf.ManifestError, match=r"column 'run_id', rows 1, 3 \(file lines 2, 5\): repeated run id"
    ):
        ingest_sweep(sweep)
