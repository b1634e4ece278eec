"""Summaries of a law fit: exponents with credible intervals and the ordering probability.

Intervals are equal-tailed at ``prob`` (default 0.9). The ordering probability is
``P(alpha_1 > alpha_2 > ... )`` over posterior draws, axes in the spec's order (for the
default spec: environments > tasks > rollouts).

Every exponent also says how much the data moved it from its prior
(:mod:`bayesscale.law.sensitivity`): its ``contraction``, power-scaling ``prior_sensitivity`` and
``likelihood_sensitivity``, and ``flag`` (``"prior-dominated"``, ``"prior-sensitive"`` or
``None``); the rule and the prior are under ``identification``. The text marks flagged
exponents with ``‡`` and ``†``.

Every summarised scalar carries its Monte Carlo standard errors (ArviZ's ``mcse``):
``mcse_mean`` of the posterior mean, ``mcse_median``, ``mcse_lower`` and ``mcse_upper`` of the
median and the interval's ends. The text prints each number to the digits its MCSE supports
(:func:`rounded`): down to the first significant digit of twice its MCSE, never finer, and
never finer than three decimals.

Example
-------
>>> result = summarise(load_fit("fit.nc"), prob=0.9)  # doctest: +SKIP
>>> result["exponents"]["population"]["env"]["median"]  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.core import laws
from bayesscale.core.intervals import describe, tail_quantiles
from bayesscale.data.fitfile import diagnose, fit_spec, format_diagnostics
from bayesscale.law.reach import reach_report
from bayesscale.law.sensitivity import (
    FLAG_BORDERLINE,
    FLAG_DOMINATED,
    FLAG_SENSITIVE,
    MARKERS,
    assess,
)
from bayesscale.law.stack import stack_report
from bayesscale.sampling.diagnostics import mcse_mean, mcse_quantile

SAMPLE = (names.CHAIN_DIM, names.DRAW_DIM)


MAX_DECIMALS = 3  # the text never prints more decimals than this, whatever the MCSE


def interval(da: xr.DataArray, prob: float) -> dict[str, float | None]:
    """Mean, median and the equal-tailed ``prob`` interval of one scalar's draws, with the
    Monte Carlo standard error of each (``mcse_mean``, ``mcse_median``, ``mcse_lower``,
    ``mcse_upper``; ``None`` where the draws are too few or not finite)."""
    return intervals(da, prob)[()]


def intervals(da: xr.DataArray, prob: float) -> dict[tuple[str, ...], dict[str, float | None]]:
    """:func:`interval` of every scalar of ``da``, keyed by its labels along the dims other
    than chain and draw (in ``da``'s order; ``()`` for a scalar variable). The Monte Carlo
    errors of all scalars are computed together (one batched ESS per statistic).

    >>> da = xr.DataArray(np.arange(24.0).reshape(2, 6, 2), dims=("chain", "draw", "axis"),
    ...                   coords={"axis": ["env", "traj"]})
    >>> sorted(intervals(da, 0.9)), intervals(da, 0.9)[("env",)]["median"]
    ([('env',), ('traj',)], 11.0)
    """
    other = [str(d) for d in da.dims if d not in SAMPLE]
    arr = da.transpose(*other, *SAMPLE)
    x = arr.to_numpy().astype(float).reshape(-1, *arr.shape[len(other) :])
    labels = list(itertools.product(*(arr[d].to_numpy().astype(str) for d in other)))
    lower, upper = tail_quantiles(prob)
    valid = (x.shape[2] >= 4) & np.isfinite(x).all(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        mcse = {"mcse_mean": mcse_mean(x)}
        for key, p in (("mcse_median", 0.5), ("mcse_lower", lower), ("mcse_upper", upper)):
            mcse[key] = mcse_quantile(x, p)
    out = {}
    for i, label in enumerate(labels):
        entry: dict[str, float | None] = dict(describe(x[i], prob))
        for key, values in mcse.items():
            v = values[i] if valid[i] else np.nan
            entry[key] = float(v) if np.isfinite(v) else None
        out[tuple(str(v) for v in label)] = entry
    return out


def decimals(mcse: float | None) -> int:
    """Decimals a number with Monte Carlo standard error ``mcse`` supports: down to the first
    significant digit of ``2 mcse`` (negative: tens, hundreds, ...), at most
    ``MAX_DECIMALS`` (also where the MCSE is 0 or not known).

    >>> decimals(0.0012), decimals(0.006), decimals(0.3), decimals(30.0), decimals(0.0)
    (3, 2, 1, -1, 3)
    """
    if mcse is None or not np.isfinite(mcse) or mcse <= 0:
        return MAX_DECIMALS
    return min(MAX_DECIMALS, -int(np.floor(np.log10(2 * mcse))))


def rounded(value: float, mcse: float | None) -> str:
    """``value`` printed to :func:`decimals` of ``mcse``.

    >>> rounded(0.123456, 0.004), rounded(0.123456, 0.02), rounded(213.7, 8.0)
    ('0.123', '0.12', '210')
    """
    d = decimals(mcse)
    if d >= 0:
        return f"{value:.{d}f}"
    return f"{round(value, d):.0f}"


def ordering_probability(alpha: xr.DataArray) -> xr.DataArray:
    """Share of draws with ``alpha`` strictly decreasing along the axis dimension."""
    ordered = (alpha.diff(names.AXIS_DIM) < 0).all(names.AXIS_DIM)
    return ordered.mean(SAMPLE)


def summarise(tree: xr.DataTree, prob: float = 0.9) -> dict[str, Any]:
    """Everything ``bayesscale summary`` prints, as plain data (JSON-ready)."""
    if not 0 < prob < 1:
        raise ValueError(f"prob must be in (0, 1), got {prob}")
    post = tree["posterior"].to_dataset()
    const = tree["constant_data"].to_dataset()
    axes = [str(a) for a in post[names.AXIS_DIM].values]
    settings = [str(s) for s in post[names.SETTING_DIM].values]
    alpha_pop, alpha = post[names.ALPHA_POP], post[names.ALPHA]
    reference = const[names.REFERENCE_SCALE]
    amplitude_one = xr.apply_ufunc(laws.amplitude_at_one, post[names.AMPLITUDE], alpha, reference)
    spec = fit_spec(tree)
    identified = assess(tree, spec)

    setting_axis = (names.SETTING_DIM, names.AXIS_DIM)
    alphas = intervals(alpha.transpose(..., *setting_axis), prob)
    amplitudes = intervals(amplitude_one.transpose(..., *setting_axis), prob)
    floors = intervals(post[names.LOSS_FLOOR], prob)
    per_setting: dict[str, Any] = {}
    for s in settings:
        per_setting[s] = {
            a: {
                **alphas[(s, a)],
                "amplitude_at_one": amplitudes[(s, a)],
                **identified["settings"][s][a],
            }
            for a in axes
        }
        per_setting[s]["loss_floor"] = floors[(s,)]
        if names.CONCENTRATION in post and names.SETTING_DIM in post[names.CONCENTRATION].dims:
            per_setting[s]["concentration"] = interval(
                post[names.CONCENTRATION].sel({names.SETTING_DIM: s}), prob
            )
    pop_intervals = intervals(alpha_pop, prob)
    ordering_settings = ordering_probability(alpha)
    other = {
        name: interval(post[name], prob)
        for name in (
            names.ALPHA_SIZE,
            names.SIZE_AMPLITUDE,
            names.CONCENTRATION,  # one shared by the settings; else their median and spread:
            names.CONCENTRATION_POP,
            names.CONCENTRATION_SPREAD,
            names.CONTAMINATION,
            names.LOG_LOSS_SIGMA,
            names.DENSE_MULTIPLIER,
            names.INTERACTION_BETA,
        )
        if name in post and names.SETTING_DIM not in post[name].dims
    }
    if "size" in identified:  # the size exponent's identification, as the axes' have theirs
        other[names.ALPHA_SIZE].update(identified["size"])
    return {
        "prob": prob,
        "model": spec.name,
        "data": {
            "source": tree.attrs.get(names.ATTR_DATA_SOURCE),
            "sha256": tree.attrs.get(names.ATTR_DATA_HASH),
        },
        "sampler": tree.attrs.get(names.ATTR_SAMPLER),
        "seed": int(tree.attrs.get(names.ATTR_SEED, -1)),
        "exponents": {
            "population": {a: {**pop_intervals[(a,)], **identified["population"][a]} for a in axes},
            "settings": per_setting,
        },
        "identification": {
            k: v for k, v in identified.items() if k not in ("population", "settings", "size")
        },
        "reference_scale": {a: float(reference.sel(axis=a)) for a in axes},
        "ordering": {
            "axes": axes,
            "population": float(ordering_probability(alpha_pop)),
            "settings": {s: float(ordering_settings.sel(setting=s)) for s in settings},
        },
        "other": other,
        "out_of_scale": reach_report(tree),
        "stack": stack_report(tree),
        "diagnostics": diagnose(tree).to_dict(),
    }


def _stack_lines(stack: dict[str, Any] | None) -> list[str]:
    """A stacked fit's paragraph: each form's weight and scores, and what the data say."""
    if stack is None:
        return []
    pct = round(100 * stack["prob"])
    lines = [
        "",
        f"Forms, stacked on {stack['out_of_scale_points']} out-of-scale points (weight "
        f"[{pct}% Bayesian-bootstrap interval]; predictions are the mixture; the exponents "
        f"above are the {stack['root_form']} fit's, the largest weight):",
    ]
    for form, row in stack["forms"].items():
        lo, hi = row["interval"]
        verdict = "ok" if row["diagnostics"]["ok"] else "DIAGNOSTICS FAILED"
        lines.append(
            f"  {form:<14} weight {row['weight']:.2f} [{lo:.2f}, {hi:.2f}]  LOO elpd "
            f"{row['loo_elpd']:.1f} ({row['loo_se']:.1f})  out of scale {row['out_of_scale_elpd']:.1f}"
            f"  {verdict}"
        )
    lines.append(
        "  the data separate the forms"
        if stack["separated"]
        else "  the data do not separate the forms: the mixture carries that uncertainty"
    )
    return lines


def _out_of_scale_lines(check: dict[str, Any] | None) -> list[str]:
    """The out-of-scale check's paragraph: how far beyond its sweep each axis holds."""
    if check is None:
        return [
            "",
            "Out of scale: not checked (the fit stores no out-of-scale check: made with "
            "--no-out-of-scale, or by a bayesscale without it; `bayesscale fit` refits without "
            "each axis's largest scales by default, and the recipe then bounds its headline at "
            "the reach measured)",
        ]
    head = "Out of scale (refit without the largest scales; reach = how far coverage holds):"
    lines = ["", head, *("  " + line for line in check["text"].splitlines())]
    drift = check.get("drift")
    if drift:
        taus = ", ".join(f"{axis} {tau:.2f}" for axis, tau in drift.items())
        lines.append(
            f"  drift beyond the sweep (link scale, sd per e-fold past the swept max; "
            f"predictions widen by it): {taus}"
        )
    return lines


def _fmt(i: dict[str, Any]) -> str:
    """``median [lower, upper]``, each to the digits its MCSE supports, and the flag."""
    median, lower, upper = (rounded(i[k], i.get(f"mcse_{k}")) for k in ("median", "lower", "upper"))
    return f"{median} [{lower}, {upper}]{marker(i)}"


def _mean(i: dict[str, Any]) -> str:
    """``mean +- MCSE`` (the MCSE to one significant digit)."""
    mcse = i.get("mcse_mean")
    if mcse is None or not np.isfinite(mcse):
        return f"mean {i['mean']:.{MAX_DECIMALS}f}"
    return f"mean {rounded(i['mean'], mcse)} \u00b1 {mcse:.1g}"


def largest_mcse(entries: list[dict[str, Any]]) -> float:
    """The largest MCSE of a median or interval end among ``entries``."""
    keys = ("mcse_median", "mcse_lower", "mcse_upper")
    values = [float(e[k]) for e in entries for k in keys if e.get(k) is not None]
    return max(values, default=float("nan"))


def marker(entry: dict[str, Any]) -> str:
    """``‡`` (prior-dominated), ``†`` (prior-sensitive), ``?`` (borderline) or ``""`` for an
    exponent's entry."""
    return MARKERS.get(entry.get("flag") or "", "")


def flagged(result: dict[str, Any]) -> list[str]:
    """``"<flag>: <axis> (population)"`` and ``"... <setting>"`` for each flagged exponent."""
    out = []
    for a, v in result["exponents"]["population"].items():
        if v.get("flag"):
            out.append(f"{v['flag']}: {a} (population)")
    for s, values in result["exponents"]["settings"].items():
        for a in result["ordering"]["axes"]:
            if values[a].get("flag"):
                out.append(f"{values[a]['flag']}: {a}, {s}")
    size = result.get("other", {}).get(names.ALPHA_SIZE, {})
    if size.get("flag"):
        out.append(f"{size['flag']}: {names.ALPHA_SIZE} (population)")
    return out


def _identified(entry: dict[str, Any]) -> str:
    """For a scalar with an identification entry (the size exponent): its contraction, and
    what its flag means, e.g. that the interval is close to the prior's."""
    if "contraction" not in entry:
        return ""
    what = {
        FLAG_DOMINATED: "mostly the prior's: the data say little about it",
        FLAG_SENSITIVE: "leans on the prior",
        FLAG_BORDERLINE: "may lean on the prior",
    }.get(entry.get("flag") or "", "identified by the data")
    return f"  (contraction {entry['contraction']:.2f}: {what})"


def _psense(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def identification_lines(result: dict[str, Any]) -> list[str]:
    """Per population exponent: contraction, power-scaling sensitivities and flag; a count of
    flagged per-setting exponents per axis; the rule."""
    ident = result.get("identification")
    if ident is None:
        return []
    axes = result["ordering"]["axes"]
    scale = ident["exponent_prior_scale"]
    prior = ", ".join(f"{a} {ident['prior_log_sd']['population'][a]:.2f}" for a in axes)
    lines = [
        "What the data identify (contraction = 1 - posterior/prior variance of log alpha; "
        "power-scaling sensitivity of prior and likelihood):",
        f"  prior log-sd of alpha_pop: {prior}"
        + (f" (exponent priors {scale:g}x the declared width)" if scale != 1 else ""),
    ]
    for a in axes:
        v = result["exponents"]["population"][a]
        lines.append(
            f"  {a:>8}  contraction {v['contraction']:.2f}, psense prior "
            f"{_psense(v['prior_sensitivity'])} / likelihood {_psense(v['likelihood_sensitivity'])}"
            f"  {marker(v)} {v['flag'] or 'identified by the data'}".rstrip()
        )
    settings = result["exponents"]["settings"]
    counts = []
    for a in axes:
        cs = [values[a]["contraction"] for values in settings.values()]
        n = sum(1 for values in settings.values() if values[a].get("flag"))
        counts.append(f"{a} {n}/{len(cs)} flagged (contraction {min(cs):.2f}-{max(cs):.2f})")
    lines.append("  per setting: " + "; ".join(counts))
    if ident.get("psense_skipped"):
        lines.append(f"  (no power-scaling check: {ident['psense_skipped']})")
    lines.append(f"  {ident['rule']}")
    return lines


def format_text(result: dict[str, Any]) -> str:
    """A terminal-friendly rendering of ``summarise``'s result."""
    prob = result["prob"]
    axes = result["ordering"]["axes"]
    headline = result["diagnostics"].get("headline")
    lines = [headline] if headline else []
    lines += [
        f"model {result['model']!r}, data {result['data']['source']} (sha256 {str(result['data']['sha256'])[:12]}), "
        f"sampler {result['sampler']}, seed {result['seed']}",
        "",
        f"Population exponents (posterior median [{prob:.0%} equal-tailed interval]; "
        "mean \u00b1 its Monte Carlo standard error):",
    ]
    for a in axes:
        pop = result["exponents"]["population"][a]
        lines.append(f"  {a:>8}  {_fmt(pop):<23}  {_mean(pop)}")
    order = " > ".join(f"alpha_{a}" for a in axes)
    lines += ["", f"P({order}) = {result['ordering']['population']:.3f} (population)"]
    for name, value in result["other"].items():
        lines.append(f"  {name} = {_fmt(value)}" + _identified(value))
    ident = identification_lines(result)
    if ident:
        lines += ["", *ident]
    width = max(len(s) for s in result["exponents"]["settings"])
    lines += [
        "",
        f"Per-setting exponents (median [{prob:.0%} equal-tailed interval]) and P(ordering):",
    ]
    lines.append("  " + "setting".ljust(width) + "".join(f"  {a:^23}" for a in axes) + "  P(order)")
    for s, values in result["exponents"]["settings"].items():
        cells = "".join(f"  {_fmt(values[a]):<23}" for a in axes)
        lines.append(f"  {s.ljust(width)}{cells}  {result['ordering']['settings'][s]:.3f}")
    per_setting = [values[a] for values in result["exponents"]["settings"].values() for a in axes]
    lines.append(
        "  (each number to the digits its Monte Carlo standard error supports: down to the "
        f"first significant digit of 2 x MCSE, at most {MAX_DECIMALS} decimals; largest MCSE "
        f"of a median or interval end above {largest_mcse(per_setting):.1g})"
    )
    notes = flagged(result)
    if notes:
        lines.append(
            f"  NOTE: {len(notes)} exponent(s) marked {MARKERS[FLAG_DOMINATED]}/"
            f"{MARKERS[FLAG_SENSITIVE]}/{MARKERS[FLAG_BORDERLINE]}: their intervals lean on the "
            "prior, or may (rule above); "
            "compare a refit with `bayesscale fit --prior-scale 2` (in Python, "
            "`bs.fit(..., prior_scale=2)`)"
        )
    if len(result["exponents"]["settings"]) == 1:
        lines.append(
            "  NOTE: one setting: nothing is pooled, so these exponents rest on one sweep and "
            "the priors; the population's are that setting's widened by the prior's spread"
        )
    lines += _stack_lines(result.get("stack"))
    lines += _out_of_scale_lines(result.get("out_of_scale"))
    diag = result["diagnostics"]
    verdict = "ok" if diag["ok"] else ("PREVIEW" if diag.get("preview") else "FAILED")
    lines += [
        "",
        f"Diagnostics ({verdict}): {format_diagnostics(diag)}, draws {diag['draws']}",
    ]
    return "\n".join(lines)
