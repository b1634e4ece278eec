"""Collapsed runs ([outcome] seed_noise = "contaminated"): the spec option, the PyMC model
against its JAX log density and the package's NumPy log-likelihood, its random draws, and a
seeded recovery of the share of collapsed runs that LOO prefers to the plain beta-binomial."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm
import pytest
import xarray as xr
from testdata import ONE_AXIS_SPEC, assert_jax_density_is_pymcs

from bayesscale import names
from bayesscale.data.observations import Table, prepare
from bayesscale.data.spec import BETA_BINOMIAL, CONTAMINATED, SpecError, parse_spec
from bayesscale.law.model import build_law_model
from bayesscale.law.predict import beta_binomial_logpmf, predict, with_collapses
from bayesscale.sampling import configure

SIZES = 16.0 * 2.0 ** np.arange(9)
TRUE_EPS, TRUE_ALPHA = 0.08, 0.4


def _spec(noise: str):
    outcome = f'seed_noise = "{noise}"' if noise else ""
    return parse_spec(ONE_AXIS_SPEC.format(outcome=outcome, form=""))


def _simulate(seed: int = 0, settings: int = 5, seeds: int = 4) -> pd.DataFrame:
    """A power law per setting, beta-binomial runs, and a share TRUE_EPS of runs collapsed to
    a uniform count."""
    rng = np.random.default_rng(seed)
    reference = float(np.sqrt(SIZES.min() * SIZES.max()))
    rows = []
    for s in range(settings):
        alpha = TRUE_ALPHA * np.exp(0.1 * rng.standard_normal())
        amplitude, floor = rng.uniform(0.4, 0.8), rng.uniform(0.1, 0.2)
        p = np.exp(-(floor + amplitude * (SIZES / reference) ** -alpha))
        for seed_ in range(seeds):
            k = rng.binomial(400, rng.beta(p * 300, (1 - p) * 300))
            collapsed = rng.uniform(size=k.size) < TRUE_EPS
            k = np.where(collapsed, rng.integers(0, 401, size=k.size), k)
            rows += [(f"d{s}", d, seed_, int(ki), 400) for d, ki in zip(SIZES, k, strict=True)]
    return pd.DataFrame(rows, columns=["dataset", "size", names.SEED, names.SUCCESSES, "trials"])


def test_the_seed_noise_key_is_read_and_checked() -> None:
    assert _spec("").seed_noise == BETA_BINOMIAL
    assert _spec(CONTAMINATED).seed_noise == CONTAMINATED
    with pytest.raises(SpecError, match=r"\[outcome\] seed_noise: must be one of .*'cauchy'"):
        _spec("cauchy")
    loss_spec = ONE_AXIS_SPEC.replace('kind = "success"', 'kind = "loss"').format(
        outcome=f'seed_noise = "{CONTAMINATED}"', form=""
    )
    with pytest.raises(SpecError, match="seed_noise: 'contaminated' is a success-count"):
        parse_spec(loss_spec)


def test_with_collapses_mixes_the_uniform_count() -> None:
    ll = beta_binomial_logpmf(3.0, 10.0, 2.0, 5.0)
    expected = np.log(0.9 * np.exp(ll) + 0.1 / 11)
    assert float(with_collapses(ll, 10, 0.1)) == pytest.approx(float(expected), rel=1e-13)
    assert float(with_collapses(ll, 10, 0.0)) == pytest.approx(float(ll), rel=1e-13)


def test_contaminated_model_in_jax_and_numpy_equals_pymc() -> None:
    configure(2)
    spec = _spec(CONTAMINATED)
    table = Table.from_frame(_simulate(), spec)
    model = build_law_model(prepare(table, spec))
    assert names.CONTAMINATION in model.named_vars
    assert_jax_density_is_pymcs(model, points=3)
    point = model.initial_point()
    # the package's pointwise log-likelihood (law.predict) is the model's, row by row
    inputs = model.value_vars
    rows = model.compile_fn(
        model.logp(vars=[model[names.OUTCOME]], sum=False)[0], inputs=inputs,
        on_unused_input="ignore",
    )  # fmt: skip
    wanted = (names.ALPHA, names.AMPLITUDE, names.LOSS_FLOOR, names.CONCENTRATION)
    deterministics = model.compile_fn(  # at the values, not random draws of the variables
        model.replace_rvs_by_values([model[v] for v in (*wanted, names.CONTAMINATION)]),
        inputs=inputs,
        on_unused_input="ignore",
    )
    value = {k: v + 0.1 for k, v in point.items()}
    alpha, amp, floor, phi, eps = deterministics(value)
    post = _as_posterior(table, spec, alpha, amp, floor, phi, eps)
    mine = predict(post, table, observed=True).log_likelihood()[0]
    np.testing.assert_allclose(mine, rows(value), rtol=1e-9)


def _as_posterior(table, spec, alpha, amp, floor, phi, eps):  # type: ignore[no-untyped-def]
    """A one-draw fit tree holding the given values (what law.predict reads)."""
    from bayesscale.data.fitfile import fit_attrs
    from bayesscale.law.inference import _constant_data

    settings = sorted(table.frame["dataset"].unique())
    one = (names.CHAIN_DIM, names.DRAW_DIM)
    post = xr.Dataset(
        {
            names.ALPHA: ((*one, names.SETTING_DIM, names.AXIS_DIM), alpha[None, None]),
            names.AMPLITUDE: ((*one, names.SETTING_DIM, names.AXIS_DIM), amp[None, None]),
            names.LOSS_FLOOR: ((*one, names.SETTING_DIM), floor[None, None]),
            names.CONCENTRATION: (one, np.reshape(phi, (1, 1))),
            names.CONTAMINATION: (one, np.reshape(eps, (1, 1))),
        },
        coords={names.SETTING_DIM: settings, names.AXIS_DIM: ["size"]},
    )
    tree = xr.DataTree.from_dict(
        {"posterior": post, "constant_data": _constant_data(prepare(table, spec), table)}
    )
    tree.attrs = fit_attrs(names.KIND_LAW_FIT, spec.text, "", "")
    return tree


@pytest.mark.filterwarnings("ignore:Numba will use object mode:UserWarning")
def test_random_draws_collapse_a_share_of_runs() -> None:
    spec = _spec(CONTAMINATED)
    model = build_law_model(prepare(Table.from_frame(_simulate(), spec), spec))
    draws = pm.draw(model[names.OUTCOME], draws=4, random_seed=1)
    assert draws.shape == (4, len(_simulate())) and draws.min() >= 0 and draws.max() <= 400


@pytest.mark.slow
def test_the_share_of_collapsed_runs_is_recovered_and_loo_prefers_it() -> None:
    from bayesscale.checks.compare import loo
    from bayesscale.law.inference import fit
    from bayesscale.sampling.config import FitConfig

    frame = _simulate(seed=3)
    fits, elpd = {}, {}
    for noise in (BETA_BINOMIAL, CONTAMINATED):
        spec = _spec(noise)
        table = Table.from_frame(frame, spec)
        config = FitConfig(seed=5, tune=300, draws=400, ess_target=0, progress=False)
        fits[noise] = fit(table, spec, config)
        elpd[noise] = loo(fits[noise], table).elpd
    post = fits[CONTAMINATED]["posterior"]
    lo, hi = np.quantile(post[names.CONTAMINATION].to_numpy().ravel(), [0.05, 0.95])
    assert lo < TRUE_EPS < hi
    lo, hi = np.quantile(post[names.ALPHA_POP].to_numpy().ravel(), [0.05, 0.95])
    assert lo < TRUE_ALPHA < hi
    assert elpd[CONTAMINATED] > elpd[BETA_BINOMIAL] + 10
