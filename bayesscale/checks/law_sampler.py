"""A law model's sampler compiled once per design, for studies that refit many datasets.

``pm.sample(nuts_sampler="numpyro")`` builds a new JAX function and so recompiles on every
call. :class:`CompiledLawSampler` instead compiles the package's own sampler
(:mod:`bayesscale.sampling`) once per design, with the observed outcome an *argument* of the
compiled program: refitting a new dataset of the same design reuses it. :func:`cached_sampler`
keeps one per layout in each process, so a Ray worker compiles once for all its jobs.

Example
-------
>>> sampler = CompiledLawSampler.for_design(design, FitConfig(chains=2))  # doctest: +SKIP
>>> fit = sampler.fit(design.successes, seed=1)  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray

from bayesscale import names
from bayesscale.checks.calibration_io import LOG_LIKELIHOOD, MAX_RHAT, MIN_ESS
from bayesscale.data.observations import Design
from bayesscale.sampling.config import OWN_SAMPLERS
from bayesscale.sampling.diagnostics import convergence_of
from bayesscale.sampling.engine import CompiledSampler, RunSettings
from bayesscale.sampling.jaxconfig import configure
from bayesscale.sampling.logdensity import LogDensity

if TYPE_CHECKING:
    import pymc as pm

    from bayesscale.law.inference import FitConfig

Array = NDArray[np.float64]


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
        check = convergence_of(self.posterior)
        return {MAX_RHAT: check.max_rhat, MIN_ESS: check.min_ess_bulk}


class CompiledLawSampler:
    """bayesscale's sampler (:mod:`bayesscale.sampling`) on a law model, compiled once; the
    observed outcome is an *argument* of the compiled program, so :meth:`fit` on a new
    dataset of the same design does not recompile.

    Each fit takes ``config.tune`` warm-up and ``config.draws`` draws per chain (no ESS target:
    calibration needs equal-length runs). With ``LOG_LIKELIHOOD`` among ``var_names``
    each fit also returns ``log p(y | theta)`` of its data at every draw
    (:meth:`log_likelihood`).

    >>> sampler = CompiledLawSampler(build_law_model(design), FitConfig(chains=2))  # doctest: +SKIP
    >>> fit = sampler.fit(design.successes, seed=1)  # doctest: +SKIP
    """

    def __init__(
        self, model: pm.Model, config: FitConfig, var_names: Sequence[str] | None = None
    ) -> None:
        if config.sampler not in OWN_SAMPLERS:
            raise ValueError(
                f"CompiledLawSampler runs bayesscale's own sampler ({' or '.join(OWN_SAMPLERS)}); "
                f"got sampler={config.sampler!r}"
            )
        configure(config.chains)
        self.model, self.config = model, config
        self.var_names = list(var_names or [names.ALPHA_POP, names.ALPHA])
        self.density = LogDensity.from_model(model, observed_as_input=True)
        self._free = [rv.name for rv in model.free_RVs]
        self._loglik: Callable[..., Any] | None = None
        if LOG_LIKELIHOOD in self.var_names:
            self._loglik = _log_likelihood_function(model)
        missing = set(self.var_names) - set(self.density.var_names) - {LOG_LIKELIHOOD}
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
                if v != LOG_LIKELIHOOD
            }
        )
        if self._loglik is not None:
            chains, draws = result.posterior[self._free[0]].shape[:2]
            flat = [
                np.reshape(
                    result.posterior[v], (chains * draws, *np.shape(result.posterior[v])[2:])
                )
                for v in self._free
            ]
            values = np.asarray(self._loglik(flat, data[0]), dtype=float).reshape(chains, draws)
            posterior[LOG_LIKELIHOOD] = ((names.CHAIN_DIM, names.DRAW_DIM), values)
        posterior = posterior.assign_coords({d: coords[d] for d in posterior.dims if d in coords})
        return QuickFit(
            posterior=posterior,
            divergences=int(result.stats["diverging"].sum()),
            mean_steps=float(result.stats["n_steps"].mean()),
            seconds=seconds,
        )

    def log_likelihood(self, values: Mapping[str, ArrayLike], observed: ArrayLike) -> float:
        """``log p(y | theta)``: the data's log-likelihood at one point ``values`` (every free
        random variable on its own scale, by name; ``-inf`` where the likelihood is invalid).
        Needs ``LOG_LIKELIHOOD`` among the sampler's ``var_names``."""
        if self._loglik is None:
            raise ValueError(f"the sampler was built without {LOG_LIKELIHOOD!r} in var_names")
        y = np.asarray(observed).astype(self._dtype).reshape(self._shape)
        point = [np.asarray(values[v], dtype=float)[None] for v in self._free]
        return float(np.asarray(self._loglik(point, y))[0])


def _log_likelihood_function(model: pm.Model) -> Callable[..., Any]:
    """Compile ``(free RV values batched over draws, observed) -> sum_i log p(y_i | theta)``
    in JAX from the model's own likelihood graph (NaN, an invalid parameter, reads as
    ``-inf``)."""
    configure()
    import jax
    import jax.numpy as jnp
    import pymc as pm
    import pytensor.tensor as pt
    from pymc.sampling.jax import get_jaxified_graph
    from pytensor.graph.replace import clone_replace

    observed_rv = model[names.OUTCOME]
    y = observed_rv.type()
    total = pt.sum(pm.logp(observed_rv, y))
    inputs = [rv.type() for rv in model.free_RVs]
    [out] = clone_replace([total], replace=dict(zip(model.free_RVs, inputs, strict=True)))
    graph = get_jaxified_graph(inputs=[*inputs, y], outputs=[out])

    def one(values: Any, data: Any) -> Any:
        [value] = graph(*values, data)
        return jnp.where(jnp.isnan(value), -jnp.inf, value)

    batched = jax.jit(jax.vmap(one, in_axes=(0, None)))

    def loglik(values: list[np.ndarray], data: np.ndarray) -> Array:
        return np.asarray(batched([jnp.asarray(v) for v in values], jnp.asarray(data)))

    return loglik


# compiled samplers of this process, by layout: a Ray worker compiles once for all its jobs
_SAMPLERS: dict[tuple[Any, ...], CompiledLawSampler] = {}


def _sampler_key(design: Design, config: FitConfig, var_names: Sequence[str]) -> tuple[Any, ...]:
    trials = None if design.trials is None else design.trials.tobytes()
    return (
        design.spec.text,
        tuple(design.settings),
        np.asarray(design.sizes).tobytes(),
        np.asarray(design.setting_index).tobytes(),
        trials,
        repr(config),
        tuple(var_names),
    )


def cached_sampler(
    design: Design, config: FitConfig, var_names: Sequence[str]
) -> CompiledLawSampler:
    """This process's :class:`CompiledLawSampler` for ``design``'s layout, ``config`` and
    ``var_names``, compiled on first use (every job a worker runs reuses it)."""
    key = _sampler_key(design, config, var_names)
    if key not in _SAMPLERS:
        _SAMPLERS[key] = CompiledLawSampler.for_design(design, config, var_names)
    return _SAMPLERS[key]


def keep_sampler(sampler: CompiledLawSampler) -> None:
    """Make ``sampler`` (built with :meth:`CompiledLawSampler.for_design`) the one
    :func:`cached_sampler` returns in this process for its design, configuration and
    variables: serial jobs then reuse it instead of compiling another."""
    if sampler.design is None:
        raise ValueError("the sampler has no design (build it with for_design)")
    _SAMPLERS[_sampler_key(sampler.design, sampler.config, sampler.var_names)] = sampler
