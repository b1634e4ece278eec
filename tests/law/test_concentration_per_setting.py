"""A concentration per setting ([outcome] concentration_spread > 0): the spec option, the PyMC
model against its JAX log density (with the contaminated likelihood too), a seeded recovery of
curves that scatter differently, and the readers (prediction per row, a new setting's draw,
the value of a run) taking each setting's own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from testdata import ONE_AXIS_SPEC, assert_jax_density_is_pymcs
from testdata import SYNTHETIC_ROWS as ROWS

from bayesscale import names
from bayesscale.data.observations import Table, prepare
from bayesscale.data.spec import SpecError, parse_spec
from bayesscale.law.model import build_law_model
from bayesscale.law.predict import predict
from bayesscale.recipe.synthetic import synthetic_fit
from bayesscale.sampling import configure

SIZES = 16.0 * 2.0 ** np.arange(9)
QUIET, NOISY = 2000.0, 40.0  # the curves' concentrations, in turn


def _spec(spread: float | None = 1.0, extra: str = ""):
    outcome = "" if spread is None else f"concentration_spread = {spread}\n{extra}"
    return parse_spec(ONE_AXIS_SPEC.format(outcome=outcome, form=""))


def _simulate(seed: int = 0, settings: int = 6, seeds: int = 4) -> pd.DataFrame:
    """A power law per setting; runs beta-binomial with concentration ``QUIET`` on the even
    curves and ``NOISY`` on the odd ones (400 trials each)."""
    rng = np.random.default_rng(seed)
    reference = float(np.sqrt(SIZES.min() * SIZES.max()))
    rows = []
    for s in range(settings):
        phi = (QUIET, NOISY)[s % 2]
        alpha = 0.4 * np.exp(0.1 * rng.standard_normal())
        amplitude, floor = rng.uniform(0.4, 0.8), rng.uniform(0.1, 0.2)
        p = np.exp(-(floor + amplitude * (SIZES / reference) ** -alpha))
        for seed_ in range(seeds):
            k = rng.binomial(400, rng.beta(p * phi, (1 - p) * phi))
            rows += [(f"d{s}", d, seed_, int(ki), 400) for d, ki in zip(SIZES, k, strict=True)]
    return pd.DataFrame(rows, columns=["dataset", "size", names.SEED, names.SUCCESSES, "trials"])


def test_the_concentration_spread_key_is_read_and_checked() -> None:
    assert _spec(None).concentration_spread == 0.0
    assert _spec(0.5).concentration_spread == 0.5
    with pytest.raises(SpecError, match=r"\[outcome\] concentration_spread: must be a number >= 0"):
        _spec(-1.0)
    loss = ONE_AXIS_SPEC.replace('kind = "success"', 'kind = "loss"').format(
        outcome="concentration_spread = 1.0", form=""
    )
    with pytest.raises(SpecError, match="concentration_spread: the concentration is the success"):
        parse_spec(loss)


@pytest.mark.parametrize("noise", ["", 'seed_noise = "contaminated"'])
def test_the_model_has_a_concentration_per_setting_and_jax_agrees(noise: str) -> None:
    configure(2)
    spec = _spec(1.0, noise)
    model = build_law_model(prepare(Table.from_frame(_simulate(), spec), spec))
    free = {v.name for v in model.free_RVs}
    added = {names.LOG_CONCENTRATION_POP, names.CONCENTRATION_SPREAD, names.CONCENTRATION_Z}
    assert added <= free and names.CONCENTRATION not in free
    assert model.named_vars_to_dims[names.CONCENTRATION] == (names.SETTING_DIM,)
    assert_jax_density_is_pymcs(model, points=4)
    # one setting, or a spread of 0: one concentration, as without the key
    one = _simulate(settings=1)
    single = build_law_model(prepare(Table.from_frame(one, spec), spec))
    assert names.CONCENTRATION in {v.name for v in single.free_RVs}
    # calibration ranks the settings' median, the one scalar of the concentrations
    from bayesscale.checks.sbc import default_quantities

    ranked = {
        q.variable for q in default_quantities(prepare(Table.from_frame(_simulate(), spec), spec))
    }
    assert names.CONCENTRATION_POP in ranked and names.CONCENTRATION not in ranked
    shared = _spec(0.0, noise)
    zero = build_law_model(prepare(Table.from_frame(_simulate(), shared), shared))
    assert names.CONCENTRATION in {v.name for v in zero.free_RVs}
    assert names.CONCENTRATION_Z not in zero.named_vars


@pytest.mark.slow
def test_each_settings_concentration_is_recovered_and_read_per_row() -> None:
    """Curves 50x apart in scatter: each curve's concentration is read on its own side, and
    prediction gives every row its own setting's concentration, so the noisy curves' run
    intervals are the wider."""
    from bayesscale.law.inference import fit
    from bayesscale.sampling.config import FitConfig

    spec = _spec(1.0)
    table = Table.from_frame(_simulate(), spec)
    tree = fit(table, spec, FitConfig(seed=3, progress=False))
    phi = tree["posterior"][names.CONCENTRATION]
    medians = phi.median((names.CHAIN_DIM, names.DRAW_DIM))
    by_truth: dict[float, list[float]] = {QUIET: [], NOISY: []}
    for setting in medians[names.SETTING_DIM].to_numpy():
        truth = (QUIET, NOISY)[int(str(setting)[1:]) % 2]
        by_truth[truth].append(float(medians.sel({names.SETTING_DIM: setting})))
    assert max(by_truth[NOISY]) * 5 < min(by_truth[QUIET])  # told apart, 50x in truth
    assert all(NOISY / 3 < m < NOISY * 3 for m in by_truth[NOISY])
    pred = predict(tree, table)
    assert pred.concentration is not None and pred.concentration.shape == pred.loss.shape
    rows = table.frame["dataset"].to_numpy()
    stacked = phi.stack(s=(names.CHAIN_DIM, names.DRAW_DIM)).transpose("s", ...)
    for setting in ("d0", "d1"):
        np.testing.assert_array_equal(
            pred.concentration[:, rows == setting],
            np.repeat(stacked.sel({names.SETTING_DIM: setting}).to_numpy()[:, None],
                      int((rows == setting).sum()), axis=1),
        )  # fmt: skip
    counts = pred.sample(np.random.default_rng(0))
    spread = {s: np.std(counts[:, rows == s], axis=0).mean() for s in ("d0", "d1")}
    assert spread["d1"] > 2 * spread["d0"]
    # a new curve draws its concentration from the population: exp(log phi_pop + sigma z)
    new = table.frame[table.frame["dataset"] == "d0"].assign(dataset="d9")
    drawn = np.log(predict(tree, new, new_groups="pooled", seed=1).concentration[:, 0])
    post = tree["posterior"]
    log_pop = post[names.LOG_CONCENTRATION_POP].to_numpy().ravel()
    sigma = post[names.CONCENTRATION_SPREAD].to_numpy().ravel()
    error = np.sqrt(np.mean(sigma**2) / drawn.size)  # z's part of the mean's noise
    assert abs(np.mean(drawn) - np.mean(log_pop)) < 4 * error
    assert np.std(drawn) > np.std(log_pop)  # the setting's own deviation adds to the median's


def _per_setting(values: tuple[float, ...]) -> xr.DataTree:
    """The synthetic fit with a concentration per setting (``values``, every draw) and the
    population variables a new setting draws from (median 100, spread 0.5)."""
    tree = synthetic_fit(draws=50, spread=0.02)
    post = tree["posterior"].to_dataset()
    settings = post[names.SETTING_DIM].to_numpy()
    shape = (post.sizes[names.CHAIN_DIM], post.sizes[names.DRAW_DIM])
    post[names.CONCENTRATION] = xr.DataArray(
        np.broadcast_to(np.array(values[: len(settings)]), (*shape, len(settings))),
        dims=(names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM),
        coords={names.SETTING_DIM: settings},
    )
    post[names.LOG_CONCENTRATION_POP] = xr.DataArray(
        np.full(shape, np.log(100.0)), dims=(names.CHAIN_DIM, names.DRAW_DIM)
    )
    post[names.CONCENTRATION_SPREAD] = xr.DataArray(
        np.full(shape, 0.5), dims=(names.CHAIN_DIM, names.DRAW_DIM)
    )
    tree["posterior"] = xr.DataTree(post)
    return tree


def test_prediction_gives_each_row_its_settings_concentration() -> None:
    tree = _per_setting((30.0, 900.0))
    pred = predict(tree, ROWS, observed=False)
    assert pred.concentration is not None
    np.testing.assert_array_equal(pred.concentration[:, [0, 2]], 30.0)
    np.testing.assert_array_equal(pred.concentration[:, 1], 900.0)
    a, b = pred._beta_parameters(pred.loss)  # the beta's a + b is the row's concentration
    np.testing.assert_allclose(a + b, pred.concentration)


def test_the_value_of_a_run_reads_its_settings_concentration() -> None:
    from bayesscale.design.results import Candidate
    from bayesscale.design.run_value import ValueEngine
    from bayesscale.law.mixed_draws import draws_with

    tree = _per_setting((30.0, 900.0))
    draws, values = draws_with(tree, [names.CONCENTRATION])
    engine = ValueEngine(draws, values[names.CONCENTRATION], 100, np.arange(4), 0,
                         "decision", [], None)  # fmt: skip
    for g, want in enumerate((30.0, 900.0)):
        cand = Candidate(draws.settings[g], (64, 3000, 16), "task", 1.0)  # type: ignore[arg-type]
        np.testing.assert_array_equal(engine.phi_at(cand), want)
