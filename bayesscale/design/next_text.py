"""The output of ``next``: the batch as text (:func:`format_text`) and as JSON
(:func:`to_json`), where a candidate lies against the swept range (:func:`where_text`), why a
run was chosen (:func:`why_text`) and the notes a reader of the batch must see
(:func:`batch_notes`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from bayesscale.design.defaults import TARGET_DECISION
from bayesscale.design.results import DECISION_AXIS, Candidate, ChosenRun, NextRuns, Valued
from bayesscale.formatting import money, times


def batch_notes(
    chosen: Sequence[ChosenRun],
    first: Sequence[Valued],
    min_ess: float,
    S: int,
    stopped: Valued | None,
    runs: int,
) -> list[str]:
    """What the reader of the batch must know: a batch stopped early, rough values, clipped
    values."""
    notes = []
    if stopped is not None:
        notes.append(
            f"the batch stops at {len(chosen)} of up to {runs} runs: given the simulated "
            f"outcomes of the runs chosen, the best next run's importance weights have a median "
            f"ESS of {stopped.ess_median:.0f} (below --min-ess {min_ess:g}, of {S} draws), too "
            "few to value it; run these, refit, and ask again (more --max-draws, up to the "
            "fit's draws, values more runs)"
        )
    low = [r for r in chosen if r.valued.ess_median < min_ess]
    if low:
        notes.append(
            f"{len(low)} chosen run(s) have a median importance-weight ESS below {min_ess:g} "
            f"(of {S} draws): their outcomes would move the posterior further than {S} draws "
            "can represent, so their values are rough; refit after them (or rerun with more "
            "draws) before trusting the ranking"
        )
    if any(r.valued.raw < 0 for r in chosen) or any(v.raw < 0 for v in first):
        notes.append(
            "values are Monte Carlo estimates clipped at 0 (the raw estimate and its standard "
            "error are in the JSON); a negative raw value is sampling noise around 0"
        )
    return notes


def where_text(c: Candidate, axes: Sequence[str] = ()) -> str:
    """Where a candidate lies against the setting's swept range, naming the axes that lie
    outside it: ``inside the swept range``, ``traj 256 is 4x the swept max 64``, ``task 135
    is below the swept min 320 (0.422x)`` (an axis held under the data, e.g. by the pool's
    caps), or both. Without ``axes`` (or the candidate's swept range) the axes go unnamed.

    >>> c = Candidate("S", (64, 135), "env", 2.0, 135 / 320, (8.0, 320.0), (32.0, 1280.0))
    >>> where_text(c, ("env", "task"))
    'task 135 is below the swept min 320 (0.422x); env 64 is 2x the swept max 32'
    >>> where_text(Candidate("S", (8, 320), "env", 1.0, 1.0))
    'inside the swept range'
    >>> where_text(Candidate("S", (64, 135), "env", 2.0, 135 / 320))
    'below the swept min (0.422x) and 2x swept max'
    """
    eps = 1e-9
    if axes and len(c.lo) == len(c.hi) == len(c.sizes) == len(axes):
        below = [
            f"{a} {s:,} is below the swept min {lo:,.0f} ({s / lo:.3g}x)"
            for a, s, lo in zip(axes, c.sizes, c.lo, strict=True)
            if s < lo * (1 - eps)
        ]
        above = [
            f"{a} {s:,} is {times(s / hi)} the swept max {hi:,.0f}"
            for a, s, hi in zip(axes, c.sizes, c.hi, strict=True)
            if s > hi * (1 + eps)
        ]
        return "; ".join(below + above) or "inside the swept range"
    parts = []
    if c.below < 1 - eps:
        parts.append(f"below the swept min ({c.below:.3g}x)")
    if c.beyond > 1 + eps:
        parts.append(f"{c.beyond:.3g}x swept max")
    return " and ".join(parts) or "inside the swept range"


def why_text(
    c: Candidate, v: Valued, target: str, targets: Sequence[str], axes: Sequence[str]
) -> str:
    """Which axis and setting the run varies, where it lies, and which part of the target it
    informs most."""
    where = where_text(c, axes)
    what = "the recipe's decision point" if c.axis == DECISION_AXIS else f"{c.axis} axis"
    k = int(np.argmax(v.by_target))
    if target == TARGET_DECISION:
        return f"{what} of {c.setting} ({where}); informs the decision for {targets[k]} most"
    return f"{what} of {c.setting} ({where}); informs alpha_pop[{axes[k]}] most"


def _number(x: float) -> float | str | None:
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf"
    return float(x)


def to_json(result: NextRuns) -> dict[str, object]:
    """A JSON-ready summary: the chosen runs in order and every candidate's first-step value."""

    def sizes(c: Candidate) -> dict[str, int]:
        return dict(zip(result.axes, c.sizes, strict=True))

    def entry(v: Valued) -> dict[str, object]:
        c = result.candidates[v.candidate]
        return {
            "setting": c.setting,
            "sizes": sizes(c),
            "axis": c.axis,
            "beyond_swept_max": c.beyond,
            "below_swept_min": c.below,
            "value": v.value,
            "value_raw": v.raw,
            "value_se": _number(v.se),
            "cost": v.cost.total,
            "cost_data": v.cost.data,
            "cost_gpu": v.cost.gpu,
            "gpu_hours": v.cost.gpu_hours,
            "trajectories": v.cost.trajectories,
            "flops": v.cost.flops,
            "value_per_cost": _number(v.per_cost),
            "ess_median": v.ess_median,
            "ess_min": v.ess_min,
        }

    return {
        "target": result.target,
        "budget": result.budget,
        "currency": result.currency,
        "target_settings": list(result.target_settings),
        "target_now": result.target_now,
        "target_after_batch": result.target_after,
        "worth_running": result.worth_running,
        "verdict": result.verdict(),
        "batch_value": _number(result.batch_value),
        "batch_value_mcse": _number(result.mcse),
        "batch_value_mcse_outcomes": _number(result.mcse_outcomes),
        "batch_value_mcse_draws": _number(result.mcse_draws),
        "recipe_gap": result.recipe_gap,
        "trials_per_run": result.trials,
        "simulations": result.simulations,
        "draws": result.draws,
        "total_cost": sum(r.valued.cost.total for r in result.chosen),
        "total_gpu_hours": sum(r.valued.cost.gpu_hours for r in result.chosen),
        "cost_model": dict(result.cost_model),
        "forms": dict(result.forms),
        "stopped_at_ess": _number(result.stopped_ess) if result.stopped_ess is not None else None,
        "anchor_rule": result.anchor_rule,
        "anchors": {s: dict(zip(result.axes, a, strict=True)) for s, a in result.anchors.items()},
        "chosen": [
            {**entry(r.valued), "repeat": r.repeat, "why": r.why, "rank": k + 1}
            for k, r in enumerate(result.chosen)
        ],
        "candidates": [entry(v) for v in result.first_step],
        "notes": list(result.notes),
        "refit": None
        if result.refit is None
        else {
            "target_now": result.refit.now,
            "target_after": list(result.refit.after),
            "reduction": result.refit.reduction,
            "reason": result.refit.reason,
        },
    }


def held_sizes(result: NextRuns) -> dict[str, dict[str, int]]:
    """Per candidate setting, the size each axis is held at while another axis is varied, as
    the candidates hold it (the anchors after the pool's caps and rounding); an axis no
    candidate holds (only one axis) is left out.

    >>> from bayesscale.design.candidates import with_concentration
    >>> from bayesscale.design.next_runs import next_runs
    >>> from bayesscale.recipe.synthetic import synthetic_fit
    >>> fit = with_concentration(synthetic_fit(draws=40, spread=0.1), 800.0)
    >>> r = next_runs(fit, 2e4, runs=1, simulations=8, max_draws=40, anchors={"env": 256})
    >>> held_sizes(r)[r.candidates[0].setting]["env"]
    256
    """
    out: dict[str, dict[str, int]] = {}
    for c in result.candidates:
        if c.axis == DECISION_AXIS:
            continue
        held = out.setdefault(c.setting, {})
        for a, size in zip(result.axes, c.sizes, strict=True):
            if a != c.axis:
                held.setdefault(a, int(size))
    return out


def _anchor_lines(result: NextRuns) -> list[str]:
    """Where the one-axis candidates hold the other axes: the sizes the rows show, and the
    anchors they come from where the pool's caps lowered them."""
    held = held_sizes(result)
    if not held:
        return []
    first = next(iter(held.values()))
    if any(h != first for h in held.values()):
        return [
            "candidates vary one axis, the others held per setting (anchors and the pool's caps; "
            "the sizes of each row, and the anchors in the JSON)"
        ]
    at = " ".join(f"{a}={first[a]:,}" for a in result.axes if a in first)
    line = f"candidates vary one axis, the others held at {at}"
    asked = set(result.anchors.values())
    if len(asked) == 1:
        anchor = dict(zip(result.axes, next(iter(asked)), strict=True))
        capped = [a for a in result.axes if a in first and first[a] < round(anchor[a])]
        paper = " ".join(f"{a}={anchor[a]:,.0f}" for a in result.axes if a in first)
        if capped:
            line += (
                f": the {result.anchor_rule} anchors {paper}, capped at what the sweep's pool "
                f"holds on {', '.join(capped)}"
            )
        else:
            line += f" (the {result.anchor_rule} anchors)"
    varied = {c.axis for c in result.candidates}
    unvaried = [a for a in result.axes if a not in varied]
    if unvaried:
        line += f"; no candidate varies {', '.join(unvaried)}: the pool caps it at the size held"
    return [line]


def format_text(result: NextRuns) -> str:
    """The batch as a table, with the target before and after."""
    what = (
        f"expected value of perfect information at budget {money(result.budget)} {result.currency}"
        if result.target == TARGET_DECISION
        else "summed posterior variance of the population exponents"
    )
    lines = [] if result.worth_running else [f"NOT WORTH RUNNING: {result.verdict()}"]
    lines += [
        f"next {len(result.chosen)} run(s), chosen greedily by value per cost "
        f"({len(result.candidates)} candidates, {result.draws} draws, "
        f"{result.simulations} simulated outcomes each, {result.trials} trials per run)",
        f"target: {what}: {result.target_now:.4g} now, {result.target_after:.4g} expected after "
        "the batch",
        f"batch value {result.batch_value:.3g} (Monte Carlo standard error {result.mcse:.2g}: "
        f"{result.mcse_outcomes:.2g} from the simulated outcomes, {result.mcse_draws:.2g} from "
        f"the draws): {'worth running' if result.worth_running else 'NOT worth running'}",
    ]
    lines += _anchor_lines(result)
    head = (
        f"{'#':>2}  {'setting':<28} {'sizes':<30} {'value':>9} {'cost':>9} {'value/cost':>10} "
        f"{'ESS':>6}  why"
    )
    lines.append(head)
    for k, r in enumerate(result.chosen):
        c, v = r.candidate, r.valued
        sz = " ".join(f"{a}={s}" for a, s in zip(result.axes, c.sizes, strict=True))
        lines.append(
            f"{k + 1:>2}  {c.setting[:28]:<28} {sz[:30]:<30} {v.value:>9.3g} {v.cost.total:>9.4g} "
            f"{v.per_cost:>10.3g} {v.ess_median:>6.0f}  {r.why}"
        )
    total = sum(r.valued.cost.total for r in result.chosen)
    hours = sum(r.valued.cost.gpu_hours for r in result.chosen)
    lines.append(f"total cost {total:.4g} {result.currency} ({hours:.4g} GPU-hours)")
    if result.cost_model:
        m = result.cost_model
        lines.append(
            f"cost model ({m['source']}): data beyond what is owned + GPU time at "
            f"{m['price_per_hour']:g} {result.currency}/GPU-hour; GPU-hours = "
            f"{m['flops_per_param_token']:g} x params x {m['tokens_per_trajectory']:.4g} tokens "
            f"x trajectories / ({m['peak_flops']:.3g} FLOP/s x {m['utilization']:.3g}) + "
            f"{m['overhead_hours']:g} per run; trajectories are GPU time, not priced as data"
        )
    lines.extend(f"note: {n}" for n in result.notes)
    if result.refit is not None:
        ref = result.refit
        lines.append(
            f"refit check ({ref.reason}): the recipe's target {ref.now:.4g} now, "
            f"{np.mean(ref.after):.4g} after the batch (mean of {len(ref.after)} refits on "
            f"simulated outcomes: {', '.join(f'{a:.4g}' for a in ref.after)}); reduction "
            f"{ref.reduction:.4g} against {result.target_now - result.target_after:.4g} by "
            "reweighting"
        )
    return "\n".join(lines)
