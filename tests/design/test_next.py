"""`bayesscale next`: preposterior values against known answers, the greedy batch, the cost
file, the sweep file it writes, and the loop next -> plan -> launch --dry-run on the bundled
example. Every fit here is hand-made (no sampling)."""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import stats
from testdata import ROOT

from bayesscale import __version__, names
from bayesscale.cli import main
from bayesscale.data.extrapolation import SweptRange
from bayesscale.data.fitfile import ATTR_FORMAT, FORMAT_VERSION, load_fit, save_fit
from bayesscale.data.observations import Table, frame_sha256, validate
from bayesscale.data.spec import parse_spec
from bayesscale.design import preposterior as pp
from bayesscale.design import sweep_file
from bayesscale.design.candidates import candidate_grid, default_anchors, with_concentration
from bayesscale.design.costs import Costs, CostsError, load_costs, parse_costs
from bayesscale.design.next_runs import next_runs
from bayesscale.design.next_text import format_text, to_json, where_text
from bayesscale.design.refit import fit_target, refit_check, simulated_rows
from bayesscale.design.results import DesignError
from bayesscale.design.run_value import value_and_mcse
from bayesscale.design.sweep_file import next_sweep_text, toml_text
from bayesscale.law.inference import FitConfig, fit
from bayesscale.law.posterior import law_draws
from bayesscale.recipe.synthetic import synthetic_fit
from bayesscale.verl import manifest as mf
from bayesscale.verl.sweep import SpecError, load_sweep_spec, parse_sweep_spec

EXAMPLE = ROOT / "data" / "verl_example" / "sweep.toml"


# --- the math, against known answers ---------------------------------------------------------


def test_reweighting_matches_the_exact_posterior_of_a_tiny_model() -> None:
    """Beta(2, 5) prior draws of a success probability, reweighted by one beta-binomial
    outcome, against the exact posterior refitted on that outcome (phi huge: binomial, so the
    posterior is Beta(2 + k, 5 + n - k))."""
    rng = np.random.default_rng(3)
    p = rng.beta(2.0, 5.0, 200_000)
    n, k, phi = 40, 17, 1e9
    w = pp.normalized_weights(pp.beta_binomial_logpmf(k, n, p, phi)[None, :])[0]
    exact = stats.beta(2 + k, 5 + n - k)
    assert np.sum(w * p) == pytest.approx(exact.mean(), abs=2e-3)
    assert np.sum(w * (p - np.sum(w * p)) ** 2) == pytest.approx(exact.var(), rel=0.05)
    assert 0.1 * p.size < pp.kish_ess(w) < p.size


def test_beta_binomial_matches_scipy_and_simulation_is_seeded() -> None:
    k, n, p, phi = np.array([0, 3, 10]), 10, 0.3, 25.0
    expected = stats.betabinom.logpmf(k, n, p * phi, (1 - p) * phi)
    assert np.allclose(pp.beta_binomial_logpmf(k, n, p, phi), expected)
    a = pp.simulate_beta_binomial(np.random.default_rng(1), 50, np.full(5, 0.4), np.full(5, 80.0))
    b = pp.simulate_beta_binomial(np.random.default_rng(1), 50, np.full(5, 0.4), np.full(5, 80.0))
    assert a.tolist() == b.tolist()


def test_an_outcome_that_cannot_change_the_decision_is_worth_nothing() -> None:
    rng = np.random.default_rng(0)
    P = rng.uniform(0.3, 0.6, (300, 6))
    P[:, 2] += 0.5  # action 2 is best in every draw: nothing to learn
    loglik = rng.normal(0, 3, (64, 300))
    value, _ = pp.evsi(P, loglik)
    assert value == pytest.approx(0.0, abs=1e-15) and pp.evpi(P) == pytest.approx(0.0, abs=1e-15)


def test_evsi_is_nonnegative_and_at_most_evpi() -> None:
    rng = np.random.default_rng(1)
    P = rng.uniform(0.3, 0.6, (400, 8))
    which = rng.integers(0, 400, 200)
    for scale in (0.1, 1.0, 10.0):  # from uninformative to revealing outcomes
        loglik = -scale * (np.arange(400)[None, :] - which[:, None]) ** 2 / 400.0
        value, se = pp.evsi(P, loglik)
        assert -2 * se <= value <= float(pp.evpi(P)) + 1e-12
    value, _ = pp.variance_reduction(P[:, :2], loglik)
    assert value >= 0


# --- the greedy batch on a hand-made fit ---------------------------------------------------------


@pytest.fixture(scope="module")
def toy_fit() -> xr.DataTree:
    return with_concentration(synthetic_fit(draws=120, spread=0.2, seed=2), 800.0)


def test_no_uncertainty_no_value(toy_fit: xr.DataTree) -> None:
    """A point-mass posterior: every candidate is worth exactly 0, the batch still fills."""
    point = with_concentration(synthetic_fit(draws=30, spread=0.0), 800.0)
    result = next_runs(point, 2e4, runs=2, simulations=8, max_draws=30, actions=8, min_ess=0)
    assert result.target_now == pytest.approx(0.0, abs=1e-12)
    assert all(v.value == 0 for v in result.first_step) and len(result.chosen) == 2


def test_batch_values_costs_and_json(toy_fit: xr.DataTree) -> None:
    result = next_runs(
        toy_fit, 2e4, runs=3, simulations=24, max_draws=120, actions=24, seed=1, min_ess=0
    )
    assert len(result.chosen) == 3 and result.target_now > 0
    assert all(v.value >= 0 and v.cost.total > 0 for v in result.first_step)
    assert 0 <= result.target_after <= result.target_now
    first = result.chosen[0].valued
    assert first.per_cost == max(v.per_cost for v in result.first_step)
    doc = json.loads(json.dumps(to_json(result)))
    assert doc["chosen"][0]["rank"] == 1 and "informs" in doc["chosen"][0]["why"]
    assert {"value", "cost", "value_per_cost", "ess_median"} <= set(doc["chosen"][0])
    again = next_runs(
        toy_fit, 2e4, runs=3, simulations=24, max_draws=120, actions=24, seed=1, min_ess=0
    )
    assert [r.candidate for r in again.chosen] == [r.candidate for r in result.chosen]


def test_a_repeated_run_is_worth_less_the_second_time(toy_fit: xr.DataTree) -> None:
    """Diminishing returns: after conditioning on a run's outcome, the same run again (another
    seed) is worth less than it was."""
    options = dict(simulations=32, max_draws=120, actions=24, min_ess=0)
    result = next_runs(toy_fit, 2e4, runs=2, **options)
    assert len(result.chosen) == 2
    top = result.chosen[0]
    second = next_runs(toy_fit, 2e4, runs=2, beyond=1.0, **options)
    assert top.valued.value > 0 and second.chosen[0].valued.value > 0
    # the same candidate valued at step 2 (its second run) against step 1
    assert all(
        not (r.candidate == top.candidate and r.repeat == 1 and r.valued.value > top.valued.value)
        for r in result.chosen
    )


def test_exponents_target(toy_fit: xr.DataTree) -> None:
    result = next_runs(
        toy_fit, 2e4, runs=2, target="exponents", simulations=16, max_draws=60, min_ess=0
    )
    assert (
        len(result.chosen) == 2
        and result.target_now > 0
        and all(v.value >= 0 for v in result.first_step)
    )
    assert "alpha_pop" in result.chosen[0].why
    # the refit check's target from scratch: alpha_pop's variance over the same 60 draws a chain
    keep = np.unique(np.linspace(0, toy_fit["posterior"].sizes["draw"] - 1, 60).round())
    alpha = toy_fit["posterior"][names.ALPHA_POP].isel(draw=keep.astype(int)).to_numpy()
    expected = float(np.var(alpha.reshape(-1, alpha.shape[-1]), axis=0).sum())
    assert fit_target(toy_fit, "exponents", 2e4, [], max_draws=60) == pytest.approx(expected)
    assert result.target_now == pytest.approx(expected)


def test_draws_the_recipe_leaves_out_are_left_out_of_the_values_too(toy_fit: xr.DataTree) -> None:
    """A draw whose law overflows is left out (at its index in every chain) by the recipe;
    the preposterior values leave out the same draws, so the result is the one of a fit
    without that draw index."""
    from bayesscale.law.posterior import PosteriorWarning

    alpha = toy_fit["posterior"][names.ALPHA].copy()
    alpha[dict(chain=1, draw=7, setting=0, axis=2)] = 500.0
    broken = toy_fit.copy()
    broken["posterior"] = toy_fit["posterior"].to_dataset().assign({names.ALPHA: alpha})
    without = toy_fit.copy()
    without["posterior"] = toy_fit["posterior"].to_dataset().drop_sel({names.DRAW_DIM: 7})
    options = dict(runs=2, simulations=16, max_draws=None, actions=16, seed=3)
    with pytest.warns(PosteriorWarning, match="2 of 240 posterior draws left out"):
        left_out = next_runs(broken, 2e4, **options)
    reference = next_runs(without, 2e4, **options)
    assert [r.candidate for r in left_out.chosen] == [r.candidate for r in reference.chosen]
    assert left_out.target_now == reference.target_now
    assert [v.value for v in left_out.first_step] == [v.value for v in reference.first_step]
    # the refit check's target from scratch leaves out the same draws
    with pytest.warns(PosteriorWarning):
        exponents_left_out = fit_target(broken, "exponents", 2e4, [], max_draws=None)
    assert exponents_left_out == fit_target(without, "exponents", 2e4, [], max_draws=None)


def test_candidate_grid_nests_sizes_and_respects_caps() -> None:
    swept = SweptRange(("env", "traj"), ("S",), np.array([[8.0, 2.0]]), np.array([[64.0, 16.0]]))
    cands = candidate_grid(["S"], ("env", "traj"), swept, np.array([[64.0, 8.0]]), 4.0, 2.0,
                           max_sizes={"env": 100})  # fmt: skip
    env = sorted(c.sizes[0] for c in cands if c.axis == "env")
    assert env == [8, 16, 32, 64, 100] and all(c.sizes[1] == 8 for c in cands if c.axis == "env")
    # the anchor itself is listed once (under the first axis)
    assert sorted(c.sizes[1] for c in cands if c.axis == "traj") == [2, 4, 16, 32, 64]


def test_default_anchors_paper_unless_the_sweep_lies_above() -> None:
    """The paper's anchors beyond a thin sweep ("paper") or only inside it ("swept"); a sweep
    wholly above an anchor, and an axis without one, keep their largest swept size."""
    lo = np.array([[8.0, 320.0, 1.0], [64.0, 320.0, 1.0], [512.0, 320.0, 1.0]])
    hi = np.array([[32.0, 1280.0, 4.0], [512.0, 20480.0, 4.0], [2048.0, 1280.0, 4.0]])
    swept = SweptRange(("env", "task", "pages"), ("A", "B", "C"), lo, hi)
    columns = {"env": "n_envs", "task": "n_tasks", "pages": "n_pages"}
    paper = default_anchors(swept, swept.axes, columns)
    assert paper.tolist() == [[256, 10240, 4], [256, 10240, 4], [2048, 10240, 4]]
    inside = default_anchors(swept, swept.axes, columns, "swept")
    assert inside.tolist() == [[32, 1280, 4], [256, 10240, 4], [2048, 1280, 4]]
    with pytest.raises(DesignError, match="anchor rule must be one of"):
        default_anchors(swept, swept.axes, columns, "nope")


def test_anchor_rule_and_given_anchors_hold_the_other_axes(toy_fit: xr.DataTree) -> None:
    options = dict(runs=1, simulations=8, max_draws=30, actions=8, min_ess=0)
    thin = with_concentration(
        synthetic_fit(draws=30, spread=0.2, seed=2, swept=((8.0, 320.0, 2.0), (32.0, 1280.0, 8.0))),
        800.0,
    )
    for rule, anchor in (("paper", (256, 10240, 8)), ("swept", (32, 1280, 8))):
        result = next_runs(thin, 2e4, anchor_rule=rule, **options)
        assert set(result.anchors.values()) == {anchor} and result.anchor_rule == rule
        for i, axis in enumerate(result.axes):
            held = {c.sizes[:i] + c.sizes[i + 1 :] for c in result.candidates if c.axis == axis}
            assert held == {anchor[:i] + anchor[i + 1 :]}, (rule, axis)
        assert to_json(result)["anchors"] == {
            s: dict(zip(result.axes, anchor, strict=True)) for s in result.anchors
        }
        at = " ".join(f"{a}={v:,}" for a, v in zip(result.axes, anchor, strict=True))
        assert f"the others held at {at} (the {rule} anchors)" in format_text(result)
    result = next_runs(toy_fit, 2e4, anchors={"env": 64}, **options)
    held = [c.sizes[0] for c in result.candidates if c.axis in ("task", "traj")]
    assert held and set(held) == {64}
    with pytest.raises(DesignError, match="anchor sizes must be finite and >= 1"):
        next_runs(toy_fit, 2e4, anchors={"env": 0.0}, **options)
    with pytest.raises(DesignError, match="the fit does not have"):
        next_runs(toy_fit, 2e4, anchors={"pages": 4.0}, **options)
    with pytest.raises(DesignError, match="anchor rule must be one of"):
        next_runs(toy_fit, 2e4, anchor_rule="nope", **options)


def test_bad_inputs(toy_fit: xr.DataTree) -> None:
    with pytest.raises(DesignError, match="target must be one of"):
        next_runs(toy_fit, 1e4, target="nope")
    with pytest.raises(DesignError, match="not in the fit"):
        next_runs(toy_fit, 1e4, target_settings=["nope"])
    with pytest.raises(DesignError, match="concentration"):
        next_runs(synthetic_fit(draws=10), 1e4)


# --- costs ----------------------------------------------------------------------------------


def test_costs_defaults_and_file(tmp_path: Path) -> None:
    """The defaults price the paper's reference run (a missing size is taken at it); a file
    overrides them; errors name the file and key (tests/design/test_run_costs.py: the compute model)."""
    costs = Costs()
    reference = 2.4e18 / (3600 * 989e12 * 0.06) + 1.0
    assert costs.gpu_hours() == pytest.approx(reference, rel=1e-12)
    assert costs.gpu_hours(params_b=4.0, rollouts=16) == pytest.approx(2 * reference - 1)
    path = tmp_path / "costs.toml"
    path.write_text('currency = "EUR"\n[data]\nenv = 5\n[gpu]\nprice_per_hour = 3.5\n')
    loaded = load_costs(path)
    assert (loaded.currency, loaded.data["env"], loaded.data["task"]) == ("EUR", 5.0, 0.18)
    assert loaded.price_per_hour == 3.5
    with pytest.raises(CostsError, match=r"costs.toml: \[gpu\]: unknown key\(s\) \['speed'\]"):
        parse_costs("[gpu]\nspeed = 1", source=str(tmp_path / "costs.toml"))
    with pytest.raises(CostsError, match=r"x.toml: \[data\] env: must be a finite number >= 0"):
        parse_costs("[data]\nenv = -1", source="x.toml")
    with pytest.raises(CostsError, match=r"\[gpu\] reference_rollouts: must be > 0"):
        parse_costs("[gpu]\nreference_rollouts = 0")


# --- is the batch worth running? ---------------------------------------------------------------


def test_the_batch_value_mcse_matches_the_spread_over_replications() -> None:
    """A normal model with a known answer: draws theta ~ N(0, 1) of the posterior, outcomes
    y ~ N(theta, sigma^2). The variance's expected reduction is 1/(1 + sigma^2) exactly; a
    decision between two actions has a value too. Over 200 independent replications (fresh
    draws and outcomes) the value's spread equals the MCSE computed from one replication (the
    outcomes' and the draws' parts in quadrature)."""
    for sigma, statistic, exact in (
        (1.0, lambda x: x[..., 1] - x[..., 0] ** 2, 0.5),
        (0.3, lambda x: x[..., 1] - x[..., 0] ** 2, 1 / 1.09),
        (1.0, lambda x: x.min(axis=-1), None),  # features: the regret of two actions
    ):
        values, mcse, parts = [], [], []
        for rep in range(200):
            rng = np.random.default_rng([11, rep])
            theta = rng.standard_normal(400)
            y = theta[:64] + sigma * rng.standard_normal(64)
            ll = -0.5 * (y[:, None] - theta[None, :]) ** 2 / sigma**2
            if exact is None:
                success = np.stack([0.5 + 0.1 * theta, np.full(400, 0.52)], axis=1)
                features = pp.regret(success)
            else:
                features = np.stack([theta, theta**2], axis=1)
            value, se_outcomes, se_draws = value_and_mcse(features, statistic, ll)
            values.append(value)
            mcse.append(np.hypot(se_outcomes, se_draws))
            parts.append((se_outcomes, se_draws))
        spread = float(np.std(values))
        assert float(np.sqrt(np.mean(np.square(mcse)))) == pytest.approx(spread, rel=0.15)
        outcomes_only = float(np.mean([p[0] for p in parts]))
        assert outcomes_only < 0.5 * spread  # the outcomes' part alone understates the error
        if exact is not None:
            assert np.mean(values) == pytest.approx(exact, abs=3 * spread / np.sqrt(200) + 0.005)


def test_a_batch_within_its_monte_carlo_error_is_not_worth_running() -> None:
    """Seeded: runs that inform a loose posterior are worth running (value many MCSE above 0);
    on a posterior already tight (lognormal spread 0.003) the same batch's value is within 2
    MCSE of 0, and on a point mass it is exactly 0; text and JSON say so, and why."""
    options = dict(runs=2, simulations=128, max_draws=None, actions=24, seed=1, min_ess=0)
    loose = with_concentration(synthetic_fit(draws=500, spread=0.2, seed=2), 3000.0)
    worth = next_runs(loose, 2e4, trials=3000, **options)
    assert worth.worth_running and worth.batch_value > 5 * worth.mcse > 0
    assert worth.mcse == pytest.approx(np.hypot(worth.mcse_outcomes, worth.mcse_draws))
    assert worth.batch_value == pytest.approx(worth.target_now - worth.target_after)
    text, doc = format_text(worth), json.loads(json.dumps(to_json(worth)))
    assert "NOT WORTH" not in text and "): worth running" in text
    assert doc["worth_running"] is True and doc["verdict"].startswith("the batch is worth running")
    assert doc["batch_value_mcse"] == pytest.approx(worth.mcse)

    tight = with_concentration(synthetic_fit(draws=300, spread=0.003, seed=2), 800.0)
    result = next_runs(tight, 2e4, **options)
    assert not result.worth_running and 0 < result.batch_value < 2 * result.mcse
    text, doc = format_text(result), json.loads(json.dumps(to_json(result)))
    assert text.startswith("NOT WORTH RUNNING: the batch is not worth running: its expected")
    assert "within 2 Monte Carlo standard errors" in text and "NOT worth running" in text
    assert doc["worth_running"] is False and doc["verdict"] in text
    assert "barely move what the target measures" in doc["verdict"]

    point = with_concentration(synthetic_fit(draws=30, spread=0.0), 800.0)
    nothing = next_runs(point, 2e4, runs=1, simulations=8, max_draws=30, actions=8, min_ess=0)
    assert not nothing.worth_running and nothing.batch_value == pytest.approx(0.0, abs=1e-12)
    assert "the target is 0 now, so no run can lower it" in format_text(nothing)


# --- the sweep file and plan's [[grid.point]] ------------------------------------------------------


def test_grid_point_spec_round_trip_and_errors(tmp_path: Path) -> None:
    base = load_sweep_spec(EXAMPLE)
    point = {"n_envs": 4, "n_tasks": 16, "rollouts": 8, "seeds": [3, 4], "models": ["qwen3-4b"],
             "algorithms": ["grpo"], "label": "next:traj"}  # fmt: skip
    text = next_sweep_text(base, [point], note="test")
    spec = parse_sweep_spec(text, "next.toml", tmp_path)
    assert spec.explicit_points[0].seeds == (3, 4) and spec.axes == ()
    assert spec.pool == base.pool.resolve() and spec.cells == base.cells
    raw = tomllib.loads(toml_text({"a": 1, "t": {"b": [1, 2], "c": "x"}}))
    assert raw == {"a": 1, "t": {"b": [1, 2], "c": "x"}}
    mixed = text.replace("[[grid.point]]", "[grid]\nspan = 4\n[[grid.point]]", 1)
    with pytest.raises(SpecError, match=r"lists the grid points explicitly; remove \['span'\]"):
        parse_sweep_spec(mixed, "next.toml", tmp_path)
    bad = text.replace('models = ["qwen3-4b"]', 'models = ["other"]')
    with pytest.raises(SpecError, match="key 'models' must name"):
        parse_sweep_spec(bad, "next.toml", tmp_path)
    twice = next_sweep_text(base, [point, point])
    with pytest.raises(SpecError, match="is listed twice"):
        parse_sweep_spec(twice, "next.toml", tmp_path)


def example_fit(path: Path) -> Path:
    """A hand-made fit of the example sweep's settings (qwen3-4b, grpo and ppo, math+code),
    swept over the example's grid (envs 1-16, tasks 8-128, rollouts 1-16)."""
    tree = synthetic_fit(
        draws=80,
        spread=0.15,
        seed=4,
        reference=(4.0, 32.0, 4.0),
        swept=((1.0, 8.0, 1.0), (16.0, 128.0, 16.0)),
    )
    labels = ["qwen3-4b | grpo | math+code", "qwen3-4b | ppo | math+code"]
    post = tree["posterior"].to_dataset().assign_coords({names.SETTING_DIM: labels})
    const = tree["constant_data"].to_dataset().assign_coords({names.SETTING_DIM: labels})
    const[names.MODEL] = (names.SETTING_DIM, ["qwen3-4b", "qwen3-4b"])
    const[names.ALGORITHM] = (names.SETTING_DIM, ["grpo", "ppo"])
    const[names.DOMAIN] = (names.SETTING_DIM, ["math+code", "math+code"])
    out = xr.DataTree.from_dict({"posterior": post, "constant_data": const})
    out.attrs = {**tree.attrs, ATTR_FORMAT: FORMAT_VERSION}
    out = with_concentration(out, 300.0)
    save_fit(out, path)
    return path


def test_next_plan_launch_dry_run_on_the_bundled_example(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fit = example_fit(tmp_path / "fit.nc")
    nxt, png = tmp_path / "next.toml", tmp_path / "next.png"
    # 80 draws (for speed) value only a few runs: --min-ess 0 keeps the batch at 3 runs
    args = ["next", str(fit), "--budget", "3000", "--runs", "3", "--sweep", str(EXAMPLE),
            "--simulations", "16", "--max-draws", "40", "--min-ess", "0"]  # fmt: skip
    assert main([*args, "--out", str(nxt), "--figure", str(png)]) == 0
    out = capsys.readouterr().out
    assert "next 3 run(s)" in out and f"wrote {nxt}" in out
    # 40 draws a chain and 16 outcomes cannot tell this batch's value from 0: said plainly,
    # and the next step is not offered
    assert "\nNOT WORTH RUNNING: the batch is not worth running" in out
    assert f"next: bayesscale plan {nxt}" not in out and "but the batch is not worth" in out
    assert out.startswith("DIAGNOSTICS FAILED")  # a fit of 160 draws: said first
    assert png.stat().st_size > 0
    assert main([*args, "--out", str(nxt)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    spec = load_sweep_spec(nxt)
    assert spec.explicit_points and all(min(p.seeds or ()) >= 3 for p in spec.explicit_points)
    assert max(p.n_envs for p in spec.explicit_points) <= 20  # the pool's training envs

    sweep = tmp_path / "sw"
    assert main(["plan", str(nxt), "--out", str(sweep)]) == 0
    capsys.readouterr()
    manifest = mf.read_manifest(sweep)
    assert len(manifest) == 3 and manifest[names.SWEEP_AXIS].str.startswith("next:").all()
    assert main(["launch", str(sweep), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all("verl.trainer.main_ppo" in line for line in lines)

    assert main([*args[:-4], "--json"]) == 0  # no --out: print only
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["chosen"]) == 3 and doc["candidates"]
    assert doc["fit_diagnostics"]["ok"] is False
    assert doc["verdict"].startswith("the batch is worth running") is doc["worth_running"]
    # every run priced by the documented arithmetic: [alignment] cells = 1024 of qwen3-4b, GPU
    # time 8 x 4e9 x 36.62109375 tokens x 1024 x rollouts / (3600 x 989e12 x 0.06) + 1 hour
    # at 2 USD; environments (4.10 USD) and tasks (0.18 USD) beyond the 16 and 128 swept and
    # those of the runs before it; no price for the trajectories
    owned = {"env": 16.0, "task": 128.0}
    for run in doc["chosen"]:
        rollouts = run["sizes"]["traj"]
        assert run["trajectories"] == 1024 * rollouts
        assert run["flops"] == pytest.approx(8 * 4e9 * 36.62109375 * 1024 * rollouts, rel=1e-12)
        hours = run["flops"] / (3600 * 989e12 * 0.06) + 1.0
        assert run["gpu_hours"] == pytest.approx(hours, rel=1e-12)
        assert run["cost_gpu"] == pytest.approx(2.0 * hours, rel=1e-12)
        data = sum(
            price * max(0.0, run["sizes"][a] - owned[a])
            for a, price in (("env", 4.10), ("task", 0.18))
        )
        assert run["cost_data"] == pytest.approx(data, abs=1e-12)
        assert run["cost"] == pytest.approx(run["cost_gpu"] + data)
        owned = {a: max(owned[a], float(run["sizes"][a])) for a in owned}
    assert doc["cost_model"]["tokens_per_trajectory"] == 36.62109375
    assert doc["anchor_rule"] == "paper" and "--anchors paper`" in nxt.read_text()
    assert main([*args[:-4], "--json", "--anchors", "swept", "--anchor", "env=4"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["anchor_rule"] == "swept" and {a["env"] for a in doc["anchors"].values()} == {4}


def _copies_pool(path: Path, statements: int) -> Path:
    """A crossed pool of 20 environment ids in 10 structures (``eK`` and ``eK+10`` differ only
    by a content seed) and 150 task ids in ``statements`` statements (``tK`` is statement
    ``K % statements``, by its embedding), in verl's columns."""
    with path.open("w") as fh:
        for t in range(150):
            for e in range(20):
                row = {
                    "task_id": f"t{t:03d}",
                    "env_id": f"e{e:02d}",
                    "world_id": f"w{e % 5}",
                    "prompt": [{"role": "user", "content": f"task {t % statements}"}],
                    "data_source": "synthetic/copies",
                    "reward_model": {"style": "rule", "ground_truth": str(t % statements)},
                    "tools": [{"name": f"tool{e % 10}"}],
                    "state_schema": {"memory": "list"},
                    "transition": "deterministic",
                    "verifier": {"kind": "exact"},
                    "content_seed": e // 10,
                    "embedding": [float(t % statements == j) for j in range(statements)],
                }
                fh.write(json.dumps(row) + "\n")
    return path


def test_next_sizes_are_the_distinct_units_plan_realises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against a pool whose ids repeat units (20 environment ids in 10 structures, 150 task ids
    in 6 statements), next caps its sizes at the distinct units, as plan counts them: plan then
    realises every chosen size as that many distinct environments and tasks (more ids would be
    copies, and plan would map them to the same counts). The fit swept 8-128 tasks, so every
    run, at 6 tasks, lies below the swept min, and its why says so."""
    pool = _copies_pool(tmp_path / "pool.jsonl", statements=6)
    text = EXAMPLE.read_text().replace('"pool.jsonl"', json.dumps(str(pool)))
    text = text.replace('model = "all-MiniLM-L6-v2"', "")  # the pool's embedding column
    base = tmp_path / "base.toml"
    base.write_text(text)
    caps = sweep_file.pool_caps(load_sweep_spec(base))
    assert caps == {names.N_ENVS: 10, names.N_TASKS: 6}  # not the 20 and 135 training ids

    fit, nxt = example_fit(tmp_path / "fit.nc"), tmp_path / "next.toml"
    args = ["next", str(fit), "--budget", "3000", "--runs", "6", "--sweep", str(base),
            "--simulations", "16", "--max-draws", "40", "--min-ess", "0"]  # fmt: skip
    assert main([*args, "--json", "--out", str(nxt)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {c["sizes"]["task"] for c in doc["candidates"]} == {6}
    assert max(c["sizes"]["env"] for c in doc["candidates"]) == 10
    assert all(c["below_swept_min"] == pytest.approx(6 / 8) for c in doc["candidates"])
    assert all("task 6 is below the swept min 8 (0.75x)" in r["why"] for r in doc["chosen"])
    assert not any("inside the swept range" in r["why"] for r in doc["chosen"])
    assert main([*args, "--figure", str(tmp_path / "next.png")]) == 0
    text = capsys.readouterr().out
    # the header names the sizes the rows hold, not the anchors before the pool's caps
    held = "candidates vary one axis, the others held at env=10 task=6 traj=8: the paper anchors"
    assert held in text and "capped at what the sweep's pool holds on env, task" in text
    assert "no candidate varies task" in text and "at budget 3,000 USD" in text
    from PIL import Image

    with Image.open(tmp_path / "next.png") as image:
        assert image.size[0] >= 1000  # at the figures' resolution, not matplotlib's 100 dpi

    sweep = tmp_path / "sw"
    assert main(["plan", str(nxt), "--out", str(sweep)]) == 0
    assert "more ids than distinct units" not in capsys.readouterr().err
    manifest = mf.read_manifest(sweep)
    assert (manifest[names.N_ENVS] == manifest[names.ENV_IDS]).all()
    assert (manifest[names.N_TASKS] == manifest[names.TASK_IDS]).all()
    chosen = {(r["sizes"]["env"], r["sizes"]["task"], r["sizes"]["traj"]) for r in doc["chosen"]}
    planned = set(
        manifest[[names.N_ENVS, names.N_TASKS, names.ROLLOUTS]].itertuples(index=False, name=None)
    )
    assert planned == chosen


def test_where_a_candidate_lies() -> None:
    swept = SweptRange(
        ("env", "task"), ("S",), np.array([[8.0, 320.0]]), np.array([[64.0, 1280.0]])
    )
    anchors = np.array([[64.0, 135.0]])  # tasks held below the swept min (a pool's cap)
    cands = candidate_grid(["S"], ("env", "task"), swept, anchors, 2.0, 2.0)
    env = {c.sizes[0]: c for c in cands if c.axis == "env"}
    assert env[8].below == pytest.approx(135 / 320) and env[8].beyond < 1
    axes = ("env", "task")
    # the axis outside the data is named: the task held below, not the env varied
    assert where_text(env[8], axes) == "task 135 is below the swept min 320 (0.422x)"
    assert where_text(env[128], axes) == (
        "task 135 is below the swept min 320 (0.422x); env 128 is 2x the swept max 64"
    )
    task = {c.sizes[1]: c for c in cands if c.axis == "task"}
    assert where_text(task[320], axes) == "inside the swept range" and task[320].below == 1.0
    assert where_text(task[2560], axes) == "task 2,560 is 2x the swept max 1,280"
    assert where_text(task[2560]) == "2x swept max"  # without the axes: unnamed


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fit = example_fit(tmp_path / "fit.nc")
    assert main(["next", str(fit), "--budget", "100", "--out", str(tmp_path / "n.toml")]) == 2
    assert "--out needs --sweep" in capsys.readouterr().err
    base = tmp_path / "base.toml"
    base.write_text("name = 'x'\n")
    argv = ["next", str(fit), "--budget", "100", "--sweep", str(base), "--out", str(base)]
    assert main([*argv, "--force"]) == 2  # the base sweep spec is never replaced
    assert "base.toml is also an input of this command" in capsys.readouterr().err
    assert base.read_text() == "name = 'x'\n"
    png = str(tmp_path / "same.png")
    assert main(["next", str(fit), "--budget", "100", "--out", png, "--figure", png]) == 2
    assert "is also --out" in capsys.readouterr().err
    costs = tmp_path / "c.toml"
    costs.write_text("[gpu]\nprice = 1\n")
    assert main(["next", str(fit), "--budget", "100", "--costs", str(costs)]) == 2
    assert "c.toml: [gpu]: unknown key(s) ['price']" in capsys.readouterr().err
    assert main(["next", str(fit), "--budget", "100", "--refit-below", "50"]) == 2
    assert "--refit-below needs --observations" in capsys.readouterr().err
    assert main(["next", str(fit), "--budget", "-1"]) == 2
    assert "budget must be finite and > 0" in capsys.readouterr().err
    assert main(["next", str(fit), "--budget", "100", "--strict"]) == 3
    assert "DIAGNOSTICS FAILED" in capsys.readouterr().err
    assert main(["next", str(fit), "--budget", "100", "--anchor", "env"]) == 2
    assert "--anchor 'env': expected AXIS=SIZE, e.g. env=256" in capsys.readouterr().err
    assert (
        main(["next", str(fit), "--budget", "100", "--anchor", "env=4", "--anchor", "env=8"]) == 2
    )
    assert "--anchor: axis 'env' given twice" in capsys.readouterr().err


# --- a real fit of a tiny model: reweighting against refitting -------------------------------------

TINY_SPEC_TEXT = """
[model]
name = "tiny"
[outcome]
kind = "success"
concentration = { median = 800.0, log_sd = 0.05 }
[settings]
keys = ["model", "algorithm", "domain"]
[[axes]]
name = "env"
column = "n_envs"
exponent = { median = 0.4, log_sd = 0.5 }
[[axes]]
name = "traj"
column = "rollouts"
exponent = { median = 0.15, log_sd = 0.5 }
[level]
prior = { median = 1.0, log_sd = 1.0 }
[slope]
prior = { median = 0.05, log_sd = 1.0 }
"""
TINY_SETTING = {names.MODEL: "m", names.ALGORITHM: "grpo", names.DOMAIN: "d"}


def _tiny_frame() -> pd.DataFrame:
    """One setting, two axes, 3 points each over 4x, two seeds: success from a known law."""
    rng = np.random.default_rng(5)
    rows = []
    for envs, rollouts, seed in [
        (e, r, s) for e, r in [(8, 8), (16, 8), (32, 8), (32, 2), (32, 4)] for s in (0, 1)
    ]:
        loss = 0.55 + 0.2 * (envs / 16) ** -0.4 + 0.08 * (rollouts / 4) ** -0.15
        q = rng.beta(np.exp(-loss) * 800, (1 - np.exp(-loss)) * 800)
        rows.append({**TINY_SETTING, names.N_ENVS: envs, names.ROLLOUTS: rollouts,
                     names.SEED: seed, names.TRIALS: 2000,
                     names.SUCCESSES: int(rng.binomial(2000, q))})  # fmt: skip
    return pd.DataFrame(rows)


def _fit_tiny(frame: pd.DataFrame) -> xr.DataTree:
    """Fit (sampled once per frame; BAYESSCALE_FIT_CACHE=DIR keeps it between runs)."""
    spec = parse_spec(TINY_SPEC_TEXT, "tiny")
    config = FitConfig(chains=2, draws=400, tune=300, seed=3, progress=False, ess_target=0)
    key = hashlib.sha256((frame.to_csv() + repr(config) + __version__).encode()).hexdigest()
    cache = os.environ.get("BAYESSCALE_FIT_CACHE")
    path = Path(cache) / f"next-tiny-{key[:16]}.nc" if cache else None
    if path is not None and path.exists():
        return load_fit(path)
    table = Table(validate(frame, spec, "tiny"), "tiny", frame_sha256(frame))
    tree = fit(table, spec, config)
    if path is not None:
        save_fit(tree, path, overwrite=True)
    return tree


def test_reweighting_matches_a_refit_on_a_tiny_model() -> None:
    """The package's law on 10 runs; one candidate run's simulated outcome. Reweighting the
    draws by its likelihood and refitting on the 11 runs give the same posterior of success at
    the candidate and of the exponents (within Monte Carlo error); refit_check reports the
    refit's target."""
    frame = _tiny_frame()
    tree = _fit_tiny(frame)
    result = next_runs(tree, 500.0, runs=1, trials=2000, simulations=16, max_draws=400,
                       actions=32, beyond=2.0)  # fmt: skip
    run = result.chosen[0]
    refits: dict[str, xr.DataTree] = {}

    def refit(rows: list[dict[str, object]]) -> xr.DataTree:
        extra = pd.DataFrame(rows).assign(**{names.SEED: 2})
        both = pd.concat([frame, extra[frame.columns]], ignore_index=True)
        key = both.to_csv()
        if key not in refits:
            refits[key] = _fit_tiny(both)
        return refits[key]

    after = refit(simulated_rows(result, tree, 0))
    draws = law_draws(tree, max_draws=400)
    sizes = np.asarray(run.candidate.sizes, dtype=float)
    p = np.exp(-(draws.floor[:, 0] + np.sum(draws.coef[:, 0] * sizes ** -draws.alpha[:, 0], -1)))
    phi = tree["posterior"][names.CONCENTRATION].to_numpy().reshape(-1)
    w = pp.normalized_weights(pp.beta_binomial_logpmf(run.outcomes[0], 2000, p, phi)[None])[0]
    new = law_draws(after, max_draws=400)
    p_new = np.exp(-(new.floor[:, 0] + np.sum(new.coef[:, 0] * sizes ** -new.alpha[:, 0], -1)))
    sd = float(np.sqrt(np.sum(w * (p - np.sum(w * p)) ** 2)))
    assert pp.kish_ess(w) > 30
    assert np.sum(w * p) == pytest.approx(p_new.mean(), abs=0.5 * sd)
    assert sd == pytest.approx(p_new.std(), rel=0.35)
    assert p.std() > 1.05 * sd  # the outcome was informative (one run: modestly)
    for a in range(2):
        alpha_w = float(np.sum(w * draws.alpha[:, 0, a]))
        spread = float(draws.alpha[:, 0, a].std())
        assert alpha_w == pytest.approx(new.alpha[:, 0, a].mean(), abs=0.35 * spread)

    check = refit_check(result, tree, refit, outcomes=1, max_draws=400, reason="test")
    assert check.now > 0 and len(check.after) == 1 and result.refit is check
    assert "refit check (test)" in format_text(result)


def test_spend_caps_the_batch(toy_fit: xr.DataTree) -> None:
    result = next_runs(toy_fit, 2e4, runs=6, spend=250.0, simulations=16, max_draws=60)
    assert 1 <= len(result.chosen) <= 6
    assert sum(r.valued.cost.total for r in result.chosen) <= 250.0
    with pytest.raises(DesignError, match="no candidate run fits in the spend cap"):
        next_runs(toy_fit, 2e4, runs=2, spend=1.0, simulations=16, max_draws=60)


def test_the_batch_stops_where_its_draws_can_no_longer_value_a_run(
    toy_fit: xr.DataTree,
) -> None:
    """Each chosen run conditions the weights on its simulated outcome; once the best next
    run's median ESS would fall below min_ess the batch stops (the first run is always
    chosen), and says so. With min_ess 0 the same batch runs on to ``runs``."""
    options = dict(runs=12, simulations=16, max_draws=60, actions=16, seed=4)
    unlimited = next_runs(toy_fit, 2e4, min_ess=0, **options)
    assert len(unlimited.chosen) == 12
    assert not any("the batch stops" in n for n in unlimited.notes)
    # the ESS of a batch falls as runs are added; stop halfway down
    ess = [r.valued.ess_median for r in unlimited.chosen]
    assert ess[-1] < ess[0]
    threshold = (ess[0] + ess[-1]) / 2
    stopped = next_runs(toy_fit, 2e4, min_ess=threshold, **options)
    k = len(stopped.chosen)
    assert 1 <= k < 12
    assert [r.candidate for r in stopped.chosen] == [r.candidate for r in unlimited.chosen[:k]]
    assert all(r.valued.ess_median >= threshold for r in stopped.chosen[1:])
    assert unlimited.chosen[k].valued.ess_median < threshold
    assert any(f"the batch stops at {k} of up to 12 runs" in n for n in stopped.notes)
    assert stopped.stopped_ess == unlimited.chosen[k].valued.ess_median
    assert unlimited.stopped_ess is None and to_json(stopped)["stopped_at_ess"] is not None
    # a first run below the threshold is still chosen, and flagged
    first_only = next_runs(toy_fit, 2e4, min_ess=0.9 * ess[0], **options)
    assert len(first_only.chosen) == 1 and first_only.chosen[0].valued.ess_median >= ess[-1]
    # a threshold the draws can never reach is refused
    with pytest.raises(DesignError, match="not below the 120 posterior draws"):
        next_runs(toy_fit, 2e4, min_ess=120, **options)


def test_a_stopped_batch_under_a_spend_cap_reports_the_batch_kept(toy_fit: xr.DataTree) -> None:
    """Under a spend cap the greedy by value per cost and the greedy by value both run, each
    stopping on the ESS; the note and ``stopped_ess`` describe the batch that is kept (here
    without the batches started from other first runs, ``first_picks=0``)."""
    options = dict(
        runs=12, simulations=16, max_draws=60, actions=16, seed=4, spend=5000.0, first_picks=0
    )
    unlimited = next_runs(toy_fit, 2e4, min_ess=0, **options)
    ess = sorted(r.valued.ess_median for r in unlimited.chosen)
    result = next_runs(toy_fit, 2e4, min_ess=ess[len(ess) // 2], **options)
    k = len(result.chosen)
    assert any("the batch is the greedy by value" in n for n in result.notes)
    stops = [n for n in result.notes if "the batch stops" in n]
    assert result.stopped_ess is not None and len(stops) == 1
    assert f"the batch stops at {k} of up to 12 runs" in stops[0]
    assert f"median ESS of {result.stopped_ess:.0f}" in stops[0]
    assert all(r.valued.ess_median >= ess[len(ess) // 2] for r in result.chosen[1:])


@pytest.mark.parametrize(("spend", "seed"), [(250.0, 1), (250.0, 4), (1000.0, 4), (5000.0, 4)])
def test_batches_started_from_the_best_first_runs(
    toy_fit: xr.DataTree, spend: float, seed: int
) -> None:
    """Under a spend cap the batches started from the best first runs (partial enumeration) are
    built beside the two greedy batches: the batch kept is never worth less than theirs, on the
    same simulated outcomes; where a started batch is kept, it starts with one of the
    ``first_picks`` first runs worth most by value or by value per cost, and fits the cap."""
    options = dict(runs=12, spend=spend, simulations=16, max_draws=60, actions=16, seed=seed)
    greedy = next_runs(toy_fit, 2e4, min_ess=0, first_picks=0, **options)
    started = next_runs(toy_fit, 2e4, min_ess=0, first_picks=3, **options)
    assert started.target_now == greedy.target_now
    assert started.target_after <= greedy.target_after + 1e-15
    assert sum(r.valued.cost.total for r in started.chosen) <= spend
    if started.target_after < greedy.target_after:
        assert any("the batch starts with a run chosen among" in n for n in started.notes)
        fits = [v for v in started.first_step if v.cost.total <= spend]
        best = {
            v.candidate
            for key in ("raw", "per_cost")
            for v in sorted(fits, key=lambda v: getattr(v, key), reverse=True)[:3]
        }
        assert started.chosen[0].candidate in [started.candidates[i] for i in best]
    else:
        assert [r.candidate for r in started.chosen] == [r.candidate for r in greedy.chosen]


def test_a_started_batch_can_be_worth_more_than_both_greedy_batches(
    toy_fit: xr.DataTree,
) -> None:
    """A known case (spend 250, seed 2, the default costs): the greedy by value is worth more
    than the greedy by value per cost, and a batch started from another first run is worth
    more than both."""
    options = dict(runs=12, spend=250.0, simulations=16, max_draws=60, actions=16, seed=2)
    greedy = next_runs(toy_fit, 2e4, min_ess=0, first_picks=0, **options)
    started = next_runs(toy_fit, 2e4, min_ess=0, first_picks=3, **options)
    assert any("the batch is the greedy by value" in n for n in greedy.notes)
    assert any("the batch starts with a run chosen among" in n for n in started.notes)
    assert started.target_after < 0.9 * greedy.target_after
    with pytest.raises(DesignError, match="first_picks must be >= 0"):
        next_runs(toy_fit, 2e4, first_picks=-1, **options)


# --- suggested for tests/design/test_next.py (needs the sweep_file.py part of the patch) ---
def test_next_sweep_keeps_a_relative_entrypoint(tmp_path: Path) -> None:
    """The base spec's ./ and ../ entrypoint words stay pointed where the base spec meant."""
    lab = tmp_path / "lab"
    lab.mkdir()
    text = EXAMPLE.read_text().replace('pool = "', f'pool = "{EXAMPLE.parent.resolve()}/', 1)
    text = text.replace("[verl]\n", '[verl]\nentrypoint = "python3 ./train.py"\n', 1)
    (lab / "sweep.toml").write_text(text)
    base = load_sweep_spec(lab / "sweep.toml")
    point = {"n_envs": 4, "n_tasks": 16, "rollouts": 8, "seeds": [3], "label": "next:traj"}
    spec = parse_sweep_spec(next_sweep_text(base, [point]), "next.toml", tmp_path / "other")
    assert spec.verl.entrypoint == f"python3 {lab.resolve() / 'train.py'}"
