"""`bayesscale recipe --sweep BASE.toml --sweep-out DECISION.toml`: the recipe's decision as a
sweep file that `plan` accepts (bayesscale.design.decision_sweep), end to end on the bundled
example sweep, and every misuse refused. Every fit here is hand-made (no sampling)."""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from testdata import ROOT

from bayesscale import names
from bayesscale.cli import main
from bayesscale.core.prices import parse_prices
from bayesscale.data.fitfile import ATTR_FORMAT, FORMAT_VERSION, save_fit
from bayesscale.design import sweep_file
from bayesscale.design.decision_sweep import DEFAULT_SEEDS, decision_sweep, pick_budget, whole_size
from bayesscale.design.results import DesignError
from bayesscale.recipe.solve import recipe
from bayesscale.recipe.synthetic import synthetic_fit
from bayesscale.verl import manifest as mf
from bayesscale.verl.sweep import load_sweep_spec, parse_sweep_spec

EXAMPLE = ROOT / "data" / "verl_example" / "sweep.toml"  # models qwen3-4b, grpo and ppo
POOL_CAPS = {names.N_ENVS: 20, names.N_TASKS: 135}  # the example pool's training ids
RUNNABLE = ["qwen3-4b | grpo | math+code", "qwen3-4b | ppo | math+code"]
OTHER = "qwen3-8b | grpo | math+code"  # not among the example sweep's [[models]]


def example_fit(labels: list[str] = [*RUNNABLE, OTHER]) -> xr.DataTree:  # noqa: B006
    """A hand-made fit (a small posterior) whose settings are ``labels``: the example sweep's
    two, and one it does not run, over the example's grid."""
    g = len(labels)
    tree = synthetic_fit(
        draws=30,
        spread=0.05,
        seed=4,
        alpha=[(0.41, 0.26, 0.11), (0.38, 0.24, 0.12), (0.40, 0.25, 0.10)][:g],
        amplitude=[(0.35, 0.30, 0.12), (0.30, 0.25, 0.10), (0.32, 0.28, 0.11)][:g],
        floor=(0.45, 0.55, 0.50)[:g],
        reference=(4.0, 32.0, 4.0),
        swept=((1.0, 8.0, 1.0), (16.0, 128.0, 16.0)),
    )
    return _relabel(tree, labels)


def _relabel(tree: xr.DataTree, labels: list[str]) -> xr.DataTree:
    post = tree["posterior"].to_dataset().assign_coords({names.SETTING_DIM: labels})
    const = tree["constant_data"].to_dataset().assign_coords({names.SETTING_DIM: labels})
    for i, key in enumerate(names.SETTING_KEYS):
        const[key] = (names.SETTING_DIM, [label.split(" | ")[i] for label in labels])
    out = xr.DataTree.from_dict({"posterior": post, "constant_data": const})
    out.attrs = {**tree.attrs, ATTR_FORMAT: FORMAT_VERSION}
    return out


@pytest.fixture(scope="module")
def fit_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("decision") / "fit.nc"
    save_fit(example_fit(), path)
    return path


# --- the module: rounding, caps, settings, seeds --------------------------------------------------


def test_whole_sizes_round_to_the_nearest_and_stay_within_the_cap() -> None:
    assert whole_size(0.2) == (1, False) and whole_size(1.49) == (1, False)
    assert whole_size(1.5) == (2, False) and whole_size(2.5) == (3, False)  # halves up
    assert whole_size(151.8, 20) == (20, True) and whole_size(19.6, 20) == (20, False)
    with pytest.raises(DesignError, match="not a finite number"):
        whole_size(math.nan)
    assert pick_budget([1e3]) == 1e3 and pick_budget([1e3, 1e4], 1e4 * (1 + 1e-12)) == 1e4
    with pytest.raises(DesignError, match=r"2 budgets \(1000, 10000\)"):
        pick_budget([1e3, 1e4])
    with pytest.raises(DesignError, match="budget 5000 is not among"):
        pick_budget([1e3, 1e4], 5e3)


def test_the_decision_becomes_one_point_per_runnable_setting() -> None:
    fit = example_fit()
    base = load_sweep_spec(EXAMPLE)
    ds = recipe(fit, [300.0, 3000.0], multipliers=False)
    caps = {"n_envs": 4, "n_tasks": 16}  # a small pool: 3,000 USD asks for more
    out = decision_sweep(ds, fit, base, 3000.0, caps=caps)
    assert [p.setting for p in out.points] == RUNNABLE and out.skipped == (OTHER,)
    assert out.seeds == (3, 4, 5) and DEFAULT_SEEDS == 3  # after the example's seeds 0-2
    spec = parse_sweep_spec(out.text, "decision.toml", Path("."))
    assert spec.name == "example-recipe" and spec.pool == base.pool.resolve()
    assert spec.cells == base.cells and spec.verl == base.verl and spec.axes == ()
    prices = json.loads(ds.attrs[names.ATTR_PRICES])
    powers = np.asarray(json.loads(ds.attrs.get(names.ATTR_COST_POWERS, "null")) or np.eye(3))
    for p, point in zip(out.points, spec.explicit_points, strict=True):
        asked = ds[names.DECISION].sel(setting=p.setting, budget=3000.0)
        assert p.asked == pytest.approx({a: float(asked.sel(axis=a)) for a in out.axes})
        for axis, column in (("env", "n_envs"), ("task", "n_tasks"), ("traj", "rollouts")):
            cap = caps.get(column, math.inf)
            want = min(max(1, math.floor(p.asked[axis] + 0.5)), cap)
            assert p.sizes[axis] == getattr(point, column) == want
            assert (axis in p.capped) == (p.asked[axis] >= cap + 0.5)
        assert point.seeds == (3, 4, 5) and point.label == "recipe:3000"
        assert point.models == ("qwen3-4b",) and point.algorithms == (p.setting.split(" | ")[1],)
        units = np.array([p.sizes[a] for a in out.axes], dtype=float)
        cost = sum(prices[a] * np.prod(units ** powers[i]) for i, a in enumerate(out.axes))
        assert p.cost == pytest.approx(cost)  # what the written sizes cost under the recipe's cost
    assert all(p.capped == {"env": 4, "task": 16} for p in out.points)
    notes = "\n".join(out.notes())
    assert "warning: qwen3-4b | grpo | math+code: the decision asks for more" in notes
    assert "capped: env " in notes and "--bounds env=1:4,task=1:16" in notes
    assert "note: 1 setting(s) left out, the base sweep does not run them" in notes
    many = dataclasses.replace(out, skipped=tuple(f"m{i} | grpo | d" for i in range(19)))
    assert "m4 | grpo | d; and 14 more" in "\n".join(many.notes())
    assert len(many.to_json()["skipped"]) == 19
    # within what the pool holds: nothing capped, nothing said about caps
    small = decision_sweep(ds, fit, base, 300.0, caps={"n_envs": 1000, "n_tasks": 10_000})
    assert not any(p.capped for p in small.points)
    assert [n.split(":")[0] for n in small.notes()] == ["warning", "note"]  # pricing; left out
    assert "# the recipe's decision at budget 300 USD" in small.text


def test_a_decision_priced_per_task_is_said_to_misprice_the_runs_it_writes() -> None:
    """Each run of a sweep trains on [alignment] cells x rollouts trajectories: a recipe that
    priced tasks x rollouts is warned; one priced with the sweep's cells is not; one priced
    with other cells is refused."""
    fit = example_fit()
    base = load_sweep_spec(EXAMPLE)  # [alignment] cells = 1024
    caps = {"n_envs": 1000, "n_tasks": 10_000}
    per_task = decision_sweep(recipe(fit, [300.0], multipliers=False), fit, base, caps=caps)
    warning = per_task.notes()[0]
    assert warning.startswith("warning: the recipe priced trajectories per task")
    assert 'trajectories = "fixed-cells" and cells = 1024' in warning
    fixed = parse_prices('[cost]\ntrajectories = "fixed-cells"\ncells = 1024')
    ds = recipe(fit, [300.0], prices=fixed, multipliers=False)
    assert ds.attrs[names.ATTR_FIXED_CELLS] == 1024
    out = decision_sweep(ds, fit, base, caps=caps)
    assert not any(n.startswith("warning") for n in out.notes())
    for p in out.points:  # money: 4.10 E + 0.18 T + 0.02 x 1,024 x R
        e, t, r = (p.sizes[a] for a in ("env", "task", "traj"))
        assert p.cost == pytest.approx(4.10 * e + 0.18 * t + 0.02 * 1024 * r)
    assert ds[names.DECISION_TRAJECTORIES].values == pytest.approx(
        1024 * ds[names.DECISION].sel(axis="traj").values
    )
    other = parse_prices('[cost]\ntrajectories = "fixed-cells"\ncells = 2048')
    ds = recipe(fit, [300.0], prices=other, multipliers=False)
    with pytest.raises(
        DesignError, match=r"fixes 2048 cells per run .* \[alignment\] cells = 1024"
    ):
        decision_sweep(ds, fit, base, caps=caps)


def test_baselines_are_written_beside_the_decision_at_equal_money() -> None:
    fit = example_fit(RUNNABLE[:1])
    base = load_sweep_spec(EXAMPLE)
    fixed = parse_prices('[cost]\ntrajectories = "fixed-cells"\ncells = 1024')
    ds = recipe(fit, [600.0], prices=fixed, multipliers=False)
    out = decision_sweep(ds, fit, base, caps={"n_envs": 1000, "n_tasks": 10_000}, baselines=True)
    labels = [p.label for p in out.points]
    assert labels == ["recipe:600", "traj_heavy:600", "chinchilla:600"]
    spec = parse_sweep_spec(out.text, "decision.toml", Path("."))
    assert [p.label for p in spec.explicit_points] == labels
    assert "# the recipe's decision and its baselines at budget 600 USD" in out.text
    units = ds[names.BASELINE_UNITS].sel(budget=600.0)
    for p in out.points[1:]:
        asked = units.sel(baseline=p.label.split(":")[0])
        assert p.asked == pytest.approx({a: float(asked.sel(axis=a)) for a in out.axes})
        # equal money before rounding to whole units: 600 USD
        e, t, r = (p.asked[a] for a in ("env", "task", "traj"))
        assert 4.10 * e + 0.18 * t + 0.02 * 1024 * r == pytest.approx(600.0)
    heavy = out.points[1].sizes  # the anchors (4, 32, 4) but rollouts
    assert (heavy["env"], heavy["task"]) == (4, 32) and heavy["traj"] > 4
    # at the anchors' own cost the Chinchilla baseline is the anchors, and so is traj_heavy:
    # one point, both labels
    anchor_cost = 4.10 * 4 + 0.18 * 32 + 0.02 * 1024 * 4
    ds = recipe(fit, [anchor_cost], prices=fixed, multipliers=False)
    out = decision_sweep(ds, fit, base, caps={"n_envs": 1000, "n_tasks": 10_000}, baselines=True)
    assert [p.label for p in out.points][1:] == [
        f"traj_heavy:{anchor_cost:g}+chinchilla:{anchor_cost:g}"
    ]


def test_seeds_follow_every_seed_of_the_base_and_other_choices() -> None:
    fit = example_fit()
    base = load_sweep_spec(EXAMPLE)
    ds = recipe(fit, [1000.0], multipliers=False)
    point = {"n_envs": 4, "n_tasks": 16, "rollouts": 8, "seeds": [3, 7], "models": ["qwen3-4b"],
             "algorithms": ["grpo"], "label": "next:traj"}  # fmt: skip
    next_base = parse_sweep_spec(sweep_file.next_sweep_text(base, [point]), "next.toml", Path("."))
    assert sweep_file.first_seed(base) == 3 and sweep_file.first_seed(next_base) == 8
    out = decision_sweep(ds, fit, next_base, seeds=1, caps=POOL_CAPS)
    assert out.seeds == (8,)
    with pytest.raises(DesignError, match="seeds must be a whole number >= 1"):
        decision_sweep(ds, fit, base, seeds=0, caps=POOL_CAPS)
    with pytest.raises(DesignError, match=r"cannot run setting 'qwen3-8b \| grpo \| math\+code'"):
        decision_sweep(ds, fit, base, caps=POOL_CAPS, strict=True)
    only = recipe(fit, [1000.0], settings=[OTHER], multipliers=False)
    with pytest.raises(DesignError, match="none of the recipe's settings"):
        decision_sweep(only, fit, base, caps=POOL_CAPS)
    with pytest.raises(DesignError, match="has no decision"):
        decision_sweep(recipe(fit, [1000.0], decision=False), fit, base, caps=POOL_CAPS)
    # the pool read from the base spec gives the caps `next` uses
    assert sweep_file.pool_caps(base) == POOL_CAPS
    tight = parse_sweep_spec(
        base.text.replace("cells = 1024", "cells = 64"), str(EXAMPLE), EXAMPLE.parent
    )
    notes = decision_sweep(ds, fit, tight, caps=POOL_CAPS).notes()
    assert any("exceed the base sweep's [alignment] cells = 64" in n for n in notes)


def test_an_axis_the_fit_lacks_takes_the_base_anchor_a_model_size_axis_is_refused() -> None:
    spec_text = (
        '[model]\nname = "two"\n[outcome]\nkind = "success"\n[settings]\n'
        'keys = ["model", "algorithm", "domain"]\n'
        '[[axes]]\nname = "env"\ncolumn = "n_envs"\n[[axes]]\nname = "task"\ncolumn = "n_tasks"\n'
    )
    two = synthetic_fit(
        draws=10,
        spread=0.0,
        alpha=[(0.41, 0.26)],
        amplitude=[(0.35, 0.30)],
        floor=(0.45,),
        reference=(4.0, 32.0),
        spec_text=spec_text,
        swept=((1.0, 8.0), (16.0, 128.0)),
    )
    two = _relabel(two, RUNNABLE[:1])
    base = load_sweep_spec(EXAMPLE)
    out = decision_sweep(recipe(two, [500.0], multipliers=False), two, base, caps=POOL_CAPS)
    assert out.filled == {"rollouts": 4}
    assert (
        "note: the fit has no axis for rollouts: written at the base sweep's anchor(s), rollouts = 4"
        in (out.notes())
    )
    assert parse_sweep_spec(out.text, "d.toml", Path(".")).explicit_points[0].rollouts == 4

    sized = example_fit(RUNNABLE)
    post = sized["posterior"].to_dataset()
    post[names.SIZE_AMPLITUDE] = (("chain", "draw"), np.full((2, 30), 0.08))
    post[names.ALPHA_SIZE] = (("chain", "draw"), np.full((2, 30), 0.3))
    const = sized["constant_data"].to_dataset()
    const[names.PARAMS_B] = ((names.SETTING_DIM,), np.array([4.0, 4.0]))
    const[names.SIZE_REFERENCE] = ((), 8.0)
    sized = xr.DataTree.from_dict({"posterior": post, "constant_data": const})
    sized.attrs = dict(example_fit(RUNNABLE).attrs)
    prices = parse_prices(f"[prices]\n{names.PARAMS_B} = 50.0")
    ds = recipe(sized, [3e3], prices=prices, multipliers=False)
    with pytest.raises(DesignError, match="the decision chooses the model size"):
        decision_sweep(ds, sized, base, caps=POOL_CAPS)


# --- the command, as a user runs it: recipe -> plan ------------------------------------------------


def test_recipe_writes_a_sweep_file_that_plan_runs(
    fit_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "decision.toml"
    args = ["recipe", str(fit_path), "--budget", "300,3000", "--decision-budget", "3000",
            "--sweep", str(EXAMPLE), "--sweep-out", str(out)]  # fmt: skip
    assert main([*args, "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    written = doc["sweep_out"]
    assert written["path"] == str(out) and written["budget"] == 3000.0
    assert written["seeds"] == [3, 4, 5] and written["skipped"] == [OTHER]
    rows = {(r["setting"], r["budget"]): r for r in doc["results"]}
    columns = {"env": "n_envs", "task": "n_tasks", "traj": "rollouts"}
    for point in written["points"]:
        decision = rows[(point["setting"], 3000.0)]["decision"]
        assert point["asked"] == pytest.approx(decision)
        whole = {columns[a]: max(1, math.floor(v + 0.5)) for a, v in decision.items()}
        capped = {c: n for c, n in POOL_CAPS.items() if whole[c] > n}
        assert point["sizes"] == {**whole, **capped} and point["capped"] == capped
        said = f"bayesscale recipe: warning: {point['setting']}: the decision asks for more"
        assert (said in captured.err) == bool(capped)
    assert any(p["capped"] for p in written["points"])  # the example pool is small
    assert f"left out, the base sweep does not run them (model / algorithm / domain): {OTHER}" in (
        captured.err
    )
    text = out.read_text()
    assert text.startswith("# written by `bayesscale recipe ")
    assert "--decision-budget 3000 --sweep " in text.splitlines()[0]

    sweep = tmp_path / "sweep"
    assert main(["plan", str(out), "--out", str(sweep)]) == 0
    capsys.readouterr()
    manifest = mf.read_manifest(sweep)
    assert len(manifest) == 2 * 3  # two settings x three seeds
    assert (manifest[names.SWEEP_AXIS] == "recipe:3000").all()
    for point in written["points"]:
        model, algorithm, _ = point["setting"].split(" | ")
        runs = manifest[manifest[names.ALGORITHM].eq(algorithm)]
        assert sorted(runs[names.SEED]) == [3, 4, 5] and runs[names.MODEL].eq(model).all()
        assert runs[names.ENV_IDS].eq(point["sizes"]["n_envs"]).all()  # ids selected
        assert runs[names.TASK_IDS].eq(point["sizes"]["n_tasks"]).all()
        assert runs[names.ROLLOUTS].eq(point["sizes"]["rollouts"]).all()

    # text output: the table, then what was written and the next command
    assert main([*args, "--force", "--setting", RUNNABLE[1]]) == 0
    stdout = capsys.readouterr().out
    assert "as a sweep file -> " in stdout and f"next: bayesscale plan {out} --out" in stdout
    raw = tomllib.loads(out.read_text())
    assert [p["algorithms"] for p in raw["grid"]["point"]] == [["ppo"]]
    assert raw["pool"] == str((EXAMPLE.parent / "pool.jsonl").resolve())

    # the spelling, --sweep BASE.toml --out DECISION.toml, writes the same sweep file
    alias = tmp_path / "alias.toml"
    spelled = [
        str(alias) if a == str(out) else ("--out" if a == "--sweep-out" else a) for a in args
    ]
    assert main([*spelled, "--setting", RUNNABLE[1]]) == 0
    capsys.readouterr()
    assert tomllib.loads(alias.read_text()) == raw

    # --with-baselines: the two baselines at the same budget too, planned as their own runs
    assert main([*args, "--force", "--setting", RUNNABLE[1], "--with-baselines"]) == 0
    assert "written by `bayesscale recipe " in out.read_text()
    assert "--with-baselines --sweep " in out.read_text().splitlines()[0]
    labels = [p["label"] for p in tomllib.loads(out.read_text())["grid"]["point"]]
    # at 3,000 USD the decision and the Chinchilla baseline both hit the pool's caps (20
    # environments, 135 tasks) and the 4x-of-the-data bound on rollouts: one run, both labels
    assert labels == ["recipe:3000+chinchilla:3000", "traj_heavy:3000"]
    capsys.readouterr()


SWEEP = ["--sweep", "BASE", "--sweep-out", "OUT"]
TWO = ["--budget", "1e3,1e4"]  # replaces --budget 1e3


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--sweep", "BASE"], "--sweep BASE.toml needs --sweep-out DECISION.toml"),
        (["--sweep-out", "OUT"], "--sweep-out needs --sweep BASE.toml"),
        (["--seeds", "2"], "--seeds applies to --sweep-out only"),
        (["--decision-budget", "1e3"], "--decision-budget applies to --sweep-out only"),
        (["--with-baselines"], "--with-baselines applies to --sweep-out only"),
        (["--out", "r.toml"], "--out r.toml: --out writes the per-draw results as netCDF"),
        (
            [*SWEEP, *TWO],
            "--sweep-out: 2 budgets (1000, 10000): the decision is written at one of them; name it "
            "with --decision-budget B",
        ),
        ([*SWEEP, *TWO, "--decision-budget", "2e3"], "--decision-budget: budget 2000 is not among"),
        ([*SWEEP, "--seeds", "0"], "--seeds must be >= 1"),
        ([*SWEEP, "--no-decision"], "drop --no-decision"),
        ([*SWEEP, "--cost", "compute"], "--cost compute has none"),
        ([*SWEEP, "--cost", "linearised"], "--cost linearised has none"),
        (
            ["--sweep", "BASE", "--sweep-out", "BASE", "--force"],
            "--sweep-out: {base} is also an input of this command",
        ),
        (["--sweep", "BASE", "--sweep-out", "DIR"], "is a directory; give the name of a file"),
        (["--sweep", "BASE", "--sweep-out", "NC", "--out", "NC"], "is also --out"),
        (
            [*SWEEP, "--setting", OTHER],
            "cannot run setting 'qwen3-8b | grpo | math+code': model 'qwen3-8b' is not among",
        ),
    ],
)
def test_misuse_exits_2_naming_the_flag(
    fit_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    match: str,
) -> None:
    base = tmp_path / "base.toml"
    base.write_text(EXAMPLE.read_text().replace('"pool.jsonl"', f'"{EXAMPLE.parent}/pool.jsonl"'))
    where = {"BASE": str(base), "OUT": str(tmp_path / "d.toml"), "NC": str(tmp_path / "d.nc")}
    where["DIR"] = str(tmp_path)
    argv = ["recipe", str(fit_path), "--budget", "1e3", *[where.get(a, a) for a in extra]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match.format(base=base) in err, err
    assert not (tmp_path / "d.toml").exists() and not (tmp_path / "d.nc").exists()
    assert base.read_text().startswith("# Example sweep")  # an input is never replaced


def test_an_existing_file_is_kept_without_force(
    fit_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "decision.toml"
    out.write_text("mine\n")
    argv = ["recipe", str(fit_path), "--budget", "1e3", "--sweep", str(EXAMPLE),
            "--sweep-out", str(out)]  # fmt: skip
    assert main(argv) == 2
    assert f"--sweep-out: {out} exists; pass --force to replace it" in capsys.readouterr().err
    assert out.read_text() == "mine\n"
    assert main([*argv, "--force", "--seeds", "2"]) == 0
    capsys.readouterr()
    assert load_sweep_spec(out).explicit_points[0].seeds == (3, 4)
    assert not list(tmp_path.glob(".decision.toml.*"))  # written atomically: no leftovers
