"""Paper figures: panels, drawn data against independent computations, provenance, errors."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from testdata import PRICING, REFERENCE

from bayesscale import __version__, names
from bayesscale.data.observations import Table, load_observations, setting_labels
from bayesscale.data.simulate import PAPER_ANCHORS, PAPER_GRIDS
from bayesscale.data.spec import load_spec
from bayesscale.pricing.spec import load_pricing_spec
from bayesscale.pricing.table import load_pricing
from bayesscale.recipe.iso_budget import iso_budget
from bayesscale.recipe.solve import recipe
from bayesscale.recipe.synthetic import synthetic_fit
from bayesscale.report.figures import (
    FigureError,
    figure_provenance,
    find_sweep,
    plot_allocation,
    plot_collapse,
    plot_exponents,
    plot_heldout,
    plot_iso_budget,
    plot_law,
    provenance,
    read_png_text,
    read_provenance,
    save_figure,
)
from bayesscale.report.figures.style import credible_band, grid_shape

SETTINGS = ["Qwen3-4B | grpo | math+code", "Qwen3-8B | ppo | swe", "Qwen3-8B | grpo | search"]
SAMPLE = (names.CHAIN_DIM, names.DRAW_DIM)


@pytest.fixture(scope="module")
def table() -> Table:
    return load_observations(REFERENCE / "observations.csv", load_spec())


@pytest.fixture(scope="module")
def recipe_result(law_fit: xr.DataTree) -> xr.Dataset:
    return recipe(
        law_fit,
        np.geomspace(1e4, 1e6, 4),
        settings=SETTINGS[:2],
        max_draws=25,
        multipliers=False,
    )


def _flat(da: xr.DataArray) -> np.ndarray:
    rest = [d for d in da.dims if d not in SAMPLE]
    arr = da.transpose(*SAMPLE, *rest).to_numpy().astype(float)
    return arr.reshape(-1, *arr.shape[2:])


def _by_gid(ax, gid: str) -> list:
    return [a for a in ax.get_children() if a.get_gid() == gid]


# --- helpers --------------------------------------------------------------------------------


def test_grid_shape_and_bands_are_known_answers() -> None:
    assert grid_shape(21) == (3, 7)
    assert grid_shape(9) == (3, 3)
    assert grid_shape(3, ncols=2) == (2, 2)
    values = np.arange(101.0)
    assert credible_band(values, 0.5, kind="eti").tolist() == [25.0, 75.0]
    # HDI of a sample skewed to the right hugs the left end; the ETI does not
    skewed = np.exp(np.random.default_rng(3).normal(size=4000))
    hdi, eti = credible_band(skewed, 0.8, "hdi"), credible_band(skewed, 0.8, "eti")
    assert hdi[1] - hdi[0] < eti[1] - eti[0]
    assert hdi[0] < eti[0]
    with pytest.raises(FigureError, match="unknown interval kind"):
        credible_band(values, 0.5, kind="quantile")


# --- per-axis law ---------------------------------------------------------------------------


def test_sweep_anchor_is_found_from_the_data(table: Table) -> None:
    spec = load_spec()
    for axis in names.PAPER_AXES:
        sweep = find_sweep(table.frame, spec, SETTINGS[0], axis)
        others = {a: float(v) for a, v in PAPER_ANCHORS.items() if a != axis}
        assert sweep.anchor == others
        column = {names.ENV: names.N_ENVS, names.TASK: names.N_TASKS, names.TRAJ: names.ROLLOUTS}
        values = sorted(set(table.frame.loc[sweep.rows, column[axis]]))
        assert set(PAPER_GRIDS[axis]) <= set(values)


def test_law_panels_draw_the_posterior_median_and_the_seed_means(
    law_fit: xr.DataTree, table: Table, tmp_path
) -> None:
    fig = plot_law(law_fit, table, names.TASK, settings=SETTINGS, max_draws=None)
    assert len(fig.axes) == len(SETTINGS)
    post, const = law_fit["posterior"], law_fit["constant_data"]
    frame = table.frame
    labels = setting_labels(frame, load_spec())
    for ax, setting in zip(fig.axes, SETTINGS, strict=True):
        (median,) = _by_gid(ax, "median")
        x, y = median.get_xdata(), median.get_ydata()
        # independent: the slope-form law from the posterior variables at env = 256, traj = 8
        sel = {names.SETTING_DIM: setting}
        alpha = _flat(post[names.ALPHA].sel(sel))
        amp = _flat(post[names.AMPLITUDE].sel(sel))
        ref = const[names.REFERENCE_SCALE].to_numpy()
        size = float(const[names.PARAMS_B].sel(sel)) / float(const[names.SIZE_REFERENCE])
        floor = _flat(post[names.LOSS_FLOOR].sel(sel)) + _flat(
            post[names.SIZE_AMPLITUDE]
        ) * size ** (-_flat(post[names.ALPHA_SIZE]))
        for k in (0, 29, len(x) - 1):
            d = np.array([256.0, x[k], 8.0])
            loss = floor + np.sum(amp * (d / ref) ** (-alpha), axis=1)
            assert y[k] == pytest.approx(np.median(np.exp(-loss)), rel=1e-10)
        (points,) = _by_gid(ax, "observed")
        rows = frame[
            (labels == setting) & (frame[names.N_ENVS] == 256) & (frame[names.ROLLOUTS] == 8)
        ]
        rate = (rows[names.SUCCESSES] / rows[names.TRIALS]).groupby(rows[names.N_TASKS]).mean()
        np.testing.assert_allclose(points.get_xdata(), rate.index.to_numpy(float))
        np.testing.assert_allclose(points.get_ydata(), rate.to_numpy(), rtol=1e-12)
        assert ax.get_xscale() == "log"
        assert len(ax.collections) >= 2  # the two bands
    path = save_figure(fig, tmp_path / "law.png")
    prov = read_provenance(path)
    assert len(prov.sources) == 1  # the table is the fit's data
    (src,) = prov.sources
    assert src.data_sha256 == law_fit.attrs[names.ATTR_DATA_HASH] == table.sha256
    assert src.data_file == "observations.csv"
    assert (src.kind, src.spec, src.seed, src.sampler) == (
        "law_fit",
        "agentic-rl",
        11,
        "bayesscale",
    )
    assert prov.version == __version__
    chunks = read_png_text(path)
    assert chunks["law_fit.data_sha256"] == table.sha256
    assert chunks["law_fit.seed"] == "11"
    assert chunks["bayesscale_version"] == __version__


def test_a_stacks_law_panel_is_the_mixture_of_its_forms() -> None:
    """Two point-mass forms at equal weight (the power law, and the offset power with a knee
    on the task axis): the median over the mixture's draws is the two curves' mean, each
    computed here from the posterior variables by its own formula."""
    from testdata import stacked_synthetic_fit

    from bayesscale.data.observations import validate
    from bayesscale.data.spec import parse_spec
    from bayesscale.recipe.synthetic import _SYNTH_SPEC

    knee = 2.0
    stack = stacked_synthetic_fit(0.5, synthetic_fit(draws=10, spread=0.0), knee)
    stack.attrs.update({names.ATTR_DATA_SOURCE: "hand.csv", names.ATTR_DATA_HASH: "0" * 64})
    anchor = {names.N_ENVS: 45, names.N_TASKS: 1810, names.ROLLOUTS: 11}
    rows = [
        {names.MODEL: "S0", names.ALGORITHM: "grpo", names.DOMAIN: "math", **anchor,
         column: v, names.SEED: seed, names.SUCCESSES: 500, names.TRIALS: 1000}
        for column, grid in ((names.N_ENVS, (8, 32, 128)), (names.N_TASKS, (320, 1280, 5120)),
                             (names.ROLLOUTS, (2, 8, 32)))
        for v in grid
        for seed in range(2)
    ]  # fmt: skip
    frame = validate(pd.DataFrame(rows), parse_spec(_SYNTH_SPEC), "hand.csv")
    table = Table(frame, "hand.csv", "0" * 64)
    fig = plot_law(stack, table, names.TASK, settings=["S0 | grpo | math"], max_draws=None)
    (median,) = _by_gid(fig.axes[0], "median")
    x, y = median.get_xdata(), median.get_ydata()
    post = stack["posterior"].to_dataset().isel({names.CHAIN_DIM: 0, names.DRAW_DIM: 0})
    sel = {names.SETTING_DIM: "S0 | grpo | math"}
    alpha = post[names.ALPHA].sel(sel).to_numpy()
    amp = post[names.AMPLITUDE].sel(sel).to_numpy()
    floor = float(post[names.LOSS_FLOOR].sel(sel))
    ref = stack["constant_data"][names.REFERENCE_SCALE].to_numpy()
    for k in (0, 30, len(x) - 1):
        d = np.array([45.0, x[k], 11.0])
        power = floor + np.sum(amp * (d / ref) ** (-alpha))
        task = (d[1] + knee * ref[1]) / (ref[1] + knee * ref[1])
        offset = power - amp[1] * (d[1] / ref[1]) ** (-alpha[1]) + amp[1] * task ** (-alpha[1])
        assert abs(offset - power) > 1e-3  # the forms differ here
        assert y[k] == pytest.approx((np.exp(-power) + np.exp(-offset)) / 2, rel=1e-10)


def test_law_refuses_bad_input(
    law_fit: xr.DataTree, pricing_fit: xr.DataTree, table: Table
) -> None:
    with pytest.raises(
        FigureError, match="needs a bayesscale 'law_fit' fit; this one is 'pricing_fit'"
    ):
        plot_law(pricing_fit, table, names.ENV)
    with pytest.raises(FigureError, match="axis 'tokens' is not an axis of the fit"):
        plot_law(law_fit, table, "tokens")
    with pytest.raises(FigureError, match=r"validated observations\.Table"):
        plot_law(law_fit, table.frame, names.ENV)  # type: ignore[arg-type]
    frame = table.frame.copy()
    frame.loc[3, names.MODEL] = "Mystery-1B"
    with pytest.raises(FigureError, match=r"Mystery-1B \| grpo \| math\+code"):
        plot_law(law_fit, Table(frame, "odd.csv", "0" * 64), names.ENV)
    post = law_fit["posterior"].to_dataset().drop_vars(names.ALPHA)
    broken = xr.DataTree.from_dict(
        {"posterior": post, "constant_data": law_fit["constant_data"].to_dataset()}
    )
    broken.attrs = dict(law_fit.attrs)
    with pytest.raises(ValueError, match="no 'alpha'"):
        plot_law(broken, table, names.ENV)


def test_law_with_interaction_and_dense_reward_series(tmp_path) -> None:
    """A hand-made fit with an env x task interaction and dense reward on traj (multiplier 2):
    the dense curve is the law at twice the rollouts, interaction included."""
    from bayesscale.data.observations import validate
    from bayesscale.data.spec import parse_spec
    from bayesscale.recipe.synthetic import _SYNTH_SPEC

    spec_text = (
        _SYNTH_SPEC
        + '[interaction]\naxes = ["env", "task"]\nunits = "raw"\n'
        + '[dense_reward]\naxis = "traj"\nmultiplier = { median = 2.0, log_sd = 0.1 }\n'
    )
    fit = synthetic_fit(draws=40, interaction=(0.2, 0.3), spec_text=spec_text, seed=4)
    post = fit["posterior"].to_dataset()
    post[names.DENSE_MULTIPLIER] = xr.full_like(post[names.INTERACTION_BETA], 2.0)
    fit["posterior"] = xr.DataTree(post)
    fit.attrs.update(
        {
            names.ATTR_DATA_SOURCE: "hand.csv",
            names.ATTR_DATA_HASH: "ab" * 32,
            names.ATTR_SEED: 4,
            names.ATTR_SAMPLER: "numpyro",
        }
    )
    rng = np.random.default_rng(8)
    rows = []
    anchor = {names.N_ENVS: 45, names.N_TASKS: 1810, names.ROLLOUTS: 11}
    for reward in ("sparse", "dense"):
        for column, grid in (
            (names.N_ENVS, (8, 32, 128)),
            (names.N_TASKS, (320, 1280, 5120)),
            (names.ROLLOUTS, (2, 8, 32)),
        ):
            if reward == "dense" and column != names.ROLLOUTS:
                continue
            for v in grid:
                for seed in range(2):
                    row = {**anchor, column: v}
                    rows.append(
                        {
                            names.MODEL: "S0",
                            names.ALGORITHM: "grpo",
                            names.DOMAIN: "math",
                            **row,
                            names.REWARD: reward,
                            names.SEED: seed,
                            names.SUCCESSES: int(rng.integers(400, 600)),
                            names.TRIALS: 1000,
                        }
                    )
    spec = parse_spec(spec_text)
    frame = validate(pd.DataFrame(rows), spec, "hand.csv")
    fig = plot_law(
        fit,
        Table(frame, "hand.csv", "ab" * 32),
        names.TRAJ,
        settings=["S0 | grpo | math"],
        max_draws=None,
    )
    (ax,) = fig.axes
    sparse, dense = _by_gid(ax, "median")
    sel = {names.SETTING_DIM: "S0 | grpo | math"}
    alpha = _flat(post[names.ALPHA].sel(sel))
    amp = _flat(post[names.AMPLITUDE].sel(sel))
    floor = _flat(post[names.LOSS_FLOOR].sel(sel))
    gamma = _flat(post[names.INTERACTION_GAMMA].sel(sel))
    beta = _flat(post[names.INTERACTION_BETA])
    ref = fit["constant_data"][names.REFERENCE_SCALE].to_numpy()
    for line, factor in ((sparse, 1.0), (dense, 2.0)):
        x, y = line.get_xdata(), line.get_ydata()
        for k in (0, 30, 59):
            d = np.array([45.0, 1810.0, factor * x[k]])
            loss = (
                floor
                + np.sum(amp * (d / ref) ** (-alpha), axis=1)
                - gamma * (45.0 * 1810.0) ** (-beta)
            )
            assert y[k] == pytest.approx(np.median(np.exp(-loss)), rel=1e-10)
    assert len(_by_gid(ax, "observed")) == 2
    prov = figure_provenance(fig)
    assert prov is not None and prov.sources[0].data_file == "hand.csv"


# --- exponents ------------------------------------------------------------------------------


def test_forest_plot_shows_every_setting_around_the_population(law_fit: xr.DataTree) -> None:
    fig = plot_exponents(law_fit)
    post = law_fit["posterior"]
    axes = [str(a) for a in post[names.AXIS_DIM].to_numpy()]
    settings = [str(s) for s in post[names.SETTING_DIM].to_numpy()]
    assert len(fig.axes) == len(axes) == 3
    for j, ax in enumerate(fig.axes):
        (dots,) = _by_gid(ax, "median")
        offsets = dots.get_offsets()
        alpha = _flat(post[names.ALPHA].sel({names.AXIS_DIM: axes[j]}).transpose(*SAMPLE, ...))
        np.testing.assert_allclose(offsets[:, 0], np.median(alpha, axis=0), rtol=1e-12)
        assert offsets.shape[0] == len(settings) == 21
        (pop,) = _by_gid(ax, "population_median")
        expected = np.median(_flat(post[names.ALPHA_POP].sel({names.AXIS_DIM: axes[j]})))
        assert pop.get_offsets()[0, 0] == pytest.approx(expected, rel=1e-12)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["population", *settings]
    sorted_fig = plot_exponents(law_fit, sort_by=names.ENV, settings=settings[:5])
    env = sorted_fig.axes[0]
    (dots,) = _by_gid(env, "median")
    y_order = np.argsort(-dots.get_offsets()[:, 1])  # top row first
    assert np.all(np.diff(dots.get_offsets()[y_order, 0]) >= 0)


def test_forest_plot_refuses_bad_input(law_fit: xr.DataTree, pricing_fit: xr.DataTree) -> None:
    with pytest.raises(FigureError, match="'law_fit'"):
        plot_exponents(pricing_fit)
    post = law_fit["posterior"].to_dataset().drop_vars(names.ALPHA_POP)
    broken = xr.DataTree.from_dict({"posterior": post})
    broken.attrs = dict(law_fit.attrs)
    with pytest.raises(FigureError, match="no 'alpha_pop'"):
        plot_exponents(broken)
    with pytest.raises(FigureError, match="sort_by 'size'"):
        plot_exponents(law_fit, sort_by="size")
    with pytest.raises(FigureError, match="at most 2 intervals"):
        plot_exponents(law_fit, probs=(0.5, 0.8, 0.9))


# --- collapse -------------------------------------------------------------------------------


def test_collapse_kappa_curves_and_r_star(pricing_fit: xr.DataTree, tmp_path) -> None:
    fig = plot_collapse(pricing_fit, quantity="kappa")
    post = pricing_fit["posterior"]
    methods = [str(m) for m in post[names.METHOD_DIM].to_numpy()]
    assert len(fig.axes) == len(methods) == 9
    for ax, method in zip(fig.axes, methods, strict=True):
        sel = {names.METHOD_DIM: method}
        k0 = _flat(post[names.KAPPA0].sel(sel))
        c = _flat(post[names.COLLAPSE_SCALE].sel(sel))
        (median,) = _by_gid(ax, "median")
        r, y = median.get_xdata(), median.get_ydata()
        for k in (0, 40, 120):
            assert y[k] == pytest.approx(np.median(k0 - (1 - k0) * r[k] / c), rel=1e-10, abs=1e-12)
        (line,) = _by_gid(ax, "r_star")
        r_star = _flat(post[names.R_STAR].sel(sel))
        assert line.get_xdata()[0] == pytest.approx(np.median(r_star), rel=1e-12)
        assert method in ax.get_title()
    prov = read_provenance(save_figure(fig, tmp_path / "kappa.png"))
    assert prov.sources[0].kind == "pricing_fit"
    assert prov.sources[0].data_file == "pricing.csv"
    assert prov.sources[0].seed == 5


def test_collapse_success_starts_at_one_with_the_observed_runs(pricing_fit: xr.DataTree) -> None:
    ptable = load_pricing(PRICING / "pricing.csv", load_pricing_spec())
    fig = plot_collapse(pricing_fit, quantity="success", methods=["AWM", "RLVE"], table=ptable)
    assert len(fig.axes) == 2
    frame = pd.read_csv(PRICING / "pricing.csv")
    baseline = pricing_fit["constant_data"][names.BASELINE_REAL]
    for ax, method in zip(fig.axes, ["AWM", "RLVE"], strict=True):
        (median,) = _by_gid(ax, "median")
        assert median.get_xdata()[0] == 0.0
        assert median.get_ydata()[0] == pytest.approx(1.0, abs=1e-12)  # S(0) = 1 exactly
        (points,) = _by_gid(ax, "observed")
        real = float(baseline.sel({names.METHOD_DIM: method}))
        mine = frame[(frame[names.METHOD] == method) & (frame[names.REAL] == real)]
        rate = mine[names.SUCCESSES] / mine[names.TRIALS]
        ratio = mine[names.SYNTHETIC] / mine[names.REAL]
        normalised = (rate / rate[ratio == 0].mean()).groupby(ratio.round(9)).mean()
        np.testing.assert_allclose(points.get_xdata(), normalised.index.to_numpy(float))
        np.testing.assert_allclose(points.get_ydata(), normalised.to_numpy(), rtol=1e-12)
    # the table is another file than the fit's data only if its hash differs: here it is the same
    assert len(figure_provenance(fig).sources) == 1  # type: ignore[union-attr]


def test_collapse_refuses_bad_input(law_fit: xr.DataTree, pricing_fit: xr.DataTree) -> None:
    with pytest.raises(FigureError, match="'pricing_fit'"):
        plot_collapse(law_fit)
    with pytest.raises(FigureError, match="unknown quantity 'ratio'"):
        plot_collapse(pricing_fit, quantity="ratio")
    with pytest.raises(FigureError, match=r"method\(s\) \['Nope'\]"):
        plot_collapse(pricing_fit, methods=["Nope"])
    with pytest.raises(FigureError, match="quantity='success'"):
        plot_collapse(pricing_fit, table=object())
    post = pricing_fit["posterior"].to_dataset().drop_vars(names.R_STAR)
    broken = xr.DataTree.from_dict({"posterior": post})
    broken.attrs = dict(pricing_fit.attrs)
    with pytest.raises(FigureError, match=r"lacks \['r_star', 'constant_data'\]"):
        plot_collapse(broken)


# --- recipe: allocation and iso-budget --------------------------------------------------------


def test_allocation_fan_chart(law_fit: xr.DataTree, recipe_result: xr.Dataset, tmp_path) -> None:
    fig = plot_allocation(recipe_result, provenance=provenance(law_fit))
    assert len(fig.axes) == 2 * 3  # settings x axes
    titles = [ax.get_title() for ax in fig.axes[:3]]  # what one unit of each axis is
    assert titles == ["env (environments)", "task (tasks)", "traj (rollouts per task)"]
    budgets = recipe_result[names.BUDGET_DIM].to_numpy()
    for i, setting in enumerate(SETTINGS[:2]):
        for j, axis in enumerate(names.PAPER_AXES):
            ax = fig.axes[i * 3 + j]
            (median,) = _by_gid(ax, "median")
            bought = recipe_result[names.PURCHASED].sel(
                {names.SETTING_DIM: setting, names.AXIS_DIM: axis}
            )
            draws = _flat(bought.transpose(*SAMPLE, names.BUDGET_DIM))
            np.testing.assert_allclose(median.get_xdata(), budgets)
            np.testing.assert_allclose(
                median.get_ydata(), np.exp(np.median(np.log(draws), axis=0)), rtol=1e-10
            )
            (decision,) = _by_gid(ax, "decision")
            expected = recipe_result[names.DECISION].sel(
                {names.SETTING_DIM: setting, names.AXIS_DIM: axis}
            )
            np.testing.assert_allclose(decision.get_ydata(), expected.to_numpy(), rtol=1e-12)
            assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    path = save_figure(fig, tmp_path / "allocation.png")
    assert read_provenance(path).sources[0].data_sha256 == law_fit.attrs[names.ATTR_DATA_HASH]


def test_allocation_refuses_bad_input(law_fit: xr.DataTree, recipe_result: xr.Dataset) -> None:
    prov = provenance(law_fit)
    with pytest.raises(FigureError, match="provenance="):
        plot_allocation(recipe_result, provenance=None)  # type: ignore[arg-type]
    with pytest.raises(FigureError, match="at least 2 budgets"):
        plot_allocation(recipe_result.isel({names.BUDGET_DIM: [0]}), provenance=prov)
    with pytest.raises(FigureError, match="no 'purchased'"):
        plot_allocation(recipe_result.drop_vars(names.PURCHASED), provenance=prov)
    many = recipe(law_fit, [1e4, 1e5], max_draws=3, decision=False, multipliers=False)
    with pytest.raises(FigureError, match="21 settings"):
        plot_allocation(many, provenance=prov)


def test_iso_budget_bands_and_decision(law_fit: xr.DataTree, recipe_result: xr.Dataset) -> None:
    budget = float(recipe_result[names.BUDGET_DIM][1])
    spend = recipe_result[names.DECISION_SPEND].sel({names.BUDGET_DIM: budget})
    iso = iso_budget(
        law_fit, budget, settings=SETTINGS[:2], reference_spend=spend.to_numpy(), max_draws=25
    )
    prov = provenance(law_fit)
    fig = plot_iso_budget(iso, provenance=prov, recipe=recipe_result)
    assert len(fig.axes) == 2 * 3
    share = iso[names.SHARE_DIM].to_numpy()
    price = np.array([4.10, 0.18, 0.02])  # the paper's, per env, task and trajectory
    for i, setting in enumerate(SETTINGS[:2]):
        money = spend.sel({names.SETTING_DIM: setting}).to_numpy()
        for j, axis in enumerate(names.PAPER_AXES):
            ax = fig.axes[i * 3 + j]
            (median,) = _by_gid(ax, "median")
            draws = _flat(
                iso[names.ISO_SUCCESS]
                .sel({names.SETTING_DIM: setting, names.AXIS_DIM: axis})
                .transpose(*SAMPLE, names.SHARE_DIM)
            )
            # Units along the curve, by hand (a rollout per task costs c_traj u_task): a share
            # that buys less than one unit of an axis is outside the box, NaN in every draw.
            others = [k for k in range(3) if k != j]
            split = np.empty((share.size, 3))
            split[:, j] = share * budget
            split[:, others] = np.outer(1 - share, money[others] / money[others].sum()) * budget
            units = split / price
            units[:, 2] = split[:, 2] / (price[2] * units[:, 1])
            outside = (units < 1.0).any(axis=1)
            inside = iso[names.ISO_INSIDE].sel({names.SETTING_DIM: setting, names.AXIS_DIM: axis})
            np.testing.assert_array_equal(inside.to_numpy(), ~outside)
            assert np.isfinite(draws).all()
            np.testing.assert_allclose(median.get_xdata(), share)
            y = median.get_ydata()
            assert np.isnan(y[outside]).all()  # bands and median inside the box only
            dashed = _by_gid(ax, "outside")  # the median beyond it, dashed
            assert len(dashed) == int(outside.any())
            if outside.any():
                np.testing.assert_allclose(
                    dashed[0].get_ydata(), np.median(draws, axis=0), rtol=1e-12
                )
            np.testing.assert_allclose(
                y[~outside], np.median(draws[:, ~outside], axis=0), rtol=1e-12
            )
            (line,) = _by_gid(ax, "decision")
            expected = float(spend.sel({names.SETTING_DIM: setting, names.AXIS_DIM: axis})) / budget
            assert line.get_xdata()[0] == pytest.approx(expected, rel=1e-12)
    relative = plot_iso_budget(iso, provenance=prov, relative=True)
    for ax in relative.axes:
        (median,) = _by_gid(ax, "median")
        assert np.nanmax(median.get_ydata()) <= 1.0 + 1e-12
    with pytest.raises(FigureError, match="has no budget"):
        plot_iso_budget(iso, provenance=prov, recipe=recipe_result.isel({names.BUDGET_DIM: [0, 2]}))


# --- held-out ---------------------------------------------------------------------------------


def _heldout_frame() -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            names.SETTING: [
                "A | grpo | x",
                "A | grpo | x",
                "A | grpo | x",
                "B | ppo | y",
                "B | ppo | y",
            ],
            names.OBSERVED: [0.30, 0.42, 0.10, 0.55, 0.61],
            names.PREDICTED: [0.31, 0.40, 0.20, 0.56, 0.60],
            names.LOWER: [0.25, 0.35, 0.15, 0.50, 0.55],
            names.UPPER: [0.37, 0.45, 0.26, 0.62, 0.66],
        }
    )
    frame.attrs = {"prob": 0.9, "coverage": 0.8}
    return frame


def test_heldout_plot_marks_runs_outside_their_interval(law_fit: xr.DataTree, tmp_path) -> None:
    fig = plot_heldout(_heldout_frame(), provenance=provenance(law_fit))
    (ax,) = fig.axes
    (inside,) = _by_gid(ax, "inside")
    (outside,) = _by_gid(ax, "outside")
    np.testing.assert_allclose(outside.get_offsets(), [[0.20, 0.10]])
    assert inside.get_offsets().shape == (4, 2)
    assert "4 of 5 runs (80%)" in ax.get_title()
    save_figure(fig, tmp_path / "heldout.png")
    loss = _heldout_frame()
    loss[[names.OBSERVED, names.PREDICTED, names.LOWER, names.UPPER]] *= 10
    loss.attrs["outcome"] = "loss"
    (ax,) = plot_heldout(loss, provenance=provenance(law_fit)).axes
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")


def test_heldout_plot_refuses_bad_frames(law_fit: xr.DataTree) -> None:
    prov = provenance(law_fit)
    frame = _heldout_frame().drop(columns=names.UPPER)
    with pytest.raises(ValueError, match="missing column"):
        plot_heldout(frame, provenance=prov)
    frame = _heldout_frame()
    frame.loc[2, names.OBSERVED] = 1.2
    with pytest.raises(ValueError, match=r"column 'observed', row 3: a success rate"):
        plot_heldout(frame, provenance=prov)
    frame = _heldout_frame()
    frame.attrs["coverage"] = 0.9
    with pytest.raises(ValueError, match="coverage"):
        plot_heldout(frame, provenance=prov)


# --- saving and provenance --------------------------------------------------------------------


def test_save_is_atomic_refuses_overwrite_and_writes_pdf_metadata(
    law_fit: xr.DataTree, tmp_path
) -> None:
    fig = plot_heldout(_heldout_frame(), provenance=provenance(law_fit))
    path = save_figure(fig, tmp_path / "f.png")
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_figure(fig, path)
    assert path.read_bytes() == before
    texts = len(fig.texts)
    save_figure(fig, path, overwrite=True, footer=True)
    assert len(fig.texts) == texts  # the footer is drawn only into the file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png"]  # no temporary files left
    pdf = save_figure(fig, tmp_path / "f.pdf").read_bytes()
    assert law_fit.attrs[names.ATTR_DATA_HASH].encode() in pdf
    with pytest.raises(FigureError, match=r"unknown figure format '\.jpg'"):
        save_figure(fig, tmp_path / "f.jpg")
    from matplotlib.figure import Figure

    with pytest.raises(FigureError, match="carries no provenance"):
        save_figure(Figure(), tmp_path / "g.png")
    with pytest.raises(FigureError, match=r"lacks the provenance attribute\(s\)"):
        provenance(synthetic_fit(draws=5))


# --- what a reader can trust: interval kind, extrapolation, the verdict stamp ----------------


def _span(patch) -> tuple[float, float]:
    return float(patch.get_x()), float(patch.get_x() + patch.get_width())


def _same_spans(got, expected, rtol: float = 1e-12) -> None:
    assert len(got) == len(expected), (got, expected)
    if expected:
        np.testing.assert_allclose(np.array(got, dtype=float), np.array(expected), rtol=rtol)


def _legend_texts(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def _without_swept(fit: xr.DataTree) -> xr.DataTree:
    const = fit["constant_data"].to_dataset().drop_vars([names.SWEPT_MIN, names.SWEPT_MAX])
    old = fit.copy()
    old["constant_data"] = xr.DataTree(const)
    return old


def _marked(fit: xr.DataTree, **attrs: object) -> xr.DataTree:
    out = fit.copy()
    out.attrs = {**fit.attrs, **attrs}
    return out


def test_figures_default_to_equal_tailed_intervals(law_fit: xr.DataTree, table: Table) -> None:
    from bayesscale.report.figures.style import DEFAULT_KIND, band_legend_text

    assert DEFAULT_KIND == "eti"
    fig = plot_law(law_fit, table, names.ENV, settings=SETTINGS[:1], max_draws=40)
    texts = _legend_texts(fig)
    assert "50% equal-tailed" in texts and "90% equal-tailed" in texts
    assert not any("HDI" in t for t in texts)
    hdi = plot_law(law_fit, table, names.ENV, settings=SETTINGS[:1], max_draws=40, kind="hdi")
    assert "90% HDI" in _legend_texts(hdi)
    assert band_legend_text((0.5, 0.9), "eti") == "median, 50% and 90% equal-tailed"


def test_law_shades_sizes_outside_the_swept_range_and_labels_the_grid(
    law_fit: xr.DataTree, table: Table
) -> None:
    fig = plot_law(law_fit, table, names.ENV, settings=SETTINGS, max_draws=20)
    const = law_fit["constant_data"]
    for ax, setting in zip(fig.axes, SETTINGS, strict=True):
        sel = {names.SETTING_DIM: setting, names.AXIS_DIM: names.ENV}
        lo = float(const[names.SWEPT_MIN].sel(sel))
        hi = float(const[names.SWEPT_MAX].sel(sel))
        left, right = ax.get_xlim()
        spans = sorted(_span(p) for p in _by_gid(ax, "extrapolated"))
        expected = [(left, lo)] if left < lo else []
        expected += [(hi, right)] if right > hi else []
        _same_spans(spans, expected)
        assert expected  # the curve runs past the swept range on at least one side
        ticks = list(ax.xaxis.get_major_locator().tick_values(left, right))
        assert ticks == [8.0, 16.0, 32.0, 64.0, 128.0, 256.0]  # every swept size, both ends
    assert "beyond the swept range (extrapolated)" in _legend_texts(fig)
    # a fit written before the swept range was stored: no shading, no error
    old = plot_law(_without_swept(law_fit), table, names.ENV, settings=SETTINGS[:1], max_draws=20)
    assert not _by_gid(old.axes[0], "extrapolated")
    assert "beyond the swept range (extrapolated)" not in _legend_texts(old)


def test_grid_ticks_keep_both_ends() -> None:
    from bayesscale.report.figures.law import grid_ticks

    assert grid_ticks(np.array([256.0, 8, 16, 64])).tolist() == [8.0, 16.0, 64.0, 256.0]
    many = grid_ticks(2.0 ** np.arange(3, 13), most=5)  # 8 .. 4096
    assert many[0] == 8.0 and many[-1] == 4096.0 and many.size == 5


def test_beyond_spans_interpolate_the_crossing_log_log() -> None:
    from bayesscale.report.figures.marks import beyond_spans, outside_spans

    x = np.array([1.0, 100.0])
    # y = x crosses hi = 10 at x = 10 (a straight line in log-log)
    _same_spans(beyond_spans(x, x, 0.5, 10.0), [(10.0, 100.0)])
    # below lo on the left, inside, above hi on the right
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    y = np.array([0.1, 10.0, 10.0, 1000.0])
    # y = 10 at x = 100 to y = 1000 at x = 1000 crosses 100 halfway in log x: at sqrt(1e5)
    _same_spans(beyond_spans(x, y, 1.0, 100.0), [(1.0, np.sqrt(10.0)), (np.sqrt(1e5), 1000.0)])
    assert beyond_spans(x, np.full(4, 50.0), 1.0, 100.0) == []
    assert outside_spans(0.0, 1.0, 0.2, 0.6) == [(0.0, 0.2), (0.6, 1.0)]
    assert outside_spans(0.0, 1.0, 0.0, 1.5) == []


def test_figure_legends_lie_inside_the_figure(
    law_fit: xr.DataTree, recipe_result: xr.Dataset, table: Table
) -> None:
    """A legend above the panels must not run past the figure's edges (the allocation
    figure's, with the decision and the shading, was clipped on both sides)."""
    figures = [
        plot_allocation(recipe_result, provenance=provenance(law_fit), fit=law_fit),
        plot_law(law_fit, table, names.TRAJ, settings=SETTINGS, max_draws=50),
    ]
    for fig in figures:
        fig.draw_without_rendering()  # the constrained layout, as when the report saves it
        width, height = fig.bbox.width, fig.bbox.height
        assert fig.legends
        for legend in fig.legends:
            box = legend.get_window_extent()
            assert box.x0 >= 0 and box.x1 <= width and box.y1 <= height, (box, width, height)


def test_allocation_shades_budgets_where_the_median_allocation_is_extrapolated(
    law_fit: xr.DataTree, recipe_result: xr.Dataset
) -> None:
    plain = plot_allocation(recipe_result, provenance=provenance(law_fit))
    assert not any(_by_gid(ax, "extrapolated") for ax in plain.axes)
    fig = plot_allocation(recipe_result, provenance=provenance(law_fit), fit=law_fit)
    budgets = recipe_result[names.BUDGET_DIM].to_numpy()
    const = law_fit["constant_data"]
    shaded = 0
    for i, setting in enumerate(SETTINGS[:2]):
        for j, axis in enumerate(names.PAPER_AXES):
            ax = fig.axes[i * 3 + j]
            sel = {names.SETTING_DIM: setting, names.AXIS_DIM: axis}
            hi = float(const[names.SWEPT_MAX].sel(sel))
            eff = _flat(recipe_result[names.ALLOCATION].sel(sel).transpose(*SAMPLE, "budget"))
            median = np.median(eff, axis=0)
            spans = [_span(p) for p in _by_gid(ax, "extrapolated")]
            if not spans:
                assert (median <= hi).all()
                continue
            shaded += 1
            ((x0, x1),) = spans  # the allocation grows with the budget: one span, to the end
            assert x1 == pytest.approx(budgets[-1])
            if median[0] > hi:
                assert x0 == pytest.approx(budgets[0])
            else:  # the median crosses the swept maximum at x0 (log-log interpolation)
                k = int(np.flatnonzero(median > hi)[0])
                t = np.log(hi / median[k - 1]) / np.log(median[k] / median[k - 1])
                edge = np.exp(np.log(budgets[k - 1]) + t * np.log(budgets[k] / budgets[k - 1]))
                assert x0 == pytest.approx(edge, rel=1e-9)
    assert shaded > 0
    assert "median of kappa x units (the law's input) beyond the swept range (extrapolated)" in (
        _legend_texts(fig)
    )


def test_iso_budget_shades_shares_beyond_the_swept_range(
    law_fit: xr.DataTree, recipe_result: xr.Dataset
) -> None:
    import json

    budget = float(recipe_result[names.BUDGET_DIM][0])
    spend = recipe_result[names.DECISION_SPEND].sel({names.BUDGET_DIM: budget})
    iso = iso_budget(
        law_fit, budget, settings=SETTINGS[:2], reference_spend=spend.to_numpy(), max_draws=25
    )
    prices = json.loads(recipe_result.attrs[names.ATTR_PRICES])
    fig = plot_iso_budget(iso, provenance=provenance(law_fit), recipe=recipe_result, fit=law_fit)
    const = law_fit["constant_data"]
    grid = iso[names.SHARE_DIM].to_numpy()
    for i, setting in enumerate(SETTINGS[:2]):
        ref = spend.sel({names.SETTING_DIM: setting})
        for j, axis in enumerate(names.PAPER_AXES):
            ax = fig.axes[i * 3 + j]
            sel = {names.SETTING_DIM: setting, names.AXIS_DIM: axis}
            lo = float(const[names.SWEPT_MIN].sel(sel))
            hi = float(const[names.SWEPT_MAX].sel(sel))
            spans = sorted(_span(p) for p in _by_gid(ax, "extrapolated"))
            if axis != names.TRAJ:
                # real data: kappa = 1, so an axis priced per unit holds s B / c at share s
                s_lo, s_hi = lo * prices[axis] / budget, hi * prices[axis] / budget
                rtol = 1e-9  # the units are a power of the share: interpolated exactly
            else:
                # rollouts per task at share s: s B / (c_traj u_task), the tasks getting
                # (1 - s) B times their part of the other axes' reference spend
                part = float(ref.sel({names.AXIS_DIM: names.TASK})) / float(
                    ref.sel({names.AXIS_DIM: [names.ENV, names.TASK]}).sum()
                )
                scale = prices[names.TASK] / (prices[names.TRAJ] * part)  # u = scale s / (1 - s)
                s_lo, s_hi = lo / (scale + lo), hi / (scale + hi)
                rtol = 0.01  # interpolated in log-log between grid points 0.04 apart
            expected = [(0.0, s_lo)] if s_lo > grid[0] else []
            expected += [(s_hi, 1.0)] if s_hi < grid[-1] else []
            _same_spans(spans, expected, rtol=rtol)
    # at this budget env's swept max falls inside the curve: shaded from there on only
    env = fig.axes[0]
    (right,) = [s for s in map(_span, _by_gid(env, "extrapolated")) if s[1] == 1.0]
    assert 0.0 < right[0] < 1.0
    without = plot_iso_budget(iso, provenance=provenance(law_fit), fit=law_fit)
    assert not any(_by_gid(ax, "extrapolated") for ax in without.axes)


def test_verdict_matches_diagnose_and_needs_no_pymc(
    law_fit: xr.DataTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    from bayesscale.data import fitfile as fitfile
    from bayesscale.report.figures.marks import verdict
    from bayesscale.sampling import diagnostics

    assert fitfile.diagnose(law_fit).ok
    with monkeypatch.context() as m:  # the fit's kept figures are read, not computed again
        m.setattr(diagnostics, "convergence", lambda *args: pytest.fail("recomputed"))
        assert verdict(law_fit) is None
    # chains that disagree: shift the second chain of every variable
    bad = law_fit.copy()
    post = law_fit["posterior"].to_dataset()
    shift = xr.DataArray([0.0, 1.0] + [0.0] * (post.sizes["chain"] - 2), dims="chain")
    bad["posterior"] = xr.DataTree(post + shift * post.std(["chain", "draw"]) * 3)
    d = fitfile.diagnose(bad)
    text = verdict(bad)
    assert not d.ok and text is not None
    assert text.startswith("FAILED DIAGNOSTICS: max R-hat ")
    assert f"{d.max_rhat:.3f} > 1.01" in text
    preview = _marked(law_fit, **{names.ATTR_PREVIEW: 1})
    assert fitfile.diagnose(preview).preview
    assert (verdict(preview) or "").startswith("PREVIEW FIT: Laplace approximation")
    code = "import sys, bayesscale.report.figures; print('pymc' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_failed_or_preview_fits_stamp_their_figures(
    law_fit: xr.DataTree, table: Table, recipe_result: xr.Dataset
) -> None:
    from bayesscale.report.figures.marks import stamp_of

    good = plot_law(law_fit, table, names.TRAJ, settings=SETTINGS[:1], max_draws=20)
    assert stamp_of(good) is None
    preview = _marked(law_fit, **{names.ATTR_PREVIEW: 1})
    prov = provenance(law_fit)
    figures = [
        plot_law(preview, table, names.TRAJ, settings=SETTINGS[:1], max_draws=20),
        plot_exponents(preview),
        plot_allocation(recipe_result, provenance=prov, fit=preview),
        plot_heldout(_heldout_frame(), provenance=prov, fit=preview),
    ]
    for fig in figures:
        text = stamp_of(fig)
        assert text is not None and text.startswith("PREVIEW FIT:\nLaplace approximation")
    height = plot_law(law_fit, table, names.TRAJ, settings=SETTINGS[:1], max_draws=20)
    assert figures[0].get_figheight() > height.get_figheight()  # grown for the stamp


def test_heldout_draws_one_interval_per_design_point(law_fit: xr.DataTree) -> None:
    frame = _heldout_frame()
    frame[names.SEED] = [0, 1, 0, 0, 1]
    # runs 0 and 1 are two seeds of one point (same setting and design), as are runs 3 and 4
    frame["n_envs"] = [64, 64, 128, 64, 64]
    frame.loc[1, [names.PREDICTED, names.LOWER, names.UPPER]] = [0.33, 0.27, 0.45]
    frame.loc[4, [names.PREDICTED, names.LOWER, names.UPPER]] = [0.58, 0.52, 0.64]
    fig = plot_heldout(frame, provenance=provenance(law_fit))
    (ax,) = fig.axes
    (bars,) = _by_gid(ax, "interval")
    segments = sorted((float(s[0, 0]), float(s[0, 1]), float(s[1, 1])) for s in bars.get_segments())
    _same_spans(segments, [(0.20, 0.15, 0.26), (0.32, 0.26, 0.41), (0.57, 0.51, 0.63)])
    (inside,) = _by_gid(ax, "inside")
    assert inside.get_offsets().shape == (4, 2)  # every run is still drawn
    assert "3 design points" in ax.get_title()
