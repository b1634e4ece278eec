"""Pricing synthetic data: pricing tables, the hierarchical discount model, and its summaries.

A pricing table has one row per evaluated run: ``method`` (the generator), ``axis`` (the
axis it synthesises: ``env``, ``task``, ``traj`` or a cross-axis label), ``real`` and
``synthetic`` (counts on that axis; ``r = synthetic / real``), ``seed`` and the outcome,
``successes`` + ``trials`` or a continuous ``loss``. Other columns are kept, unused.

The model (``models/pricing.toml``; equations in :mod:`bayesscale.collapse`):

.. math::

    \\kappa_m(r) &= \\kappa_{0,m} - (1 - \\kappa_{0,m})\\, r / c_m
                = \\kappa_{0,m} (1 - r / r_{0,m}), \\qquad
    D_{\\mathrm{eff}} = D_r\\, G^+(1 + r \\kappa_m(r)) \\\\
    L_i &= \\ell_m + s_a \\frac{(D_{\\mathrm{eff},i} / D_{a,\\mathrm{ref}})^{-\\alpha_a} - 1}{\\alpha_a}
    \\\\
    \\mathrm{logit}\\,\\kappa_{0,m} &= \\mathrm{logit}\\,\\bar\\kappa_{0,a} + \\tau z_m, \\qquad
    \\log r_{0,m} \\sim \\mathcal{N}(\\log \\bar r_{0,a}, \\tau_r)

with ``a`` the axis of method ``m`` (kappa0 non-centered; the zero crossing ``r_0 = c kappa0 /
(1 - kappa0)`` centered, as each method's runs place it sharply); successes are beta-binomial around ``p = exp(-L)`` in
logits form. ``r*`` and the peak ratio are derived from the posterior draws after
sampling with :func:`bayesscale.collapse.collapse_ratio` and :func:`~bayesscale.collapse.peak_ratio`.

Unusable input is left out with a ``PricingWarning`` that names it (never silently), or
refused with ``strict=True``: pure-synthetic rows (``real = 0``), methods with no pure-real
baseline (``synthetic = 0`` rows), and methods whose ratio grid is too coarse to place r*.

Example
-------
>>> spec = load_pricing_spec()  # doctest: +SKIP
>>> table = load_pricing("data/pricing/pricing.csv", spec)  # doctest: +SKIP
>>> tree = fit_pricing(table, spec, FitConfig(seed=1))  # doctest: +SKIP
>>> summarise_pricing(tree)["methods"]["AWM"]["kappa0"]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
import xarray as xr

from bayesscale import collapse, names
from bayesscale.observations import (
    DataWarning,
    ObservationError,
    column_error,
    missing_columns,
    read_table,
    rows_text,
)
from bayesscale.spec import SPEC_DIR, LogNormalPrior, SpecError, _Reader, open_spec

if TYPE_CHECKING:
    from bayesscale.fitfile import Diagnostics

DEFAULT_PRICING_SPEC: Final = "pricing"
POOLING_MODES: Final = ("axis", "none")
MIN_POSITIVE_RATIOS: Final = 3
COARSE_GAP: Final = 4.0  # r* between two grid ratios more than this factor apart is "coarse"
SAMPLE: Final = (names.CHAIN_DIM, names.DRAW_DIM)
MAX_LOSS: Final = 30.0  # smooth cap on the loss-equivalent of a collapsed run (p >= 1e-13)
DERIVED: Final = (names.R_STAR, names.PEAK_RATIO)


class PricingError(ObservationError):
    """Bad pricing data; the message names the file, the column and the rows."""


class PricingWarning(DataWarning):
    """Part of a pricing table was left out of the fit (the message says what and why)."""


# --- the pricing spec ----------------------------------------------------------------------


@dataclass(frozen=True)
class PricingSpec:
    """A validated pricing model specification (``models/pricing.toml``)."""

    name: str
    description: str
    outcome: str
    concentration: LogNormalPrior
    log_loss_sigma: float
    student_nu: float
    kappa0_logit_mean: float
    kappa0_logit_sd: float
    kappa0_spread: float
    pooling: str
    zero_ratio: LogNormalPrior
    zero_ratio_spread: float
    threshold: float
    frame: str
    softness: float
    floor: float
    level: LogNormalPrior
    slope: LogNormalPrior
    floor_softness: float
    exponent: LogNormalPrior
    exponents: Mapping[str, LogNormalPrior] = field(default_factory=dict)
    text: str = field(default="", repr=False, compare=False)
    source: str = field(default="", repr=False, compare=False)

    def exponent_prior(self, axis: str) -> LogNormalPrior:
        """The exponent prior of ``axis``: its override if the spec has one, else the default."""
        return self.exponents.get(axis, self.exponent)

    def required_columns(self) -> tuple[str, ...]:
        cols = [names.METHOD, names.AXIS_COLUMN, names.REAL, names.SYNTHETIC, names.SEED]
        cols += [names.SUCCESSES, names.TRIALS] if self.outcome == "success" else [names.LOSS]
        return tuple(cols)


def parse_pricing_spec(text: str, source: str = "<string>") -> PricingSpec:
    """Parse and validate pricing-spec TOML; errors name ``source`` and the key."""
    raw, top, name, description = open_spec(text, source)

    out = top.sub("outcome") if "outcome" in raw else _Reader({}, "outcome", source)
    top.used.add("outcome")
    outcome = out.get("kind", str, "success")
    if outcome not in ("success", "loss"):
        raise SpecError(f"{source}: [outcome] kind: must be 'success' or 'loss', got {outcome!r}")
    concentration = out.prior("concentration", LogNormalPrior(150.0, 1.0))
    log_loss_sigma = out.positive("log_loss_sigma", 0.05)
    student_nu = out.positive("student_nu", 4.0)
    out.finish()

    k = top.sub("kappa0") if "kappa0" in raw else _Reader({}, "kappa0", source)
    top.used.add("kappa0")
    logit_mean = float(k.get("logit_mean", float, 0.0))
    logit_sd = k.positive("logit_sd", 1.0)
    spread = k.positive("spread", 0.5)
    pooling = k.get("pooling", str, "axis")
    if pooling not in POOLING_MODES:
        raise SpecError(f"{source}: [kappa0] pooling: one of {POOLING_MODES}, got {pooling!r}")
    k.finish()

    c = top.sub("collapse") if "collapse" in raw else _Reader({}, "collapse", source)
    top.used.add("collapse")
    zero_ratio = c.prior("zero_ratio", LogNormalPrior(3.0, 1.0))
    zero_ratio_spread = c.positive("spread", 0.3)
    threshold = c.positive("threshold", collapse.DEFAULT_THRESHOLD)
    if not threshold < 1:
        raise SpecError(f"{source}: [collapse] threshold: must be in (0, 1), got {threshold}")
    frame = c.get("frame", str, collapse.FIXED_REAL)
    if frame not in collapse.FRAMES:
        raise SpecError(f"{source}: [collapse] frame: one of {collapse.FRAMES}, got {frame!r}")
    softness = c.positive("softness", collapse.DEFAULT_SOFTNESS)
    floor = c.positive("floor", collapse.DEFAULT_FLOOR)
    if not floor < 1:
        raise SpecError(f"{source}: [collapse] floor: must be in (0, 1), got {floor}")
    c.finish()

    law = top.sub("law") if "law" in raw else _Reader({}, "law", source)
    top.used.add("law")
    level = law.prior("level", LogNormalPrior(0.8, 0.5))
    slope = law.prior("slope", LogNormalPrior(0.05, 1.0))
    floor_softness = law.positive("floor_softness", 0.02)
    exponent = law.prior("exponent", LogNormalPrior(0.25, 0.75))
    exponents: dict[str, LogNormalPrior] = {}
    if "exponents" in law.table:
        per_axis = law.sub("exponents")
        for axis in list(per_axis.table):
            exponents[axis] = per_axis.prior(axis)
        per_axis.finish()
    law.used.add("exponents")
    law.finish()
    top.finish()

    return PricingSpec(
        name=name,
        description=description,
        outcome=outcome,
        concentration=concentration,
        log_loss_sigma=log_loss_sigma,
        student_nu=student_nu,
        kappa0_logit_mean=logit_mean,
        kappa0_logit_sd=logit_sd,
        kappa0_spread=spread,
        pooling=pooling,
        zero_ratio=zero_ratio,
        zero_ratio_spread=zero_ratio_spread,
        threshold=threshold,
        frame=frame,
        softness=softness,
        floor=floor,
        level=level,
        slope=slope,
        floor_softness=floor_softness,
        exponent=exponent,
        exponents=exponents,
        text=text,
        source=source,
    )


def load_pricing_spec(path_or_name: str | Path | None = None) -> PricingSpec:
    """Load a pricing spec from a file, or by name from ``models/`` (default ``pricing``)."""
    path = Path(path_or_name if path_or_name is not None else DEFAULT_PRICING_SPEC)
    if not path.exists():
        bundled = SPEC_DIR / f"{path}.toml"
        if not bundled.exists():
            raise SpecError(f"{path}: no such pricing spec file, and no bundled spec of that name")
        path = bundled
    return parse_pricing_spec(path.read_text(), source=str(path))


# --- pricing tables ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Exclusion:
    """Something left out of a fit: which method (or None for rows), which rows, and why."""

    reason: str
    method: str | None
    rows: tuple[int, ...]
    message: str


@dataclass(frozen=True)
class PricingTable:
    """The usable rows of a validated pricing table, and what was left out.

    ``frame`` keeps the original 0-based row position in the column ``_row``.
    """

    frame: pd.DataFrame
    source: str
    sha256: str
    exclusions: tuple[Exclusion, ...] = ()

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.frame[names.METHOD]))


def load_pricing(path: str | Path, spec: PricingSpec, strict: bool = False) -> PricingTable:
    """Read and validate a pricing table (CSV or parquet); see :func:`validate_pricing`."""
    frame, digest = read_table(path)
    return validate_pricing(frame, spec, source=str(path), sha256=digest, strict=strict)


def validate_pricing(
    frame: pd.DataFrame,
    spec: PricingSpec,
    source: str = "<table>",
    sha256: str | None = None,
    strict: bool = False,
) -> PricingTable:
    """Check a pricing table; return its usable rows and the exclusions.

    Malformed data (missing columns, non-numbers, negative counts, successes above trials, a
    method listed under two axes, rows with no data at all) raises ``PricingError``. Usable
    tables with unusable parts leave them out with a ``PricingWarning`` naming each, or
    raise with ``strict=True``:

    * rows with ``synthetic > 0`` and ``real = 0``: the ratio is undefined (pure synthetic);
    * methods with no pure-real baseline (no row with ``synthetic = 0``);
    * methods with fewer than 3 distinct ratios ``r > 0``: too coarse to place r*.
    """
    from bayesscale.observations import frame_sha256

    if len(frame) == 0:
        raise PricingError(f"{source}: the table has no rows")
    frame = frame.reset_index(drop=True).copy()
    hints = missing_columns(frame, spec.required_columns())
    if hints:
        raise PricingError(
            f"{source}: missing column(s) {hints} of a pricing table; "
            f"the table has {[str(c) for c in frame.columns]}"
        )
    for column in (names.METHOD, names.AXIS_COLUMN):
        values = frame[column]
        empty = frame.index[values.isna() | (values.astype(str).str.strip() == "")]
        if len(empty):
            raise _pfail(source, column, empty, "value is missing")
        frame[column] = values.astype(str).str.strip()
    numeric = [names.REAL, names.SYNTHETIC, names.SEED]
    numeric += [names.SUCCESSES, names.TRIALS] if spec.outcome == "success" else [names.LOSS]
    for column in numeric:
        raw = frame[column]
        values = pd.to_numeric(raw, errors="coerce")
        bad = frame.index[values.isna() & raw.notna()]
        if len(bad):
            shown = ", ".join(repr(raw[i]) for i in bad[:3])
            raise _pfail(source, column, bad, f"not a number ({shown})")
        bad = frame.index[values.isna() | ~np.isfinite(values.to_numpy(float))]
        if len(bad):
            raise _pfail(source, column, bad, "value is missing, NaN or infinite")
        frame[column] = values.astype(float)
    for column in (names.REAL, names.SYNTHETIC, names.SEED):
        bad = frame.index[frame[column] < 0]
        if len(bad):
            raise _pfail(source, column, bad, f"counts must be >= 0, got {frame[column][bad[0]]!r}")
    both_zero = frame.index[(frame[names.REAL] == 0) & (frame[names.SYNTHETIC] == 0)]
    if len(both_zero):
        raise _pfail(
            source, f"{names.REAL},{names.SYNTHETIC}", both_zero, "a run with no data at all"
        )
    if spec.outcome == "success":
        for column in (names.SUCCESSES, names.TRIALS, names.SEED):
            values = frame[column].to_numpy(float)
            bad = frame.index[values != np.round(values)]
            if len(bad):
                raise _pfail(source, column, bad, "counts must be whole numbers")
            frame[column] = frame[column].astype(np.int64)
        bad = frame.index[frame[names.SUCCESSES] < 0]
        if len(bad):
            raise _pfail(source, names.SUCCESSES, bad, "counts must be >= 0")
        bad = frame.index[frame[names.TRIALS] < 1]
        if len(bad):
            raise _pfail(source, names.TRIALS, bad, "trials must be >= 1")
        bad = frame.index[frame[names.SUCCESSES] > frame[names.TRIALS]]
        if len(bad):
            raise _pfail(source, names.SUCCESSES, bad, "successes exceed trials")
    else:
        bad = frame.index[frame[names.LOSS] <= 0]
        if len(bad):
            raise _pfail(source, names.LOSS, bad, "a loss must be > 0")
    axes_per_method = frame.groupby(names.METHOD)[names.AXIS_COLUMN].nunique()
    for method in axes_per_method[axes_per_method > 1].index:
        rows = frame.index[frame[names.METHOD] == method]
        found = sorted(set(frame.loc[rows, names.AXIS_COLUMN]))
        raise _pfail(
            source,
            names.AXIS_COLUMN,
            rows,
            f"method {method!r} is listed under several axes {found}; a method synthesises "
            "one axis (give a cross-axis generator its own label, e.g. 'cross')",
        )

    frame["_row"] = np.arange(len(frame))
    exclusions: list[Exclusion] = []
    pure_synthetic = frame.index[(frame[names.REAL] == 0) & (frame[names.SYNTHETIC] > 0)]
    if len(pure_synthetic):
        methods = sorted(set(frame.loc[pure_synthetic, names.METHOD]))
        exclusions.append(
            Exclusion(
                "pure_synthetic",
                None,
                tuple(int(i) for i in pure_synthetic),
                f"{source}: column {names.REAL!r}, {rows_text(pure_synthetic, source)}: "
                f"synthetic > 0 with real = 0 (methods {methods}): the ratio synthetic/real is "
                "undefined and kappa(r) cannot place these runs; rows left out",
            )
        )
        frame = frame.drop(index=pure_synthetic)
    ratio = frame[names.SYNTHETIC] / frame[names.REAL]
    for method, rows in frame.groupby(names.METHOD, sort=False).groups.items():
        method = str(method)
        r = ratio[rows]
        positions = frame.loc[rows, "_row"].to_numpy()
        if not (r == 0).any():
            exclusions.append(
                Exclusion(
                    "no_baseline",
                    method,
                    tuple(int(i) for i in positions),
                    f"{source}: method {method!r} ({rows_text(positions, source)}): no pure-real "
                    f"baseline (no row with {names.SYNTHETIC} = 0), so success cannot be "
                    "normalised and kappa is not identified; method left out",
                )
            )
            continue
        positive = np.unique(np.round(r[r > 0].to_numpy(), 9))
        if len(positive) < MIN_POSITIVE_RATIOS:
            exclusions.append(
                Exclusion(
                    "coarse_grid",
                    method,
                    tuple(int(i) for i in positions),
                    f"{source}: method {method!r} ({rows_text(positions, source)}): ratio grid "
                    f"{[0.0, *positive.round(4).tolist()]} too coarse to place r*: kappa0, the "
                    f"collapse scale and r* need at least {MIN_POSITIVE_RATIOS} distinct ratios "
                    "> 0; method left out",
                )
            )
    dropped = {e.method for e in exclusions if e.method is not None}
    frame = frame[~frame[names.METHOD].isin(dropped)]
    if exclusions:
        text = "\n  ".join(e.message for e in exclusions)
        if strict:
            raise PricingError(f"refusing to leave parts of the table out (strict):\n  {text}")
        warnings.warn(f"left out of the pricing fit:\n  {text}", PricingWarning, stacklevel=2)
    if frame.empty:
        raise PricingError(f"{source}: nothing usable is left after the exclusions above")
    digest = sha256 if sha256 is not None else frame_sha256(frame.drop(columns="_row"))
    return PricingTable(frame.reset_index(drop=True), source, digest, tuple(exclusions))


def _pfail(source: str, column: str, positions: Any, problem: str) -> PricingError:
    return PricingError(str(column_error(source, column, positions, problem)))


# --- design ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PricingDesign:
    """Arrays the pricing model needs, with coordinates."""

    methods: tuple[str, ...]
    axes: tuple[str, ...]  # priced axes, the paper's first
    method_axis: np.ndarray  # (method,) index into axes
    method_index: np.ndarray  # (obs,)
    real: np.ndarray
    synthetic: np.ndarray
    reference: np.ndarray  # (axis,) D_ref
    baseline_real: np.ndarray  # (method,)
    successes: np.ndarray | None
    trials: np.ndarray | None
    loss: np.ndarray | None

    @property
    def ratio(self) -> np.ndarray:
        return self.synthetic / self.real

    @property
    def n_obs(self) -> int:
        return int(self.real.shape[0])

    def coords(self) -> dict[str, Sequence[str] | np.ndarray]:
        return {
            names.OBS_DIM: np.arange(self.n_obs),
            names.METHOD_DIM: list(self.methods),
            names.PRICED_AXIS_DIM: list(self.axes),
        }


def prepare_pricing(table: PricingTable, spec: PricingSpec) -> PricingDesign:
    """Lay out a validated pricing table for :func:`build_pricing_model`.

    ``D_ref`` of an axis is the geometric mean of its runs' real counts; a method's r* is
    evaluated at its largest pure-real count (its full-budget baseline).
    """
    frame = table.frame
    methods = table.methods
    axis_of = frame.groupby(names.METHOD, sort=False)[names.AXIS_COLUMN].first()
    found = list(dict.fromkeys(axis_of[list(methods)]))
    axes = tuple(
        [a for a in names.PAPER_AXES if a in found]
        + [a for a in found if a not in names.PAPER_AXES]
    )
    method_axis = np.array([axes.index(axis_of[m]) for m in methods], dtype=np.int64)
    method_index = frame[names.METHOD].map({m: i for i, m in enumerate(methods)}).to_numpy(np.int64)
    real = frame[names.REAL].to_numpy(float)
    synthetic = frame[names.SYNTHETIC].to_numpy(float)
    pure = synthetic == 0
    row_axis = method_axis[method_index]
    # D_ref at the runs' centre of mass (geometric mean of every real count on the axis), so
    # the level is pinned where the data are: at the midpoint of the pure-real sweep the level
    # and exponent were correlated at -0.7 to -0.9.
    reference = np.array([np.exp(np.log(real[row_axis == j]).mean()) for j in range(len(axes))])
    baseline = np.array([real[pure & (method_index == i)].max() for i in range(len(methods))])
    success = spec.outcome == "success"
    return PricingDesign(
        methods=methods,
        axes=axes,
        method_axis=method_axis,
        method_index=method_index,
        real=real,
        synthetic=synthetic,
        reference=reference,
        baseline_real=baseline,
        successes=frame[names.SUCCESSES].to_numpy(np.int64) if success else None,
        trials=frame[names.TRIALS].to_numpy(np.int64) if success else None,
        loss=None if success else frame[names.LOSS].to_numpy(float),
    )


# --- the model ------------------------------------------------------------------------------


def exponent_priors_from_law_fit(
    tree: xr.DataTree, inflate: float = 1.0
) -> dict[str, LogNormalPrior]:
    """Exponent priors per axis from a law fit's ``alpha_pop`` posterior.

    ``log alpha ~ Normal(mean of log draws, inflate * sd of log draws)``: the previous fit's
    posterior, as a lognormal, optionally widened.
    """
    if inflate <= 0:
        raise ValueError(f"inflate must be > 0, got {inflate}")
    post = tree["posterior"]
    if names.ALPHA_POP not in post:
        raise ValueError(f"the law fit's posterior has no {names.ALPHA_POP!r}")
    da = post[names.ALPHA_POP]
    out = {}
    for axis in da[names.AXIS_DIM].to_numpy():
        logs = np.log(da.sel({names.AXIS_DIM: axis}).to_numpy().ravel())
        out[str(axis)] = LogNormalPrior(float(np.exp(logs.mean())), float(inflate * logs.std()))
    return out


def build_pricing_model(
    design: PricingDesign,
    spec: PricingSpec,
    exponent_priors: Mapping[str, LogNormalPrior] | None = None,
) -> Any:
    """The pricing model as a ``pm.Model`` (see the module docstring for the equations).

    ``exponent_priors`` (axis -> prior) win over the spec's, e.g. from
    :func:`exponent_priors_from_law_fit`.
    """
    import pymc as pm
    import pytensor.tensor as pt

    from bayesscale.likelihood import log_loss_likelihood, success_likelihood
    from bayesscale.observations import cells_of

    axis_dim, method_dim = names.PRICED_AXIS_DIM, names.METHOD_DIM
    priors = [(exponent_priors or {}).get(a, spec.exponent_prior(a)) for a in design.axes]
    ma, mi = design.method_axis, design.method_index
    n_methods, n_axes = len(design.methods), len(design.axes)
    with pm.Model(coords=design.coords()) as model:
        # --- the axis law -------------------------------------------------------------------
        log_alpha = pm.Normal(
            "log_pricing_alpha",
            np.log([p.median for p in priors]),
            np.array([p.log_sd for p in priors]),
            dims=axis_dim,
        )
        alpha = pm.Deterministic(names.PRICING_ALPHA, pt.exp(log_alpha), dims=axis_dim)
        log_slope = pm.Normal(
            "log_pricing_slope", np.log(spec.slope.median), spec.slope.log_sd, dims=axis_dim
        )
        slope = pm.Deterministic(names.PRICING_SLOPE, pt.exp(log_slope), dims=axis_dim)
        log_level = pm.Normal(
            "log_pricing_level", np.log(spec.level.median), spec.level.log_sd, dims=method_dim
        )
        level = pm.Deterministic(names.PRICING_LEVEL, pt.exp(log_level), dims=method_dim)
        floor = pm.Deterministic(names.PRICING_FLOOR, level - (slope / alpha)[ma], dims=method_dim)
        # Soft wall on the floor: -softplus(-z)^2 / 2, z = floor / softness. Like log Phi(z)
        # (about -z^2/2 below 0, about 0 above) but with finite JAX gradients everywhere.
        z = floor / spec.floor_softness
        wall = -0.5 * _softplus(-z) ** 2
        pm.Potential("floor_positive", wall.sum())

        # --- discount intercepts and collapse scales ------------------------------------------
        if spec.pooling == "axis":
            logit_axis = pm.Normal(
                "logit_kappa0_axis", spec.kappa0_logit_mean, spec.kappa0_logit_sd, dims=axis_dim
            )
            spread = pm.HalfNormal(names.KAPPA0_SPREAD, sigma=spec.kappa0_spread)
            logit_k0 = logit_axis[ma] + spread * pm.Normal("kappa0_z", 0.0, 1.0, dims=method_dim)
            log_r0_axis = pm.Normal(
                "log_kappa_zero_ratio_axis",
                np.log(spec.zero_ratio.median),
                spec.zero_ratio.log_sd,
                dims=axis_dim,
            )
            r0_spread = pm.HalfNormal(names.KAPPA_ZERO_SPREAD, sigma=spec.zero_ratio_spread)
            # Centered: each method's collapse is placed sharply by its own runs, so the
            # non-centered form (tried first) tied axis mean and z at correlation -0.78.
            log_r0 = pm.Normal("log_kappa_zero_ratio", log_r0_axis[ma], r0_spread, dims=method_dim)
        else:
            logit_k0 = pm.Normal(
                "logit_kappa0", spec.kappa0_logit_mean, spec.kappa0_logit_sd, dims=method_dim
            )
            log_r0 = pm.Normal(
                "log_kappa_zero_ratio",
                np.log(spec.zero_ratio.median),
                spec.zero_ratio.log_sd,
                dims=method_dim,
            )
            # Unpooled: an axis's value is the median (logit / log mean) of its methods'.
            member = np.zeros((n_axes, n_methods))
            member[ma, np.arange(n_methods)] = 1.0
            member /= member.sum(axis=1, keepdims=True)
            logit_axis = pt.dot(pt.as_tensor(member), logit_k0)
            log_r0_axis = pt.dot(pt.as_tensor(member), log_r0)
        pm.Deterministic(names.KAPPA0_AXIS, pm.math.sigmoid(logit_axis), dims=axis_dim)
        pm.Deterministic(names.KAPPA_ZERO_AXIS, pt.exp(log_r0_axis), dims=axis_dim)
        kappa0 = pm.Deterministic(names.KAPPA0, pm.math.sigmoid(logit_k0), dims=method_dim)
        r0 = pm.Deterministic(names.KAPPA_ZERO, pt.exp(log_r0), dims=method_dim)
        # c = r_0 (1 - kappa0) / kappa0, i.e. logit-free: exp(log r_0 - logit kappa0)
        pm.Deterministic(names.COLLAPSE_SCALE, pt.exp(log_r0 - logit_k0), dims=method_dim)

        # --- effective data and the law, once per cell (a method's runs at one real and
        # synthetic count; the seeds share it) ----------------------------------------------------
        cells = cells_of(mi, np.column_stack([design.real, design.synthetic]))
        rows = cells.first_row
        ratio = design.ratio[rows]
        method = mi[rows]
        cell_axis = ma[method]
        # kappa(r) = kappa0 - (1 - kappa0) r / c = kappa0 (1 - r / r_0): sampled as (kappa0, r_0)
        # because the data place the zero crossing r_0 far better than c (c and kappa0 form a
        # ridge along constant r_0).
        g = 1.0 + ratio * kappa0[method] * (1.0 - ratio / r0[method])
        g_plus = soft_multiplier_tensor(g, spec.softness, spec.floor)
        log_x = np.log(design.real[rows] / design.reference[cell_axis]) + pt.log(g_plus)
        a_cell = alpha[cell_axis]
        # (D_eff / D_ref)^-alpha with the exponent clipped at 25: beyond it the loss is capped
        # anyway, and an overflow there would turn the cap's zero gradient into NaN.
        power = pt.expm1(pt.minimum(-a_cell * log_x, 25.0))
        loss = level[method] + slope[cell_axis] * power / a_cell
        # Keep 1e-4 < L < MAX_LOSS: the floor's wall keeps the lower clip inactive in practice;
        # the smooth upper cap (p >= e^-30) keeps collapsed runs' beta-binomial finite.
        loss = MAX_LOSS - _softplus(MAX_LOSS - pt.maximum(loss, 1e-4))

        if spec.outcome == "success":
            success_likelihood(
                loss, cells.index, design.trials, design.successes, spec.concentration
            )
        else:
            if design.loss is None:
                raise ValueError("a loss outcome needs the table's loss column")
            log_loss_likelihood(
                loss[cells.index], design.loss, spec.log_loss_sigma, spec.student_nu
            )
    return model


def soft_multiplier_tensor(g: Any, softness: float, floor: float) -> Any:
    """PyTensor twin of :func:`bayesscale.collapse.soft_multiplier`: ``h(G) / h(1)``."""

    def h(x: Any) -> Any:
        return floor + softness * _softplus((x - floor) / softness)

    one = floor + softness * float(np.logaddexp(0.0, (1.0 - floor) / softness))
    return h(g) / one


def _softplus(x: Any) -> Any:
    """``log(1 + e^x)`` as ``max(x, 0) + log1p(e^y)``, ``y = max(-|x|, -50)``.

    PyTensor rewrites ``log1p(exp(y))`` into its softplus op, whose JAX form evaluates every
    branch: for ``y`` near ``-1e4`` (collapsed runs) one overflows and JAX's autodiff gives a
    NaN gradient, stalling NUTS. Clipping at ``-50`` changes the value by < 2e-22.
    """
    import pytensor.tensor as pt

    return pt.maximum(x, 0.0) + pt.log1p(pt.exp(pt.maximum(-pt.abs(x), -50.0)))


# --- derived quantities --------------------------------------------------------------------


def derived_quantities(
    posterior: xr.Dataset,
    constant: xr.Dataset,
    threshold: float,
    frame: str,
    softness: float = collapse.DEFAULT_SOFTNESS,
    floor: float = collapse.DEFAULT_FLOOR,
) -> xr.Dataset:
    """``r_star`` and ``peak_ratio`` per (chain, draw, method) from posterior draws.

    Pure :mod:`bayesscale.collapse` math on the draws of kappa0, the collapse scale and the
    axis law, each method at its ``baseline_real`` count.
    """
    axis_of = constant[names.METHOD_AXIS]
    on_axis = {names.PRICED_AXIS_DIM: axis_of}
    x = constant[names.BASELINE_REAL] / constant[names.PRICING_REFERENCE].sel(on_axis)
    args = [
        posterior[names.KAPPA0],
        posterior[names.COLLAPSE_SCALE],
        posterior[names.PRICING_LEVEL],
        posterior[names.PRICING_SLOPE].sel(on_axis),
        posterior[names.PRICING_ALPHA].sel(on_axis),
        x,
    ]
    args = [a.drop_vars(names.PRICED_AXIS_DIM, errors="ignore") for a in args]
    k0, c, level, slope, alpha, xb = xr.broadcast(*args)
    r_star = collapse.collapse_ratio(
        k0.to_numpy(),
        c.to_numpy(),
        level.to_numpy(),
        slope.to_numpy(),
        alpha.to_numpy(),
        xb.to_numpy(),
        threshold=threshold,
        frame=frame,
        softness=softness,
        floor=floor,
    )
    peak = collapse.peak_ratio(k0.to_numpy(), c.to_numpy(), frame=frame)
    return xr.Dataset(
        {
            names.R_STAR: (k0.dims, r_star),
            names.PEAK_RATIO: (k0.dims, peak),
        },
        coords=k0.coords,
    )


def _constant_data(design: PricingDesign) -> xr.Dataset:
    return xr.Dataset(
        {
            names.METHOD_AXIS: ((names.METHOD_DIM,), np.array(design.axes)[design.method_axis]),
            names.BASELINE_REAL: ((names.METHOD_DIM,), design.baseline_real),
            names.PRICING_REFERENCE: ((names.PRICED_AXIS_DIM,), design.reference),
            names.OBS_METHOD: ((names.OBS_DIM,), np.array(design.methods)[design.method_index]),
            names.REAL: ((names.OBS_DIM,), design.real),
            names.SYNTHETIC: ((names.OBS_DIM,), design.synthetic),
        },
        coords={
            names.METHOD_DIM: list(design.methods),
            names.PRICED_AXIS_DIM: list(design.axes),
            names.OBS_DIM: np.arange(design.n_obs),
        },
    )


def fit_pricing(
    table: PricingTable,
    spec: PricingSpec,
    config: Any = None,
    exponent_priors: Mapping[str, LogNormalPrior] | None = None,
    exponent_source: str = "",
) -> xr.DataTree:
    """Fit the pricing model; return a ``pricing_fit`` DataTree with r* and the peak added.

    ``config`` is an :class:`bayesscale.sampling.config.FitConfig` (default: its defaults).
    """
    from bayesscale import __version__
    from bayesscale.fitfile import ATTR_FORMAT, FORMAT_VERSION
    from bayesscale.inference import FitConfig, sample, sampler_attrs
    from bayesscale.sampling.config import PRICING_TARGET_ACCEPT

    config = config or FitConfig(target_accept=PRICING_TARGET_ACCEPT)
    design = prepare_pricing(table, spec)
    model = build_pricing_model(design, spec, exponent_priors)
    tree, timing = sample(model, config, label="price")
    constant = _constant_data(design)
    posterior = tree["posterior"].to_dataset()
    posterior = posterior.merge(
        derived_quantities(
            posterior, constant, spec.threshold, spec.frame, spec.softness, spec.floor
        )
    )
    out = xr.DataTree.from_dict(
        {
            "posterior": posterior,
            "sample_stats": tree["sample_stats"].to_dataset(),
            "observed_data": tree["observed_data"].to_dataset(),
            "constant_data": constant,
        }
    )
    law_fit = f"previous law fit ({exponent_source})" if exponent_source else "previous law fit"
    sources = {}
    for a in design.axes:
        if exponent_priors and a in exponent_priors:
            sources[a] = law_fit
        else:
            sources[a] = "spec override" if a in spec.exponents else "spec default"
    out.attrs = {
        ATTR_FORMAT: FORMAT_VERSION,
        names.ATTR_KIND: names.KIND_PRICING_FIT,
        names.ATTR_VERSION: __version__,
        names.ATTR_SPEC: spec.text,
        names.ATTR_DATA_HASH: table.sha256,
        names.ATTR_DATA_SOURCE: table.source,
        names.ATTR_SAMPLER: config.sampler,
        names.ATTR_SEED: config.seed,
        names.ATTR_THRESHOLD: spec.threshold,
        names.ATTR_FRAME: spec.frame,
        names.ATTR_EXCLUSIONS: json.dumps([asdict(e) for e in table.exclusions]),
        names.ATTR_EXPONENT_SOURCE: json.dumps(sources),
        "pooling": spec.pooling,
        **sampler_attrs(config, int(posterior.sizes[names.DRAW_DIM]), timing),
    }
    return out


# --- summaries --------------------------------------------------------------------------------


def eta_squared(values: np.ndarray, groups: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Share of variance between groups, and the one-way ANOVA F, along the last axis.

    ``eta^2 = SS_between / SS_total``; ``F = (SS_b / (k - 1)) / (SS_w / (n - k))``.
    Leading dimensions (draws) broadcast.

    >>> e, f = eta_squared(np.array([1.0, 1.2, 3.0, 3.2]), ["a", "a", "b", "b"])
    >>> round(float(e), 4), round(float(f), 1)
    (0.9901, 200.0)
    """
    v = np.asarray(values, dtype=float)
    labels = np.asarray([str(g) for g in groups])
    kinds = list(dict.fromkeys(labels))
    n, k = v.shape[-1], len(kinds)
    if n != len(labels) or k < 2 or n <= k:
        raise ValueError(f"need n > k >= 2 (values {n}, groups {k}) with one label per value")
    grand = v.mean(axis=-1, keepdims=True)
    total = ((v - grand) ** 2).sum(axis=-1)
    between = np.zeros(v.shape[:-1])
    for g in kinds:
        member = v[..., labels == g]
        between = between + member.shape[-1] * (member.mean(axis=-1) - grand[..., 0]) ** 2
    within = total - between
    eta = between / total
    with np.errstate(divide="ignore"):
        f = (between / (k - 1)) / (within / (n - k))
    return eta, f


def _interval(values: np.ndarray, prob: float) -> dict[str, float | None]:
    """Mean, median and the equal-tailed ``prob`` interval of draws: an infinite value (r* of
    draws without collapse) stays ``inf``; an undefined one (NaN) is ``None``."""
    from bayesscale.recipe import quantiles  # keeps inf (np.quantile: inf - inf = NaN)

    v = np.asarray(values, dtype=float).ravel()
    tail = (1 - prob) / 2

    def clean(x: float) -> float | None:
        return None if np.isnan(x) else float(x)

    with np.errstate(invalid="ignore"):
        mean = float(v.mean())  # inf with an infinite draw; NaN (undefined) with inf and -inf
    median, lower, upper = quantiles(v, [0.5, tail, 1 - tail]).tolist()
    return {
        "mean": clean(mean),
        "median": clean(median),
        "lower": clean(lower),
        "upper": clean(upper),
    }


def json_ready(value: Any) -> Any:
    """A summary as strict JSON, the convention of ``bayesscale recipe --json``: an infinite
    number is the string ``"inf"`` or ``"-inf"``, an undefined one (NaN) ``null``.

    >>> json_ready({"r_star": {"median": float("inf"), "lower": 0.5, "mean": float("nan")}})
    {'r_star': {'median': 'inf', 'lower': 0.5, 'mean': None}}
    """
    if isinstance(value, Mapping):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, float | np.floating):
        if np.isnan(value):
            return None
        if np.isinf(value):
            return "inf" if value > 0 else "-inf"
        return float(value)
    return value


def r_star_notes(r_star_median: float, ratios: np.ndarray) -> list[str]:
    """Where r* falls relative to the observed ratio grid (beyond it, or in a wide gap)."""
    grid = np.unique(ratios[ratios > 0])
    if not np.isfinite(r_star_median):
        return ["success never falls to the threshold in the posterior median: no collapse"]
    if r_star_median > grid.max():
        return [
            f"r* (median {r_star_median:.3g}) lies beyond the largest ratio {grid.max():g}: "
            "extrapolated by the kappa family, not placed by data"
        ]
    below, above = grid[grid <= r_star_median], grid[grid >= r_star_median]
    low = below.max() if len(below) else 0.0
    high = above.min()
    if low == 0 or high / low >= COARSE_GAP:
        return [
            f"r* (median {r_star_median:.3g}) falls between ratios {low:g} and {high:g}: a grid "
            f"this coarse (a factor >= {COARSE_GAP:g} apart) leaves r* to the kappa family; add ratios there"
        ]
    return []


def pricing_diagnostics(tree: xr.DataTree) -> Diagnostics:
    """Convergence of the sampled and deterministic variables; r* and the peak ratio are
    computed per draw after sampling (and may be infinite), so they are left out."""
    from bayesscale.fitfile import diagnose

    groups = {"posterior": tree["posterior"].to_dataset().drop_vars(list(DERIVED), errors="ignore")}
    if "sample_stats" in tree.children:
        groups["sample_stats"] = tree["sample_stats"].to_dataset()
    base = xr.DataTree.from_dict(groups)
    base.attrs = dict(tree.attrs)  # the preview mark
    return diagnose(base)


def summarise_pricing(tree: xr.DataTree, prob: float = 0.9) -> dict[str, Any]:
    """Everything ``bayesscale pricing-table`` prints, as plain data (JSON-ready).

    Per method: axis, runs, kappa0, collapse scale, r*, peak ratio (equal-tailed ``prob``
    intervals; ``inf`` for an infinite bound, i.e. no collapse, ``None`` for an undefined one;
    :func:`json_ready` writes them as ``"inf"`` and ``null``); per axis: the pooled
    kappa0; the share of kappa0 variance axis membership explains (eta^2, per draw, over
    methods on axes with at least two methods), with its interval; exclusions; diagnostics.
    """
    if not 0 < prob < 1:
        raise ValueError(f"--prob must be in (0, 1), got {prob}")
    post = tree["posterior"].to_dataset()
    const = tree["constant_data"].to_dataset()
    methods = [str(m) for m in post[names.METHOD_DIM].to_numpy()]
    axes = [str(a) for a in post[names.PRICED_AXIS_DIM].to_numpy()]
    axis_of = {m: str(a) for m, a in zip(methods, const[names.METHOD_AXIS].to_numpy(), strict=True)}
    obs_method = const[names.OBS_METHOD].to_numpy().astype(str)
    ratio = (const[names.SYNTHETIC] / const[names.REAL]).to_numpy()

    per_method: dict[str, Any] = {}
    for m in methods:
        r_star = post[names.R_STAR].sel({names.METHOD_DIM: m}).to_numpy()
        mine = ratio[obs_method == m]
        per_method[m] = {
            "axis": axis_of[m],
            "runs": int((obs_method == m).sum()),
            "ratios": np.unique(mine).round(4).tolist(),
            "kappa0": _interval(post[names.KAPPA0].sel({names.METHOD_DIM: m}).to_numpy(), prob),
            "collapse_scale": _interval(
                post[names.COLLAPSE_SCALE].sel({names.METHOD_DIM: m}).to_numpy(), prob
            ),
            "kappa_zero_ratio": _interval(
                post[names.KAPPA_ZERO].sel({names.METHOD_DIM: m}).to_numpy(), prob
            ),
            "r_star": _interval(r_star, prob),
            "r_star_no_collapse_share": float(np.mean(~np.isfinite(r_star))),
            "peak_ratio": _interval(
                post[names.PEAK_RATIO].sel({names.METHOD_DIM: m}).to_numpy(), prob
            ),
            "notes": r_star_notes(float(np.median(r_star)), mine),
        }
    per_axis = {
        a: {
            "kappa0": _interval(
                post[names.KAPPA0_AXIS].sel({names.PRICED_AXIS_DIM: a}).to_numpy(), prob
            ),
            "methods": [m for m in methods if axis_of[m] == a],
        }
        for a in axes
    }
    counts = {a: len(v["methods"]) for a, v in per_axis.items()}
    grouped = [m for m in methods if counts[axis_of[m]] >= 2]
    left_out = [m for m in methods if counts[axis_of[m]] < 2]
    variance: dict[str, Any]
    n_groups = len({axis_of[m] for m in grouped})
    if n_groups >= 2 and len(grouped) > n_groups:
        k0 = (
            post[names.KAPPA0]
            .sel({names.METHOD_DIM: grouped})
            .stack(_s=SAMPLE)
            .transpose("_s", names.METHOD_DIM)
        )
        eta, f = eta_squared(k0.to_numpy(), [axis_of[m] for m in grouped])
        variance = {
            "eta_squared": _interval(eta, prob),
            "f_statistic": _interval(f, prob),
            "df": [n_groups - 1, len(grouped) - n_groups],
            "methods": grouped,
            "left_out": left_out,
        }
    else:
        variance = {"eta_squared": None, "reason": "needs two axes with two or more methods each"}
    return {
        "prob": prob,
        "threshold": float(tree.attrs.get(names.ATTR_THRESHOLD, collapse.DEFAULT_THRESHOLD)),
        "frame": str(tree.attrs.get(names.ATTR_FRAME, collapse.FIXED_REAL)),
        "pooling": str(tree.attrs.get("pooling", "")),
        "methods": per_method,
        "axes": per_axis,
        "axis_share_of_kappa0_variance": variance,
        "exponent_source": json.loads(str(tree.attrs.get(names.ATTR_EXPONENT_SOURCE, "{}"))),
        "exclusions": [
            e["message"] for e in json.loads(str(tree.attrs.get(names.ATTR_EXCLUSIONS, "[]")))
        ],
        "diagnostics": pricing_diagnostics(tree).to_dict(),
    }


def format_pricing_text(result: Mapping[str, Any]) -> str:
    """The pricing table as aligned text."""
    from bayesscale.fitfile import format_diagnostics

    def iv(d: Mapping[str, Any] | None, digits: int = 2) -> str:
        if d is None:
            return "-"

        def num(x: float | None) -> str:
            if x is None:
                return "n/a"
            return ("inf" if x > 0 else "-inf") if np.isinf(x) else f"{x:.{digits}f}"

        return f"{num(d['median'])} [{num(d['lower'])}, {num(d['upper'])}]"

    pct = round(100 * result["prob"])
    lines = [
        f"pricing: kappa(r) = kappa0 - (1 - kappa0) r / c; r* where normalised success falls "
        f"below {result['threshold']:g} of the pure-real baseline ({result['frame']}); "
        f"median [{pct}% interval]; pooling: {result['pooling']}",
        "",
        f"{'method':<14}{'axis':<8}{'runs':>5}  {'kappa0':<22}{'r*':<24}{'peak ratio':<22}",
    ]
    notes = []
    for m, d in result["methods"].items():
        lines.append(
            f"{m:<14}{d['axis']:<8}{d['runs']:>5}  {iv(d['kappa0']):<22}{iv(d['r_star']):<24}"
            f"{iv(d['peak_ratio']):<22}"
        )
        notes += [f"  {m}: {n}" for n in d["notes"]]
    lines += ["", "pooled kappa0 per axis:"]
    for a, d in result["axes"].items():
        lines.append(f"  {a:<10}{iv(d['kappa0']):<24}methods: {', '.join(d['methods'])}")
    v = result["axis_share_of_kappa0_variance"]
    lines.append("")
    if v.get("eta_squared") is None:
        lines.append(f"axis share of kappa0 variance: not computed ({v.get('reason')})")
    else:
        lines.append(
            f"axis share of kappa0 variance (eta^2): {iv(v['eta_squared'])}; "
            f"F({v['df'][0]}, {v['df'][1]}) {iv(v['f_statistic'], 1)}"
            + (
                f"; left out (alone on their axis): {', '.join(v['left_out'])}"
                if v["left_out"]
                else ""
            )
        )
    if notes:
        lines += ["", "notes:", *notes]
    if result["exclusions"]:
        lines += ["", "left out of the fit:", *[f"  {e}" for e in result["exclusions"]]]
    dg = result["diagnostics"]
    lines += [
        "",
        f"diagnostics: {format_diagnostics(dg)}"
        + ("" if dg["ok"] else f"  ({dg.get('headline') or 'FAILED: do not trust yet'})"),
    ]
    return "\n".join(lines)
