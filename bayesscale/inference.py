"""Fitting: sampler choice, diagnostics, and saving fits as ArviZ DataTrees in netCDF.

NumPyro (through PyMC) is the default sampler; its chains run in parallel only when
JAX sees as many host devices as chains, so this module sets
``XLA_FLAGS=--xla_force_host_platform_device_count`` before JAX is first imported.
nutpie and PyMC's own NUTS are selectable.

Example
-------
>>> tree = fit(load_observations(path, spec), spec, FitConfig(seed=1))  # doctest: +SKIP
>>> save_fit(tree, "fit.nc")  # doctest: +SKIP
>>> report = diagnose(tree)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys

HOST_DEVICES = max(4, os.cpu_count() or 1)
if "jax" not in sys.modules and "xla_force_host_platform_device_count" not in os.environ.get(
    "XLA_FLAGS", ""
):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={HOST_DEVICES}"
    ).strip()

import time  # noqa: E402
import warnings  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import xarray as xr  # noqa: E402

from bayesscale import __version__, names  # noqa: E402
from bayesscale.atomic import write_atomically  # noqa: E402
from bayesscale.models import build_law_model  # noqa: E402
from bayesscale.observations import Design, Table, prepare  # noqa: E402
from bayesscale.spec import ModelSpec, parse_spec  # noqa: E402

SAMPLERS = ("numpyro", "nutpie", "pymc")
RHAT_MAX = 1.01
ESS_MIN = 400
FORMAT_VERSION = 1
ATTR_FORMAT = "bayesscale_format"


class FitFileError(ValueError):
    """A file is not a fit this version of bayesscale can read."""


@dataclass(frozen=True)
class FitConfig:
    """How to sample. ``seed`` makes the whole fit reproducible."""

    sampler: str = "numpyro"
    chains: int = 4
    draws: int = 1000
    tune: int = 1000
    target_accept: float = 0.9
    seed: int = 20261129
    progress: bool = True

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.sampler!r}; choose one of {SAMPLERS}")
        if self.chains < 1 or self.draws < 1 or self.tune < 0:
            raise ValueError("chains and draws must be >= 1 and tune >= 0")
        if not 0 < self.target_accept < 1:
            raise ValueError(f"target_accept must be in (0, 1), got {self.target_accept}")


@dataclass
class Timing:
    """Wall-clock seconds of one sampling run; ``compile`` is the time before the first draw
    where the sampler reports it (NumPyro's ``sampling_time`` excludes compilation)."""

    wall: float
    sampling: float | None

    @property
    def compile(self) -> float | None:
        return None if self.sampling is None else max(self.wall - self.sampling, 0.0)


def _check_parallel_chains(chains: int) -> None:
    import jax

    devices = jax.local_device_count()
    if devices < chains:
        warnings.warn(
            f"JAX sees {devices} host device(s) for {chains} chains, so NumPyro runs them one "
            "after another. Set XLA_FLAGS=--xla_force_host_platform_device_count="
            f"{chains} before JAX is imported (import bayesscale.inference first).",
            RuntimeWarning,
            stacklevel=3,
        )


def sample(model: pm.Model, config: FitConfig) -> tuple[xr.DataTree, Timing]:
    """Run NUTS on ``model`` with the configured sampler; return the DataTree and timing."""
    kwargs: dict[str, object] = {}
    if config.sampler == "numpyro":
        _check_parallel_chains(config.chains)  # PyMC's numpyro default is chain_method="parallel"
    elif config.sampler == "pymc":
        kwargs["cores"] = min(config.chains, os.cpu_count() or 1)
        # JAX (imported for NumPyro) is multithreaded: a plain fork of this process can
        # deadlock, so PyMC's worker processes come from a fresh forkserver.
        kwargs["mp_ctx"] = "forkserver"
    start = time.perf_counter()
    with model:
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
    wall = time.perf_counter() - start
    sampling = tree["posterior"].attrs.get("sampling_time")
    return tree, Timing(wall=wall, sampling=float(sampling) if sampling is not None else None)


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
    return xr.Dataset(data, coords=coords)


def fit(table: Table, spec: ModelSpec, config: FitConfig | None = None) -> xr.DataTree:
    """Fit the pooled law of ``spec`` to a validated observation table."""
    config = config or FitConfig()
    design = prepare(table, spec)
    model = build_law_model(design)
    tree, timing = sample(model, config)
    keep = {
        "posterior": tree["posterior"].to_dataset(),
        "sample_stats": tree["sample_stats"].to_dataset(),
        "observed_data": tree["observed_data"].to_dataset(),
        "constant_data": _constant_data(design, table),
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
        "chains": config.chains,
        "draws": config.draws,
        "tune": config.tune,
        "target_accept": config.target_accept,
        "wall_seconds": round(timing.wall, 3),
    }
    return out


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

    @property
    def ok(self) -> bool:
        return (
            self.max_rhat <= RHAT_MAX
            and self.min_ess_bulk >= ESS_MIN
            and self.min_ess_tail >= ESS_MIN
            and self.divergences == 0
        )

    def problems(self) -> list[str]:
        """What failed, each with what to try."""
        out = []
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

    def to_dict(self) -> dict[str, object]:
        return {
            "max_rhat": self.max_rhat,
            "min_ess_bulk": self.min_ess_bulk,
            "min_ess_tail": self.min_ess_tail,
            "divergences": self.divergences,
            "draws": self.draws,
            "ok": self.ok,
        }


def diagnose(tree: xr.DataTree) -> Diagnostics:
    """R-hat, bulk and tail ESS over all posterior variables, and divergences."""
    posterior = tree["posterior"].to_dataset()
    n_draws = int(posterior.sizes[names.CHAIN_DIM] * posterior.sizes[names.DRAW_DIM])
    rhat = az.rhat(posterior)
    ess_bulk = az.ess(posterior, method="bulk")
    ess_tail = az.ess(posterior, method="tail")

    def extreme(ds: xr.Dataset, pick: str) -> tuple[float, str]:
        values = {str(name): float(getattr(np, f"nan{pick}")(da.values)) for name, da in ds.items()}
        worst = (max if pick == "max" else min)(values, key=lambda k: values[k])
        return values[worst], worst

    max_rhat, worst_rhat = extreme(rhat, "max")
    min_bulk, worst_bulk = extreme(ess_bulk, "min")
    min_tail, worst_tail = extreme(ess_tail, "min")
    diverging = tree["sample_stats"].to_dataset()["diverging"]
    return Diagnostics(
        max_rhat=max_rhat,
        min_ess_bulk=min_bulk,
        min_ess_tail=min_tail,
        divergences=int(diverging.sum()),
        draws=n_draws,
        worst={"rhat": worst_rhat, "ess": worst_bulk if min_bulk <= min_tail else worst_tail},
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
    try:
        tree = xr.open_datatree(path, engine="h5netcdf").load()
    except (OSError, ValueError) as exc:
        raise FitFileError(f"{path}: not a readable netCDF fit: {exc}") from exc
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
