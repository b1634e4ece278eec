"""Helpers shared by the verl tests (pools, paths); fixtures live in conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
REPO = HERE.parents[1]
GOLDEN = HERE / "golden"
FAKE_VERL = HERE / "fake_verl.py"
VERL_VENV = REPO / ".venv-verl"


def crossed_pool(
    n_envs: int, n_tasks: int, worlds: int = 0, data_source: str = "org/bench/v2"
) -> pd.DataFrame:
    """A fully crossed pool: every task has a cell in every environment."""
    rows = []
    for t in range(n_tasks):
        for e in range(n_envs):
            row = {
                "task_id": f"t{t:04d}",
                "env_id": f"e{e:03d}",
                "prompt": f"Task {t} in environment {e}",
                "data_source": data_source,
                "reward_model": {"style": "rule", "ground_truth": str(t)},
                "extra_info": {"note": "x"},
            }
            if worlds:
                row["world_id"] = f"w{e % worlds}"
            rows.append(row)
    return pd.DataFrame(rows)


def duplicated_pool(n_envs: int, n_tasks: int, structures: int, statements: int) -> pd.DataFrame:
    """A crossed pool whose environment ``eK`` has structure ``K % structures`` (the other ids
    are content-seed copies) and whose task ``tK`` has statement ``K % statements`` (the
    others are exact duplicates, by their ``embedding``)."""
    frame = crossed_pool(n_envs, n_tasks)
    env = frame["env_id"].str[1:].astype(int)
    task = frame["task_id"].str[1:].astype(int)
    frame["tools"] = [[{"name": "calc", "args": {"x": "str"}}]] * len(frame)
    frame["state_schema"] = [{"memory": "list"}] * len(frame)
    frame["transition"] = [f"structure-{k % structures}" for k in env]
    frame["verifier"] = [{"kind": "exact"}] * len(frame)
    frame["embedding"] = [[float(k % statements == j) for j in range(statements)] for k in task]
    return frame


def write_jsonl(frame: pd.DataFrame, path: Path) -> Path:
    with path.open("w") as fh:
        for record in frame.to_dict(orient="records"):
            fh.write(json.dumps(record) + "\n")
    return path


SMALL_SPEC = """
name = "small"
pool = "{pool}"
domain = "math"
seeds = [0, 1]
algorithms = ["grpo", "ppo"]

[[models]]
name = "tiny"
path = "/models/tiny"
params_b = 0.5

[anchors]
n_envs = 8
n_tasks = 16
rollouts = 4

[grid]
points = 4
span = 8

[alignment]
cells = 64
updates = 4

[holdout]
by = "task"
count = 3

[verl]
n_gpus_per_node = 1
test_freq = 2
ppo_mini_batch_size = 8
"""
