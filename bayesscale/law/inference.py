"""Fitting: sampler choice, diagnostics, and saving fits as ArviZ DataTrees in netCDF.

The default sampler is bayesscale's own (:mod:`bayesscale.sampling`): MAMS transitions
(:mod:`bayesscale.sampling.mams`) on the PyMC model's JAX log density, nutpie-style mass
adaptation, chains in parallel on XLA host devices, and draws until every stored quantity
reaches the ESS target; ``nuts`` is the same driver with NumPyro's NUTS trees. ``numpyro``
(PyMC's ``pm.sample(nuts_sampler="numpyro")``), ``nutpie`` and ``pymc`` (PyMC's own NUTS)
are selectable and run a fixed number of draws. JAX is configured by
:func:`bayesscale.sampling.jaxconfig.configure`, called here before the first JAX computation.

Example
-------
>>> tree = fit(load_observations(path, spec), spec, FitConfig(seed=1))  # doctest: +SKIP
>>> save_fit(tree, "fit.nc")  # doctest: +SKIP
>>> report = diagnose(tree)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pymc as pm
import xarray as xr

from bayesscale import names
from bayesscale.data.extrapolation import SweptRange
from bayesscale.data.fitfile import fit_attrs, keep_convergence
from bayesscale.data.observations import Design, Table, prepare
from bayesscale.data.spec import ModelSpec
from bayesscale.law.model import build_law_model, top_level_priors
from bayesscale.sampling import configure
from bayesscale.sampling.config import (
    MAMS_KERNEL,
    OWN_SAMPLERS,
    FitConfig,
)
from bayesscale.sampling.jaxconfig import release_compiled
from bayesscale.sampling.logdensity import LogDensity
from bayesscale.sampling.progress import Progress

SAMPLE_DIMS = (names.CHAIN_DIM, names.DRAW_DIM)


@dataclass
class Timing:
    """Wall-clock seconds of one sampling run; ``compile`` is the time spent compiling where
    the sampler reports it."""

    wall: float
    sampling: float | None
    compile_seconds: float | None = None
    warmup: float | None = None

    @property
    def compile(self) -> float | None:
        if self.compile_seconds is not None:
            return self.compile_seconds
        return None if self.sampling is None else max(self.wall - self.sampling, 0.0)


def sample(
    model: pm.Model,
    config: FitConfig,
    label: str = "fit",
    per_draw: Mapping[str, Any] | None = None,
) -> tuple[xr.DataTree, Timing]:
    """Sample ``model`` with the configured sampler; return the DataTree and timing.

    The tree has ``posterior``, ``sample_stats`` and ``observed_data``. ``per_draw`` names
    graphs of the model's value variables that the package's own samplers evaluate at every
    draw, into the in-memory group ``names.PER_DRAW_GROUP``; the other samplers and the
    preview ignore them. A ``KeyboardInterrupt`` (Ctrl-C) stops the default sampler within
    about half a second and propagates.
    """
    configure(config.chains)
    release_compiled()  # the programs of earlier fits in this process (memory maps)
    if config.preview:
        return _preview(model, config, label)
    if config.sampler in OWN_SAMPLERS:
        return _sample_own(model, config, label, per_draw)
    return _sample_pymc(model, config)


def _preview(model: pm.Model, config: FitConfig, label: str) -> tuple[xr.DataTree, Timing]:
    """A Laplace approximation in place of sampling (``--preview``): one "chain" of
    independent draws from the Gaussian at the mode. Marked as a preview by :func:`fit`."""
    from bayesscale.sampling.laplace import laplace

    start = time.perf_counter()
    progress = Progress(label, enabled=config.progress)
    density = LogDensity.from_model(model)
    result = laplace(density, draws=config.draws * config.chains, seed=config.seed)
    draws = config.draws * config.chains
    posterior = _posterior_dataset(result.posterior, density)
    posterior.attrs = {"inference_library": "bayesscale (Laplace approximation, preview)"}
    stats = xr.Dataset(
        {"diverging": ((names.CHAIN_DIM, names.DRAW_DIM), np.zeros((1, draws), dtype=bool))},
        coords={names.CHAIN_DIM: [0], names.DRAW_DIM: np.arange(draws)},
    )
    tree = xr.DataTree.from_dict(
        {"posterior": posterior, "sample_stats": stats, "observed_data": _observed_data(model)}
    )
    wall = time.perf_counter() - start
    mode = "mode found" if result.converged else f"MODE NOT FOUND ({result.message})"
    progress.close(
        f"PREVIEW: Laplace approximation, {draws} draws in {wall:.1f} s "
        f"({mode} after {result.iterations} L-BFGS iterations); not a posterior sample"
    )
    return tree, Timing(wall=wall, sampling=None, compile_seconds=result.compile_seconds)


def _posterior_dataset(draws: dict[str, np.ndarray], density: Any) -> xr.Dataset:
    """Draws ``(chain, draw, ...)`` of the stored quantities, with the model's dims."""
    posterior = xr.Dataset(
        {
            name: ((names.CHAIN_DIM, names.DRAW_DIM, *_dims(name, value, density.dims)), value)
            for name, value in draws.items()
        }
    )
    chains, n = next(iter(draws.values())).shape[:2]
    coords = {names.CHAIN_DIM: np.arange(chains), names.DRAW_DIM: np.arange(n), **density.coords}
    return posterior.assign_coords({d: v for d, v in coords.items() if d in posterior.dims})


def _sample_own(
    model: pm.Model, config: FitConfig, label: str, per_draw: Mapping[str, Any] | None = None
) -> tuple[xr.DataTree, Timing]:
    from bayesscale.sampling.engine import CompiledSampler, RunSettings

    start = time.perf_counter()
    progress = Progress(label, enabled=config.progress)
    density = LogDensity.from_model(model, per_draw=per_draw)
    sampler = CompiledSampler.from_config(density, config)
    result = sampler.run(RunSettings.from_config(config), progress=progress)
    chains, draws = result.stats["diverging"].shape
    posterior = _posterior_dataset(result.posterior, density)
    wall = time.perf_counter() - start
    posterior.attrs = {
        "sampling_time": round(result.sampling_seconds, 3),
        "tuning_steps": config.tune,
        "inference_library": (
            "bayesscale (MAMS)"
            if config.kernel == MAMS_KERNEL
            else "bayesscale (NumPyro NUTS trees)"
        ),
    }
    stats = xr.Dataset(
        {k: ((names.CHAIN_DIM, names.DRAW_DIM), v) for k, v in result.stats.items()},
        coords={names.CHAIN_DIM: np.arange(chains), names.DRAW_DIM: np.arange(draws)},
    )
    groups = {
        "posterior": posterior,
        "sample_stats": stats,
        "observed_data": _observed_data(model),
    }
    if result.per_draw:
        groups[names.PER_DRAW_GROUP] = xr.Dataset(
            {  # a term's shape need not be its variable's (a multivariate prior's is not)
                name: ((names.CHAIN_DIM, names.DRAW_DIM, *_dims(name, v, {})), v)
                for name, v in result.per_draw.items()
            },
            coords={names.CHAIN_DIM: np.arange(chains), names.DRAW_DIM: np.arange(draws)},
        )
    tree = xr.DataTree.from_dict(groups)
    if result.convergence is not None:
        keep_convergence(tree, result.convergence)
    summary = (
        f"{chains} chains x {draws} draws in {wall:.1f} s (compile {result.compile_seconds:.1f} s, "
        f"warm-up {result.warmup_seconds:.1f} s, sampling {result.sampling_seconds:.1f} s), "
        f"{int(result.stats['diverging'].sum())} divergences"
    )
    progress.close(summary)
    return tree, Timing(
        wall=wall,
        sampling=result.sampling_seconds,
        compile_seconds=result.compile_seconds,
        warmup=result.warmup_seconds,
    )


def _dims(name: str, value: np.ndarray, dims: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    named = tuple(dims.get(name, ()))
    return named + tuple(f"{name}_dim_{i}" for i in range(len(named), np.ndim(value) - 2))


def _observed_data(model: pm.Model) -> xr.Dataset:
    data = {}
    for rv in model.observed_RVs:
        value = model.rvs_to_values[rv]
        array = np.asarray(value.data if hasattr(value, "data") else value.get_value())
        dims = tuple(model.named_vars_to_dims.get(rv.name, ()) or ())
        dims = dims + tuple(f"{rv.name}_dim_{i}" for i in range(len(dims), array.ndim))
        data[rv.name] = (dims, array)
    ds = xr.Dataset(data)
    coords = {d: list(v) for d, v in model.coords.items() if v is not None and d in ds.dims}
    return ds.assign_coords(coords)


def _sample_pymc(model: pm.Model, config: FitConfig) -> tuple[xr.DataTree, Timing]:
    kwargs: dict[str, object] = {}
    if config.sampler == "pymc":
        kwargs["cores"] = min(config.chains, os.cpu_count() or 1)
        # JAX is multithreaded: a plain fork of this process can deadlock, so PyMC's worker
        # processes come from a fresh forkserver.
        kwargs["mp_ctx"] = "forkserver"
    start = time.perf_counter()
    with model, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        tree = pm.sample(
            draws=config.draws,
            tune=config.tune,
            chains=config.chains,
            target_accept=config.accept,
            random_seed=config.seed,
            nuts_sampler=config.sampler,
            progressbar=config.progress,
            compute_convergence_checks=False,
            **kwargs,
        )
    _pymc_notes(caught, config.progress)
    wall = time.perf_counter() - start
    sampling = tree["posterior"].attrs.get("sampling_time")
    return tree, Timing(wall=wall, sampling=float(sampling) if sampling is not None else None)


def _pymc_notes(caught: list[warnings.WarningMessage], show: bool) -> None:
    """PyMC's warnings (draw counts and the like) as one-line notes; others re-raised."""
    note = Progress("fit", enabled=show)
    for w in caught:
        text = str(w.message).strip().splitlines()[0] if str(w.message).strip() else ""
        if issubclass(w.category, UserWarning) and "samples per chain" in text:
            note.note(f"note: {text}")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _constant_data(design: Design, table: Table) -> xr.Dataset:
    spec = design.spec
    data: dict[str, tuple] = {
        names.REFERENCE_SCALE: ((names.AXIS_DIM,), design.reference),
    }
    frame = table.frame
    if spec.setting_keys:
        from bayesscale.data.observations import setting_labels

        labels = setting_labels(frame, spec)
        first = frame.groupby(labels.to_numpy(), sort=False).head(1)
        first = first.set_axis(labels[first.index].to_numpy()).reindex(list(design.settings))
        for key in spec.setting_keys:
            data[key] = ((names.SETTING_DIM,), first[key].astype(str).to_numpy())
    if design.model_size is not None and design.size_reference is not None:
        data[names.PARAMS_B] = ((names.SETTING_DIM,), design.model_size)
        data[names.SIZE_REFERENCE] = ((), design.size_reference)
    coords = {names.AXIS_DIM: list(spec.axis_names), names.SETTING_DIM: list(design.settings)}
    swept = SweptRange.of_rows(spec.axis_names, design.settings, design.setting_index, design.sizes)
    return xr.merge([xr.Dataset(data, coords=coords), swept.dataset()])


def fit(table: Table, spec: ModelSpec, config: FitConfig | None = None) -> xr.DataTree:
    """Fit the pooled law of ``spec`` to a validated observation table."""
    config = config or FitConfig()
    design = prepare(table, spec)
    model = build_law_model(design)
    tree, timing = sample(model, config, per_draw=log_density_terms(model))
    draws = int(tree["posterior"].sizes[names.DRAW_DIM])
    posterior = tree["posterior"].to_dataset()
    if names.PER_DRAW_GROUP in tree.children:
        log_prior, log_likelihood = _log_densities_of_terms(
            tree[names.PER_DRAW_GROUP].to_dataset(),
            tree["sample_stats"].to_dataset()["lp"],
            posterior,
        )
    else:
        log_prior, log_likelihood = log_densities(model, posterior)
    keep = {
        "posterior": posterior,
        "sample_stats": tree["sample_stats"]
        .to_dataset()
        .assign({names.LOG_LIKELIHOOD_TOTAL: log_likelihood}),
        "observed_data": tree["observed_data"].to_dataset(),
        "constant_data": _constant_data(design, table),
        names.LOG_PRIOR_GROUP: log_prior,
    }
    out = xr.DataTree.from_dict(keep)
    out.attrs = {
        **fit_attrs(names.KIND_LAW_FIT, spec.text, table.sha256, table.source),
        names.ATTR_PRIOR_SCALE: spec.exponent_prior_scale,
        **sampler_attrs(config, draws, timing),
    }
    if names.ATTR_CONVERGENCE in tree.attrs:  # the sampler's last check, made on these draws
        out.attrs[names.ATTR_CONVERGENCE] = tree.attrs[names.ATTR_CONVERGENCE]
    return add_log_likelihood(out, table) if stores_log_likelihood(out) else out


# the pointwise log-likelihood (chains x draws x rows values) is stored in float64 up to this
# many values (16 MB), in float32 above: the reference fit (1,008 rows, about 3,000 draws)
# holds 3 million, 12 MB as float32. float32 keeps each value to about 1e-7 relative, far
# below anything PSIS-LOO or a comparison of fits can resolve.
LOG_LIKELIHOOD_FLOAT64_MAX_VALUES = 2_000_000


def stores_log_likelihood(tree: xr.DataTree) -> bool:
    """Whether :func:`fit` stores the pointwise log-likelihood of ``tree``: every sampled fit,
    not a preview (whose few draws no LOO should read)."""
    return not int(tree.attrs.get(names.ATTR_PREVIEW, 0))


def add_log_likelihood(tree: xr.DataTree, table: Table) -> xr.DataTree:
    """``tree`` with ArviZ's ``log_likelihood`` group: ``outcome`` (chain, draw, obs), each
    row's log-likelihood at each draw (:func:`bayesscale.law.predict.pointwise_log_likelihood`;
    float32 above ``LOG_LIKELIHOOD_FLOAT64_MAX_VALUES`` values), what ``arviz_stats.loo``
    reads; unchanged (without it) where a value is not finite, for then LOO is undefined."""
    from bayesscale.law.predict import pointwise_log_likelihood

    log_lik = pointwise_log_likelihood(tree, table)
    if not np.all(np.isfinite(log_lik.to_numpy())):
        return tree
    if log_lik.size > LOG_LIKELIHOOD_FLOAT64_MAX_VALUES:
        log_lik = log_lik.astype(np.float32)
    out = tree.copy()
    out[names.LOG_LIKELIHOOD_GROUP] = xr.DataTree(xr.Dataset({names.OUTCOME: log_lik}))
    return out


# the per-draw term that is not a top-level prior: the model's log density less its
# likelihood (every free variable's prior with its transform's Jacobian, and the potentials)
WITHOUT_LIKELIHOOD = "log_density_without_likelihood"


def log_density_terms(model: pm.Model) -> dict[str, Any]:
    """Graphs of the model's value variables that a fit evaluates at every draw: the log
    prior density of each top-level free variable (:func:`bayesscale.law.model.top_level_priors`;
    elementwise, on the variable's own scale, without the Jacobian of the sampler's transform),
    and ``WITHOUT_LIKELIHOOD``,

    .. math::

        \\log p(\\theta) + \\log |J(\\theta)| + \\textstyle\\sum \\text{potentials}
        = \\text{lp} - \\log p(y \\mid \\theta),

    from which :func:`fit` takes the log-likelihood summed over rows as the draw's ``lp`` (the
    sampler's log density) less this: no row of the likelihood is evaluated again.

    >>> sorted(log_density_terms(model))  # doctest: +SKIP
    ['log_alpha_pop', ..., 'log_density_without_likelihood', ...]
    """
    priors = top_level_priors(model)
    if WITHOUT_LIKELIHOOD in priors:
        raise ValueError(f"a model variable is named {WITHOUT_LIKELIHOOD!r}: rename it")
    terms = model.logp(vars=[model[n] for n in priors], jacobian=False, sum=False)
    rest = model.logp(vars=[*model.free_RVs, *model.potentials], jacobian=True, sum=True)
    return {**dict(zip(priors, terms, strict=True)), WITHOUT_LIKELIHOOD: rest}


def _log_densities_of_terms(
    terms: xr.Dataset, lp: xr.DataArray, posterior: xr.Dataset
) -> tuple[xr.Dataset, xr.DataArray]:
    """The fit's ``log_prior`` group and log-likelihood total from the per-draw terms of
    :func:`log_density_terms`, evaluated by the sampler, and its log density ``lp``."""
    coords = {d: posterior.coords[d] for d in SAMPLE_DIMS}

    def dims(name: str) -> tuple[str, ...]:  # the variable's, where the term has its shape
        own = posterior[name]
        chosen = own.dims if terms[name].shape == own.shape else terms[name].dims
        return tuple(str(d) for d in chosen)

    prior = xr.Dataset(
        {
            str(name): (dims(str(name)), terms[name].to_numpy())
            for name in terms.data_vars
            if name != WITHOUT_LIKELIHOOD
        }
    )
    prior = prior.assign_coords(
        {d: posterior.coords[d] for d in prior.dims if d in posterior.coords}
    )
    total = xr.DataArray(
        lp.to_numpy() - terms[WITHOUT_LIKELIHOOD].to_numpy(),
        dims=SAMPLE_DIMS,
        coords=coords,
        name=names.LOG_LIKELIHOOD_TOTAL,
    )
    return prior, total


def log_densities(model: pm.Model, posterior: xr.Dataset) -> tuple[xr.Dataset, xr.DataArray]:
    """Per draw: the log prior density of each top-level free variable (as
    :func:`log_density_terms`), and the log-likelihood summed over the observed rows, by
    PyMC's ``compute_log_prior`` and ``compute_log_likelihood``, one draw at a time (about
    3 s on the reference fit). With both, :mod:`bayesscale.law.sensitivity` runs ArviZ's
    power-scaling sensitivity check without PyMC; together they are a few percent of the fit
    file (the pointwise log-likelihood would be three times the posterior's size). The
    package's own samplers evaluate them at every draw instead (:func:`log_density_terms`);
    this path serves fits by PyMC's samplers and previews. ``tests/law/test_sensitivity.py``
    holds what a fit stores equal to PyMC's."""
    from pymc.stats import compute_log_likelihood, compute_log_prior

    tree = xr.DataTree.from_dict({"posterior": posterior})
    options: dict[str, Any] = {"model": model, "extend_inferencedata": False, "progressbar": False}
    prior = compute_log_prior(tree, var_names=top_level_priors(model), **options)
    pointwise = compute_log_likelihood(tree, **options)
    total = sum(
        (
            da.sum([d for d in da.dims if d not in SAMPLE_DIMS])
            for da in pointwise.data_vars.values()
        ),
        start=xr.zeros_like(posterior[names.CHAIN_DIM] * posterior[names.DRAW_DIM], dtype=float),
    )
    prior.attrs = {}
    return prior, total.rename(names.LOG_LIKELIHOOD_TOTAL)


def sampler_attrs(config: FitConfig, draws: int, timing: Timing) -> dict[str, Any]:
    """How a fit was sampled, as root attributes: ``draws`` is what the posterior holds per
    chain (with an ESS target it can exceed ``config.draws``); a preview's sampler is the
    Laplace approximation that made it, whatever ``config.sampler`` says."""
    return {
        names.ATTR_SAMPLER: names.SAMPLER_PREVIEW if config.preview else config.sampler,
        names.ATTR_SEED: config.seed,
        names.ATTR_PREVIEW: int(config.preview),
        "chains": config.chains,
        "draws": draws,
        "tune": config.tune,
        "target_accept": config.accept,
        "ess_target": config.ess_target,
        "wall_seconds": round(timing.wall, 3),
        "compile_seconds": round(timing.compile or 0.0, 3),
    }
