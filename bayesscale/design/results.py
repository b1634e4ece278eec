"""The results of ``next`` and the types they are built of: a candidate run, its cost, its
value at a greedy step, a chosen run, the batch (:class:`NextRuns`) with its verdict, a refit
check; and :class:`DesignError`, raised on inputs the design cannot use.

>>> RunCost(data=10.0, gpu=2.5, gpu_hours=1.0).total
12.5
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from bayesscale.design.defaults import ANCHORS_PAPER

Array = NDArray[np.float64]
DECISION_AXIS = "decision"  # the candidate at the recipe's decision (every axis moves)
WORTH_SE = 2.0  # a batch worth less than this many Monte Carlo standard errors is not worth running


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
    forms: dict[str, float] = field(default_factory=dict)
    """A stack's forms that the draws mix, with their weights (empty for a fit of one form)."""

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
