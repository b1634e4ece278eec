"""Fitting the pricing model, and the quantities derived from its draws (``r*`` and the peak
ratio, by :func:`bayesscale.core.collapse.collapse_ratio` and
:func:`~bayesscale.core.collapse.peak_ratio`).

>>> tree = fit_pricing(table, spec, FitConfig(seed=1))  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.core import collapse
from bayesscale.data.spec import LogNormalPrior, SpecError
from bayesscale.pricing.design import PricingDesign, prepare_pricing
from bayesscale.pricing.model import build_pricing_model
from bayesscale.pricing.spec import PricingSpec
from bayesscale.pricing.table import PricingTable
from bayesscale.sampling.config import PRICING_TARGET_ACCEPT, FitConfig

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

    Pure :mod:`bayesscale.core.collapse` math on the draws of kappa0, the collapse scale and the
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


def pricing_config(config: FitConfig | None = None) -> FitConfig:
    """What a pricing fit samples with: ``config`` (by default
    :class:`~bayesscale.sampling.config.FitConfig`'s defaults), at the pricing model's own
    target acceptance where it names none.

    >>> pricing_config().accept, pricing_config(FitConfig(target_accept=0.9)).accept
    (0.95, 0.9)
    """
    return (config or FitConfig()).with_default_accept(PRICING_TARGET_ACCEPT)


def fit_pricing(
    table: PricingTable,
    spec: PricingSpec,
    config: Any = None,
    exponent_priors: Mapping[str, LogNormalPrior] | None = None,
    exponent_source: str = "",
) -> xr.DataTree:
    """Fit the pricing model; return a ``pricing_fit`` DataTree with r* and the peak added.

    ``config`` is an :class:`bayesscale.sampling.config.FitConfig` (default: its defaults);
    where it names no ``target_accept``, the pricing model's own (0.95) is used.
    """
    from bayesscale.data.fitfile import fit_attrs
    from bayesscale.law.inference import sample, sampler_attrs

    config = pricing_config(config)
    design = prepare_pricing(table, spec)
    unknown = sorted(set(spec.exponents) - set(design.axes))
    if unknown:  # a misspelt axis would otherwise leave its prior silently unused
        raise SpecError(
            f"{spec.source}: [law.exponents] {', '.join(map(repr, unknown))}: not an axis of "
            f"{table.source} (its axes: {', '.join(design.axes)})"
        )
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
        **fit_attrs(names.KIND_PRICING_FIT, spec.text, table.sha256, table.source),
        names.ATTR_THRESHOLD: spec.threshold,
        names.ATTR_FRAME: spec.frame,
        names.ATTR_EXCLUSIONS: json.dumps([asdict(e) for e in table.exclusions]),
        names.ATTR_EXPONENT_SOURCE: json.dumps(sources),
        "pooling": spec.pooling,
        **sampler_attrs(config, int(posterior.sizes[names.DRAW_DIM]), timing),
    }
    # The sampler's last convergence check, made on the posterior before r* and the peak were
    # added, which is what pricing's diagnostics read (they leave those two out): kept, so it
    # is not computed again.
    if names.ATTR_CONVERGENCE in tree.attrs:
        out.attrs[names.ATTR_CONVERGENCE] = tree.attrs[names.ATTR_CONVERGENCE]
    return out
