"""The four commands end to end: plan -> launch --local (fake verl) -> ingest -> count."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from verl_testlib import FAKE_VERL, REPO

from bayesscale import names
from bayesscale.cli import main
from bayesscale.verl import manifest as mf


def test_plan_launch_ingest(
    small_spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sw"
    assert main(["plan", str(small_spec), "--out", str(sweep)]) == 0
    out = capsys.readouterr().out
    assert "planned 40 run(s)" in out and "64 task-env cells in 4 updates of 16" in out
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
    assert "ingested 2 run(s); could not use 38" in out and "2 added" in out
    assert main(["ingest", str(sweep), "--out", str(obs)]) == 0
    assert "0 added, 0 replaced, 2 unchanged; 2 row(s)" in capsys.readouterr().out
    table = pd.read_csv(obs)
    assert list(table[names.RUN_ID]) == runs and (table[names.TRIALS] == 30).all()


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
