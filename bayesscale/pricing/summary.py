"""Summaries of a pricing fit: kappa0, r* and the peak ratio per method with intervals, the
variance share of the axis (eta squared), notes on r*, the text table.

>>> summarise_pricing(tree)["methods"]["AWM"]["kappa0"]  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.core import collapse
from bayesscale.core.intervals import describe
from bayesscale.data.fitfile import Diagnostics, diagnose, format_diagnostics
from bayesscale.data.spec import LogNormalPrior, SpreadPrior
from bayesscale.law.sensitivity import (
    CONTRACTION_DOMINATED,
    CONTRACTION_SENSITIVE,
    FLAG_DOMINATED,
    FLAG_SENSITIVE,
    MARKERS,
)
from bayesscale.pricing.spec import COARSE_GAP, DERIVED, SAMPLE, pricing_fit_spec

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
    return {k: None if np.isnan(x) else float(x) for k, x in describe(values, prob).items()}


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


def spread_second_moment(prior: SpreadPrior) -> float:
    """``E[s^2]`` of a spread prior: ``median^2 exp(2 log_sd^2)`` for a lognormal, ``scale^2``
    for a HalfNormal.

    >>> spread_second_moment(0.5), round(spread_second_moment(LogNormalPrior(0.35, 0.75)), 4)
    (0.25, 0.3773)
    """
    if isinstance(prior, LogNormalPrior):
        return float(prior.median**2 * np.exp(2 * prior.log_sd**2))
    return float(prior) ** 2


def kappa0_identification(
    logit_draws: np.ndarray, prior_variance: float
) -> dict[str, float | str | None]:
    """How much the data decide a discount: the contraction ``1 - var_post / var_prior`` of
    its logit, flagged as the law's exponents are (:mod:`bayesscale.law.sensitivity`'s
    thresholds; contraction only, no power-scaling).

    >>> kappa0_identification(np.array([-0.1, 0.0, 0.1]), 1.0)["flag"] is None
    True
    """
    contraction = float(1.0 - np.var(logit_draws) / prior_variance)
    flag = None
    if contraction < CONTRACTION_DOMINATED:
        flag = FLAG_DOMINATED
    elif contraction < CONTRACTION_SENSITIVE:
        flag = FLAG_SENSITIVE
    return {"contraction": contraction, "flag": flag}


def kappa0_marker(entry: Mapping[str, Any]) -> str:
    """``‡`` / ``†`` (or ``""``) for a method's or an axis's kappa0 (old results have none)."""
    ident = entry.get("kappa0_identification") or {}
    return MARKERS.get(ident.get("flag") or "", "")


def kappa0_flag_note(result: Mapping[str, Any]) -> str | None:
    """The note under a pricing table whose kappa0 are flagged, else ``None``."""
    entries = [*result["methods"].values(), *result["axes"].values()]
    if not any(kappa0_marker(e) for e in entries):
        return None
    return (
        f"{MARKERS[FLAG_DOMINATED]} / {MARKERS[FLAG_SENSITIVE]} after kappa0: the posterior of "
        f"logit kappa0 kept more than {1 - CONTRACTION_DOMINATED:.0%} / "
        f"{1 - CONTRACTION_SENSITIVE:.0%} of the prior's variance (the pricing spec's [kappa0] "
        "priors): the interval leans on the prior, and so do the discounts a recipe takes "
        "from it."
    )


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def pricing_diagnostics(tree: xr.DataTree) -> Diagnostics:
    """Convergence of the sampled and deterministic variables; r* and the peak ratio are
    computed per draw after sampling (and may be infinite), so they are left out."""
    return diagnose(tree, leave_out=DERIVED)


def summarise_pricing(tree: xr.DataTree, prob: float = 0.9) -> dict[str, Any]:
    """Everything ``bayesscale pricing-table`` prints, as plain data (JSON-ready).

    Per method: axis, runs, kappa0, collapse scale, r*, peak ratio (equal-tailed ``prob``
    intervals; ``inf`` for an infinite bound, i.e. no collapse, ``None`` for an undefined one;
    :func:`json_ready` writes them as ``"inf"`` and ``null``); per axis: the pooled
    kappa0; the share of kappa0 variance axis membership explains (eta^2, per draw, over
    methods on axes with at least two methods), with its interval; exclusions; diagnostics.
    """
    if not 0 < prob < 1:
        raise ValueError(f"prob must be in (0, 1), got {prob}")
    post = tree["posterior"].to_dataset()
    const = tree["constant_data"].to_dataset()
    methods = [str(m) for m in post[names.METHOD_DIM].to_numpy()]
    axes = [str(a) for a in post[names.PRICED_AXIS_DIM].to_numpy()]
    axis_of = {m: str(a) for m, a in zip(methods, const[names.METHOD_AXIS].to_numpy(), strict=True)}
    obs_method = const[names.OBS_METHOD].to_numpy().astype(str)
    ratio = (const[names.SYNTHETIC] / const[names.REAL]).to_numpy()

    # the prior variance of a method's and an axis's logit kappa0, from the fit's own spec
    spec = pricing_fit_spec(tree)
    logit_var = spec.kappa0_logit_sd**2
    pooled = spec.pooling == "axis"
    method_prior_variance = logit_var + (
        spread_second_moment(spec.kappa0_spread) if pooled else 0.0
    )
    members = {a: sum(1 for m in methods if axis_of[m] == a) for a in axes}

    per_method = {
        m: _method_summary(post, m, axis_of[m], ratio[obs_method == m], prob, method_prior_variance)
        for m in methods
    }
    per_axis = {
        a: {
            "kappa0": _interval(
                post[names.KAPPA0_AXIS].sel({names.PRICED_AXIS_DIM: a}).to_numpy(), prob
            ),
            "methods": [m for m in methods if axis_of[m] == a],
            "kappa0_identification": kappa0_identification(
                _logit(post[names.KAPPA0_AXIS].sel({names.PRICED_AXIS_DIM: a}).to_numpy()),
                # unpooled, an axis's logit is the mean of its methods'
                logit_var if pooled else logit_var / max(members[a], 1),
            ),
        }
        for a in axes
    }
    variance = _axis_share(post, methods, axis_of, per_axis, prob)
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


def _method_summary(
    post: xr.Dataset, m: str, axis: str, mine: Any, prob: float, method_prior_variance: float
) -> dict[str, Any]:
    """One method's entry of :func:`summarise_pricing`: its axis, runs and ratios (``mine``:
    the ratio of each of its runs), and the intervals of kappa0, the collapse, r* and the
    peak."""
    r_star = post[names.R_STAR].sel({names.METHOD_DIM: m}).to_numpy()
    return {
        "axis": axis,
        "runs": int(np.size(mine)),
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
        "peak_ratio": _interval(post[names.PEAK_RATIO].sel({names.METHOD_DIM: m}).to_numpy(), prob),
        "notes": r_star_notes(float(np.median(r_star)), mine),
        "kappa0_identification": kappa0_identification(
            _logit(post[names.KAPPA0].sel({names.METHOD_DIM: m}).to_numpy()),
            method_prior_variance,
        ),
    }


def _axis_share(
    post: xr.Dataset,
    methods: list[str],
    axis_of: dict[str, str],
    per_axis: dict[str, Any],
    prob: float,
) -> dict[str, Any]:
    """The share of kappa0 variance axis membership explains (eta^2 per draw, and its F
    statistic), over the methods on axes with at least two methods each."""
    counts = {a: len(v["methods"]) for a, v in per_axis.items()}
    grouped = [m for m in methods if counts[axis_of[m]] >= 2]
    left_out = [m for m in methods if counts[axis_of[m]] < 2]
    n_groups = len({axis_of[m] for m in grouped})
    if n_groups >= 2 and len(grouped) > n_groups:
        k0 = (
            post[names.KAPPA0]
            .sel({names.METHOD_DIM: grouped})
            .stack(_s=SAMPLE)
            .transpose("_s", names.METHOD_DIM)
        )
        eta, f = eta_squared(k0.to_numpy(), [axis_of[m] for m in grouped])
        return {
            "eta_squared": _interval(eta, prob),
            "f_statistic": _interval(f, prob),
            "df": [n_groups - 1, len(grouped) - n_groups],
            "methods": grouped,
            "left_out": left_out,
        }
    return {"eta_squared": None, "reason": "needs two axes with two or more methods each"}


def format_pricing_text(result: Mapping[str, Any]) -> str:
    """The pricing table as aligned text."""

    def iv(d: Mapping[str, Any] | None, digits: int = 2) -> str:
        if d is None:
            return "-"

        def num(x: float | None) -> str:
            if x is None:
                return "n/a"
            return ("inf" if x > 0 else "-inf") if np.isinf(x) else f"{x:.{digits}f}"

        return f"{num(d['median'])} [{num(d['lower'])}, {num(d['upper'])}]"

    pct = round(100 * result["prob"])
    dg = result["diagnostics"]
    headline = dg.get("headline")  # a preview or failed fit says so first, as the law's summary
    lines = [headline] if headline else []
    lines += [
        f"pricing: kappa(r) = kappa0 - (1 - kappa0) r / c; r* where normalised success falls "
        f"below {result['threshold']:g} of the pure-real baseline ({result['frame']}); "
        f"median [{pct}% interval]; pooling: {result['pooling']}",
        "",
        f"{'method':<14}{'axis':<8}{'runs':>5}  {'kappa0':<22}{'r*':<24}{'peak ratio':<22}",
    ]
    notes = []
    for m, d in result["methods"].items():
        kappa0 = f"{iv(d['kappa0'])}{kappa0_marker(d)}"
        lines.append(
            f"{m:<14}{d['axis']:<8}{d['runs']:>5}  {kappa0:<22}{iv(d['r_star']):<24}"
            f"{iv(d['peak_ratio']):<22}"
        )
        notes += [f"  {m}: {n}" for n in d["notes"]]
    lines += ["", "pooled kappa0 per axis:"]
    for a, d in result["axes"].items():
        kappa0 = f"{iv(d['kappa0'])}{kappa0_marker(d)}"
        lines.append(f"  {a:<10}{kappa0:<24}methods: {', '.join(d['methods'])}")
    flagged = kappa0_flag_note(result)
    if flagged is not None:
        lines += ["", flagged]
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
    lines += [
        "",
        f"diagnostics: {format_diagnostics(dg)}"
        + ("" if dg["ok"] else f"  ({dg.get('headline') or 'FAILED: do not trust yet'})"),
    ]
    return "\n".join(lines)
