"""The whole loop on the lab, small, on a real Ray head (docs/lab.md):

    plan -> launch (Ray) -> ingest -> fit -> next -> plan -> launch -> ingest -> check -> refit

The runs are lab/train.py in .venv-verl (GRPO on CPU with verl's own advantage, policy loss
and file logger), on a 20-environment x 80-task corner of lab/pool.parquet: 14 runs of 128
cells in 16 updates, then the 2 that ``next`` chooses. The fits are shortened (fewer draws, no
ESS target) for time. About 2 minutes on 2 cores.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesscale import names
from bayesscale.cli import main
from bayesscale.data.extrapolation import SweptRange
from bayesscale.data.fitfile import load_fit
from bayesscale.verl import manifest as mf
from bayesscale.verl.sweep import load_sweep_spec

REPO = Path(__file__).resolve().parents[2]
VERL_VENV = REPO / ".venv-verl"  # built by scripts/setup-verl-env

PYTHON = VERL_VENV / "bin" / "python"
pytestmark = pytest.mark.skipif(
    not PYTHON.exists(), reason=f"{PYTHON} is missing: `make verl-env` builds it"
)

SPEC = """
name = "labloop"
pool = "pool.parquet"
domain = "tooluse"
reward = "sparse"
seeds = [0, 1]
algorithms = ["grpo"]

[[models]]
name = "lab-w16"
path = "lab://width-16"
params_b = 0.00002

[anchors]
n_envs = 8
n_tasks = 32
rollouts = 8

[grid]
axes = ["env", "task", "traj"]
points = 3
span = 4

[alignment]
cells = 128
updates = 16

[holdout]
by = "task+env"
fraction = 0.2
selection_seed = 0

[verl]
entrypoint = "{python} {train}"
n_gpus_per_node = 1
nnodes = 1
test_freq = 8
val_n = 1
ppo_mini_batch_size = 4
"""
FIT = ["--draws", "100", "--tune", "100", "--ess-target", "0", "--quiet", "--no-out-of-scale",
       "--forms", "power"]  # fmt: skip


def corner(out: Path, n_envs: int = 20, n_tasks: int = 80) -> Path:
    pool = pd.read_parquet(REPO / "lab" / "pool.parquet")
    envs = sorted(pool[names.ENV_ID].unique())[:n_envs]
    tasks = sorted(pool[names.TASK_ID].unique())[:n_tasks]
    pool[pool[names.ENV_ID].isin(envs) & pool[names.TASK_ID].isin(tasks)].to_parquet(out)
    return out


def launch(sweep: Path, ray_head: str, capsys: pytest.CaptureFixture[str]) -> str:
    args = ["launch", str(sweep), "--ray-address", ray_head, "--poll", "1", "--timeout", "900"]
    assert main(args) == 0
    return capsys.readouterr().out


def test_the_lab_loop_closes_on_ray(
    tmp_path: Path, ray_head: str, capsys: pytest.CaptureFixture[str]
) -> None:
    corner(tmp_path / "pool.parquet")
    spec_path = tmp_path / "sweep.toml"
    spec_path.write_text(SPEC.format(python=PYTHON, train=REPO / "lab" / "train.py"))
    spec = load_sweep_spec(spec_path)

    sweep = tmp_path / "S"
    assert main(["plan", str(spec_path), "--out", str(sweep)]) == 0
    out = capsys.readouterr().out
    assert "held out 16 task(s) x 4 env(s): 64 val cells" in out
    assert "planned 14 run(s)" in out
    assert "now: succeeded 14" in launch(sweep, ray_head, capsys)

    obs = tmp_path / "obs.csv"
    assert main(["ingest", str(sweep), "--out", str(obs)]) == 0
    assert "ingested 14 of 14 run(s); could not use 0" in capsys.readouterr().out
    table = pd.read_csv(obs)
    assert (table[names.TRIALS] == 64).all()  # every held task in every held env
    rate = table[names.SUCCESSES] / table[names.TRIALS]
    assert rate.between(0, 1).all() and rate.nunique() > 3  # real runs differ
    for axis in spec.axes:
        assert set(spec.grid_points(axis)) <= set(table[{"env": names.N_ENVS,
            "task": names.N_TASKS, "traj": names.ROLLOUTS}[axis]])  # fmt: skip

    fit = tmp_path / "f.nc"
    assert main(["fit", str(obs), "--out", str(fit), *FIT]) == 0
    capsys.readouterr()

    nxt = tmp_path / "next.toml"
    args = ["next", str(fit), "--budget", "60", "--runs", "2", "--sweep", str(spec_path),
            "--simulations", "16", "--max-draws", "40", "--min-ess", "0", "--out", str(nxt)]  # fmt: skip
    assert main(args) == 0
    assert f"wrote {nxt}" in capsys.readouterr().out
    points = load_sweep_spec(nxt).explicit_points
    assert 1 <= len(points) <= 2 and all(min(p.seeds or ()) >= 2 for p in points)

    sweep2 = tmp_path / "S2"
    assert main(["plan", str(nxt), "--out", str(sweep2)]) == 0
    capsys.readouterr()
    n2 = len(mf.read_manifest(sweep2))
    assert f"now: succeeded {n2}" in launch(sweep2, ray_head, capsys)
    obs2 = tmp_path / "obs2.csv"
    assert main(["ingest", str(sweep2), "--out", str(obs2)]) == 0
    capsys.readouterr()

    # the new runs, predicted by the first fit before it saw them
    checked = tmp_path / "check.csv"
    assert main(["check", str(fit), str(obs2), "--out", str(checked)]) == 0
    assert "coverage" in capsys.readouterr().out
    assert len(pd.read_csv(checked)) == n2

    both = tmp_path / "both.csv"
    pd.concat([pd.read_csv(obs), pd.read_csv(obs2)]).to_csv(both, index=False)
    refit = tmp_path / "f2.nc"
    assert main(["fit", str(both), "--out", str(refit), *FIT]) == 0
    capsys.readouterr()
    before, after = (SweptRange.from_fit(load_fit(f)) for f in (fit, refit))
    assert before is not None and after is not None
    new = pd.read_csv(obs2)
    for i, column in enumerate((names.N_ENVS, names.N_TASKS, names.ROLLOUTS)):
        assert after.hi[0, i] == max(before.hi[0, i], new[column].max())
    assert np.isfinite(load_fit(refit).posterior[names.ALPHA].values).all()
