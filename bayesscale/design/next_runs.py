"""Which runs next: the batch of runs whose outcomes are expected to change the recipe most.

For each candidate run (a setting, sizes on and beyond the swept grid, one more seed), the
**value** is the expected reduction of a target once its outcome is seen, computed by
preposterior analysis on the fit's posterior draws (:mod:`bayesscale.design.preposterior`):

1. ``M`` outer draws ``s_m`` of the posterior; for each, the run's outcome is simulated from
   the beta-binomial the fit assumes, ``y_m ~ BetaBinomial(n, p_{s_m}(D) phi, ...)``;
2. every posterior draw ``s`` is reweighted by ``p(y_m | theta_s)``;
3. the target is recomputed under the weights and averaged over ``m``.

Targets: ``decision`` (default), the expected value of perfect information of the recipe's
decision at budget ``B`` (``success_at_optimum - success_at_decision``, here over a finite
action set: the recipe's decision and the per-draw optima of ``J - 1`` draws), averaged over
the target settings; ``exponents``, the summed posterior variance of the population exponents.

A stacked fit's draws are its forms' mixture (:func:`bayesscale.law.mixed_draws.draws_with`):
each draw is a law of its own form with its own form's concentration, so the weights of step 2
move between the forms too, and a run whose outcome the forms predict differently is worth
what telling them apart is worth to the decision. The ``exponents`` target, one form's
population exponents, refuses a mixture.

The **batch** is chosen greedily: each step adds the run with the largest value per cost,
where the value is *marginal*, the batch's joint preposterior value with the run minus
without it (the outcomes of the runs already chosen are simulated from the same outer draw and
condition the weights): a second run that answers the same question is worth less. The batch
stops before a run whose weights, so conditioned, rest on too few draws to value it (median
Kish ESS below ``min_ess``): past that point every value is noise and the ranking would buy
the cheapest runs. Costs (:mod:`bayesscale.design.costs`) are marginal too: data bought for
one run is not paid again; a run's trajectories are its own GPU time, not data.

**Is the batch worth running?** The batch's value, the target's expected reduction, is a Monte
Carlo estimate with two sources of error: the ``M`` simulated outcomes (the spread of the
per-outcome reductions over ``sqrt(M)``) and the ``S`` posterior draws that are reweighted (a
delete-a-block jackknife: the value recomputed without each of ``B`` blocks of consecutive
draws, in the weights and in the target now alike, outcomes held; consecutive blocks carry the
chains' autocorrelation, as batch means do). Their standard errors add in quadrature to the
batch's MCSE (:func:`~bayesscale.design.run_value.value_and_mcse`). A batch whose value is below ``2`` MCSE cannot be told
from a batch worth nothing: the output says it is not worth running, and why.

Example
-------
>>> from bayesscale.design.candidates import with_concentration
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> fit = with_concentration(synthetic_fit(draws=100, spread=0.1), 800.0)
>>> result = next_runs(fit, budget=2e4, runs=2, simulations=16, max_draws=100, actions=16)
>>> len(result.chosen)
2
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from bayesscale import names
from bayesscale.core import laws
from bayesscale.core.prices import Prices
from bayesscale.data.extrapolation import SweptRange
from bayesscale.design.candidates import candidate_grid, default_anchors
from bayesscale.design.costs import Costs
from bayesscale.design.defaults import (
    ANCHORS_PAPER,
    DEFAULT_ACTIONS,
    DEFAULT_BEYOND,
    DEFAULT_FIRST_PICKS,
    DEFAULT_MAX_DRAWS,
    DEFAULT_MIN_ESS,
    DEFAULT_RUNS,
    DEFAULT_SIMULATIONS,
    DEFAULT_STEP,
    DEFAULT_TRIALS,
    TARGET_DECISION,
    TARGET_EXPONENTS,
    TARGETS,
)
from bayesscale.design.greedy import GreedyBatch, RunCosts, best_within_spend, owned_sizes
from bayesscale.design.next_text import batch_notes, why_text
from bayesscale.design.preposterior import regret
from bayesscale.design.results import Array, Candidate, ChosenRun, DesignError, NextRuns, Valued
from bayesscale.design.run_value import ValueEngine
from bayesscale.law.mixed_draws import draws_with, mixture_weights
from bayesscale.law.posterior import LawDraws, axis_columns, setting_keys
from bayesscale.recipe.solve import recipe


def next_runs(
    fit: xr.DataTree,
    budget: float,
    *,
    runs: int = DEFAULT_RUNS,
    target: str = TARGET_DECISION,
    target_settings: Sequence[str] | None = None,
    candidate_settings: Sequence[str] | None = None,
    costs: Costs | None = None,
    prices: Prices | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    trials: int = DEFAULT_TRIALS,
    simulations: int = DEFAULT_SIMULATIONS,
    max_draws: int | None = DEFAULT_MAX_DRAWS,
    actions: int = DEFAULT_ACTIONS,
    beyond: float = DEFAULT_BEYOND,
    step: float = DEFAULT_STEP,
    anchors: Mapping[str, float] | None = None,
    anchor_rule: str = ANCHORS_PAPER,
    max_sizes: Mapping[str, float] | None = None,
    cells: float | None = None,
    min_ess: float = DEFAULT_MIN_ESS,
    spend: float | None = None,
    first_picks: int = DEFAULT_FIRST_PICKS,
    seed: int = 0,
) -> NextRuns:
    """Choose up to ``runs`` next runs greedily by marginal value per cost (see the module
    docstring).

    ``budget`` is the recipe's budget ``B`` at which the decision target is measured
    (``prices``, ``bounds`` as in :func:`bayesscale.recipe.solve`); ``target_settings`` the
    settings whose decisions count (default: all), ``candidate_settings`` those that may run
    (default: all). ``trials`` held-out tasks per run; ``simulations`` outer draws ``M``;
    ``max_draws`` thins the posterior per chain; ``actions`` the size ``J`` of the finite action
    set. Candidates: :func:`~bayesscale.design.candidates.candidate_grid` with ``beyond``, ``step``, ``anchors`` (axis ->
    size, for every setting; the other axes by :func:`~bayesscale.design.candidates.default_anchors` with ``anchor_rule``)
    and ``max_sizes``, plus the recipe's decision per setting. ``cells``, the task-environment
    cells a run trains on over all its updates (a sweep's ``[alignment] cells``), enter its
    trajectories and GPU-hours (default: the costs' ``cells``, the paper's 256,000).
    ``min_ess``: the batch stops before a run (other than its first) whose median Kish ESS,
    given the batch's simulated outcomes, is below this, and a first run below it is flagged
    unreliable (refit to check it); 0 never stops. The result says whether the batch is worth
    running (:attr:`~bayesscale.design.results.NextRuns.worth_running`: its value at least ``WORTH_SE`` Monte Carlo
    standard errors).
    ``spend`` caps the batch's total cost (at most ``runs`` runs, fewer when the cap is
    reached): then the greedy by value per cost, the greedy by value, and batches that start
    with one of the ``first_picks`` first runs worth most (by value, and by value per cost) and
    go on by value per cost are all built, and the batch worth most is kept.
    """
    _check_arguments(target, spend, runs, simulations, actions, trials, budget, prices)
    if first_picks < 0:
        raise DesignError(f"first_picks must be >= 0, got {first_picks}")
    costs = costs or Costs()
    fitted = _read_fit(
        fit, costs, target, target_settings, candidate_settings, anchors, anchor_rule, cells,
        max_draws,
    )  # fmt: skip
    outer = _outer_draws(fitted.draws.samples, min_ess, simulations, seed)
    ds, recipe_gap = _recipe_at(fit, budget, prices, bounds, fitted.targets, max_draws, seed)
    engine = _value_engine(fitted, ds, outer, target, trials, actions, seed)
    cands = _candidates(fitted, ds, beyond, step, max_sizes)
    batcher = _greedy_batch(fit, fitted, engine, cands, costs, cells, target, runs, spend, min_ess)
    chosen, first, ll_batch, stopped, notes = _choose(batcher, spend, first_picks)
    reduction, mcse_outcomes, mcse_draws = _batch_value(engine, ll_batch)
    now = engine.target_now()
    notes += batch_notes(chosen, first, min_ess, fitted.draws.samples, stopped, runs)
    if len(fitted.forms) > 1:
        notes.append(
            f"the draws are the stack's mixture of its forms ({_weights_text(fitted.forms)}), "
            "so a run's value includes what its outcome says about the form: runs at sizes "
            "where the forms predict differently (beyond the sweep, or below it for a knee) "
            "are worth more than under any one form"
        )
    return NextRuns(
        target=target,
        budget=float(budget),
        axes=tuple(fitted.draws.axes),
        candidates=cands,
        chosen=chosen,
        first_step=first,
        target_now=now,
        target_after=max(now - reduction, 0.0),
        target_settings=tuple(fitted.targets),
        currency=costs.currency,
        trials=int(trials),
        simulations=len(outer),
        draws=fitted.draws.samples,
        notes=notes,
        recipe_gap=recipe_gap,
        stopped_ess=None if stopped is None else stopped.ess_median,
        anchor_rule=anchor_rule,
        anchors={s: tuple(float(v) for v in fitted.anchor[g]) for g, s in enumerate(fitted.movers)},
        batch_value=reduction,
        mcse_outcomes=mcse_outcomes,
        mcse_draws=mcse_draws,
        min_ess=float(min_ess),
        cost_model=costs.describe(),
        forms=fitted.forms,
    )


@dataclass(frozen=True)
class _FitInputs:
    """What :func:`next_runs` reads from the fit, checked against its arguments."""

    draws: LawDraws
    settings: list[str]  # every setting of the fit
    targets: list[str]  # the settings whose target counts
    movers: list[str]  # the settings that may run
    columns: Mapping[str, str]  # axis -> observation column
    swept: SweptRange
    anchor: Array  # (movers, axes): where one-axis candidates hold the other axes
    phi: Array  # (S,) the beta-binomial concentration at every draw, or (S, G) per setting
    contamination: Array | None  # (S,) the share of collapsed runs, where the fit models it
    exponents: Array | None  # (S, n) the population exponents, for the exponents target
    forms: dict[str, float]  # a stack's forms that the draws mix, with their weights


def _read_fit(
    fit: xr.DataTree,
    costs: Costs,
    target: str,
    target_settings: Sequence[str] | None,
    candidate_settings: Sequence[str] | None,
    anchors: Mapping[str, float] | None,
    anchor_rule: str,
    cells: float | None,
    max_draws: int | None,
) -> _FitInputs:
    """The fit's draws (a stack's mixture of its forms, each draw with its own form's
    concentration), settings, axis columns, swept range and anchors; a
    :class:`~bayesscale.design.results.DesignError` for an argument the fit cannot serve."""
    forms = mixture_weights(fit)
    if target == TARGET_EXPONENTS and len(forms) > 1:
        raise DesignError(
            "the exponents target is the variance of one form's population exponents, and this "
            f"stack mixes forms ({_weights_text(forms)}) whose exponents mean different things: "
            "value runs by the decision target, or use the power law's own fit "
            "(fit.forms['power'] in Python)"
        )
    variables = [names.CONCENTRATION]
    variables += [names.CONTAMINATION] if names.CONTAMINATION in fit["posterior"] else []
    variables += [names.ALPHA_POP] if target == TARGET_EXPONENTS else []
    if names.CONCENTRATION not in fit["posterior"]:
        raise DesignError(
            f"the fit's posterior has no {names.CONCENTRATION!r}: the value of a run needs the "
            "beta-binomial likelihood of a success-count fit"
        )
    if target == TARGET_EXPONENTS and names.ALPHA_POP not in fit["posterior"]:
        raise DesignError(f"the fit's posterior has no {names.ALPHA_POP!r}")
    draws, values = draws_with(fit, variables, None, max_draws)
    all_settings = list(draws.settings)
    for label, named in (("target", target_settings), ("candidate", candidate_settings)):
        unknown = [s for s in named or () if s not in all_settings]
        if unknown:
            raise DesignError(
                f"{label} setting(s) {unknown} not in the fit; its settings: {all_settings}"
            )
    targets = list(target_settings or all_settings)
    movers = list(candidate_settings or all_settings)
    axes = draws.axes
    if anchors:
        unknown = sorted(set(anchors) - set(axes))
        if unknown:
            raise DesignError(f"anchors name axis/axes {unknown} the fit does not have: {axes}")
        bad = {a: v for a, v in anchors.items() if not (math.isfinite(v) and v >= 1)}
        if bad:
            raise DesignError(f"anchor sizes must be finite and >= 1, got {bad}")
    columns = axis_columns(fit, axes)
    _check_costs(costs, axes, columns)
    if cells is not None and not (math.isfinite(cells) and cells > 0):
        raise DesignError(f"cells must be finite and > 0, got {cells}")
    swept = SweptRange.from_fit(fit)
    if swept is None:
        raise DesignError("the fit stores no swept range (written by an older version): refit it")
    anchor = default_anchors(swept.select(movers, list(axes)), axes, columns, anchor_rule)
    for a, v in (anchors or {}).items():
        anchor[:, list(axes).index(a)] = float(v)
    return _FitInputs(
        draws, all_settings, targets, movers, columns, swept, anchor,
        phi=values[names.CONCENTRATION],
        contamination=values.get(names.CONTAMINATION),
        exponents=values.get(names.ALPHA_POP),
        forms=forms,
    )  # fmt: skip


def _weights_text(forms: Mapping[str, float]) -> str:
    return ", ".join(f"{f} {w:.2f}" for f, w in forms.items())


def _outer_draws(S: int, min_ess: float, simulations: int, seed: int) -> NDArray[np.int64]:
    """The ``M = min(simulations, S)`` outer draws the outcomes are simulated from (seeded)."""
    if min_ess > 0 and min_ess >= S:
        raise DesignError(
            f"min_ess {min_ess:g} is not below the {S} posterior draws used: an importance-weight "
            "ESS never exceeds the draws, so no run after the first could be valued; lower "
            "--min-ess or raise --max-draws"
        )
    return np.random.default_rng([seed, 1]).permutation(S)[: min(simulations, S)]


def _recipe_at(
    fit: xr.DataTree,
    budget: float,
    prices: Prices | None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None,
    targets: list[str],
    max_draws: int | None,
    seed: int,
) -> tuple[xr.Dataset, dict[str, float]]:
    """The recipe at ``budget`` for the target settings, and per setting its mean gap
    ``success_at_optimum - success_at_decision``."""
    ds = recipe(
        fit,
        [budget],
        prices=prices,
        bounds=bounds,
        settings=targets,
        max_draws=max_draws,
        multipliers=False,
        seed=seed,
    )
    gap = (ds[names.SUCCESS_OPTIMUM] - ds[names.SUCCESS_DECISION]).isel({names.BUDGET_DIM: 0})
    return ds, {s: float(gap.sel({names.SETTING_DIM: s}).mean()) for s in targets}


def _value_engine(
    fitted: _FitInputs,
    ds: xr.Dataset,
    outer: NDArray[np.int64],
    target: str,
    trials: int,
    actions: int,
    seed: int,
) -> ValueEngine:
    """The preposterior engine of ``target``: the regret of every action (decision) or the
    draws of the population exponents (exponents)."""
    success: list[Array] = []
    if target == TARGET_DECISION:
        success = _decision_regrets(ds, fitted.draws, fitted.targets, actions)
    return ValueEngine(
        fitted.draws, fitted.phi, int(trials), outer, seed, target, success, fitted.exponents,
        fitted.contamination,
    )  # fmt: skip


def _candidates(
    fitted: _FitInputs,
    ds: xr.Dataset,
    beyond: float,
    step: float,
    max_sizes: Mapping[str, float] | None,
) -> list[Candidate]:
    """The candidate grid of the movers, plus the recipe's decision of each mover that is a
    target setting."""
    decision = ds[names.DECISION].isel({names.BUDGET_DIM: 0})  # (setting, axis) purchased
    extra: dict[str, Sequence[Sequence[float]]] = {
        s: [decision.sel({names.SETTING_DIM: s}).to_numpy().tolist()]
        for s in fitted.movers
        if s in fitted.targets
    }
    axes = fitted.draws.axes
    cands = candidate_grid(
        fitted.movers, axes, fitted.swept, fitted.anchor, beyond, step, max_sizes, extra
    )
    if not cands:
        raise DesignError("no candidate runs")
    return cands


def _greedy_batch(
    fit: xr.DataTree,
    fitted: _FitInputs,
    engine: ValueEngine,
    cands: list[Candidate],
    costs: Costs,
    cells: float | None,
    target: str,
    runs: int,
    spend: float | None,
    min_ess: float,
) -> GreedyBatch:
    """The greedy batch builder over ``cands``, the data the fit's rows own already counted."""
    all_settings, axes = fitted.settings, fitted.draws.axes
    keys = setting_keys(fit, all_settings)
    return GreedyBatch(
        engine,
        cands,
        keys,
        owned_sizes(keys, fitted.swept.select(all_settings, list(axes)), all_settings, axes),
        RunCosts(axes, fitted.columns, costs, cells),
        runs=runs,
        spend=spend,
        stop_ess=min_ess,
        why=lambda c, v: why_text(c, v, target, fitted.targets, axes),
    )


def _choose(
    batcher: GreedyBatch, spend: float | None, first_picks: int
) -> tuple[list[ChosenRun], list[Valued], Array, Valued | None, list[str]]:
    """The batch (the greedy by value per cost, or under ``spend`` the best of several), the
    first step's values, the batch's simulated log-likelihoods, the run it stopped before for
    its ESS, and a note on which batch was kept."""
    notes: list[str] = []
    chosen, first, ll_batch, stopped = batcher.run(by_ratio=True)
    if spend is not None:
        chosen, ll_batch, stopped, note = best_within_spend(
            batcher, (chosen, first, ll_batch, stopped), first_picks, spend
        )
        notes += [note] if note else []
    if not chosen:
        raise DesignError(f"no candidate run fits in the spend cap {spend:g}")
    return chosen, first, ll_batch, stopped, notes


def _batch_value(engine: ValueEngine, ll_batch: Array) -> tuple[float, float, float]:
    """The batch's value, the target's expected reduction given its simulated
    log-likelihoods ``ll_batch`` (M, S), and its Monte Carlo standard errors from the outcomes
    and from the draws."""
    base_total, _, _ = engine.score(np.zeros(ll_batch.shape))  # zero reduction before anything
    total, _, _ = engine.score(ll_batch)
    reduction = float(total.mean() - base_total.mean())
    _, mcse_outcomes, mcse_draws = engine.batch_value(ll_batch)
    return reduction, mcse_outcomes, mcse_draws


def _check_arguments(
    target: str,
    spend: float | None,
    runs: int,
    simulations: int,
    actions: int,
    trials: int,
    budget: float,
    prices: Prices | None,
) -> None:
    if target not in TARGETS:
        raise DesignError(f"target must be one of {TARGETS}, got {target!r}")
    if spend is not None and not (np.isfinite(spend) and spend > 0):
        raise DesignError(f"spend must be finite and > 0, got {spend}")
    if runs < 1 or simulations < 2 or actions < 1 or trials < 1:
        raise DesignError("runs, actions and trials must be >= 1 and simulations >= 2")
    if not (np.isfinite(budget) and budget > 0):
        raise DesignError(f"budget must be finite and > 0, got {budget}")
    if prices is not None and names.PARAMS_B in prices.explicit:
        raise DesignError(
            f"a price for {names.PARAMS_B!r} (the recipe choosing the model size) is not "
            "supported by next: candidates keep each setting's model size"
        )


def _check_costs(costs: Costs, axes: Sequence[str], columns: Mapping[str, str]) -> None:
    """A costs file must not price the rollout axis as data: its trajectories are GPU time."""
    for a in axes:
        if columns[a] == names.ROLLOUTS and a in costs.explicit_data:
            raise DesignError(
                f"{costs.source}: [data] {a}: the trajectories of a run are generated by the "
                "run itself and charged once, as its GPU time ([gpu], [compute]); remove the "
                "key (to price them differently, set [compute] tokens_per_trajectory or [gpu] "
                "utilization)"
            )


def _decision_regrets(
    ds: xr.Dataset, draws: LawDraws, targets: Sequence[str], actions: int
) -> list[Array]:
    """Per target setting, the regret ``R[s, j]`` of every draw ``s`` under each action ``j``
    of the finite action set: the recipe's decision and the per-draw optima of ``actions - 1``
    draws spread over the posterior."""
    decision = ds[names.DECISION].isel({names.BUDGET_DIM: 0})
    per_draw = ds[names.PURCHASED].isel({names.BUDGET_DIM: 0})
    all_settings = list(draws.settings)
    pick = np.unique(np.linspace(0, draws.samples - 1, max(actions - 1, 1)).round().astype(int))
    out = []
    for s in targets:
        g = all_settings.index(s)
        opt = per_draw.sel({names.SETTING_DIM: s}).transpose(..., names.AXIS_DIM).to_numpy()
        opt = opt.reshape(-1, len(draws.axes))[pick]
        act = np.vstack([decision.sel({names.SETTING_DIM: s}).to_numpy()[None, :], opt])
        law = draws.law(setting=g, extra=1)
        out.append(regret(laws.success_from_loss(law.loss(act[None]))))
    return out
