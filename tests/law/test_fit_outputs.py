"""What a MAMS fit carries for an ArviZ user and a skeptical statistician: overdispersed
starts, the energy error per draw, advice that names the sampler used, MCSEs and digits no
finer than they support, and a ``log_likelihood`` group that ``az.loo`` reads after a save
and a load."""

from __future__ import annotations

import re

import numpy as np
import pytest
import xarray as xr
from sampler_runs import SCALES, gaussian_model
from testdata import small_reference_frame

import bayesscale as bs
from bayesscale import names
from bayesscale.data.fitfile import Diagnostics, diagnose
from bayesscale.data.observations import Table, validate
from bayesscale.data.spec import load_spec
from bayesscale.law.inference import FitConfig, fit
from bayesscale.law.summary import decimals, format_text, rounded, summarise
from bayesscale.sampling import configure
from bayesscale.sampling.diagnostics import mcse_mean, mcse_quantile
from bayesscale.sampling.engine import CompiledSampler, RunSettings
from bayesscale.sampling.logdensity import LogDensity

SPEC = load_spec(None)
ROWS = len(small_reference_frame())


@pytest.fixture(scope="module")
def small_fit() -> bs.LawFit:
    """A MAMS fit (the default sampler) of two settings, 2 x 300 draws."""
    table = Table(validate(small_reference_frame(), SPEC), "small", "x")
    config = FitConfig(chains=2, tune=300, draws=300, ess_target=0, seed=5, progress=False)
    return bs.LawFit(fit(table, SPEC, config), table=table)


# A 2 x 300-draw fit of 96 rows may leave a row's Pareto k above 0.64 (which rows follows the
# draws, so the CPU's floating point): ArviZ warns; this test checks what ArviZ can read and
# compute from a saved fit, not how reliable LOO is on so short a fit.
@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto distribution:UserWarning")
def test_a_saved_and_loaded_fit_is_at_home_in_arviz(small_fit, tmp_path) -> None:
    import arviz as az

    path = small_fit.save(tmp_path / "fit.nc")
    loaded = bs.load(path)
    assert isinstance(loaded, bs.LawFit)
    tree = loaded.tree
    assert set(tree.children) == {
        "posterior",
        "sample_stats",
        "observed_data",
        "constant_data",
        names.LOG_PRIOR_GROUP,
        names.LOG_LIKELIHOOD_GROUP,
    }
    stats = set(tree["sample_stats"].data_vars)
    assert stats >= {"diverging", "acceptance_rate", "step_size", "n_steps", "lp"}
    assert names.LOG_LIKELIHOOD_TOTAL in stats and not stats & {"tree_depth", "energy"}
    log_lik = tree[names.LOG_LIKELIHOOD_GROUP][names.OUTCOME]
    assert log_lik.dims == (names.CHAIN_DIM, names.DRAW_DIM, "obs") and log_lik.shape == (
        2,
        300,
        ROWS,
    )
    # the pointwise terms add up to the stored total, draw by draw
    np.testing.assert_allclose(
        log_lik.sum("obs").values,
        tree["sample_stats"][names.LOG_LIKELIHOOD_TOTAL].values,
        rtol=1e-6,
    )
    assert loaded.with_log_likelihood() is loaded  # stored: nothing to add
    for source in (tree, xr.open_datatree(path, engine="h5netcdf")):
        result = az.loo(source, pointwise=True)
        assert np.isfinite(result.elpd) and result.elpd < 0 and np.isfinite(result.se)
        assert result.n_data_points == ROWS and result.pareto_k.size == ROWS
    summary = az.summary(tree, var_names=[names.ALPHA_POP])
    assert summary.shape[0] == len(SPEC.axis_names)
    assert np.all(np.isfinite(summary["mcse_mean"].astype(float)))


def test_a_fit_without_the_group_gets_it_on_demand(small_fit) -> None:
    tree = small_fit.tree.copy()
    del tree[names.LOG_LIKELIHOOD_GROUP]
    bare = bs.LawFit(tree, table=small_fit.table)
    added = bare.with_log_likelihood()
    xr.testing.assert_allclose(
        added.tree[names.LOG_LIKELIHOOD_GROUP].to_dataset(),
        small_fit.tree[names.LOG_LIKELIHOOD_GROUP].to_dataset(),
    )


def test_divergence_advice_names_the_sampler_that_made_the_fit(small_fit) -> None:
    assert diagnose(small_fit.tree).sampler == "bayesscale"

    def advice(sampler: str) -> str:
        d = Diagnostics(1.0, 1000.0, 1000.0, divergences=3, draws=1000, sampler=sampler)
        (problem,) = d.problems()
        return problem

    mams = advice("bayesscale")
    assert "MAMS" in mams and "energy error" in mams and "1000" in mams
    assert "--target-accept" in mams and "smaller step size" in mams and "--tune" in mams
    assert "NUTS cannot" not in mams
    for sampler in ("nuts", "numpyro", "pymc"):
        text = advice(sampler)
        assert "NUTS" in text and "MAMS" not in text and "--target-accept" in text
    assert "nutpie" in advice("nutpie") and "MAMS" not in advice("nutpie")


@pytest.fixture(scope="module")
def mams() -> CompiledSampler:
    configure(2)
    return CompiledSampler(LogDensity.from_model(gaussian_model()), chains=2, kernel="mams")


def test_mams_reports_its_energy_error(mams) -> None:
    """``energy_error`` is the negated log Metropolis ratio of each draw's proposal:
    ``acceptance_rate = min(1, exp(-energy_error))`` draw by draw."""
    run = mams.run(RunSettings(tune=100, draws=100, seed=2))
    error = run.stats["energy_error"]
    assert error.shape == run.stats["acceptance_rate"].shape
    expected = np.minimum(1.0, np.exp(-error))
    np.testing.assert_allclose(run.stats["acceptance_rate"], expected, rtol=1e-5)
    assert np.any(error < 0) and np.any(error > 0)
    np.testing.assert_array_equal(run.stats["diverging"], error > 1000)


def test_starts_are_overdispersed_seeded_and_finite(mams) -> None:
    first = mams._starts(np.random.default_rng(1), ())
    np.testing.assert_array_equal(first.z, mams._starts(np.random.default_rng(1), ()).z)
    states = [first] + [mams._starts(np.random.default_rng(seed), ()) for seed in range(2, 11)]
    z = np.concatenate([s.z for s in states])  # 20 starts
    assert all(np.all(np.isfinite(s.potential)) and np.all(np.isfinite(s.grad)) for s in states)
    # x ~ N([1, -2, 5], SCALES): the first two coordinates start about twice as spread as the
    # posterior (the third's sd, 30, is beyond the cap of 3 units), around its mean
    spread = z[:, :2].std(axis=0, ddof=1)
    assert np.all(spread > 1.3 * SCALES[:2]) and np.all(spread < 3 * SCALES[:2]), spread
    assert np.all(np.abs(z[:, :2].mean(axis=0) - [1.0, -2.0]) < 2 * SCALES[:2])
    assert np.all(np.abs(z[:, 2] - 5.0) <= 3.0 + 1e-9)


def test_mcse_equals_arviz_and_digits_follow_it() -> None:
    import arviz_stats

    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 2, 400)).cumsum(axis=2) * 0.05 + rng.normal(size=(2, 2, 400))
    ds = xr.Dataset({"x": (("k", names.CHAIN_DIM, names.DRAW_DIM), x)})
    np.testing.assert_allclose(mcse_mean(x), arviz_stats.mcse(ds, method="mean")["x"].values)
    for p in (0.05, 0.5, 0.95):
        ours = mcse_quantile(x, p)
        np.testing.assert_allclose(ours, arviz_stats.mcse(ds, method="quantile", prob=p)["x"])
    mcses = (0.0004, 0.004, 0.006, 0.04, 0.3, 3.0, 40.0)
    assert [decimals(m) for m in mcses] == [3, 3, 2, 2, 1, 0, -1]
    assert rounded(0.98765, 0.02) == "0.99" and rounded(1234.0, 30.0) == "1230"


def test_the_summary_reports_mcse_and_prints_no_finer_digits(small_fit) -> None:
    result = summarise(small_fit.tree, prob=0.9)
    text = format_text(result)
    for axis in SPEC.axis_names:
        entry = result["exponents"]["population"][axis]
        keys = ("mcse_mean", "mcse_median", "mcse_lower", "mcse_upper")
        assert all(entry[k] is not None and 0 < entry[k] < 0.1 for k in keys), entry
        (line,) = [ln for ln in text.splitlines() if re.match(rf"\s+{axis}\s+\d", ln)]
        numbers = re.findall(r"-?\d+\.?\d*", line.split("mean")[0])
        shown = dict(zip(("median", "lower", "upper"), numbers, strict=True))
        for key, value in shown.items():
            places = len(value.split(".")[1]) if "." in value else 0
            assert places == max(decimals(entry[f"mcse_{key}"]), 0), (key, value, entry)
            assert abs(float(value) - entry[key]) <= 0.5 * 10.0**-places + 1e-12
        assert f"mean {rounded(entry['mean'], entry['mcse_mean'])} \u00b1" in line
    assert "Monte Carlo standard error" in text
