"""A saved fit, read without PyMC: the file format, loading and saving, the stored spec, and
the diagnostics verdict every output that reads a fit states.

Commands that only read fits (``summary``, ``recipe``, ``check``) import this module, not
:mod:`bayesscale.inference`, which loads PyMC and JAX (about 3 s).

A fit passes when every posterior quantity has R-hat ``<= RHAT_MAX`` (1.01), bulk and tail ESS
``>= ESS_MIN`` (400) and there are no divergent transitions; a ``--preview`` fit never passes.

Example
-------
>>> tree = load_fit("out/fit.nc")  # doctest: +SKIP
>>> diagnose(tree).headline() is None  # doctest: +SKIP
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from bayesscale import __version__, names
from bayesscale.atomic import write_atomically
from bayesscale.sampling.config import ESS_TARGET
from bayesscale.sampling.diagnostics import convergence_of
from bayesscale.spec import ModelSpec, parse_spec

RHAT_MAX = 1.01
ESS_MIN = ESS_TARGET
FORMAT_VERSION = 1
ATTR_FORMAT = "bayesscale_format"


class FitFileError(ValueError):
    """A file is not a fit this version of bayesscale can read."""


def fit_spec(tree: xr.DataTree) -> ModelSpec:
    """The model spec a fit was made with (parsed from its attributes)."""
    return parse_spec(str(tree.attrs[names.ATTR_SPEC]), source="<spec stored in fit>")


# --- diagnostics ---------------------------------------------------------------------------


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
