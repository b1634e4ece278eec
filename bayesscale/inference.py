"""Fitting: sampler choice, diagnostics, and saving fits as ArviZ DataTrees in netCDF.

The default sampler is bayesscale's own NUTS driver (:mod:`bayesscale.sampling`): NumPyro's
tree building on the PyMC model's JAX log density, nutpie-style mass adaptation, chains in
parallel on XLA host devices, and draws until every stored quantity reaches the ESS target.
``numpyro`` (PyMC's ``pm.sample(nuts_sampler="numpyro")``), ``nutpie`` and ``pymc`` (PyMC's
own NUTS) are selectable and run a fixed number of draws. JAX is configured by
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pymc as pm
import xarray as xr

from bayesscale import __version__, names
from bayesscale.atomic import write_atomically
from bayesscale.extrapolation import SweptRange
from bayesscale.models import build_law_model, top_level_priors
from bayesscale.observations import Design, Table, prepare
from bayesscale.sampling import configure
from bayesscale.sampling.config import (
    DEFAULT_SAMPLER,
    ESS_TARGET,
    FitConfig,
)
from bayesscale.sampling.diagnostics import convergence_of
from bayesscale.sampling.progress import Progress
from bayesscale.spec import ModelSpec, parse_spec

SAMPLE_DIMS = (names.CHAIN_DIM, names.DRAW_DIM)
RHAT_MAX = 1.01
ESS_MIN = ESS_TARGET
FORMAT_VERSION = 1
ATTR_FORMAT = "bayesscale_format"


class FitFileError(ValueError):
    """A file is not a fit this version of bayesscale can read."""


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


def sample(model: pm.Model, config: FitConfig, label: str = "fit") -> tuple[xr.DataTree, Timing]:
    """Run NUTS on ``model`` with the configured sampler; return the DataTree and timing.

    The tree has ``posterior``, ``sample_stats`` and ``observed_data``. A ``KeyboardInterrupt``
    (Ctrl-C) stops the default sampler within about half a second and propagates.
    """
    configure(config.chains)
    if config.preview:
        return _preview(model, config, label)
    if config.sampler == DEFAULT_SAMPLER:
        return _sample_own(model, config, label)
    return _sample_pymc(model, config)


def _preview(model: pm.Model, config: FitConfig, label: str) -> tuple[xr.DataTree, Timing]:
    """A Laplace approximation in place of sampling (``--preview``): one "chain" of
    independent draws from the Gaussian at the mode. Marked as a preview by :func:`fit`."""
    from bayesscale.sampling.laplace import laplace
    from bayesscale.sampling.logdensity import LogDensity

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


def _sample_own(model: pm.Model, config: FitConfig, label: str) -> tuple[xr.DataTree, Timing]:
    from bayesscale.sampling.engine import CompiledNuts, NutsSettings
    from bayesscale.sampling.logdensity import LogDensity

    start = time.perf_counter()
    progress = Progress(label, enabled=config.progress)
    density = LogDensity.from_model(model)
    sampler = CompiledNuts(density, chains=config.chains, target_accept=config.target_accept)
    settings = NutsSettings(
        tune=config.tune,
        draws=config.draws,
        seed=config.seed,
        ess_target=config.ess_target,
        max_draws=config.max_draws,
    )
    result = sampler.run(settings, progress=progress)
    chains, draws = result.stats["diverging"].shape
    posterior = _posterior_dataset(result.posterior, density)
    wall = time.perf_counter() - start
    posterior.attrs = {
        "sampling_time": round(result.sampling_seconds, 3),
        "tuning_steps": config.tune,
        "inference_library": "bayesscale (NumPyro NUTS trees)",
    }
    stats = xr.Dataset(
        {k: ((names.CHAIN_DIM, names.DRAW_DIM), v) for k, v in result.stats.items()},
        coords={names.CHAIN_DIM: np.arange(chains), names.DRAW_DIM: np.arange(draws)},
    )
    tree = xr.DataTree.from_dict(
        {"posterior": posterior, "sample_stats": stats, "observed_data": _observed_data(model)}
    )
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
            target_accept=config.target_accept,
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
        from bayesscale.observations import setting_labels

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
    tree, timing = sample(model, config)
    draws = int(tree["posterior"].sizes[names.DRAW_DIM])
    posterior = tree["posterior"].to_dataset()
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
        ATTR_FORMAT: FORMAT_VERSION,
        names.ATTR_KIND: names.KIND_LAW_FIT,
        names.ATTR_VERSION: __version__,
        names.ATTR_SPEC: spec.text,
        names.ATTR_DATA_HASH: table.sha256,
        names.ATTR_DATA_SOURCE: table.source,
        names.ATTR_SAMPLER: config.sampler,
        names.ATTR_SEED: config.seed,
        names.ATTR_PRIOR_SCALE: spec.exponent_prior_scale,
        **sampler_attrs(config, draws, timing),
    }
    return out


def log_densities(model: pm.Model, posterior: xr.Dataset) -> tuple[xr.Dataset, xr.DataArray]:
    """Per draw: the log prior density of each top-level free variable
    (:func:`bayesscale.models.top_level_priors`; elementwise, on the variable's own scale,
    without the Jacobian of the sampler's transform), and the log-likelihood summed over the
    observed rows. With both, :mod:`bayesscale.sensitivity` runs ArviZ's power-scaling
    sensitivity check without PyMC; together they are a few percent of the fit file (the
    pointwise log-likelihood would be three times the posterior's size)."""
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
    chain (with an ESS target it can exceed ``config.draws``)."""
    return {
        names.ATTR_PREVIEW: int(config.preview),
        "chains": config.chains,
        "draws": draws,
        "tune": config.tune,
        "target_accept": config.target_accept,
        "ess_target": config.ess_target,
        "wall_seconds": round(timing.wall, 3),
        "compile_seconds": round(timing.compile or 0.0, 3),
    }


def fit_spec(tree: xr.DataTree) -> ModelSpec:
    """The model spec a fit was made with (parsed from its attributes)."""
    return parse_spec(str(tree.attrs[names.ATTR_SPEC]), source="<spec stored in fit>")


# --- diagnostics ----------------------------------------------------------------------------


@dataclass
class Diagnostics:
    """Convergence summary over every free and derived parameter of the posterior."""

    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    divergences: int
    draws: int
    worst: dict[str, str] = field(default_factory=dict)
    preview: bool = False

    @property
    def ok(self) -> bool:
        return (
            not self.preview
            and self.max_rhat <= RHAT_MAX
            and self.min_ess_bulk >= ESS_MIN
            and self.min_ess_tail >= ESS_MIN
            and self.divergences == 0
        )

    def problems(self) -> list[str]:
        """What failed, each with what to try."""
        out = []
        if self.preview:
            out.append(
                "this is a PREVIEW (--preview): draws from the Laplace approximation at the "
                "posterior mode, not a posterior sample; R-hat and ESS say nothing about it. "
                "Refit without --preview before drawing conclusions."
            )
        if self.divergences:
            out.append(
                f"{self.divergences} divergent transitions: the posterior has regions NUTS cannot "
                "follow. Try --target-accept 0.95 or 0.99, tighter priors in the spec, or check "
                "that every swept axis has enough distinct values per setting."
            )
        if self.max_rhat > RHAT_MAX:
            out.append(
                f"max R-hat {self.max_rhat:.3f} > {RHAT_MAX} (worst: {self.worst.get('rhat')}): "
                "chains disagree. Try more --tune and --draws, or a simpler spec."
            )
        if min(self.min_ess_bulk, self.min_ess_tail) < ESS_MIN:
            out.append(
                f"min bulk/tail ESS {self.min_ess_bulk:.0f}/{self.min_ess_tail:.0f} < {ESS_MIN} "
                f"(worst: {self.worst.get('ess')}): intervals are imprecise. Try more --draws."
            )
        return out

    def headline(self) -> str | None:
        """One line for the top of every output that reads the fit, or ``None`` when the fit
        converged: a preview, or which diagnostics failed."""
        if self.preview:
            return (
                "PREVIEW FIT (Laplace approximation, not a posterior sample): do not draw "
                "conclusions from it; refit without --preview"
            )
        if self.ok:
            return None
        failed = []
        if self.max_rhat != self.max_rhat or self.max_rhat > RHAT_MAX:
            failed.append(f"max R-hat {self.max_rhat:.3f} > {RHAT_MAX}")
        ess = min(self.min_ess_bulk, self.min_ess_tail)
        if ess != ess or ess < ESS_MIN:
            failed.append(f"min ESS {ess:.0f} < {ESS_MIN}")
        if self.divergences:
            failed.append(f"{self.divergences} divergent transitions")
        return f"DIAGNOSTICS FAILED ({', '.join(failed)}): do not trust these numbers yet"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: a statistic that is not defined (R-hat of one chain) is ``None``."""

        def number(x: float) -> float | None:
            return float(x) if np.isfinite(x) else None

        return {
            "max_rhat": number(self.max_rhat),
            "min_ess_bulk": number(self.min_ess_bulk),
            "min_ess_tail": number(self.min_ess_tail),
            "divergences": self.divergences,
            "draws": self.draws,
            "preview": self.preview,
            "ok": self.ok,
            "headline": self.headline(),
        }


def format_diagnostics(d: Mapping[str, Any]) -> str:
    """``max R-hat 1.0045, min bulk ESS 461, min tail ESS 453, divergences 0`` from
    :meth:`Diagnostics.to_dict` (``n/a`` where a statistic is not defined)."""

    def num(key: str, fmt: str) -> str:
        value = d.get(key)
        return "n/a" if value is None else format(value, fmt)

    return (
        f"max R-hat {num('max_rhat', '.4f')}, min bulk ESS {num('min_ess_bulk', '.0f')}, "
        f"min tail ESS {num('min_ess_tail', '.0f')}, divergences {d.get('divergences')}"
    )


def diagnose(tree: xr.DataTree) -> Diagnostics:
    """R-hat, bulk and tail ESS over all posterior variables, and divergences."""
    posterior = tree["posterior"].to_dataset()
    n_draws = int(posterior.sizes[names.CHAIN_DIM] * posterior.sizes[names.DRAW_DIM])
    check = convergence_of(posterior)
    stats = tree["sample_stats"].to_dataset() if "sample_stats" in tree.children else None
    # a tree assembled from draws made elsewhere (tests, synthetic fits) may lack them
    diverging = (
        stats["diverging"] if stats is not None and "diverging" in stats else xr.DataArray(0)
    )
    preview = bool(int(tree.attrs.get(names.ATTR_PREVIEW, 0)))
    return Diagnostics(
        preview=preview,
        max_rhat=check.max_rhat,
        min_ess_bulk=check.min_ess_bulk,
        min_ess_tail=check.min_ess_tail,
        divergences=int(diverging.sum()),
        draws=n_draws,
        worst={"rhat": check.worst_rhat, "ess": check.worst_ess},
    )


# --- saving and loading --------------------------------------------------------------------


def save_fit(tree: xr.DataTree, path: str | Path, overwrite: bool = False) -> Path:
    """Write a fit to netCDF atomically (temporary file in the same folder, then rename)."""
    return write_atomically(path, lambda tmp: tree.to_netcdf(tmp, engine="h5netcdf"), overwrite)


def load_fit(path: str | Path, kind: str = names.KIND_LAW_FIT) -> xr.DataTree:
    """Load a saved fit fully into memory. netCDF holds arrays and attributes only:
    nothing is unpickled. Refuses files that are not bayesscale fits of ``kind``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such fit file")
    if path.is_dir():
        raise FitFileError(f"{path}: is a directory, not a fit file (.nc)")
    try:
        tree = xr.open_datatree(path, engine="h5netcdf").load()
    except (OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise FitFileError(
            f"{path}: not a readable netCDF fit ({reason}); pass a file written by "
            "`bayesscale fit` or `bayesscale price`"
        ) from exc
    found_kind = tree.attrs.get(names.ATTR_KIND)
    if found_kind != kind:
        raise FitFileError(f"{path}: expected a bayesscale {kind!r} file, found {found_kind!r}")
    fmt = int(tree.attrs.get(ATTR_FORMAT, -1))
    if fmt != FORMAT_VERSION:
        raise FitFileError(
            f"{path}: fit format {fmt} written by bayesscale {tree.attrs.get(names.ATTR_VERSION)}; "
            f"this version ({__version__}) reads format {FORMAT_VERSION}. Refit with this version."
        )
    return tree
