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
batch's MCSE (:func:`value_and_mcse`). A batch whose value is below ``2`` MCSE cannot be told
from a batch worth nothing: the output says it is not worth running, and why.

Example
-------
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> fit = with_concentration(synthetic_fit(draws=100, spread=0.1), 800.0)
>>> result = next_runs(fit, budget=2e4, runs=2, simulations=16, max_draws=100, actions=16)
>>> len(result.chosen)
2
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from bayesscale import names
from bayesscale.core import allocate, laws
from bayesscale.core.prices import Prices
from bayesscale.data.extrapolation import SweptRange
from bayesscale.data.simulate import AXIS_COLUMNS, PAPER_ANCHORS
from bayesscale.design.costs import Costs
from bayesscale.design.defaults import (
    ANCHOR_RULES,
    ANCHORS_PAPER,
    ANCHORS_SWEPT,
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
from bayesscale.design.preposterior import (
    beta_binomial_logpmf,
    kish_ess,
    normalized_weights,
    regret,
    simulate_beta_binomial,
    weighted_variance,
)
from bayesscale.formatting import money, times
from bayesscale.law.posterior import LawDraws, at_draws, axis_columns, law_draws, setting_keys
from bayesscale.recipe.solve import recipe

Array = NDArray[np.float64]
DECISION_AXIS = "decision"  # the candidate at the recipe's decision (every axis moves)
CACHE_BYTES = 768 * 2**20  # simulated log-likelihoods kept between greedy steps up to this size
WORTH_SE = 2.0  # a batch worth less than this many Monte Carlo standard errors is not worth running
JACKKNIFE_BLOCKS = 20  # blocks of consecutive posterior draws in the batch value's jackknife


class DesignError(ValueError):
    """Inputs the design cannot use; the message says which and why."""


@dataclass(frozen=True)
class Candidate:
    """One candidate run: a setting of the fit and a size per axis (purchased units)."""

    setting: str
    sizes: tuple[int, ...]
    axis: str  # the axis varied from the anchors, or "decision"
    beyond: float  # max over axes of size / largest swept size (<= 1: inside the data)
    below: float = 1.0  # min over axes of size / smallest swept size (< 1: below the data)
    lo: tuple[float, ...] = ()  # the setting's smallest swept size per axis (for the text)
    hi: tuple[float, ...] = ()  # and its largest


@dataclass(frozen=True)
class RunCost:
    """A run's cost: data bought beyond what is owned, and GPU time (money and hours), with
    the trajectories and FLOPs the GPU time is priced from."""

    data: float
    gpu: float
    gpu_hours: float
    trajectories: float = 0.0
    flops: float = 0.0

    @property
    def total(self) -> float:
        return self.data + self.gpu


@dataclass(frozen=True)
class Valued:
    """A candidate's marginal value at one greedy step, and its cost there."""

    candidate: int
    value: float  # clipped at 0
    raw: float  # Monte Carlo estimate, may dip below 0
    se: float
    cost: RunCost
    ess_median: float
    ess_min: float
    by_target: tuple[float, ...]  # decision: per target setting; exponents: per axis

    @property
    def per_cost(self) -> float:
        return self.value / self.cost.total if self.cost.total > 0 else math.inf


@dataclass(frozen=True)
class ChosenRun:
    """A run of the batch, in the order chosen."""

    candidate: Candidate
    repeat: int  # 0 for the first run at this setting and size, 1 for the second, ...
    valued: Valued
    why: str
    outcomes: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Successes of the run simulated from each outer draw (the preposterior's ``y_m``)."""


@dataclass
class NextRuns:
    """The chosen batch, the first step's value of every candidate, and the target."""

    target: str
    budget: float
    axes: tuple[str, ...]
    candidates: list[Candidate]
    chosen: list[ChosenRun]
    first_step: list[Valued]
    target_now: float
    target_after: float
    target_settings: tuple[str, ...]
    currency: str
    trials: int
    simulations: int
    draws: int
    notes: list[str] = field(default_factory=list)
    recipe_gap: dict[str, float] = field(default_factory=dict)
    refit: RefitCheck | None = None
    stopped_ess: float | None = None
    """The median ESS of the best next run where the batch stopped for it (else None)."""
    anchor_rule: str = ANCHORS_PAPER
    anchors: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """Per candidate setting, where its one-axis candidates hold the other axes (``axes``
    order; before the pool's caps)."""
    batch_value: float = math.nan
    """The batch's value, the target's expected reduction (the raw Monte Carlo estimate)."""
    mcse_outcomes: float = math.nan
    """Its Monte Carlo standard error from the simulated outcomes."""
    mcse_draws: float = math.nan
    """Its Monte Carlo standard error from the posterior draws (jackknife over blocks)."""
    min_ess: float = 0.0
    cost_model: dict[str, float | str] = field(default_factory=dict)

    @property
    def mcse(self) -> float:
        """The batch value's Monte Carlo standard error (both sources in quadrature)."""
        return math.hypot(self.mcse_outcomes, self.mcse_draws)

    @property
    def worth_running(self) -> bool:
        """Whether the batch's value is distinguishable from 0 (at least ``WORTH_SE`` MCSE)."""
        return bool(self.batch_value > WORTH_SE * self.mcse and self.batch_value > 0)

    def verdict(self) -> str:
        """In words: whether the batch is worth running, and why."""
        v, se, now = self.batch_value, self.mcse, self.target_now
        share = f", {v / now:.2%} of the target now" if now > 0 else ""
        if self.worth_running:
            return (
                f"the batch is worth running: it is expected to lower the target by {v:.3g}"
                f"{share} (Monte Carlo standard error {se:.2g}, {v / se:.1f} standard errors "
                "above 0)"
                if se > 0
                else f"the batch is worth running: it is expected to lower the target by {v:.3g}"
            )
        if now <= 0:
            return (
                "the batch is not worth running: the target is 0 now, so no run can lower it "
                "(the posterior leaves nothing to learn about it)"
            )
        if se == 0:
            return (
                f"the batch is not worth running: its expected reduction of the target is "
                f"{v:.3g}: its runs' outcomes would not move the posterior"
            )
        ess = min((r.valued.ess_median for r in self.chosen), default=math.inf)
        if now <= WORTH_SE * se:
            why = (
                f"the posterior leaves next to nothing to learn: the target is {now:.3g} now, "
                f"itself within {WORTH_SE:g} standard errors of 0"
            )
        elif ess < self.min_ess:
            why = (
                f"the importance weights of its runs rest on few draws (median ESS {ess:.0f} "
                f"of {self.draws}), too few to value them: refit, or raise --max-draws"
            )
        else:
            why = (
                f"the runs' simulated outcomes barely move what the target measures "
                f"(the target is {now:.3g} now)"
            )
        return (
            f"the batch is not worth running: its expected reduction of the target, {v:.3g}"
            f"{share}, is within {WORTH_SE:g} Monte Carlo standard errors ({se:.2g}) of 0, so "
            f"the draws cannot tell it from a batch worth nothing; {why}. More --simulations "
            "and --max-draws shrink the standard error"
        )


@dataclass(frozen=True)
class RefitCheck:
    """The batch's effect on the target estimated by refitting instead of reweighting: the
    recipe's own target before (``now``) and after refits on the observations plus the
    batch's outcomes simulated from ``outcomes`` outer draws (``after``, one per refit)."""

    now: float
    after: tuple[float, ...]
    reason: str

    @property
    def reduction(self) -> float:
        return self.now - float(np.mean(self.after))


# --- reading the fit ---------------------------------------------------------------------------


def with_concentration(fit: xr.DataTree, value: float) -> xr.DataTree:
    """A copy of ``fit`` whose posterior has a constant beta-binomial ``concentration``
    (for hand-made fits such as :func:`bayesscale.recipe.synthetic`)."""
    post = fit["posterior"].to_dataset()
    shape = (post.sizes[names.CHAIN_DIM], post.sizes[names.DRAW_DIM])
    post[names.CONCENTRATION] = ((names.CHAIN_DIM, names.DRAW_DIM), np.full(shape, float(value)))
    out = fit.copy()
    out["posterior"] = xr.DataTree(post)
    return out


def _array(fit: xr.DataTree, name: str) -> xr.DataArray:
    value = fit["posterior"][name]
    if not isinstance(value, xr.DataArray):
        raise DesignError(f"{name!r} in the fit is not a variable")
    return value


# --- candidates --------------------------------------------------------------------------------


def default_anchors(
    swept: SweptRange,
    axes: Sequence[str],
    columns: Mapping[str, str],
    rule: str = ANCHORS_PAPER,
) -> Array:
    """Per setting and axis (G, n), where a one-axis candidate holds the other axes.

    ``rule="paper"`` (the default): the paper's anchors (256 / 10,240 / 8) unless the setting's
    sweep lies wholly above one, so that after a thin first sweep the runs are made nearer to
    where the recipe's decision lies, as the paper's grid makes them; ``"swept"``: the paper's
    anchors only where they lie inside the setting's swept range. Otherwise, and on an axis
    without a paper anchor, the largest swept value.

    >>> s = SweptRange(("env", "task"), ("S",), np.array([[8.0, 320.0]]), np.array([[32.0, 1280.0]]))
    >>> default_anchors(s, ("env", "task"), {"env": "n_envs", "task": "n_tasks"}).tolist()
    [[256.0, 10240.0]]
    >>> default_anchors(s, ("env", "task"), {"env": "n_envs", "task": "n_tasks"}, "swept").tolist()
    [[32.0, 1280.0]]
    """
    if rule not in ANCHOR_RULES:
        raise DesignError(f"anchor rule must be one of {ANCHOR_RULES}, got {rule!r}")
    out = np.array(swept.hi, dtype=float, copy=True)
    paper = {AXIS_COLUMNS[a]: v for a, v in PAPER_ANCHORS.items()}
    for i, axis in enumerate(axes):
        value = paper.get(columns.get(axis, axis))
        if value is not None:
            usable = swept.lo[:, i] <= value
            if rule == ANCHORS_SWEPT:
                usable &= value <= swept.hi[:, i]
            out[:, i] = np.where(usable, value, out[:, i])
    return out


def candidate_grid(
    settings: Sequence[str],
    axes: Sequence[str],
    swept: SweptRange,
    anchors: Array,
    beyond: float = DEFAULT_BEYOND,
    step: float = DEFAULT_STEP,
    max_sizes: Mapping[str, float] | None = None,
    extra: Mapping[str, Sequence[Sequence[float]]] | None = None,
) -> list[Candidate]:
    """Candidate runs, one axis at a time as ``plan`` sweeps: per setting and axis, sizes from
    the smallest swept value up to ``beyond`` times the largest, a factor ``step`` apart (the
    top always included), the other axes at ``anchors`` (G, n); plus ``extra`` points per
    setting (e.g. the recipe's decision). Sizes are whole numbers, capped at ``max_sizes``
    (e.g. what the pool holds)."""
    if not (beyond >= 1 and step > 1):
        raise DesignError(f"beyond must be >= 1 and step > 1, got {beyond:g}, {step:g}")
    cap = np.array([float((max_sizes or {}).get(a, np.inf)) for a in axes])
    out: list[Candidate] = []
    seen: set[tuple[str, tuple[int, ...]]] = set()
    sel = swept.select(list(settings), list(axes))

    def add(setting: str, g: int, sizes: Array, axis: str) -> None:
        s = tuple(int(v) for v in np.maximum(np.round(np.minimum(sizes, cap)), 1))
        if (setting, s) in seen:
            return
        seen.add((setting, s))
        size = np.asarray(s, dtype=float)
        out.append(
            Candidate(
                setting,
                s,
                axis,
                float(np.max(size / sel.hi[g])),
                float(np.min(size / sel.lo[g])),
                tuple(float(v) for v in sel.lo[g]),
                tuple(float(v) for v in sel.hi[g]),
            )
        )

    for g, setting in enumerate(settings):
        for i, axis in enumerate(axes):
            lo, hi = float(sel.lo[g, i]), float(sel.hi[g, i])
            top = min(beyond * hi, cap[i])
            k = np.arange(int(np.floor(np.log(top / lo) / np.log(step) + 1e-9)) + 1)
            values = np.unique(np.append(lo * step**k, top))
            for v in values:
                sizes = anchors[g].astype(float).copy()
                sizes[i] = v
                add(setting, g, sizes, axis)
        for point in (extra or {}).get(setting, ()):
            add(setting, g, np.asarray(point, dtype=float), DECISION_AXIS)
    return out


# --- the preposterior engine -------------------------------------------------------------------


@dataclass
class _Engine:
    draws: LawDraws
    phi: Array  # (S,)
    trials: int
    outer: NDArray[np.int64]  # (M,) outer draw indices
    seed: int
    target: str
    regret: list[Array]  # decision: per target setting (S, J), see preposterior.regret
    exponents: Array | None  # exponents: (S, n)
    _stacked: NDArray[np.float32] | None = None
    _now: Array | None = None

    def p_at(self, cand: Candidate) -> Array:
        g = self.draws.settings.index(cand.setting)
        d = self.draws
        law = allocate.PowerLaw(
            d.coef[:, g],
            d.alpha[:, g],
            d.floor[:, g],
            None if d.gamma is None else d.gamma[:, g],
            None if d.beta is None else d.beta[:, 0],
            d.pair,
        )
        loss = law.loss(np.asarray(cand.sizes, dtype=float)[None, :])
        return np.asarray(laws.success_from_loss(loss), dtype=float)

    def outcomes(self, index: int, repeat: int, p: Array) -> NDArray[np.int64]:
        """(M,): the outcome of this candidate's ``repeat``-th run simulated from each outer
        draw (its own seeded stream, so every call gives the same outcomes)."""
        rng = np.random.default_rng([self.seed, 7, index, repeat])
        return simulate_beta_binomial(rng, self.trials, p[self.outer], self.phi[self.outer])

    def loglik(self, index: int, repeat: int, p: Array) -> Array:
        """(M, S): the log-likelihood under every draw of :meth:`outcomes`."""
        k = self.outcomes(index, repeat, p)
        return beta_binomial_logpmf(k[:, None], self.trials, p[None, :], self.phi[None, :])

    def score(self, ll: Array) -> tuple[Array, Array, Array]:
        """Per outer draw: the target's reduction so far (M,), per target part (M, T), and
        the Kish ESS of the weights (M,)."""
        w = normalized_weights(ll)
        ess = kish_ess(w)
        if self.target == TARGET_DECISION:
            if self._stacked is None or self._now is None:
                # one float32 product for every target (S, T * J): the cost of a step
                self._stacked = np.hstack(self.regret).astype(np.float32)
                self._now = np.array([np.min(R.mean(axis=0)) for R in self.regret])
            after = (w.astype(np.float32) @ self._stacked).reshape(w.shape[0], len(self.regret), -1)
            parts = self._now[None, :] - after.min(axis=-1).astype(float)
        else:
            assert self.exponents is not None
            now = np.var(self.exponents, axis=0)
            parts = now[None, :] - weighted_variance(self.exponents, w)
        total = parts.mean(axis=-1) if self.target == TARGET_DECISION else parts.sum(axis=-1)
        return total, parts, ess

    def batch_value(self, ll: Array, blocks: int = JACKKNIFE_BLOCKS) -> tuple[float, float, float]:
        """The target's expected reduction given the simulated log-likelihoods ``ll`` (M, S)
        of a batch, and its Monte Carlo standard errors from the outcomes and from the draws
        (:func:`value_and_mcse`, in float64)."""
        if self.target == TARGET_DECISION:
            features = np.hstack(self.regret)
            n_targets = len(self.regret)

            def statistic(x: Array) -> Array:
                return np.asarray(x.reshape(*x.shape[:-1], n_targets, -1).min(-1).mean(-1))

        else:
            assert self.exponents is not None
            centred = self.exponents - self.exponents.mean(axis=0)
            features = np.hstack([centred, centred**2])
            n = centred.shape[1]

            def statistic(x: Array) -> Array:
                return np.asarray(np.maximum(x[..., n:] - x[..., :n] ** 2, 0.0).sum(-1))

        return value_and_mcse(features, statistic, ll, blocks)


def value_and_mcse(
    features: Array, statistic: Callable[[Array], Array], ll: Array, blocks: int = JACKKNIFE_BLOCKS
) -> tuple[float, float, float]:
    """The preposterior value ``statistic(mean_s f_s) - mean_m statistic(sum_s w_ms f_s)`` of
    ``features`` (S, K) under the normalised weights ``w_m = softmax(ll_m)`` (``ll``: (M, S)),
    and its two Monte Carlo standard errors: over the ``M`` simulated outcomes (the spread of
    the per-outcome reductions over ``sqrt(M)``), and over the ``S`` draws (a delete-a-block
    jackknife, ``sqrt((B - 1) / B sum_b (v_b - mean v)^2)``, with ``v_b`` the value without
    the ``b``-th of ``B`` blocks of consecutive draws, in the weights and in the first term
    alike, the outcomes held). ``statistic`` maps (..., K) feature means to the target, e.g.
    the minimum over actions of the mean regret (decision) or the summed variance from the
    first two moments (exponents).

    Each block's weighted means and log mass are computed once, so the jackknife costs about
    one pass over the draws.

    >>> rng = np.random.default_rng(0)
    >>> theta = rng.standard_normal(2000)               # a N(0, 1) posterior
    >>> y = theta[:256] + rng.standard_normal(256)      # outcomes, noise sd 1
    >>> ll = -0.5 * (y[:, None] - theta[None, :]) ** 2
    >>> f = np.stack([theta, theta**2], axis=1)
    >>> value, se_y, se_s = value_and_mcse(f, lambda x: x[..., 1] - x[..., 0] ** 2, ll)
    >>> bool(abs(value - 0.5) < 3 * np.hypot(se_y, se_s))  # exact: 1 - 1/2
    True
    """
    f = np.asarray(features, dtype=float)
    ll = np.asarray(ll, dtype=float)
    S, M = f.shape[0], ll.shape[0]
    B = max(1, min(int(blocks), S))
    edges = np.linspace(0, S, B + 1).round().astype(int)
    means = np.empty((B, M, f.shape[1]))  # within-block weighted feature means
    mass = np.empty((B, M))  # log of each block's unnormalised weight
    sums = np.empty((B, f.shape[1]))
    for b in range(B):
        part = ll[:, edges[b] : edges[b + 1]]
        top = np.max(part, axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        e = np.exp(part - top)
        z = e.sum(axis=1)
        means[b] = (e @ f[edges[b] : edges[b + 1]]) / np.maximum(z, 1e-300)[:, None]
        with np.errstate(divide="ignore"):
            mass[b] = top[:, 0] + np.log(z)
        sums[b] = f[edges[b] : edges[b + 1]].sum(axis=0)
    counts = np.diff(edges).astype(float)

    def value(keep: NDArray[np.bool_]) -> tuple[float, Array]:
        lm = np.where(keep[:, None], mass, -np.inf)
        top = np.max(lm, axis=0)
        pi = np.exp(lm - np.where(np.isfinite(top), top, 0.0))
        pi /= np.maximum(pi.sum(axis=0), 1e-300)
        after = statistic(np.einsum("bm,bmk->mk", pi, means))
        now = float(statistic(sums[keep].sum(axis=0) / counts[keep].sum()))
        gain = now - after
        return float(gain.mean()), gain

    everything = np.ones(B, dtype=bool)
    total, gain = value(everything)
    se_outcomes = float(gain.std(ddof=1) / math.sqrt(M)) if M > 1 else 0.0
    if B < 2:
        return total, se_outcomes, 0.0
    left = np.array([value(everything & (np.arange(B) != b))[0] for b in range(B)])
    se_draws = float(math.sqrt((B - 1) / B * np.sum((left - left.mean()) ** 2)))
    return total, se_outcomes, se_draws


def _cost(
    cand: Candidate,
    axes: Sequence[str],
    columns: Mapping[str, str],
    owned: Mapping[str, float],
    costs: Costs,
    params_b: float | None,
    cells: float | None,
) -> RunCost:
    """Data beyond what is owned (environments, tasks: every axis but the rollouts, whose
    trajectories the run generates itself) plus GPU time (:mod:`bayesscale.design.costs`)."""
    data = sum(
        costs.data_price(a) * max(0.0, s - owned.get(a, 0.0))
        for a, s in zip(axes, cand.sizes, strict=True)
        if columns[a] != names.ROLLOUTS
    )
    rollouts = next(
        (s for a, s in zip(axes, cand.sizes, strict=True) if columns[a] == names.ROLLOUTS), None
    )
    hours = costs.gpu_hours(params_b, rollouts, cells)
    return RunCost(
        data=float(data),
        gpu=hours * costs.price_per_hour,
        gpu_hours=hours,
        trajectories=costs.trajectories(rollouts, cells),
        flops=costs.flops(params_b, rollouts, cells),
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
    set. Candidates: :func:`candidate_grid` with ``beyond``, ``step``, ``anchors`` (axis ->
    size, for every setting; the other axes by :func:`default_anchors` with ``anchor_rule``)
    and ``max_sizes``, plus the recipe's decision per setting. ``cells``, the task-environment
    cells a run trains on over all its updates (a sweep's ``[alignment] cells``), enter its
    trajectories and GPU-hours (default: the costs' ``cells``, the paper's 256,000).
    ``min_ess``: the batch stops before a run (other than its first) whose median Kish ESS,
    given the batch's simulated outcomes, is below this, and a first run below it is flagged
    unreliable (refit to check it); 0 never stops. The result says whether the batch is worth
    running (:attr:`NextRuns.worth_running`: its value at least ``WORTH_SE`` Monte Carlo
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
    rng = np.random.default_rng([seed, 1])
    draws = law_draws(fit, None, max_draws)
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
    post = fit["posterior"]
    if names.CONCENTRATION not in post:
        raise DesignError(
            f"the fit's posterior has no {names.CONCENTRATION!r}: the value of a run needs the "
            "beta-binomial likelihood of a success-count fit"
        )
    phi = at_draws(_array(fit, names.CONCENTRATION), draws)
    S = draws.samples
    if min_ess > 0 and min_ess >= S:
        raise DesignError(
            f"min_ess {min_ess:g} is not below the {S} posterior draws used: an importance-weight "
            "ESS never exceeds the draws, so no run after the first could be valued; lower "
            "--min-ess or raise --max-draws"
        )
    M = min(simulations, S)
    outer = rng.permutation(S)[:M]

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
    decision = ds[names.DECISION].isel({names.BUDGET_DIM: 0})  # (setting, axis) purchased
    gap = (ds[names.SUCCESS_OPTIMUM] - ds[names.SUCCESS_DECISION]).isel({names.BUDGET_DIM: 0})
    recipe_gap = {s: float(gap.sel({names.SETTING_DIM: s}).mean()) for s in targets}

    success: list[Array] = []
    exponents = None
    if target == TARGET_DECISION:
        success = _decision_regrets(ds, draws, targets, actions)
    else:
        if names.ALPHA_POP not in post:
            raise DesignError(f"the fit's posterior has no {names.ALPHA_POP!r}")
        exponents = at_draws(_array(fit, names.ALPHA_POP).transpose(..., names.AXIS_DIM), draws)

    engine = _Engine(draws, phi, int(trials), outer, seed, target, success, exponents)
    extra: dict[str, Sequence[Sequence[float]]] = {
        s: [decision.sel({names.SETTING_DIM: s}).to_numpy().tolist()]
        for s in movers
        if s in targets
    }
    cands = candidate_grid(movers, axes, swept, anchor, beyond, step, max_sizes, extra)
    if not cands:
        raise DesignError("no candidate runs")

    keys = setting_keys(fit, all_settings)
    batcher = _Greedy(
        engine,
        cands,
        keys,
        _owned_sizes(keys, swept.select(all_settings, list(axes)), all_settings, axes),
        _RunCosts(axes, columns, costs, cells),
        runs=runs,
        spend=spend,
        stop_ess=min_ess,
        why=lambda c, v: _why(c, v, target, targets, axes),
    )
    base_total, _, _ = engine.score(np.zeros((M, S)))  # zero reduction before anything is seen
    notes: list[str] = []
    chosen, first, ll_batch, stopped = batcher.run(by_ratio=True)
    if spend is not None:
        chosen, ll_batch, stopped, note = _best_within_spend(
            batcher, (chosen, first, ll_batch, stopped), first_picks, spend
        )
        notes += [note] if note else []
    if not chosen:
        raise DesignError(f"no candidate run fits in the spend cap {spend:g}")
    total, _, _ = engine.score(ll_batch)
    reduction = float(total.mean() - base_total.mean())
    _, mcse_outcomes, mcse_draws = engine.batch_value(ll_batch)
    if target == TARGET_DECISION:
        now = float(np.mean([np.min(R.mean(axis=0)) for R in success]))
    else:
        assert exponents is not None
        now = float(np.var(exponents, axis=0).sum())
    notes += _notes(chosen, first, min_ess, S, stopped, runs)
    return NextRuns(
        target=target,
        budget=float(budget),
        axes=tuple(axes),
        candidates=cands,
        chosen=chosen,
        first_step=first,
        target_now=now,
        target_after=max(now - reduction, 0.0),
        target_settings=tuple(targets),
        currency=costs.currency,
        trials=int(trials),
        simulations=M,
        draws=S,
        notes=notes,
        recipe_gap=recipe_gap,
        stopped_ess=None if stopped is None else stopped.ess_median,
        anchor_rule=anchor_rule,
        anchors={s: tuple(float(v) for v in anchor[g]) for g, s in enumerate(movers)},
        batch_value=reduction,
        mcse_outcomes=mcse_outcomes,
        mcse_draws=mcse_draws,
        min_ess=float(min_ess),
        cost_model=costs.describe(),
    )


def _best_within_spend(
    batcher: _Greedy,
    by_ratio: tuple[list[ChosenRun], list[Valued], Array, Valued | None],
    first_picks: int,
    spend: float,
) -> tuple[list[ChosenRun], Array, Valued | None, str]:
    """The batch worth most within the spend cap, of the greedy by value per cost (given as
    ``by_ratio``), the greedy by value, and the batches that start with one of the
    ``first_picks`` first runs worth most and one of the ``first_picks`` worth most per cost,
    each completed by value per cost; and a note saying which was kept (empty for the first).

    Greedy by value per cost alone can fill the cap with cheap runs of little value while an
    expensive run is worth more: the greedy by value alone, kept when its batch is worth more,
    bounds that loss (Leskovec et al. 2007, "cost-effective outbreak detection", CELF). Neither
    sees that data bought for one run makes the next runs at those sizes cheap (a run pays
    only for data beyond what is owned), so a batch that starts with an expensive run and goes
    on by value per cost can beat both. Starting from each first run, then completing greedily,
    is partial enumeration (Khuller, Moss and Naor 1999, budgeted maximum coverage, enumerate
    the first three); here only the best few first runs are tried, a heuristic without that
    guarantee. Every batch is scored on the same simulated outcomes."""
    chosen, first, ll_batch, stopped = by_ratio
    # started from its own first run, the greedy by value per cost is the batch given
    own_first = chosen[0].valued.candidate if chosen else None
    kept = (float(batcher.engine.score(ll_batch)[0].mean()), chosen, ll_batch, stopped, "")

    def consider(
        built: tuple[list[ChosenRun], list[Valued], Array, Valued | None], note: str
    ) -> None:
        """Keep ``built`` (a batch from :meth:`_Greedy.run`) if it is worth more."""
        nonlocal kept
        batch, _, ll, stop = built
        worth = float(batcher.engine.score(ll)[0].mean())
        if worth > kept[0]:
            kept = (worth, batch, ll, stop, note)

    consider(
        batcher.run(by_ratio=False),
        "the batch is the greedy by value (not value per cost): within the spend cap it is "
        "worth more",
    )
    affordable = [v for v in first if v.cost.total <= spend]
    starts: list[int] = []
    for rank in (lambda v: v.raw, lambda v: v.per_cost):
        for v in sorted(affordable, key=rank, reverse=True)[:first_picks]:
            if v.candidate not in starts and v.candidate != own_first:
                starts.append(v.candidate)
    for i in starts:
        consider(
            batcher.run(by_ratio=True, first=i),
            "the batch starts with a run chosen among the first runs worth most (by value and "
            "by value per cost) and goes on by value per cost: within the spend cap it is worth "
            "more than either greedy (the best of several batches scored on the same simulated "
            "outcomes: its expected target after is somewhat optimistic)",
        )
    _, chosen, ll_batch, stopped, note = kept
    return chosen, ll_batch, stopped, note


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
        law = allocate.PowerLaw(
            draws.coef[:, g, None],
            draws.alpha[:, g, None],
            draws.floor[:, g, None],
            None if draws.gamma is None else draws.gamma[:, g, None],
            None if draws.beta is None else draws.beta,
            draws.pair,
        )
        out.append(regret(laws.success_from_loss(law.loss(act[None]))))
    return out


def _owned_sizes(
    keys: Mapping[str, Mapping[str, Any]],
    swept_all: SweptRange,
    settings: Sequence[str],
    axes: Sequence[str],
) -> dict[str, dict[str, float]]:
    """Per domain, the largest size of every axis already in the fit's rows (data bought)."""
    owned: dict[str, dict[str, float]] = {}
    for g, s in enumerate(settings):
        dom = str(keys[s].get(names.DOMAIN, s))
        have = owned.setdefault(dom, {a: 0.0 for a in axes})
        for i, a in enumerate(axes):
            have[a] = max(have[a], float(swept_all.hi[g, i]))
    return owned


@dataclass(frozen=True)
class _RunCosts:
    """What a candidate costs, given the data already owned in its domain."""

    axes: Sequence[str]
    columns: Mapping[str, str]
    costs: Costs
    cells: float | None

    def __call__(self, c: Candidate, owned: Mapping[str, float], params_b: Any) -> RunCost:
        return _cost(c, self.axes, self.columns, owned, self.costs, params_b, self.cells)


class _Greedy:
    """The greedy batch: at each step every candidate is valued given the simulated outcomes
    of the runs already chosen (diminishing returns), and the best by value per cost (or by
    value) is added, until ``runs`` runs, the ``spend`` cap, or a best run whose median ESS
    is below ``stop_ess``."""

    def __init__(
        self,
        engine: _Engine,
        cands: Sequence[Candidate],
        keys: Mapping[str, Mapping[str, Any]],
        owned: Mapping[str, Mapping[str, float]],
        cost_of: _RunCosts,
        *,
        runs: int,
        spend: float | None,
        stop_ess: float,
        why: Callable[[Candidate, Valued], str],
    ) -> None:
        self.engine, self.cands, self.keys, self.owned = engine, cands, keys, owned
        self.cost_of, self.runs, self.spend, self.why = cost_of, runs, spend, why
        self.stop_ess = stop_ess
        self.p_cache = [engine.p_at(c) for c in cands]
        m, s = len(engine.outer), engine.draws.samples
        self.shape = (m, s)
        self.cache_ok = len(cands) * m * s * 4 <= CACHE_BYTES
        self.ll_cache: dict[tuple[int, int], NDArray[np.float32]] = {}
        self.first_values: list[Valued] | None = None

    def _domain(self, c: Candidate) -> str:
        return str(self.keys[c.setting].get(names.DOMAIN, c.setting))

    def loglik(self, i: int, repeat: int) -> Array:
        """The log-likelihood of every draw for each simulated outcome of candidate ``i``'s
        ``repeat``-th run (cached in float32 up to ``CACHE_BYTES``)."""
        if not self.cache_ok:
            return self.engine.loglik(i, repeat, self.p_cache[i])
        if (i, repeat) not in self.ll_cache:
            ll = self.engine.loglik(i, repeat, self.p_cache[i]).astype(np.float32)
            self.ll_cache[(i, repeat)] = ll
        return np.asarray(self.ll_cache[(i, repeat)], dtype=float)

    def value_all(
        self, ll_batch: Array, repeats: Sequence[int], have: Mapping[str, Mapping[str, float]]
    ) -> list[Valued]:
        """Every candidate's marginal value (clipped, raw, standard error), cost and ESS."""
        engine, m = self.engine, self.shape[0]
        current, current_parts, _ = engine.score(ll_batch)
        valued = []
        for i, c in enumerate(self.cands):
            total, parts, ess = engine.score(ll_batch + self.loglik(i, repeats[i]))
            gain = total - current
            raw = float(gain.mean())
            se = float(gain.std(ddof=1) / np.sqrt(m))
            cost = self.cost_of(c, have[self._domain(c)], self.keys[c.setting][names.PARAMS_B])
            by = tuple((parts - current_parts).mean(axis=0).tolist())
            valued.append(
                Valued(i, max(raw, 0.0), raw, se, cost, float(np.median(ess)), float(ess.min()), by)
            )
        return valued

    def run(
        self, by_ratio: bool, first: int | None = None
    ) -> tuple[list[ChosenRun], list[Valued], Array, Valued | None]:
        """The batch, the first step's values of every candidate, the batch's summed simulated
        log-likelihoods, and the run it stopped before for its ESS (None if it did not).
        ``first``: the candidate the batch starts with (default: the greedy's own choice).

        The batch stops before a run (other than its first) whose median importance-weight ESS
        is below ``stop_ess``: conditioned on that many simulated outcomes, the weights rest on
        a handful of draws, every value is then near zero or noise, and the ranking falls back
        to the cheapest runs. A refit after the batch values the next runs afresh."""
        repeats = [0] * len(self.cands)
        have = {d: dict(v) for d, v in self.owned.items()}
        ll_batch = np.zeros(self.shape)
        batch: list[ChosenRun] = []
        first_values: list[Valued] = []
        spent = 0.0
        stopped: Valued | None = None
        for step_no in range(self.runs):
            if step_no == 0:  # the same for every batch built: valued once
                if self.first_values is None:
                    self.first_values = self.value_all(ll_batch, repeats, have)
                valued = first_values = self.first_values
            else:
                valued = self.value_all(ll_batch, repeats, have)
            affordable = [
                v for v in valued if self.spend is None or spent + v.cost.total <= self.spend
            ]
            if not affordable:
                break
            if step_no == 0 and first is not None:
                best = valued[first]
            elif by_ratio:
                best = max(affordable, key=lambda v: (v.per_cost, v.raw))
            else:
                best = max(affordable, key=lambda v: (v.raw, -v.cost.total))
            if batch and best.ess_median < self.stop_ess:
                stopped = best
                break
            i = best.candidate
            c = self.cands[i]
            outcomes = self.engine.outcomes(i, repeats[i], self.p_cache[i])
            batch.append(ChosenRun(c, repeats[i], best, self.why(c, best), outcomes))
            ll_batch = ll_batch + self.loglik(i, repeats[i])
            repeats[i] += 1
            spent += best.cost.total
            for a, v in zip(self.cost_of.axes, c.sizes, strict=True):
                have[self._domain(c)][a] = max(have[self._domain(c)][a], float(v))
        return batch, first_values, ll_batch, stopped


def _notes(
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


def _why(c: Candidate, v: Valued, target: str, targets: Sequence[str], axes: Sequence[str]) -> str:
    """Which axis and setting the run varies, where it lies, and which part of the target it
    informs most."""
    where = where_text(c, axes)
    what = "the recipe's decision point" if c.axis == DECISION_AXIS else f"{c.axis} axis"
    k = int(np.argmax(v.by_target))
    if target == TARGET_DECISION:
        return f"{what} of {c.setting} ({where}); informs the decision for {targets[k]} most"
    return f"{what} of {c.setting} ({where}); informs alpha_pop[{axes[k]}] most"


# --- the refit fallback ------------------------------------------------------------------------


def fit_target(
    fit: xr.DataTree,
    target: str,
    budget: float,
    settings: Sequence[str],
    prices: Prices | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    max_draws: int | None = DEFAULT_MAX_DRAWS,
) -> float:
    """The target of a fit, computed from scratch: the recipe's
    ``mean(success_at_optimum - success_at_decision)`` at ``budget`` averaged over ``settings``
    (decision), or the summed posterior variance of ``alpha_pop`` (exponents)."""
    if target == TARGET_EXPONENTS:
        # the draws next values runs on: law_draws' thinning, less any draw it leaves out
        draws = law_draws(fit, None, max_draws)
        alpha = at_draws(_array(fit, names.ALPHA_POP).transpose(..., names.AXIS_DIM), draws)
        return float(np.var(alpha, axis=0).sum())
    ds = recipe(
        fit,
        [budget],
        prices=prices,
        bounds=bounds,
        settings=list(settings),
        max_draws=max_draws,
        multipliers=False,
    )
    gap = ds[names.SUCCESS_OPTIMUM] - ds[names.SUCCESS_DECISION]
    return float(gap.mean())


def simulated_rows(
    result: NextRuns, fit: xr.DataTree, outer: int, first_seed: int = 1000
) -> list[dict[str, Any]]:
    """Observation rows of the batch with the outcomes simulated from outer draw ``outer``:
    setting keys (and ``params_b``), axis columns, seed ``first_seed + repeat``, ``trials``,
    ``successes``."""
    keys = setting_keys(fit, list(dict.fromkeys(r.candidate.setting for r in result.chosen)))
    columns = axis_columns(fit, result.axes)
    rows = []
    for r in result.chosen:
        row: dict[str, Any] = {k: v for k, v in keys[r.candidate.setting].items() if v is not None}
        row.update(
            {columns[a]: int(v) for a, v in zip(result.axes, r.candidate.sizes, strict=True)}
        )
        row[names.SEED] = first_seed + r.repeat
        row[names.TRIALS] = result.trials
        row[names.SUCCESSES] = int(r.outcomes[outer])
        rows.append(row)
    return rows


def refit_check(
    result: NextRuns,
    fit: xr.DataTree,
    refit: Callable[[list[dict[str, Any]]], xr.DataTree],
    outcomes: int = 4,
    prices: Prices | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    max_draws: int | None = DEFAULT_MAX_DRAWS,
    reason: str = "",
) -> RefitCheck:
    """Re-estimate the batch's effect on the target by refitting: for the first ``outcomes``
    outer draws, ``refit(rows)`` fits the law to the fit's observations plus the batch's rows
    simulated from that draw (:func:`simulated_rows`), and the target is recomputed from the
    refit (:func:`fit_target`). The fallback when the importance weights collapse; it costs
    ``outcomes`` fits. Stored in ``result.refit`` and returned."""
    if outcomes < 1:
        raise DesignError(f"outcomes must be >= 1, got {outcomes}")
    args = (result.target, result.budget, result.target_settings, prices, bounds, max_draws)
    now = fit_target(fit, *args)
    after = []
    for m in range(min(outcomes, result.simulations)):
        after.append(fit_target(refit(simulated_rows(result, fit, m)), *args))
    result.refit = RefitCheck(now, tuple(after), reason)
    return result.refit


# --- output ------------------------------------------------------------------------------------


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
