"""Calibration of the method itself: simulation-based calibration and coverage over redraws.

**Simulation-based calibration** (SBC; Talts et al. 2018, arXiv:1804.06788). For
``n = 1..N``: draw ``theta_n`` from the model's prior, simulate ``y_n ~ p(y | theta_n)`` from the
model's own likelihood, fit, and take the rank of the true value among ``L`` roughly
independent posterior draws of a scalar quantity ``f``:

.. math::

    r_n = \\#\\{\\ell : f(\\theta^{(\\ell)}_n) < f(\\theta_n)\\} \\in \\{0, \\dots, L\\}, \\qquad
    u_n = (r_n + v_n) / (L + 1), \\quad v_n \\sim \\mathrm{U}(0, 1)

If the sampler draws from the exact posterior, ``r_n`` is uniform on ``{0..L}`` and the
randomised normalised rank ``u_n`` is exactly ``U(0, 1)``, whatever ``L`` is. Uniformity is
tested with a chi-square test on ``u`` in equal bins and a Kolmogorov-Smirnov test.

The law model's prior is not only its random variables: the soft wall
``pm.Potential("floor_positive", sum_s log sigmoid(L_inf,s / eps))`` multiplies it, and
parameters that put ``L <= 0`` at a design row (success above 1) have no likelihood at all,
so NUTS never visits them. The prior SBC must draw from is therefore

.. math::

    \\pi(\\theta) \\propto \\pi_0(\\theta)\\, e^{\\Phi(\\theta)}\\, 1[\\theta \\text{ valid}],
    \\qquad \\Phi = \\sum \\text{potentials} \\le 0,

which :func:`prior_datasets` draws exactly by rejection: a draw of the random variables
(``pm.sample_prior_predictive``, which ignores potentials) is kept with probability
``exp(Phi(theta))`` and only if every likelihood parameter is finite and positive.
Rejecting only draws with a negative floor would match the wall only approximately
(the wall also thins draws just above zero and keeps some just below it).

**Coverage over redraws** (:func:`coverage_study`): re-simulate a fixed truth's design
``R`` times, fit the pooled model and the frequentist bootstrap baseline
(:func:`bayesscale.law.baseline.bootstrap_fit`) to each redraw, and count how often each
method's 90% interval covers the true per-setting exponent and the population exponent.

**Sampling cost.** ``pm.sample(nuts_sampler="numpyro")`` builds a new JAX function and so
recompiles on every call. :class:`CompiledLawSampler` instead compiles the package's own
sampler once per design, with the observed outcome an
*argument* of the compiled program: refitting a new dataset of the same design reuses it.

Example
-------
>>> import numpy as np
>>> u = normalized_ranks(np.array([0, 5, 10]), np.array([10, 10, 10]), np.random.default_rng(0))
>>> bool(np.all((u >= 0) & (u < 1)))
True
>>> round(uniformity(np.linspace(0.025, 0.975, 20), bins=4).chi2_p, 6)
1.0
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from bayesscale import names
from bayesscale.core.intervals import ETI, interval
from bayesscale.data.observations import (
    Design,
    Table,
    frame_sha256,
    prepare,
    setting_labels,
    validate,
)
from bayesscale.data.simulate import PAPER_ANCHORS, PAPER_GRIDS, Truth, per_axis_design, simulate
from bayesscale.data.spec import ModelSpec
from bayesscale.sampling.config import OWN_SAMPLERS

if TYPE_CHECKING:
    import pymc as pm

    from bayesscale.law.inference import FitConfig

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

# --- names of what this module writes (columns, labels, JSON keys) ---------------------------
DATASET: Final = "dataset"
QUANTITY: Final = "quantity"
TRUE_VALUE: Final = "true_value"
RANK: Final = "rank"
RANK_DRAWS: Final = "rank_draws"  # L: posterior draws the truth is ranked among
NORMALIZED_RANK: Final = "normalized_rank"  # u = (rank + v) / (L + 1)
ESS_BULK: Final = "ess_bulk"
DIVERGENCES: Final = "divergences"
MAX_RHAT: Final = "max_rhat"
MIN_ESS: Final = "min_ess_bulk"
SECONDS: Final = "seconds"
REDRAW: Final = "redraw"
ESTIMATOR: Final = "estimator"  # pooled | bootstrap
LEVEL: Final = "level"
LOWER: Final = "lower"
UPPER: Final = "upper"
COVERED: Final = "covered"
WIDTH: Final = "width"
COVERAGE: Final = "coverage"
COVERAGE_SE: Final = "coverage_se"
MEAN_WIDTH: Final = "mean_width"
N_INTERVALS: Final = "n_intervals"
POOLED: Final = "pooled"  # method label: the pooled Bayesian law
BOOTSTRAP: Final = "bootstrap"  # method label: the paper's per-panel bootstrap
SETTING_LEVEL: Final = "setting"  # level label: per-setting exponents alpha[s, a]
POPULATION_LEVEL: Final = "population"  # level label: alpha_pop[a]
POTENTIAL_WARNING: Final = "The effect of Potentials on other parameters is ignored"
# PyTensor's Numba backend draws the beta-binomial in object mode (NumPy's generator) and
# says so with a UserWarning; that is only slower, so the message is silenced where we sample.
OBJECT_MODE_WARNING: Final = "Numba will use object mode"

COVERAGE_VARIABLES: Final = (names.ALPHA_POP, names.ALPHA)
DEFAULT_PROB = 0.9
DEFAULT_MAX_RANK_DRAWS = 100
MIN_RANK_DRAWS = 10
MAX_PRIOR_ROUNDS = 100


# --- pure statistics (NumPy/SciPy) -------------------------------------------------------------


def rank_of(truth: float, draws: ArrayLike) -> int:
    """``#{draws < truth}``: the SBC rank of a true value among posterior draws.

    >>> rank_of(0.5, [0.1, 0.7, 0.3])
    2
    """
    return int(np.sum(np.asarray(draws, dtype=float) < truth))


def thin(draws: ArrayLike, keep: int) -> Array:
    """``keep`` draws evenly spaced over ``draws`` (flattened in order, chains one after another).

    >>> thin(np.arange(10.0), 3).tolist()
    [0.0, 4.0, 9.0]
    """
    flat = np.asarray(draws, dtype=float).ravel()
    keep = max(1, min(int(keep), flat.size))
    return flat[np.round(np.linspace(0, flat.size - 1, keep)).astype(int)]


def normalized_ranks(ranks: ArrayLike, n_draws: ArrayLike, rng: np.random.Generator) -> Array:
    """Randomised normalised ranks ``u = (r + v) / (L + 1)``, ``v ~ U(0, 1)``.

    For ``r`` uniform on ``{0..L}``, ``u`` is exactly ``U(0, 1)``, so ranks among different
    numbers of draws ``L`` can be pooled and tested with continuous tests.
    """
    r = np.asarray(ranks, dtype=float)
    n = np.asarray(n_draws, dtype=float)
    if np.any(r < 0) or np.any(r > n):
        raise ValueError("every rank must lie in 0..n_draws")
    return (r + rng.uniform(size=r.shape)) / (n + 1.0)


@dataclass(frozen=True)
class Uniformity:
    """Tests of ``u ~ U(0, 1)``: chi-square on ``bins`` equal bins and Kolmogorov-Smirnov."""

    n: int
    bins: int
    counts: tuple[int, ...]
    chi2: float
    chi2_p: float
    ks: float
    ks_p: float

    @property
    def min_p(self) -> float:
        return min(self.chi2_p, self.ks_p)


def default_bins(n: int) -> int:
    """Equal bins with about 5 or more expected counts each, between 2 and 20.

    >>> default_bins(25), default_bins(100), default_bins(1000)
    (5, 20, 20)
    """
    return int(max(2, min(20, n // 5)))


def uniformity(u: ArrayLike, bins: int | None = None) -> Uniformity:
    """Chi-square (``sum_b (O_b - E)^2 / E``, ``bins - 1`` dof) and KS tests of ``u ~ U(0, 1)``.

    >>> round(uniformity([0.1, 0.3, 0.6, 0.9], bins=2).chi2, 6)
    0.0
    """
    values = np.asarray(u, dtype=float).ravel()
    if values.size == 0 or np.any((values < 0) | (values > 1)) or not np.all(np.isfinite(values)):
        raise ValueError("uniformity needs at least one value, all in [0, 1]")
    b = default_bins(values.size) if bins is None else int(bins)
    if b < 2:
        raise ValueError(f"bins must be >= 2, got {b}")
    counts = np.histogram(values, bins=b, range=(0.0, 1.0))[0]
    chi2, chi2_p = stats.chisquare(counts)
    ks = stats.kstest(values, "uniform")
    return Uniformity(
        n=int(values.size),
        bins=b,
        counts=tuple(int(c) for c in counts),
        chi2=float(chi2),
        chi2_p=float(chi2_p),
        ks=float(ks.statistic),
        ks_p=float(ks.pvalue),
    )


def text_histogram(counts: Sequence[int], width: int = 40) -> list[str]:
    """One line per bin, ``#`` scaled to ``width`` at the largest count; ``|`` marks the
    uniform expectation.

    >>> text_histogram([2, 2], width=4)
    ['  0.00-0.50     2 ####|', '  0.50-1.00     2 ####|']
    """
    counts = [int(c) for c in counts]
    b, top = len(counts), max(max(counts), 1)
    expected = sum(counts) / b
    mark = round(expected / top * width)
    lines = []
    for i, c in enumerate(counts):
        bar = list("#" * round(c / top * width) + " " * (width + 1))
        bar.insert(mark, "|")
        lines.append(f"  {i / b:.2f}-{(i + 1) / b:.2f} {c:5d} {''.join(bar).rstrip()}")
    return lines


def equal_tailed(
    draws: ArrayLike, prob: float = DEFAULT_PROB, axis: int = 0
) -> tuple[Array, Array]:
    """``(lower, upper)``: the ``(1 - prob)/2`` and ``(1 + prob)/2`` quantiles along ``axis``."""
    lo, hi = interval(draws, prob, ETI, axis=axis)
    return lo, hi


def summarize_coverage(records: pd.DataFrame) -> pd.DataFrame:
    """Coverage and mean width per ``(method, level, axis)`` from interval records.

    ``coverage_se`` is the standard error over redraws (the sd of per-redraw coverage
    fractions over sqrt(R)), which respects the correlation of intervals within a redraw.
    """
    keys = [ESTIMATOR, LEVEL, names.AXIS_DIM]
    per_redraw = records.groupby([*keys, REDRAW])[COVERED].mean().rename("fraction").reset_index()
    grouped = records.groupby(keys)
    out = pd.DataFrame(
        {
            COVERAGE: grouped[COVERED].mean(),
            MEAN_WIDTH: grouped[WIDTH].mean(),
            N_INTERVALS: grouped[COVERED].size(),
        }
    )
    spread = per_redraw.groupby(keys)["fraction"].agg(["std", "size"])
    out[COVERAGE_SE] = spread["std"] / np.sqrt(spread["size"])
    return out.reset_index()


# --- designs for calibration runs ------------------------------------------------------------


def truth_subset(truth: Truth, settings: Sequence[int]) -> Truth:
    """The same truth restricted to some of its settings (by position)."""
    idx = [int(i) for i in settings]
    if not idx or any(i < 0 or i >= len(truth.settings) for i in idx):
        raise ValueError(f"setting positions must lie in 0..{len(truth.settings) - 1}, got {idx}")
    return replace(
        truth,
        settings=[dict(truth.settings[i]) for i in idx],
        alpha=[list(truth.alpha[i]) for i in idx],
        amplitude=[list(truth.amplitude[i]) for i in idx],
        loss_floor=[truth.loss_floor[i] for i in idx],
    )


def design_of(frame: pd.DataFrame, spec: ModelSpec, source: str) -> Design:
    """Validate a simulated table (errors name ``source``) and lay it out for the model."""
    clean = validate(frame, spec, source=source)
    return prepare(Table(clean, source, frame_sha256(clean)), spec)


def sbc_design(
    spec: ModelSpec,
    truth: Truth,
    settings: Sequence[int] = (0, 1),
    grids: Mapping[str, tuple[int, ...]] | None = None,
    anchors: Mapping[str, int] | None = None,
    seeds: tuple[int, ...] = (0, 1),
) -> Design:
    """A per-axis-sweep design for SBC: the settings of ``truth`` at ``settings`` (their keys
    and model sizes only), ``grids`` swept with the others at ``anchors``. The outcome column
    is a placeholder (half the trials): SBC replaces it with data simulated from the prior."""
    sub = truth_subset(truth, settings)
    frame = per_axis_design(
        sub, dict(grids) if grids else None, dict(anchors) if anchors else None, seeds
    )
    frame[names.SUCCESSES] = frame[names.TRIALS] // 2
    return design_of(frame, spec, "<SBC design>")


SMALL_GRIDS: Final = {axis: grid[::2] for axis, grid in PAPER_GRIDS.items()}
SMALL_ANCHORS: Final = {
    axis: grid[-1] if PAPER_ANCHORS[axis] == PAPER_GRIDS[axis][-1] else grid[len(grid) // 2]
    for axis, grid in SMALL_GRIDS.items()
}


# --- quantities ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Quantity:
    """A scalar of the model: a variable and a label on each of its dimensions."""

    variable: str
    selection: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        if not self.selection:
            return self.variable
        return f"{self.variable}[{','.join(v for _, v in self.selection)}]"

    def select(self, data: xr.DataArray) -> xr.DataArray:
        return data.sel({dim: value for dim, value in self.selection}) if self.selection else data


def default_quantities(design: Design) -> list[Quantity]:
    """``alpha_pop`` per axis, the first setting's exponents (with more than one setting),
    the concentration (success outcomes) and the first setting's loss floor."""
    axes = design.spec.axis_names
    first = design.settings[0]
    out = [Quantity(names.ALPHA_POP, ((names.AXIS_DIM, a),)) for a in axes]
    if len(design.settings) > 1:
        out += [
            Quantity(names.ALPHA, ((names.SETTING_DIM, first), (names.AXIS_DIM, a))) for a in axes
        ]
    if design.spec.outcome == "success":
        out.append(Quantity(names.CONCENTRATION))
    out.append(Quantity(names.LOSS_FLOOR, ((names.SETTING_DIM, first),)))
    return out


# --- a sampler compiled once per design -------------------------------------------------------


@dataclass
class QuickFit:
    """One run of :class:`CompiledLawSampler`: the requested variables' draws
    ``(chain, draw, ...)``, post-warm-up divergences, mean integration steps per draw and wall
    seconds."""

    posterior: xr.Dataset
    divergences: int
    mean_steps: float
    seconds: float

    def convergence(self) -> dict[str, float]:
        """Max rank-normalised R-hat and min bulk ESS over the returned variables."""
        from bayesscale.sampling.diagnostics import convergence_of

        check = convergence_of(self.posterior)
        return {MAX_RHAT: check.max_rhat, MIN_ESS: check.min_ess_bulk}


class CompiledLawSampler:
    """bayesscale's sampler (:mod:`bayesscale.sampling`) on a law model, compiled once; the
    observed outcome is an *argument* of the compiled program, so :meth:`fit` on a new
    dataset of the same design does not recompile.

    Each fit takes ``config.tune`` warm-up and ``config.draws`` draws per chain (no ESS target:
    calibration needs equal-length runs).

    >>> sampler = CompiledLawSampler(build_law_model(design), FitConfig(chains=2))  # doctest: +SKIP
    >>> fit = sampler.fit(design.successes, seed=1)  # doctest: +SKIP
    """

    def __init__(
        self, model: pm.Model, config: FitConfig, var_names: Sequence[str] | None = None
    ) -> None:
        from bayesscale.sampling import configure
        from bayesscale.sampling.engine import CompiledSampler
        from bayesscale.sampling.logdensity import LogDensity

        if config.sampler not in OWN_SAMPLERS:
            raise ValueError(
                f"CompiledLawSampler runs bayesscale's own sampler ({' or '.join(OWN_SAMPLERS)}); "
                f"got sampler={config.sampler!r}"
            )
        configure(config.chains)
        self.model, self.config = model, config
        self.var_names = list(var_names or [names.ALPHA_POP, names.ALPHA])
        self.density = LogDensity.from_model(model, observed_as_input=True)
        missing = set(self.var_names) - set(self.density.var_names)
        if missing:
            raise ValueError(f"the model stores no {sorted(missing)}")
        [value] = self.density.data_values
        [self._dtype] = self.density.data_dtypes
        self.n_obs = int(np.size(value))
        self._shape = np.shape(value)
        self._sampler = CompiledSampler(self.density, config.chains, config.accept, config.kernel)
        self.design: Design | None = None

    @property
    def compile_seconds(self) -> float | None:
        return self._sampler.compile_seconds or None

    @classmethod
    def for_design(
        cls, design: Design, config: FitConfig, var_names: Sequence[str] | None = None
    ) -> CompiledLawSampler:
        """Build the law model of ``design`` and compile a sampler for its layout."""
        from bayesscale.law.model import build_law_model

        sampler = cls(build_law_model(design), config, var_names)
        sampler.design = design
        return sampler

    def same_layout(self, design: Design) -> bool:
        """Whether ``design`` has this sampler's settings, sizes and trials (outcome aside)."""
        mine = self.design
        if mine is None:
            return False
        same_trials = (mine.trials is None and design.trials is None) or (
            mine.trials is not None
            and design.trials is not None
            and np.array_equal(mine.trials, design.trials)
        )
        return (
            mine.spec.text == design.spec.text
            and mine.settings == design.settings
            and np.array_equal(mine.sizes, design.sizes)
            and np.array_equal(mine.setting_index, design.setting_index)
            and same_trials
        )

    def fit(self, observed: ArrayLike, seed: int) -> QuickFit:
        """Sample the posterior given ``observed`` (the outcome as the model observes it)."""
        from bayesscale.sampling.engine import RunSettings

        y = np.asarray(observed)
        if y.size != self.n_obs:
            raise ValueError(f"observed has {y.size} values; the design has {self.n_obs} rows")
        if np.issubdtype(self._dtype, np.integer) and not np.all(y == np.round(y)):
            raise ValueError("observed counts must be whole numbers")
        data = (y.astype(self._dtype).reshape(self._shape),)
        start = time.perf_counter()
        settings = RunSettings(tune=self.config.tune, draws=self.config.draws, seed=int(seed))
        result = self._sampler.run(settings, data=data)
        seconds = time.perf_counter() - start
        dims = self.density.dims
        coords = self.density.coords
        posterior = xr.Dataset(
            {
                v: ((names.CHAIN_DIM, names.DRAW_DIM, *dims[v]), result.posterior[v])
                for v in self.var_names
            }
        )
        posterior = posterior.assign_coords({d: coords[d] for d in posterior.dims if d in coords})
        return QuickFit(
            posterior=posterior,
            divergences=int(result.stats["diverging"].sum()),
            mean_steps=float(result.stats["n_steps"].mean()),
            seconds=seconds,
        )


# --- exact draws from the model's prior, and data from its own likelihood ----------------------


@dataclass
class PriorDatasets:
    """Parameters drawn from the model's prior (potentials and validity included) and one
    simulated outcome vector per draw. ``truth`` has dim ``dataset`` first; ``outcomes`` is
    ``(dataset, obs)``; ``proposed`` counts prior draws before rejection."""

    truth: xr.Dataset
    outcomes: np.ndarray
    proposed: int
    invalid: int

    @property
    def acceptance(self) -> float:
        return self.truth.sizes[DATASET] / self.proposed


Perturbation = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


def scale_variable(variable: str, factor: float) -> Perturbation:
    """A deliberately broken simulator for SBC negative controls: the free random variable
    ``variable`` multiplied by ``factor`` in the data, the truth left as drawn (for a
    ``log_*`` variable, pass the factor of the variable itself: ``log factor`` is added).

    >>> scale_variable("concentration", 4.0)({"concentration": np.array([100.0])})
    {'concentration': array([400.])}
    """
    if factor <= 0:
        raise ValueError(f"factor must be > 0, got {factor}")

    def perturb(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if variable not in values:
            raise KeyError(f"{variable!r} is not a free random variable of the model")
        out = dict(values)
        if variable.startswith("log_"):
            out[variable] = np.asarray(values[variable]) + math.log(factor)
        else:
            out[variable] = np.asarray(values[variable]) * factor
        return out

    return perturb


def scale_exponents(factor: float) -> Perturbation:
    """Every exponent multiplied by ``factor`` in the simulated data (``log_alpha_pop``)."""
    return scale_variable(names.LOG_ALPHA_POP, factor)


def _prior_checks(model: pm.Model) -> Callable[[list[np.ndarray]], tuple[Array, BoolArray]]:
    """Compile ``free RV values (batched) -> (sum of potentials, likelihood valid)`` in JAX.

    Valid: every parameter of the likelihood finite and, for counts (the beta-binomial),
    positive.
    """
    from bayesscale.sampling import configure

    configure()
    import jax
    import jax.numpy as jnp
    import pytensor.tensor as pt
    from pymc.sampling.jax import get_jaxified_graph
    from pytensor.graph.replace import clone_replace

    observed_rv = model[names.OUTCOME]
    params = [
        i
        for i in observed_rv.owner.inputs
        if isinstance(i.type, pt.TensorType) and i.type.dtype.startswith("float")
    ]
    positive = observed_rv.type.dtype.startswith("int")  # counts: beta-binomial parameters
    total = pt.as_tensor(0.0)
    for potential in model.potentials:
        total = total + pt.sum(potential)
    inputs = [rv.type() for rv in model.free_RVs]
    outputs = clone_replace(
        [total, *params], replace=dict(zip(model.free_RVs, inputs, strict=True))
    )
    graph = get_jaxified_graph(inputs=inputs, outputs=outputs)

    def one(*values: Any) -> tuple[Any, Any]:
        phi, *pars = graph(*values)
        ok = jnp.all(jnp.asarray([jnp.all(jnp.isfinite(p)) for p in pars]))
        if positive:
            ok = ok & jnp.all(jnp.asarray([jnp.all(p > 0) for p in pars]))
        return phi, ok

    batched = jax.jit(jax.vmap(one))

    def check(values: list[np.ndarray]) -> tuple[Array, BoolArray]:
        phi, ok = batched(*[jnp.asarray(v) for v in values])
        return np.array(phi, dtype=float), np.array(ok, dtype=bool)

    return check


def prior_datasets(
    model: pm.Model,
    n: int,
    seed: int,
    variables: Sequence[str] = (),
    perturb: Perturbation | None = None,
    batch: int | None = None,
) -> PriorDatasets:
    """``n`` exact draws from the model's prior and data simulated from its likelihood.

    Draws of the random variables come from ``pm.sample_prior_predictive`` (which ignores
    potentials); each is kept with probability ``exp(sum of potentials)`` (all potentials must
    be <= 0) and only if every likelihood parameter is finite (and, for the beta-binomial,
    positive): the prior the fitted model actually has. Outcomes come from
    ``pm.sample_posterior_predictive`` on the kept draws: the model's own likelihood.
    ``perturb`` changes the free random variables *before simulating only* (a broken
    simulator for negative controls); ``truth`` keeps the drawn values.
    """
    import pymc as pm

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    free = [rv.name for rv in model.free_RVs]
    keep_vars = sorted(set(free) | set(variables))
    check = _prior_checks(model)
    seeds = np.random.SeedSequence(seed).spawn(3)
    accept_rng = np.random.default_rng(seeds[1])
    batch = batch or max(2 * n, 50)
    kept: list[xr.Dataset] = []
    simulated: list[dict[str, np.ndarray]] = []
    proposed = invalid = 0
    for round_seed in seeds[0].spawn(MAX_PRIOR_ROUNDS):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=POTENTIAL_WARNING, category=UserWarning)
            prior = pm.sample_prior_predictive(
                draws=batch,
                model=model,
                var_names=keep_vars,
                random_seed=np.random.default_rng(round_seed),
            )["prior"].to_dataset()
        prior = prior.isel({names.CHAIN_DIM: 0}, drop=True)
        values = {v: prior[v].values for v in free}
        sim = perturb(values) if perturb is not None else values
        potential, valid = check([values[v] for v in free])
        if np.any(potential > 1e-9):
            raise ValueError(
                f"a potential of the model is positive ({potential.max():.3g}); rejection "
                "sampling of its prior needs every potential <= 0"
            )
        if perturb is not None:
            valid &= check([sim[v] for v in free])[1]
        accept = valid & (accept_rng.uniform(size=batch) < np.exp(potential))
        need = n - len(kept)
        take = np.flatnonzero(accept)[:need]
        for d in take:
            kept.append(prior.isel({names.DRAW_DIM: int(d)}, drop=True))
            simulated.append({v: sim[v][d] for v in free})
        # proposals consumed: up to the last draw taken once enough are kept
        used = int(take[-1]) + 1 if len(take) == need else batch
        proposed += used
        invalid += int(np.sum(~valid[:used]))
        if len(kept) == n:
            break
    else:
        raise RuntimeError(
            f"only {len(kept)} of {n} prior draws accepted after {proposed} proposals"
        )
    truth = xr.concat(kept, dim=DATASET).assign_coords({DATASET: np.arange(n)})
    trace = xr.Dataset(
        {
            v: (
                (names.CHAIN_DIM, names.DRAW_DIM, *prior[v].dims[1:]),
                np.stack([s[v] for s in simulated])[None],
            )
            for v in free
        },
        coords={
            names.CHAIN_DIM: [0],
            names.DRAW_DIM: np.arange(n),
            **{d: prior.coords[d].values for v in free for d in prior[v].dims[1:]},
        },
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=POTENTIAL_WARNING, category=UserWarning)
        warnings.filterwarnings("ignore", message=OBJECT_MODE_WARNING, category=UserWarning)
        predictive = pm.sample_posterior_predictive(
            trace,
            model=model,
            var_names=[names.OUTCOME],
            random_seed=np.random.default_rng(seeds[2]),
            progressbar=False,
        )
    outcomes = predictive["posterior_predictive"][names.OUTCOME].values[0]
    return PriorDatasets(
        truth=truth, outcomes=np.asarray(outcomes), proposed=proposed, invalid=invalid
    )


# --- simulation-based calibration ---------------------------------------------------------------


@dataclass
class SBCResult:
    """Ranks of the truth (one row per dataset and quantity) and uniformity tests."""

    ranks: pd.DataFrame
    tests: dict[str, Uniformity]
    acceptance: float
    timing: dict[str, float]
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def min_p(self) -> float:
        """The smallest p-value over quantities and both tests."""
        return min(t.min_p for t in self.tests.values())

    def table(self) -> pd.DataFrame:
        """One row per quantity: chi-square and KS statistics and p-values."""
        rows = [
            {
                QUANTITY: q,
                "n": t.n,
                "bins": t.bins,
                "chi2": t.chi2,
                "chi2_p": t.chi2_p,
                "ks": t.ks,
                "ks_p": t.ks_p,
            }
            for q, t in self.tests.items()
        ]
        return pd.DataFrame(rows)

    def report(self) -> str:
        """Text rank histograms and p-values."""
        lines = []
        for q, t in self.tests.items():
            lines.append(
                f"{q}: chi2 = {t.chi2:.2f} (p = {t.chi2_p:.3g}), KS = {t.ks:.3f} (p = {t.ks_p:.3g})"
            )
            lines += text_histogram(t.counts)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "acceptance": self.acceptance,
            "timing": self.timing,
            "tests": self.table().to_dict(orient="records"),
            "histograms": {q: list(t.counts) for q, t in self.tests.items()},
            "divergent_fits": int((self.ranks.groupby(DATASET)[DIVERGENCES].first() > 0).sum()),
            "min_ess_bulk": float(self.ranks[ESS_BULK].min()),
        }


def simulation_based_calibration(
    design: Design,
    n_datasets: int,
    config: FitConfig,
    seed: int = 0,
    quantities: Sequence[Quantity] | None = None,
    perturb: Perturbation | None = None,
    max_rank_draws: int = DEFAULT_MAX_RANK_DRAWS,
    bins: int | None = None,
    sampler: CompiledLawSampler | None = None,
) -> SBCResult:
    """SBC of the law model of ``design.spec`` on ``design``'s rows.

    Each quantity's truth is ranked among ``L = min(max_rank_draws, ESS_bulk)`` posterior
    draws spaced evenly over the chains (Talts et al.: thin to about independent draws).
    Pass ``sampler`` (from :meth:`CompiledLawSampler.for_design` on this design) to reuse a
    compiled one; its configuration then replaces ``config``.

    >>> result = simulation_based_calibration(design, 25, FitConfig(chains=2, draws=200))  # doctest: +SKIP
    >>> result.min_p > 0.001  # doctest: +SKIP
    True
    """
    import arviz as az

    if max_rank_draws < MIN_RANK_DRAWS:
        raise ValueError(f"max_rank_draws must be >= {MIN_RANK_DRAWS}")
    seeds = np.random.SeedSequence(seed).spawn(3)
    quantities = list(quantities or default_quantities(design))
    variables = sorted({q.variable for q in quantities})
    start = time.perf_counter()
    if sampler is None:
        sampler = CompiledLawSampler.for_design(design, config, variables)
    elif not sampler.same_layout(design):
        raise ValueError("the sampler was compiled for another design (settings, sizes or trials)")
    config = sampler.config
    missing = set(variables) - set(sampler.var_names)
    if missing:
        raise ValueError(f"the sampler does not return {sorted(missing)}")
    setup_seconds = time.perf_counter() - start
    prior = prior_datasets(
        sampler.model, n_datasets, int(seeds[0].generate_state(1)[0]), variables, perturb
    )
    prior_seconds = time.perf_counter() - start - setup_seconds
    fit_seeds = seeds[1].generate_state(n_datasets)
    jitter = np.random.default_rng(seeds[2])
    rows = []
    sampling = []
    for i in range(n_datasets):
        fit = sampler.fit(prior.outcomes[i], seed=int(fit_seeds[i]))
        sampling.append(fit.seconds)
        for q in quantities:
            draws = q.select(fit.posterior[q.variable]).values
            truth = float(q.select(prior.truth[q.variable].isel({DATASET: i})).values)
            ess = float(az.ess(draws, method="bulk"))
            usable = math.floor(ess) if np.isfinite(ess) else MIN_RANK_DRAWS
            keep = int(min(max_rank_draws, max(MIN_RANK_DRAWS, usable)))
            thinned = thin(draws, keep)
            rank = rank_of(truth, thinned)
            rows.append(
                {
                    DATASET: i,
                    QUANTITY: q.label,
                    TRUE_VALUE: truth,
                    RANK: rank,
                    RANK_DRAWS: thinned.size,
                    NORMALIZED_RANK: float(normalized_ranks([rank], [thinned.size], jitter)[0]),
                    ESS_BULK: ess,
                    DIVERGENCES: fit.divergences,
                }
            )
    ranks = pd.DataFrame(rows)
    tests = {
        q.label: uniformity(ranks.loc[ranks[QUANTITY] == q.label, NORMALIZED_RANK], bins)
        for q in quantities
    }
    return SBCResult(
        ranks=ranks,
        tests=tests,
        acceptance=prior.acceptance,
        timing={
            "setup_s": setup_seconds,
            "compile_s": float(sampler.compile_seconds or 0.0),
            "prior_draws_s": prior_seconds,
            "sampling_s_per_dataset": float(np.mean(sampling)),
            "sampling_s_total": float(np.sum(sampling)),
        },
        config={
            "n_datasets": n_datasets,
            "rows": design.n_obs,
            "settings": len(design.settings),
            "chains": config.chains,
            "tune": config.tune,
            "draws": config.draws,
            "target_accept": config.accept,
            "max_rank_draws": max_rank_draws,
            "seed": seed,
            "perturbed": perturb is not None,
        },
    )


# --- coverage over redraws: pooled model vs bootstrap baseline ---------------------------------


@dataclass
class CoverageResult:
    """Interval records (one per redraw, method, level, setting and axis) and their summary."""

    records: pd.DataFrame
    summary: pd.DataFrame
    fits: pd.DataFrame  # per redraw: pooled seconds, divergences, max R-hat, min bulk ESS
    timing: dict[str, float]
    config: dict[str, Any] = field(default_factory=dict)

    def report(self) -> str:
        """The coverage/width table, pooled and bootstrap side by side."""
        table = self.summary.pivot_table(
            index=[LEVEL, names.AXIS_DIM], columns=ESTIMATOR, values=[COVERAGE, MEAN_WIDTH]
        )
        return table.to_string(float_format=lambda v: f"{v:.3f}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "timing": self.timing,
            "summary": self.summary.to_dict(orient="records"),
            "pooled_fits": self.fits.to_dict(orient="records"),
        }


def _record(
    redraw: int,
    method: str,
    level: str,
    setting: str,
    axis: str,
    truth: float,
    lo: float,
    hi: float,
) -> dict[str, Any]:
    return {
        REDRAW: redraw,
        ESTIMATOR: method,
        LEVEL: level,
        names.SETTING_DIM: setting,
        names.AXIS_DIM: axis,
        TRUE_VALUE: truth,
        LOWER: lo,
        UPPER: hi,
        COVERED: bool(lo <= truth <= hi),
        WIDTH: hi - lo,
    }


def coverage_study(
    truth: Truth,
    spec: ModelSpec,
    n_redraws: int,
    config: FitConfig,
    seed: int = 0,
    n_boot: int = 500,
    prob: float = DEFAULT_PROB,
    design_frame: pd.DataFrame | None = None,
    progress: Callable[[str], None] | None = None,
    sampler: CompiledLawSampler | None = None,
) -> CoverageResult:
    """Redraw ``truth``'s design (rows without outcomes; default
    :func:`bayesscale.data.simulate.per_axis_design`) ``n_redraws`` times; fit the pooled law (one compiled sampler for every redraw) and the
    bootstrap baseline to each, and record whether each ``prob`` interval covers the truth.

    Population intervals: the pooled model's ``alpha_pop``; for the baseline, the bootstrap
    distribution of the median over settings of the per-setting exponents (``alpha_pop`` is
    the population median), which ignores between-setting sampling variability. Pass
    ``sampler`` (returning ``alpha`` and ``alpha_pop``) to reuse one compiled for this layout.
    """
    from bayesscale.law.baseline import bootstrap_fit

    if n_redraws < 1:
        raise ValueError(f"n_redraws must be >= 1, got {n_redraws}")
    frame0 = per_axis_design(truth) if design_frame is None else design_frame
    truth_labels = list(setting_labels(pd.DataFrame(truth.settings), spec))
    seeds = np.random.SeedSequence(seed).spawn(3)
    data_seeds = seeds[0].generate_state(n_redraws)
    fit_seeds = seeds[1].generate_state(n_redraws)
    boot_seeds = seeds[2].generate_state(n_redraws)
    axes = list(truth.axes)
    true_alpha = np.asarray(truth.alpha)
    records: list[dict[str, Any]] = []
    fits: list[dict[str, Any]] = []
    timing = {"pooled_s": 0.0, "bootstrap_s": 0.0, "compile_s": 0.0}
    for r in range(n_redraws):
        frame = simulate(truth, frame0, seed=int(data_seeds[r]))
        source = f"<coverage redraw {r}>"
        design_r = design_of(frame, spec, source)
        if sampler is None:
            sampler = CompiledLawSampler.for_design(design_r, config, COVERAGE_VARIABLES)
        if not sampler.same_layout(design_r):
            raise ValueError(f"{source}: the sampler was compiled for another design layout")
        row_of = {label: truth_labels.index(label) for label in design_r.settings}
        # pooled law
        if design_r.successes is None:
            raise ValueError(f"{source}: coverage needs a success-count outcome")
        fit = sampler.fit(design_r.successes, seed=int(fit_seeds[r]))
        timing["pooled_s"] += fit.seconds
        fits.append(
            {REDRAW: r, SECONDS: fit.seconds, DIVERGENCES: fit.divergences, **fit.convergence()}
        )
        alpha = fit.posterior[names.ALPHA].stack(sample=(names.CHAIN_DIM, names.DRAW_DIM))
        lo, hi = equal_tailed(alpha.transpose("sample", ...).values, prob)
        for s, label in enumerate(alpha[names.SETTING_DIM].values.tolist()):
            for a, axis in enumerate(alpha[names.AXIS_DIM].values.tolist()):
                t = float(true_alpha[row_of[label], axes.index(axis)])
                records.append(
                    _record(r, POOLED, SETTING_LEVEL, label, axis, t, lo[s, a], hi[s, a])
                )
        pop = fit.posterior[names.ALPHA_POP].stack(sample=(names.CHAIN_DIM, names.DRAW_DIM))
        plo, phi = equal_tailed(pop.transpose("sample", ...).values, prob)
        for a, axis in enumerate(pop[names.AXIS_DIM].values.tolist()):
            t = float(truth.alpha_pop[axes.index(axis)])
            records.append(_record(r, POOLED, POPULATION_LEVEL, "", axis, t, plo[a], phi[a]))
        # bootstrap baseline
        start = time.perf_counter()
        boot = bootstrap_fit(frame, spec, n_boot=n_boot, prob=prob, seed=int(boot_seeds[r]))
        timing["bootstrap_s"] += time.perf_counter() - start
        for row in boot.exponents.itertuples(index=False):
            t = float(true_alpha[row_of[str(row.setting)], axes.index(str(row.axis))])
            records.append(
                _record(
                    r,
                    BOOTSTRAP,
                    SETTING_LEVEL,
                    str(row.setting),
                    str(row.axis),
                    t,
                    float(row.lower),
                    float(row.upper),
                )
            )
        medians = boot.replicates.groupby(["axis", "replicate"])["alpha"].median()
        for axis, values in medians.groupby(level="axis"):
            blo, bhi = equal_tailed(values.to_numpy(), prob)
            t = float(truth.alpha_pop[axes.index(str(axis))])
            records.append(
                _record(r, BOOTSTRAP, POPULATION_LEVEL, "", str(axis), t, float(blo), float(bhi))
            )
        if progress is not None:
            done = pd.DataFrame([x for x in records if x[REDRAW] == r])
            text = ", ".join(
                f"{m} {lvl} {g[COVERED].mean():.2f}"
                for (m, lvl), g in done.groupby([ESTIMATOR, LEVEL])
            )
            progress(
                f"redraw {r + 1}/{n_redraws}: pooled {fit.seconds:.1f} s, {fit.divergences} "
                f"divergences, max R-hat {fits[-1][MAX_RHAT]:.3f}, min bulk ESS "
                f"{fits[-1][MIN_ESS]:.0f}; coverage {text}"
            )
    assert sampler is not None
    config = sampler.config
    timing["compile_s"] = float(sampler.compile_seconds or 0.0)
    frame_records = pd.DataFrame(records)
    return CoverageResult(
        records=frame_records,
        summary=summarize_coverage(frame_records),
        fits=pd.DataFrame(fits),
        timing=timing,
        config={
            "n_redraws": n_redraws,
            "settings": len(truth.settings),
            "rows": len(frame0),
            "chains": config.chains,
            "tune": config.tune,
            "draws": config.draws,
            "target_accept": config.accept,
            "n_boot": n_boot,
            "prob": prob,
            "seed": seed,
        },
    )


# --- output ----------------------------------------------------------------------------------


def write_json(payload: Mapping[str, Any], path: str | Path, overwrite: bool = False) -> Path:
    """Write JSON atomically (temporary file in the same folder, then rename); refuse to
    replace an existing file unless ``overwrite``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass --force (overwrite=True) to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(payload, handle, indent=1, default=_json_default)
            handle.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
