"""Law forms compared by LOO and by out-of-scale scores, and their stacking weights: on data
simulated with a knee, the offset power wins and the data separate it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from testdata import KNEE_SPEC, knee_curves

from bayesscale.checks.form_scores import default_rules, usable_rules
from bayesscale.data.observations import Table
from bayesscale.data.spec import ModelSpec, SpecError, load_spec, parse_spec, with_form
from bayesscale.sampling.config import FitConfig

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "data" / "lab"
BAYESSCALE = str(Path(sys.executable).parent / "bayesscale")


def _knee_data() -> tuple[Table, ModelSpec]:
    spec = parse_spec(KNEE_SPEC.format(form=""))  # the power law; the forms come from with_form
    return Table.from_frame(knee_curves(), spec), spec


def test_with_form_writes_the_form_under_every_axis() -> None:
    spec = with_form(load_spec(), "offset_power")
    assert [a.form for a in spec.axes] == ["offset_power"] * 3
    assert spec.text.count('form = "offset_power"') == 3  # a fit records the form it used
    assert with_form(load_spec(), "power") == load_spec()
    with pytest.raises(SpecError, match=r"\[\[axes\]\] \['env', 'task', 'traj'\] name their form"):
        with_form(spec, "power")


def test_rules_the_law_cannot_be_refitted_without_are_set_aside() -> None:
    spec = load_spec()
    table = Table.from_frame(pd.read_csv(LAB / "observations.csv"), spec)
    usable, skipped = usable_rules(table, spec, default_rules(spec))
    # the lab sweeps one axis at a time around an anchor at each axis's largest value: leaving
    # that value out leaves another axis with one size
    assert usable == [] and set(skipped) == {"n_envs=max", "n_tasks=max", "rollouts=max"}
    assert "has 1 distinct value" in skipped["n_envs=max"]


@pytest.mark.slow
def test_the_offset_form_wins_on_data_with_a_knee() -> None:
    import bayesscale as bs

    table, spec = _knee_data()
    config = FitConfig(chains=2, tune=150, draws=200, ess_target=0, seed=1, progress=False)
    scores = bs.compare_forms(table.frame, spec, config, n_boot=100)  # the notebook's call
    data = scores.to_dict()
    assert data["leave_out"] == ["size=max"] and data["skipped_leave_out"] == {}
    # within the sweep (LOO) and at the next scale the knee predicts better, by margins far
    # beyond the estimates' noise (LOO se about 9)
    assert data["loo"]["offset_power"]["elpd"] > data["loo"]["power"]["elpd"] + 20
    oos = data["out_of_scale"]
    assert oos["offset_power"]["points"] == oos["power"]["points"] == 18  # 6 curves x 3 seeds
    assert oos["offset_power"]["elpd"] > oos["power"]["elpd"] + 2
    assert scores.stack.weights[1] > 0.9 and scores.stack.separated
    assert "the data separate the forms: offset_power" in scores.summary_text()


def test_the_command_refuses_a_single_form(tmp_path: Path) -> None:
    done = subprocess.run(
        [BAYESSCALE, "forms", str(LAB / "observations.csv"),
         "--forms", "power"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--forms 'power': name two or more of" in done.stderr


@pytest.mark.slow
def test_a_one_axis_at_a_time_design_is_scored_on_each_axis_own_sweep(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The lab's sweeps vary one axis around an anchor at every axis's largest value, so no
    axis's top can be left out of the whole table. The forms are then scored as the
    out-of-scale check scores them: each axis's own sweep with its top left out, refitted with
    that axis alone; so the default stack (`bayesscale fit`) fits the lab's data."""
    from bayesscale.cli import main

    args = ["forms", str(LAB / "observations.csv"), "--json", "--draws", "100", "--tune", "100",
            "--ess-target", "0", "--quiet"]  # fmt: skip
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["skipped_leave_out"]) == {"n_envs=max", "n_tasks=max", "rollouts=max"}
    for form in ("power", "offset_power"):
        folds = data["out_of_scale"][form]["folds"]
        assert [f["leave_out"].split(">")[0] for f in folds] == ["n_envs", "n_tasks", "rollouts"]
        assert all("in its own sweep" in f["leave_out"] for f in folds)
        assert sum(f["rows"] for f in folds) == 48
    assert sum(data["stacking"]["weights"].values()) == pytest.approx(1.0)


def test_the_command_scores_the_lab_held_out_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bayesscale.cli import main

    out = tmp_path / "forms.json"
    args = ["forms", str(LAB / "observations.csv"), "--heldout", str(LAB / "heldout.csv")]
    args += ["--out", str(out), "--draws", "150", "--tune", "150", "--ess-target", "0", "--quiet"]
    assert main(args) == 0
    data = json.loads(out.read_text())
    for form in ("power", "offset_power"):
        (fold,) = data["out_of_scale"][form]["folds"]
        assert fold["leave_out"] == "held-out rows" and fold["rows"] == 48
    assert "stacking weights on the 48 out-of-scale points" in capsys.readouterr().out
