"""The hierarchical discount model of synthetic data, built in PyMC.

The model (``models/pricing.toml``; equations in :mod:`bayesscale.core.collapse`):

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
sampling with :func:`bayesscale.core.collapse.collapse_ratio` and :func:`~bayesscale.core.collapse.peak_ratio`
(:mod:`bayesscale.pricing.fit`).

Example
-------
>>> from bayesscale.pricing.design import prepare_pricing
>>> model = build_pricing_model(prepare_pricing(table, spec), spec)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.data.spec import LogNormalPrior, SpreadPrior
from bayesscale.pricing.design import PricingDesign
from bayesscale.pricing.spec import MAX_LOSS, PricingSpec

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
    """The pricing model as a ``pm.Model`` (see the module docstring for the equations), in
    three steps: the law of each axis, the discount of each method, the loss of each cell
    and its likelihood.

    ``exponent_priors`` (axis -> prior) win over the spec's, e.g. from
    :func:`exponent_priors_from_law_fit`.
    """
    import pymc as pm

    from bayesscale.data.observations import cells_of
    from bayesscale.law.likelihood import observe

    with pm.Model(coords=design.coords()) as model:
        alpha, slope, level = _axis_law(design, spec, exponent_priors)
        kappa0, r0 = _discounts(design, spec)
        # a method's runs at one real and synthetic count share one cell; the seeds its rows
        cells = cells_of(design.method_index, np.column_stack([design.real, design.synthetic]))
        loss = _loss_at_cells(design, spec, cells.first_row, alpha, slope, level, kappa0, r0)
        observe(loss, cells.index, design, spec)
    return model


def _axis_law(
    design: PricingDesign, spec: PricingSpec, exponent_priors: Mapping[str, LogNormalPrior] | None
) -> tuple[Any, Any, Any]:
    """Exponent and slope per axis, the pure-real loss level per method, and the soft wall
    that keeps each method's loss floor ``level - slope / alpha`` positive."""
    import pymc as pm
    import pytensor.tensor as pt

    axis_dim, method_dim = names.PRICED_AXIS_DIM, names.METHOD_DIM
    priors = [(exponent_priors or {}).get(a, spec.exponent_prior(a)) for a in design.axes]
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
    floor = pm.Deterministic(
        names.PRICING_FLOOR, level - (slope / alpha)[design.method_axis], dims=method_dim
    )
    # Soft wall on the floor: -softplus(-z)^2 / 2, z = floor / softness. Like log Phi(z)
    # (about -z^2/2 below 0, about 0 above) but with finite JAX gradients everywhere.
    z = floor / spec.floor_softness
    pm.Potential(names.FLOOR_POSITIVE, (-0.5 * _softplus(-z) ** 2).sum())
    return alpha, slope, level


def _discounts(design: PricingDesign, spec: PricingSpec) -> tuple[Any, Any]:
    """Each method's discount intercept kappa0 and zero crossing r_0, pooled within its axis
    (``pooling = "axis"``) or not; the axis values and the collapse scale as deterministics."""
    import pymc as pm
    import pytensor.tensor as pt

    axis_dim, method_dim = names.PRICED_AXIS_DIM, names.METHOD_DIM
    ma = design.method_axis
    n_methods, n_axes = len(design.methods), len(design.axes)
    if spec.pooling == "axis":
        logit_axis = pm.Normal(
            "logit_kappa0_axis", spec.kappa0_logit_mean, spec.kappa0_logit_sd, dims=axis_dim
        )
        spread = _spread(names.KAPPA0_SPREAD, spec.kappa0_spread)
        logit_k0 = logit_axis[ma] + spread * pm.Normal("kappa0_z", 0.0, 1.0, dims=method_dim)
        log_r0_axis = pm.Normal(
            "log_kappa_zero_ratio_axis",
            np.log(spec.zero_ratio.median),
            spec.zero_ratio.log_sd,
            dims=axis_dim,
        )
        r0_spread = _spread(names.KAPPA_ZERO_SPREAD, spec.zero_ratio_spread)
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
    return kappa0, r0


def _spread(name: str, prior: SpreadPrior) -> Any:
    """A spread of methods around their axis: LogNormal (zero-avoiding) for a
    ``{ median, log_sd }`` prior, else HalfNormal with that scale.

    Near zero spread the methods' centred values form a funnel, which NUTS cannot enter
    without diverging; a LogNormal prior puts almost no mass there (docs/pricing.md).
    """
    import pymc as pm

    if isinstance(prior, LogNormalPrior):
        return pm.LogNormal(name, mu=float(np.log(prior.median)), sigma=prior.log_sd)
    return pm.HalfNormal(name, sigma=prior)


def _loss_at_cells(
    design: PricingDesign,
    spec: PricingSpec,
    rows: np.ndarray,
    alpha: Any,
    slope: Any,
    level: Any,
    kappa0: Any,
    r0: Any,
) -> Any:
    """The loss at each cell (``rows``: a row of each), from its effective data
    ``D_eff = D_r G+(1 + r kappa(r))``."""
    import pytensor.tensor as pt

    ratio = design.ratio[rows]
    method = design.method_index[rows]
    cell_axis = design.method_axis[method]
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
    return MAX_LOSS - _softplus(MAX_LOSS - pt.maximum(loss, 1e-4))


def soft_multiplier_tensor(g: Any, softness: float, floor: float) -> Any:
    """PyTensor twin of :func:`bayesscale.core.collapse.soft_multiplier`: ``h(G) / h(1)``."""

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
