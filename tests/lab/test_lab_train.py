"""The lab's trainer (lab/train.py) in .venv-verl: verl's overrides in, verl's file log out,
and it learns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bayesscale.verl.logs import held_out, read_log

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
import make_pool
import world

REPO = Path(__file__).resolve().parents[2]
VERL_VENV = REPO / ".venv-verl"  # built by scripts/setup-verl-env

PYTHON = VERL_VENV / "bin" / "python"
TRAIN = REPO / "lab" / "train.py"
pytestmark = pytest.mark.skipif(
    not PYTHON.exists(), reason=f"{PYTHON} is missing: `make verl-env` builds it"
)


def cells(n_envs: int, n_tasks: int, n_rows: int) -> pd.DataFrame:
    lab = world.Lab.generate(seed=0)
    envs = lab.environments(n_envs, seed=0)
    tasks = lab.tasks(n_tasks, seed=0)
    rows = [make_pool.cell(lab, e, t) for t in tasks for e in envs]
    return pd.DataFrame([rows[k % len(rows)] for k in range(n_rows)])


def train(tmp_path: Path, *overrides: str, steps: int = 32) -> subprocess.CompletedProcess[str]:
    frame = cells(4, 16, 256)
    frame.to_parquet(tmp_path / "train.parquet")
    frame.iloc[:64].to_parquet(tmp_path / "val.parquet")
    args = [
        f"data.train_files={tmp_path / 'train.parquet'}",
        f"data.val_files={tmp_path / 'val.parquet'}",
        "data.train_batch_size=8",
        "data.train_max_samples=256",
        "actor_rollout_ref.model.path=lab://width-32",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.rollout.n=8",
        f"trainer.total_training_steps={steps}",
        "trainer.test_freq=16",
        'trainer.logger=["console","file"]',
        "trainer.n_gpus_per_node=1",
        *overrides,
    ]
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(tmp_path / "verl.jsonl")}
    return subprocess.run(
        [str(PYTHON), str(TRAIN), *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_a_run_writes_the_log_ingest_reads_and_learns(tmp_path: Path) -> None:
    done = train(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "verl keys without meaning here: trainer.n_gpus_per_node" in done.stdout
    lines = (tmp_path / "verl.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == list(range(33))  # once each, as verl
    log = read_log(tmp_path / "verl.jsonl")
    val = {s: held_out(log.steps[s])["lab/tooluse"].value for s in (0, 16, 32)}
    # the validation cells are training cells: seen, they are learnt (chance is about 0.2)
    assert val[0] < 0.4 < 0.8 < val[32], val
    tokens = [log.steps[s]["perf/total_num_tokens"] for s in range(1, 33)]
    assert all(t > 8 * 8 * 10 for t in tokens)  # 64 trajectories of prompt + response a step
    scores = [log.steps[s]["critic/score/mean"] for s in range(1, 33)]
    assert all(0 <= x <= 1 for x in scores)
    assert sum(scores[-8:]) > sum(scores[:8]), scores  # sampled (temperature 1): slower


def test_the_same_overrides_give_the_same_run_and_the_seeds_differ(tmp_path: Path) -> None:
    runs = []
    for name, seeds in (("a", ("0", "0")), ("b", ("0", "0")), ("c", ("1", "0")), ("d", ("0", "1"))):
        folder = tmp_path / name
        folder.mkdir()
        data_seed, rollout_seed = seeds
        done = train(
            folder,
            f"data.seed={data_seed}",
            f"actor_rollout_ref.rollout.seed={rollout_seed}",
            steps=4,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        steps = read_log(folder / "verl.jsonl").steps
        for record in steps.values():  # timings differ; everything else is seeded
            record.pop("timing_s/step", None)
        runs.append(steps)
    assert runs[0] == runs[1]
    assert runs[2] != runs[0]  # another order of the rows (data.seed)
    assert runs[3] != runs[0]  # another initialisation and other samples (rollout seed)


def test_without_test_freq_it_validates_before_training_only(tmp_path: Path) -> None:
    assert train(tmp_path, "trainer.test_freq=-1", steps=2).returncode == 0
    log = read_log(tmp_path / "verl.jsonl")
    assert [s for s, r in log.steps.items() if held_out(r)] == [0]  # as verl


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("algorithm.adv_estimator=gae", "the lab runs grpo only"),
        ("actor_rollout_ref.model.path=Qwen/Qwen3-4B", "expected lab://width-<W>"),
        ("data.train_batch_size", "not a key=value override"),
        ("actor_rollout_ref.rollout.val_kwargs.n=4", "one greedy response per task"),
        ("actor_rollout_ref.actor.ppo_mini_batch_size=3", "must divide data.train_batch_size=8"),
    ],
)
def test_what_it_cannot_run_is_refused(tmp_path: Path, override: str, message: str) -> None:
    done = train(tmp_path, override, steps=1)
    assert done.returncode == 2
    assert message in done.stderr
