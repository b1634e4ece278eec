"""The documented loop on the bundled example closes (docs/verl.md):

    bayesscale plan data/verl_example/sweep.toml --out S
    bayesscale launch S --local --entrypoint "<python> tests/verl/fake_verl.py"
    bayesscale ingest S --out obs.csv
    bayesscale fit obs.csv --out f.nc

The fake verl writes verl-format logs whose accuracy grows with the run's sizes. The fit is
shortened (fewer draws, no ESS target) for time; the table it is given is the ingested one.
About 30 s on 2 cores: the 78 fake runs take most of it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
from verl_testlib import FAKE_VERL, REPO

from bayesscale import names
from bayesscale.cli import main
from bayesscale.data.extrapolation import SweptRange
from bayesscale.data.fitfile import load_fit
from bayesscale.verl import manifest as mf
from bayesscale.verl.sweep import AXIS_COLUMNS, load_sweep_spec

EXAMPLE = REPO / "data" / "verl_example" / "sweep.toml"


def test_the_example_loop_closes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = load_sweep_spec(EXAMPLE)
    sweep = tmp_path / "S"
    assert main(["plan", str(EXAMPLE), "--out", str(sweep)]) == 0
    out, err = capsys.readouterr()
    # every grid point's ids are distinct environments and tasks: no warning
    assert err == "", err
    assert "training pool 20 env ids (20 distinct) x 135 task ids (135 distinct)" in out

    entry = f"{sys.executable} {FAKE_VERL}"
    assert main(["launch", str(sweep), "--local", "--entrypoint", entry, "--poll", "0"]) == 0
    assert "now: succeeded 78" in capsys.readouterr().out

    obs = tmp_path / "obs.csv"
    assert main(["ingest", str(sweep), "--out", str(obs)]) == 0
    assert "ingested 78 of 78 run(s); could not use 0" in capsys.readouterr().out
    table = pd.read_csv(obs)
    manifest = mf.read_manifest(sweep).set_index(names.RUN_ID)
    table[names.SWEEP_AXIS] = manifest.loc[table[names.RUN_ID], names.SWEEP_AXIS].to_numpy()

    # along each swept axis, every grid value is its own distinct count: the ingested rows
    # differ where the runs differ, and no two runs of a setting and seed look alike
    assert (table[names.N_ENVS] == table[names.ENV_IDS]).all()
    assert (table[names.N_TASKS] == table[names.TASK_IDS]).all()
    for axis in spec.axes:
        column = AXIS_COLUMNS[axis]
        along = table[table[names.SWEEP_AXIS].str.split("+").apply(lambda a, x=axis: x in a)]
        assert sorted(along[column].unique()) == list(spec.grid_points(axis)), axis
    keys = [names.MODEL, names.ALGORITHM, names.N_ENVS, names.N_TASKS, names.ROLLOUTS, names.SEED]
    assert not table.duplicated(keys).any()

    fit = tmp_path / "f.nc"
    args = ["fit", str(obs), "--out", str(fit), "--quiet", "--no-out-of-scale", "--forms", "power"]
    assert main([*args, "--draws", "100", "--tune", "100", "--ess-target", "0"]) == 0
    capsys.readouterr()
    swept = SweptRange.from_fit(load_fit(fit))
    assert swept is not None
    for axis in spec.axes:  # the fit sees each axis's whole grid, in distinct units
        i, grid = swept.axes.index(axis), spec.grid_points(axis)
        assert (swept.lo[0, i], swept.hi[0, i]) == (min(grid), max(grid)), axis
