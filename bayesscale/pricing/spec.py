"""The pricing spec (``models/pricing.toml``): priors of the discount model, its pooling, the
ratio grid it needs; and the errors of the pricing pipeline.

>>> spec = load_pricing_spec()
>>> spec.pooling in POOLING_MODES
True
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from bayesscale import names
from bayesscale.core import collapse
from bayesscale.data.fitfile import stored_spec_text
from bayesscale.data.observations import (
    DataWarning,
    ObservationError,
)
from bayesscale.data.spec import (
    BETA_BINOMIAL,
    SPEC_DIR,
    LogNormalPrior,
    SpecError,
    SpreadPrior,
    open_spec,
)

if TYPE_CHECKING:
    import xarray as xr

DEFAULT_PRICING_SPEC: Final = "pricing"
POOLING_MODES: Final = ("axis", "none")
MIN_POSITIVE_RATIOS: Final = 3
COARSE_GAP: Final = 4.0  # r* between two grid ratios more than this factor apart is "coarse"
SAMPLE: Final = (names.CHAIN_DIM, names.DRAW_DIM)
MAX_LOSS: Final = 30.0  # smooth cap on the loss-equivalent of a collapsed run (p >= 1e-13)
DERIVED: Final = (names.R_STAR, names.PEAK_RATIO)
# The spreads of the methods' logit kappa0 and log r0 around their axis when a spec leaves
# them out: lognormal, as models/pricing.toml has them (docs/pricing.md says why).
DEFAULT_KAPPA0_SPREAD: Final = LogNormalPrior(0.35, 0.75)
DEFAULT_ZERO_RATIO_SPREAD: Final = LogNormalPrior(0.2, 0.75)


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
    kappa0_spread: SpreadPrior
    pooling: str
    zero_ratio: LogNormalPrior
    zero_ratio_spread: SpreadPrior
    threshold: float
    frame: str
    softness: float
    floor: float
    level: LogNormalPrior
    slope: LogNormalPrior
    floor_softness: float
    exponent: LogNormalPrior
    exponents: Mapping[str, LogNormalPrior] = field(default_factory=dict)
    seed_noise: str = BETA_BINOMIAL  # the pricing model's runs are beta-binomial
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
    top, name, description = open_spec(text, source)

    out = top.optional("outcome")
    outcome = out.get("kind", str, "success")
    if outcome not in ("success", "loss"):
        raise SpecError(f"{source}: [outcome] kind: must be 'success' or 'loss', got {outcome!r}")
    concentration = out.prior("concentration", LogNormalPrior(150.0, 1.0))
    log_loss_sigma = out.positive("log_loss_sigma", 0.05)
    student_nu = out.positive("student_nu", 4.0)
    out.finish()

    k = top.optional("kappa0")
    logit_mean = float(k.get("logit_mean", float, 0.0))
    logit_sd = k.positive("logit_sd", 1.0)
    spread = k.spread_prior("spread", DEFAULT_KAPPA0_SPREAD)
    pooling = k.get("pooling", str, "axis")
    if pooling not in POOLING_MODES:
        raise SpecError(f"{source}: [kappa0] pooling: one of {POOLING_MODES}, got {pooling!r}")
    k.finish()

    c = top.optional("collapse")
    zero_ratio = c.prior("zero_ratio", LogNormalPrior(3.0, 1.0))
    zero_ratio_spread = c.spread_prior("spread", DEFAULT_ZERO_RATIO_SPREAD)
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

    law = top.optional("law")
    level = law.prior("level", LogNormalPrior(0.8, 0.5))
    slope = law.prior("slope", LogNormalPrior(0.05, 1.0))
    floor_softness = law.positive("floor_softness", 0.02)
    exponent = law.prior("exponent", LogNormalPrior(0.25, 0.75))
    per_axis = law.optional("exponents")
    exponents = {axis: per_axis.prior(axis) for axis in list(per_axis.table)}
    per_axis.finish()
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


def pricing_fit_spec(tree: xr.DataTree) -> PricingSpec:
    """The pricing spec a pricing fit was made with, parsed from its attributes: the one place a
    stored pricing spec is parsed (cached by its text, as :func:`bayesscale.data.fitfile.fit_spec`
    caches the law's)."""
    return _parse_stored(stored_spec_text(tree))


@functools.lru_cache(maxsize=16)
def _parse_stored(text: str) -> PricingSpec:
    return parse_pricing_spec(text, source="<pricing spec stored in fit>")


def load_pricing_spec(path_or_name: str | Path | None = None) -> PricingSpec:
    """Load a pricing spec from a file, or by name from ``models/`` (default ``pricing``)."""
    path = Path(path_or_name if path_or_name is not None else DEFAULT_PRICING_SPEC)
    if not path.exists():
        bundled = SPEC_DIR / f"{path}.toml"
        if not bundled.exists():
            raise SpecError(f"{path}: no such pricing spec file, and no bundled spec of that name")
        path = bundled
    return parse_pricing_spec(path.read_text(), source=str(path))
