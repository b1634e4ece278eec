"""The sampling engine against known answers: NUTS on Gaussians (means and variances
recovered, the ESS target reached and no further), the warm-up schedule, the diagnostics
equal to ArviZ's, the Laplace approximation exact on a Gaussian, progress output, and Ctrl-C
on a real `bayesscale fit` process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import numpy as np
import pymc as pm
import pytest
import xarray as xr
from sampler_runs import SCALES, assert_stops_at_the_ess_target, gaussian_model, runs_cut_two_ways

from bayesscale.sampling import adapt, configure
from bayesscale.sampling.diagnostics import convergence, ess_bulk, ess_tail, rank_rhat
from bayesscale.sampling.engine import CompiledSampler, RunSettings
from bayesscale.sampling.laplace import laplace
from bayesscale.sampling.logdensity import LogDensity, flat_point
from bayesscale.sampling.progress import Progress

ROOT = Path(__file__).resolve().parents[2]
RESTORE_SIGINT_AND_EXEC = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


@pytest.fixture(scope="module")
def gaussian() -> tuple[LogDensity, CompiledSampler]:
    configure(2)
    density = LogDensity.from_model(gaussian_model())
    return density, CompiledSampler(density, chains=2)


def test_nuts_recovers_a_badly_scaled_gaussian(gaussian) -> None:
    _, sampler = gaussian
    result = sampler.run(RunSettings(tune=400, draws=1500, seed=3))
    x = result.posterior["x"].reshape(-1, 3)
    se = SCALES / np.sqrt(1500)  # per chain ESS >= draws / 2 is ample here
    assert np.all(np.abs(x.mean(axis=0) - [1.0, -2.0, 5.0]) < 8 * se), x.mean(axis=0)
    np.testing.assert_allclose(x.std(axis=0), SCALES, rtol=0.1)
    np.testing.assert_allclose(result.posterior["x_squared"], result.posterior["x"] ** 2)
    s = result.posterior["s"].ravel()  # HalfNormal(2): mean 2 sqrt(2/pi)
    assert abs(s.mean() - 2 * np.sqrt(2 / np.pi)) < 0.1
    # A divergence is a rare event whose occurrence follows the floating-point order of the
    # machine's CPU (seed 3 gives one of 3,000 draws on one CPU, none on another; seeds 4-8 none):
    # at most one in a thousand draws on this Gaussian.
    assert result.stats["diverging"].sum() <= result.stats["diverging"].size // 1000
    # the mass matrix learnt the scales (inverse mass ~ posterior variance)
    assert np.allclose(np.sqrt(result.inv_mass[0, :3]), SCALES, rtol=0.3)
    assert set(result.stats) >= {"diverging", "n_steps", "tree_depth", "step_size", "lp"}


def test_same_seed_same_draws_and_other_data_reuse_the_compiled_sampler(gaussian) -> None:
    _, sampler = gaussian
    a = sampler.run(RunSettings(tune=100, draws=50, seed=7))
    compiled = sampler.compile_seconds
    b = sampler.run(RunSettings(tune=100, draws=50, seed=7))
    assert sampler.compile_seconds == compiled  # compiled once
    np.testing.assert_array_equal(a.posterior["x"], b.posterior["x"])
    c = sampler.run(RunSettings(tune=100, draws=50, seed=8))
    assert not np.array_equal(a.posterior["x"], c.posterior["x"])


def test_draws_do_not_depend_on_where_the_run_is_cut_into_chunks(
    gaussian, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunk lengths follow the wall clock; the draws must not: one transition per chunk and
    the longest chunks give the same draws, bit for bit."""
    _, sampler = gaussian
    runs = runs_cut_two_ways(sampler, RunSettings(tune=60, draws=40, seed=4), monkeypatch)
    np.testing.assert_array_equal(runs[0].posterior["x"], runs[1].posterior["x"])
    np.testing.assert_array_equal(runs[0].stats["lp"], runs[1].stats["lp"])
    # what makes it so: a chunk of transitions starts from the potential and gradient carried
    # in the state, as they are (an evaluation of its own could round differently); only a
    # chunk of no transitions evaluates them
    from bayesscale.sampling.types import step_size_state

    state = sampler._starts(np.random.default_rng(0), ())
    state = state._replace(step=step_size_state(np.full(2, 1e-3)))  # every step accepted
    unit = np.ones_like(state.z)
    off = state._replace(potential=state.potential - 1.0)  # would accept with exp(-1)
    _, carried = sampler._compiled(state, unit, 1, False, 10)
    _, shifted = sampler._compiled(off, unit, 1, False, 10)
    assert not np.array_equal(carried.accept[:, 0], shifted.accept[:, 0])
    evaluated, _ = sampler._compiled(off, unit, 0, False, 10)
    np.testing.assert_allclose(evaluated.potential, state.potential)


def test_starting_points_are_finite_or_the_fit_says_why() -> None:
    """Starts are jittered around the initial point and checked by the compiled sampler
    (a chunk of no transitions): the jitter shrinks until the density is finite, and the
    potential and gradient returned are the density's there."""
    import jax.numpy as jnp

    configure(2)

    def logp(x):  # finite only within 0.2 of the origin: the first jitter (0.5) mostly misses
        return jnp.where(jnp.all(jnp.abs(x) < 0.2), -0.5 * jnp.sum(x**2), -jnp.inf)

    def density(f) -> LogDensity:
        return LogDensity(
            logp=f, derived=lambda x: [x], x0=np.zeros(3), var_names=["x"], dims={}, coords={}
        )

    sampler = CompiledSampler(density(logp), chains=2)
    state = sampler._starts(np.random.default_rng(0), ())
    assert np.all(np.abs(state.z) < 0.2) and np.any(state.z != 0)
    np.testing.assert_allclose(state.potential, 0.5 * (state.z**2).sum(axis=1))
    np.testing.assert_allclose(state.grad, state.z)
    nowhere = CompiledSampler(density(lambda x: jnp.sum(x) * jnp.nan), chains=2)
    with pytest.raises(FloatingPointError, match="not finite at its initial point"):
        nowhere.run(RunSettings(tune=10, draws=10))


def test_sampling_stops_once_the_ess_target_is_reached(gaussian) -> None:
    density, sampler = gaussian
    assert_stops_at_the_ess_target(density, sampler)
    capped = sampler.run(RunSettings(tune=200, draws=100, seed=1, ess_target=1e6, max_draws=300))
    assert capped.stats["diverging"].shape[1] == 300  # never past max_draws


@pytest.mark.parametrize("kernel", ["nuts", "mams"])
def test_the_run_accounts_for_its_transitions(gaussian, kernel: str) -> None:
    """``warmup_steps`` is the mean over chains of the integration steps of every chunk
    before the draws kept (MAMS's probe included), counted here from the chunks' own output;
    none without warm-up. ``transition_seconds`` is time spent inside warm-up and sampling."""
    density, nuts = gaussian
    sampler = nuts if kernel == "nuts" else CompiledSampler(density, chains=2, kernel="mams")
    sampler.run(RunSettings(tune=0, draws=5, seed=1))  # compiles
    compiled, steps = sampler._compiled, []

    def recording(state, inv_mass, n, *rest):
        new, out = compiled(state, inv_mass, n, *rest)
        if n > 0:
            steps.append(np.asarray(out.steps)[:, :n].sum(axis=1))
        return new, out

    sampler._compiled = recording
    try:
        for tune in (100, 0):
            steps.clear()
            run = sampler.run(RunSettings(tune=tune, draws=50, seed=2))
            counted = np.sum(steps, axis=0) - run.stats["n_steps"].sum(axis=1)
            assert run.warmup_steps == pytest.approx(counted.mean(), abs=1e-9)
            assert (run.warmup_steps > 100) if tune else (run.warmup_steps == 0)
            assert 0 < run.transition_seconds <= run.warmup_seconds + run.sampling_seconds
    finally:
        sampler._compiled = compiled


def test_observed_data_as_input_refits_without_recompiling() -> None:
    configure(2)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Normal("y", mu, 1.0, observed=np.zeros(20))
    density = LogDensity.from_model(model, observed_as_input=True)
    sampler = CompiledSampler(density, chains=2)
    for shift in (0.0, 3.0):
        result = sampler.run(RunSettings(tune=200, draws=400, seed=2), data=(np.full(20, shift),))
        mean = result.posterior["mu"].mean()
        assert abs(mean - shift * 20 / (20 + 0.01)) < 0.1
    assert density.data_names == ("y",)


@pytest.mark.parametrize("kernel", ["mams", "nuts"])
def test_per_draw_terms_equal_pymcs_and_the_log_density_splits_at_the_likelihood(
    kernel: str,
) -> None:
    """At every draw (rejected MAMS transitions among them, which repeat a draw) each per-draw
    term the sampler evaluates equals PyMC's own compiled value, and the fit's log-likelihood
    rule holds: lp less ``WITHOUT_LIKELIHOOD`` (priors on a transformed scale, Jacobians, a
    potential) equals PyMC's log-likelihood summed. A multivariate prior's term has no event
    dimension, and the fit's log prior group takes the term's own shape."""
    from bayesscale.law.inference import (
        WITHOUT_LIKELIHOOD,
        _log_densities_of_terms,
        _sample_own,
        log_density_terms,
    )
    from bayesscale.sampling.config import DEFAULT_SAMPLER, NUTS_SAMPLER, FitConfig

    configure(2)
    with pm.Model(coords={"k": ["a", "b", "c"]}) as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        sigma = pm.HalfNormal("sigma", 2.0)
        weights = pm.Dirichlet("weights", np.ones(3), dims="k")
        pm.Potential("pull", -0.5 * (mu - 1.0) ** 2)
        pm.Normal("y", mu + weights[0], sigma, observed=np.array([0.3, 1.2, 2.5, -0.4]))
    terms = log_density_terms(model)
    assert sorted(terms) == sorted(["mu", "sigma", "weights", WITHOUT_LIKELIHOOD])
    density = LogDensity.from_model(model, per_draw=terms)
    sampler = CompiledSampler(density, chains=2, kernel=kernel)
    result = sampler.run(RunSettings(tune=100, draws=20, seed=3))
    assert sorted(result.per_draw) == sorted(terms)
    assert result.per_draw["weights"].shape == (2, 20)  # no event dimension
    assert result.unconstrained is not None
    z = result.unconstrained.reshape(40, -1)
    if kernel == "mams":  # the run rejects some transitions: their draws repeat
        assert (np.diff(result.unconstrained, axis=1) == 0).all(axis=2).any()
    values = model.value_vars  # the sampler's coordinates, in this order
    prior = model.compile_fn(
        model.logp(vars=[mu, sigma, weights], jacobian=False, sum=False),
        inputs=values,
        point_fn=False,
    )
    likelihood = model.compile_fn(
        model.logp(vars=model.observed_RVs), inputs=values, point_fn=False
    )
    lp = result.stats["lp"].reshape(-1)  # the sampler's log density at each draw
    got = {k: v.reshape(40) for k, v in result.per_draw.items()}
    unravel = flat_point(model)[1]
    for i in range(40):
        want = prior(*unravel(z[i]))
        for name, value in zip(["mu", "sigma", "weights"], want, strict=True):
            np.testing.assert_allclose(got[name][i], value, rtol=1e-12)
        np.testing.assert_allclose(
            lp[i] - got[WITHOUT_LIKELIHOOD][i], likelihood(*unravel(z[i])), rtol=1e-12
        )
    # and through a fit: the log prior group has the term's shape
    tree, _ = _sample_own(
        model,
        FitConfig(
            chains=2,
            draws=20,
            tune=100,
            seed=3,
            ess_target=0,
            progress=False,
            sampler=DEFAULT_SAMPLER if kernel == "mams" else NUTS_SAMPLER,
        ),
        "t",
        terms,
    )
    log_prior, total = _log_densities_of_terms(
        tree["per_draw_terms"].to_dataset(),
        tree["sample_stats"].to_dataset()["lp"],
        tree["posterior"].to_dataset(),
    )
    assert log_prior["weights"].dims == ("chain", "draw")
    assert log_prior["mu"].dims == ("chain", "draw") and total.dims == ("chain", "draw")


def test_the_log_density_takes_data_its_rewritten_graph_no_longer_reads() -> None:
    """With observed data as inputs, ``logp`` takes every data value even where PyMC's
    rewrites leave the log density reading none of it (a Flat's reads only its shape)."""
    configure(2)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Flat("w", observed=np.array([1.0, 2.0]))
        pm.Normal("y", mu, 1.0, observed=np.array([0.5, -0.5]))
    density = LogDensity.from_model(model, observed_as_input=True)
    got = density.logp(density.x0, *density.data_values)
    want = model.compile_logp()(model.initial_point())
    np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ValueError, match="observed_as_input"):
        LogDensity.from_model(model, observed_as_input=True, per_draw={"mu": mu})


def test_flat_point_splits_back_into_the_value_variables() -> None:
    """The sampler's flat coordinates hold every value variable in ``model.value_vars``
    order, and ``unravel`` gives back the initial point's arrays, from NumPy and JAX."""
    import doctest

    import jax.numpy as jnp

    import bayesscale.sampling.logdensity

    configure(2)
    with pm.Model() as model:
        pm.Normal("a", [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], 1.0, shape=(2, 3))
        pm.HalfNormal("b", 2.0)
        pm.Beta("c", 2.0, 3.0, shape=2)
    x0, unravel = flat_point(model)
    point = model.initial_point()
    assert x0.shape == (9,)
    for x in (x0, jnp.asarray(x0)):
        parts = unravel(x)
        for var, part in zip(model.value_vars, parts, strict=True):
            np.testing.assert_array_equal(np.asarray(part), point[var.name])
            assert np.asarray(part).dtype == point[var.name].dtype
    with pm.Model() as counts:  # an integer value variable comes back as integers
        pm.Normal("m", 0.0, 1.0)
        pm.Poisson("n", 3.0, shape=2)
    x0, unravel = flat_point(counts)
    assert x0.dtype == np.float64 and [p.dtype.kind for p in unravel(x0)] == ["f", "i"]
    with pm.Model() as empty:
        pass
    x0, unravel = flat_point(empty)
    assert x0.shape == (0,) and unravel(x0) == []
    result = doctest.testmod(bayesscale.sampling.logdensity, raise_on_error=False)
    assert result.attempted >= 2 and result.failed == 0


def test_warmup_windows_cover_the_warmup() -> None:
    for tune in (0, 20, 79, 80, 400, 1000, 3333):
        sizes = adapt.windows(tune)
        assert sum(sizes) == tune and all(s > 0 for s in sizes)
    assert adapt.windows(400) == [25, 25, 50, 100, 150, 50]
    draws = np.random.default_rng(0).normal(size=(2, 500, 3)) * [1.0, 10.0, 0.1]
    grads = draws / np.array([1.0, 10.0, 0.1]) ** 2  # a Gaussian's gradient
    np.testing.assert_allclose(
        adapt.inv_mass_from_window(draws, grads)[0], [1.0, 100.0, 0.01], rtol=1e-6
    )


def _ar1(shape: tuple[int, int, int], phi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    x = np.zeros(shape)
    noise = rng.standard_normal(shape)
    for t in range(1, shape[2]):
        x[:, :, t] = phi[:, None] * x[:, :, t - 1] + noise[:, :, t]
    return x


@pytest.mark.parametrize(("chains", "draws"), [(2, 1000), (4, 301), (1, 200), (3, 9)])
def test_diagnostics_equal_arviz(chains: int, draws: int) -> None:
    """Vectorised R-hat and bulk/tail ESS against ArviZ's, including a constant, ties, a stuck
    chain and a rare event."""
    import arviz as az

    rng = np.random.default_rng(chains * 1000 + draws)
    x = _ar1((30, chains, draws), np.linspace(0.0, 0.97, 30), rng)
    x[0] = 2.0
    x[1] = np.round(x[1])
    x[2, 0] += 4.0
    x[3] = (rng.uniform(size=(chains, draws)) < 0.05).astype(float)
    ds = xr.Dataset({"v": (("chain", "draw", "k"), np.moveaxis(x, 0, -1))})
    np.testing.assert_allclose(ess_bulk(x), az.ess(ds, method="bulk")["v"].values, rtol=1e-9)
    np.testing.assert_allclose(ess_tail(x), az.ess(ds, method="tail")["v"].values, rtol=1e-9)
    if chains > 1:
        with np.errstate(invalid="ignore", divide="ignore"):
            theirs = az.rhat(ds)["v"].values
        np.testing.assert_allclose(rank_rhat(x), theirs, rtol=1e-9)


def test_average_ranks_equal_scipys_with_ties_and_nans() -> None:
    """Ranks as SciPy's ``rankdata(method="average")`` (NaN propagating): rows of few
    distinct values (ties everywhere, as MAMS's repeated draws), rows without ties, and rows
    with a NaN."""
    from scipy.stats import rankdata

    from bayesscale.sampling.diagnostics import _average_ranks

    rng = np.random.default_rng(3)
    tied = rng.integers(0, 7, size=(40, 57)).astype(float)
    distinct = rng.normal(size=(5, 57))
    with_nan = rng.integers(0, 3, size=(3, 57)).astype(float)
    with_nan[:, [4, 9]] = np.nan
    untied_nan = rng.normal(size=(1, 57))  # one NaN in a row of distinct values: NaN, as SciPy
    untied_nan[0, 7] = np.nan
    signed = rng.choice([-np.inf, -0.0, 0.0, 1.5, np.inf], size=(2, 57))  # -0.0 ties 0.0
    x = np.vstack([tied, distinct, with_nan, untied_nan, signed])
    np.testing.assert_array_equal(_average_ranks(x), rankdata(x, axis=1, method="average"))


def test_convergence_names_the_worst_quantity() -> None:
    rng = np.random.default_rng(0)
    good = rng.normal(size=(2, 400, 3))
    stuck = rng.normal(size=(2, 400)) + np.array([[0.0], [3.0]])  # the chains disagree
    check = convergence({"good": good, "stuck": stuck}, {"good": ("k",)})
    assert check.worst_rhat == "stuck" and check.max_rhat > 1.5


def test_laplace_is_exact_for_a_gaussian() -> None:
    configure(2)
    density = LogDensity.from_model(gaussian_model())
    result = laplace(density, draws=4000, seed=0)
    x = result.posterior["x"].reshape(-1, 3)
    assert result.converged
    assert np.all(np.abs(x.mean(axis=0) - [1.0, -2.0, 5.0]) < 4 * SCALES / np.sqrt(4000))
    np.testing.assert_allclose(x.std(axis=0), SCALES, rtol=0.05)


def test_progress_is_plain_lines_without_a_terminal() -> None:
    out = StringIO()
    bar = Progress("fit", stream=out, interval=0.0)
    bar.update("sampling", 10, 100, 0.5, 2)
    bar.close("done")
    text = out.getvalue()
    assert "\x1b" not in text and "\r" not in text
    assert [line.split()[0:2] for line in text.splitlines()] == [["fit:", "50%"], ["fit:", "done"]]
    assert "2 divergences" in text and "ETA" in text


def test_progress_redraws_one_line_in_a_terminal() -> None:
    class Tty(StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    bar = Progress("fit", stream=out)
    for done in (10, 20, 30):
        bar.update("warm-up", done, 100, done / 100, 0)
    bar.close("done")
    text = out.getvalue()
    assert text.count("\r") >= 3 and text.count("\n") == 1 and "[" in text


@pytest.mark.slow
def test_ctrl_c_stops_a_fit_at_once_and_writes_nothing(tmp_path: Path) -> None:
    """A real SIGINT to `bayesscale fit`, once during compilation (which Python cannot
    interrupt) and once while sampling: exit 130 within 2 s, one line, no traceback, no file."""
    out = tmp_path / "fit.nc"
    # the first run compiles (an empty cache of its own); the second may use the session's cache
    fresh = dict(os.environ, BAYESSCALE_CACHE_DIR=str(tmp_path / "jax"), PYTHONUNBUFFERED="1")
    shared = dict(os.environ, PYTHONUNBUFFERED="1")
    command = [
        str(Path(sys.executable).parent / "bayesscale"),
        "fit",
        str(ROOT / "data" / "reference" / "observations.csv"),
        "--out",
        str(out),
    ]
    for marker, env in (("fitting", fresh), ("sampling", shared)):  # compiling; sampling
        # A terminal's Ctrl-C: SIGINT handled as Python does by default. A pytest-xdist worker
        # runs with SIGINT ignored and a child would inherit that, so a small launcher (no JAX
        # in it: no fork of a multithreaded process) restores it and execs the command.
        proc = subprocess.Popen(
            [sys.executable, "-c", RESTORE_SIGINT_AND_EXEC, *command],
            env=env,
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            seen = ""
            deadline = time.monotonic() + 120
            while marker not in seen and time.monotonic() < deadline:
                seen += proc.stderr.read(1)
            assert marker in seen, seen
            tic = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
            stopped = time.monotonic() - tic
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 130, (proc.returncode, err)
        assert stopped < 2.0, stopped
        assert "Traceback" not in err
        assert err.strip().splitlines()[-1] == "bayesscale fit: interrupted: nothing written"
        assert not out.exists() and not list(tmp_path.glob(".fit.nc*"))


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="counts Linux memory maps")
def test_fits_of_new_layouts_do_not_pile_up_compiled_programs() -> None:
    """JAX keeps a compiled program in memory until it is dropped (about 650 memory maps per law
    fit of a new layout): a study of a hundred fits in one process would run out. Each fit
    drops the programs of the fits before it, so the count stays flat."""
    from bayesscale.law.inference import FitConfig, sample

    def maps() -> int:
        return len(Path("/proc/self/maps").read_text().splitlines())

    config = FitConfig(chains=2, draws=20, tune=20, seed=1, progress=False)
    counts = []
    for rows in (5, 6, 7, 8):  # a new data layout each time: a new program
        with pm.Model() as model:
            mu = pm.Normal("mu", 0.0, 1.0)
            pm.Normal("y", mu, 1.0, observed=np.linspace(-1.0, 1.0, rows))
        sample(model, config)
        counts.append(maps())
    assert counts[-1] - counts[1] < 20, counts  # was 35 more per fit of this tiny model
