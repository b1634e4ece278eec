"""A saved fit, read without PyMC: the file format, loading and saving, the stored spec, and
the diagnostics verdict every output that reads a fit states.

Commands that only read fits (``summary``, ``recipe``, ``check``) import this module, not
:mod:`bayesscale.law.inference`, which loads PyMC and JAX (about 3 s).

A fit passes when every posterior quantity has R-hat ``<= RHAT_MAX`` (1.01), bulk and tail ESS
``>= ESS_MIN`` (400) and there are no divergent transitions; a ``--preview`` fit never passes.

Example
-------
>>> tree = load_fit("out/fit.nc")  # doctest: +SKIP
>>> diagnose(tree).headline() is None  # doctest: +SKIP
True
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale._version import __version__
from bayesscale.atomic import write_atomically
from bayesscale.data.spec import ModelSpec, parse_spec
from bayesscale.sampling.config import DEFAULT_SAMPLER, ESS_TARGET
from bayesscale.sampling.diagnostics import Convergence, convergence_of, tail_probabilities
from bayesscale.sampling.types import MAX_DELTA_ENERGY  # NumPy only: no JAX is loaded

RHAT_MAX = 1.01
# Part of the key of the stored convergence figures: change it when their computation changes,
# so that fits saved before are diagnosed anew.
CONVERGENCE_METHOD = "rank-normalised split R-hat, bulk and tail ESS (Vehtari et al. 2021) v1"
ESS_MIN = ESS_TARGET
FORMAT_VERSION = 1
ATTR_FORMAT = "bayesscale_format"


class FitFileError(ValueError):
    """A file is not a fit this version of bayesscale can read."""


def fit_spec(tree: xr.DataTree) -> ModelSpec:
    """The model spec a law fit was made with, parsed from its attributes.

    The one place a stored law spec is parsed; the parse is cached by the spec's text, so
    every reader of the same fit shares one :class:`~bayesscale.data.spec.ModelSpec`.
    """
    return _parse_stored_spec(stored_spec_text(tree))


def stored_spec_text(tree: xr.DataTree) -> str:
    """The spec text a fit (law or pricing) stores in its attributes."""
    text = tree.attrs.get(names.ATTR_SPEC)
    if not text:
        raise FitFileError(f"the fit has no {names.ATTR_SPEC!r} attribute (no model spec)")
    return str(text)


@functools.lru_cache(maxsize=16)
def _parse_stored_spec(text: str) -> ModelSpec:
    return parse_spec(text, source="<spec stored in fit>")


# --- diagnostics ---------------------------------------------------------------------------


class DiagnosticsRefusedError(ValueError):
    """A fit whose diagnostics failed (or a preview), refused under ``strict``: the command
    line exits with ``exit_status`` 3, the one status for "a fit failed its diagnostics
    under --strict" in every command (2 is a usage or input error)."""

    exit_status = 3


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
    # the fit's ``sampler`` attribute (``bayesscale``: MAMS; ``nuts``, ``numpyro``, ``nutpie``,
    # ``pymc``: NUTS): what a divergence means and what to try depend on it
    sampler: str | None = None

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
            out.append(divergence_advice(self.divergences, self.sampler))
        if self.max_rhat > RHAT_MAX:
            out.append(
                f"max R-hat {self.max_rhat:.3f} > {RHAT_MAX} (worst: {self.worst.get('rhat')}): "
                "chains disagree (they start overdispersed, so this is a real warning). Try "
                "more warm-up and draws (FitConfig(tune=, draws=); --tune, --draws), or a simpler spec."
            )
        if min(self.min_ess_bulk, self.min_ess_tail) < ESS_MIN:
            out.append(
                f"min bulk/tail ESS {self.min_ess_bulk:.0f}/{self.min_ess_tail:.0f} < {ESS_MIN} "
                f"(worst: {self.worst.get('ess')}): intervals are imprecise. Try more draws (FitConfig(draws=); --draws)."
            )
        return out

    def headline(self) -> str | None:
        """One line for the top of every output that reads the fit, or ``None`` when the fit
        converged: a preview, or which diagnostics failed."""
        if self.preview:
            return (
                "PREVIEW FIT (Laplace approximation, not a posterior sample): do not draw "
                "conclusions from it; refit without --preview (preview=False in Python)"
            )
        if self.ok:
            return None
        return f"DIAGNOSTICS FAILED ({', '.join(self.failures())}): do not trust these numbers yet"

    def failures(self) -> list[str]:
        """Each failed threshold in a few words (``max R-hat 1.300 > 1.01``); a NaN fails."""
        failed = []
        if not self.max_rhat <= RHAT_MAX:
            failed.append(f"max R-hat {self.max_rhat:.3f} > {RHAT_MAX}")
        ess = min(self.min_ess_bulk, self.min_ess_tail)
        if not ess >= ESS_MIN:
            failed.append(f"min ESS {ess:.0f} < {ESS_MIN}")
        if self.divergences:
            failed.append(f"{self.divergences} divergent transitions")
        return failed

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


def verdict(diagnostics: Diagnostics, what: str) -> list[str]:
    """``["law fit: DIAGNOSTICS FAILED (...)..."]`` for a failed or preview fit, else ``[]``."""
    headline = diagnostics.headline()
    return [] if headline is None else [f"{what}: {headline}"]


def divergence_advice(divergences: int, sampler: str | None) -> str:
    """What ``divergences`` divergent transitions mean for the ``sampler`` that made the fit
    (its ``sampler`` attribute) and what to try.

    >>> divergence_advice(2, "bayesscale").split(":")[0]
    '2 divergent MAMS transitions'
    >>> "NUTS" in divergence_advice(2, "pymc")
    True
    """
    cap = f"{MAX_DELTA_ENERGY:g}"
    common = (
        "tighter priors in the spec, or check that every swept axis has enough distinct "
        "values per setting"
    )
    if sampler == DEFAULT_SAMPLER:  # MAMS
        return (
            f"{divergences} divergent MAMS transitions: trajectories whose energy error "
            f"(dU + dK, sample_stats.energy_error) exceeded {cap}, i.e. the integrator blew "
            "up where the posterior curves more sharply than the adapted step size allows; "
            "the draws may miss that region. Try a target acceptance of 0.95 or 0.99 (FitConfig("
            "target_accept=); --target-accept; a higher target gives MAMS a smaller step size), "
            "more warm-up (tune=; --tune: a better mass matrix), a reparameterisation or "
            f"{common}; NUTS (sampler='nuts'; --sampler nuts) shows whether NUTS agrees."
        )
    if sampler == "nutpie":
        return (
            f"{divergences} divergent transitions: nutpie's NUTS trajectories whose energy "
            "error grew too large, in regions of high curvature the draws may miss. Try "
            "--target-accept 0.95 or 0.99 (nutpie then adapts a smaller step size), more "
            f"--tune (nutpie's mass-matrix adaptation uses the warm-up's gradients), {common}."
        )
    who = {"pymc": "PyMC's NUTS", "numpyro": "NumPyro's NUTS"}.get(sampler or "", "NUTS")
    return (
        f"{divergences} divergent transitions: {who} trajectories whose energy error "
        f"exceeded {cap}: the posterior has "
        f"regions NUTS cannot follow. Try --target-accept 0.95 or 0.99, {common}."
    )


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


def diagnose(tree: xr.DataTree, leave_out: Sequence[str] = ()) -> Diagnostics:
    """R-hat, bulk and tail ESS over all posterior variables but ``leave_out``, and
    divergences.

    Rank-normalising every variable takes seconds on a large fit, so the convergence figures
    are kept in the tree's attributes (``names.ATTR_CONVERGENCE``, saved with the fit) together
    with a digest of the posterior they describe; a later call on the same draws reads them,
    and any change to the draws (thinning, a subset of chains) recomputes them.
    """
    posterior = tree["posterior"].to_dataset().drop_vars(list(leave_out), errors="ignore")
    n_draws = int(posterior.sizes[names.CHAIN_DIM] * posterior.sizes[names.DRAW_DIM])
    check = Convergence(
        **cached(
            tree,
            names.ATTR_CONVERGENCE,
            convergence_key(posterior),
            lambda: asdict(convergence_of(posterior)),
        )
    )
    stats = tree["sample_stats"].to_dataset() if "sample_stats" in tree.children else None
    # a tree assembled from draws made elsewhere (tests, synthetic fits) may lack them
    diverging = (
        stats["diverging"] if stats is not None and "diverging" in stats else xr.DataArray(0)
    )
    preview = bool(int(tree.attrs.get(names.ATTR_PREVIEW, 0)))
    sampler = tree.attrs.get(names.ATTR_SAMPLER)
    return Diagnostics(
        preview=preview,
        sampler=None if sampler is None else str(sampler),
        max_rhat=float(check.max_rhat),
        min_ess_bulk=float(check.min_ess_bulk),
        min_ess_tail=float(check.min_ess_tail),
        divergences=int(diverging.sum()),
        draws=n_draws,
        worst={"rhat": check.worst_rhat, "ess": check.worst_ess},
    )


def convergence_key(posterior: xr.Dataset) -> str:
    """The digest that the stored convergence figures of ``posterior`` are kept under."""
    return digest(posterior, f"{CONVERGENCE_METHOD} {tail_probabilities()}")


def keep_convergence(tree: xr.DataTree, check: Convergence) -> None:
    """Keep ``check``, made on exactly ``tree``'s whole posterior (the sampler's last check
    before it stopped), as :func:`diagnose` keeps what it computes: it is not computed again."""
    key = convergence_key(tree["posterior"].to_dataset())
    tree.attrs[names.ATTR_CONVERGENCE] = json.dumps({"digest": key, "value": asdict(check)})


def digest(*parts: xr.Dataset | str) -> str:
    """A digest of datasets (every variable's name, dims and values, and every coordinate's
    labels) and strings (milliseconds for a fit's posterior)."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        if isinstance(part, str):
            h.update(part.encode())
            continue
        for name in sorted(map(str, part.coords)):
            labels = part.coords[name].to_numpy().ravel()
            h.update(f"{name}={'|'.join(map(str, labels))};".encode())
        for name in sorted(map(str, part.data_vars)):
            da = part[name]
            h.update(f"{name}{da.dims}{da.shape}".encode())
            h.update(np.ascontiguousarray(da.values).tobytes())
    return h.hexdigest()


def cached(tree: xr.DataTree, attr: str, key: str, compute: Callable[[], Any]) -> Any:
    """A JSON-ready result kept in the tree's attribute ``attr`` with the digest ``key`` of
    what it was computed from: returned as stored when the key matches, else computed and
    stored (the attribute is saved with the fit, so every later reader skips the work)."""
    stored = json.loads(str(tree.attrs.get(attr, "{}")))
    if stored.get("digest") == key:
        return stored["value"]
    value = compute()
    tree.attrs[attr] = json.dumps({"digest": key, "value": value})
    return value


def fit_attrs(kind: str, spec_text: str, data_sha256: str, data_source: str) -> dict[str, Any]:
    """The root attributes every fit starts with: the file format, the kind of fit, the
    package version, the spec it was made with and the data it was made from (the sampler's
    are :func:`bayesscale.law.inference.sampler_attrs`)."""
    return {
        ATTR_FORMAT: FORMAT_VERSION,
        names.ATTR_KIND: kind,
        names.ATTR_VERSION: __version__,
        names.ATTR_SPEC: spec_text,
        names.ATTR_DATA_HASH: data_sha256,
        names.ATTR_DATA_SOURCE: data_source,
    }


# --- saving and loading --------------------------------------------------------------------


def save_fit(tree: xr.DataTree, path: str | Path, overwrite: bool = False) -> Path:
    """Write a fit to netCDF atomically (temporary file in the same folder, then rename).

    A law fit is saved with its convergence figures (:func:`diagnose`, which keeps them in the
    tree's attributes: the tree passed in gains them too), so that every command that reads it
    states its verdict without recomputing them.
    """
    if tree.attrs.get(names.ATTR_KIND) == names.KIND_LAW_FIT and "posterior" in tree.children:
        diagnose(tree)
    return write_atomically(path, lambda tmp: tree.to_netcdf(tmp, engine="h5netcdf"), overwrite)


def load_fit(path: str | Path, kind: str | None = names.KIND_LAW_FIT) -> xr.DataTree:
    """Load a saved fit fully into memory. netCDF holds arrays and attributes only:
    nothing is unpickled. Refuses files that are not bayesscale fits of ``kind`` (``None``:
    a law or a pricing fit)."""
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
    kinds = (names.KIND_LAW_FIT, names.KIND_PRICING_FIT) if kind is None else (kind,)
    if found_kind not in kinds:
        if kind is None:
            raise FitFileError(
                f"{path}: expected a bayesscale law or pricing fit, found {found_kind!r}"
            )
        raise FitFileError(f"{path}: expected a bayesscale {kind!r} file, found {found_kind!r}")
    fmt = int(tree.attrs.get(ATTR_FORMAT, -1))
    if fmt != FORMAT_VERSION:
        raise FitFileError(
            f"{path}: fit format {fmt} written by bayesscale {tree.attrs.get(names.ATTR_VERSION)}; "
            f"this version ({__version__}) reads format {FORMAT_VERSION}. Refit with this version."
        )
    _check_variables(tree, path, str(found_kind))
    return tree


# What every fit of a kind holds, whatever its spec: a file without one of them was changed
# after it was written (or cut short), and every reader would fail on it in its own words.
REQUIRED_VARIABLES: Final[dict[str, dict[str, tuple[str, ...]]]] = {
    names.KIND_LAW_FIT: {
        "posterior": (names.ALPHA_POP, names.ALPHA, names.AMPLITUDE, names.LOSS_FLOOR),
        "constant_data": (names.REFERENCE_SCALE,),
    },
    names.KIND_PRICING_FIT: {
        "posterior": (names.KAPPA0_AXIS,),
    },
}


def _check_variables(tree: xr.DataTree, path: Path, kind: str) -> None:
    for group, variables in REQUIRED_VARIABLES.get(kind, {}).items():
        held = set(tree[group].data_vars) if group in tree.children else set()
        missing = [v for v in variables if v not in held]
        if missing:
            raise FitFileError(
                f"{path}: group {group!r} lacks {', '.join(map(repr, missing))}: the file is "
                "not a complete fit (changed or cut short after it was written); refit"
            )
