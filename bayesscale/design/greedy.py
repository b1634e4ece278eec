"""The greedy batch of ``next``: each step adds the run with the largest marginal value per
cost (:class:`GreedyBatch`), its cost the data beyond what its domain owns plus GPU time
(:class:`RunCosts`); under a spend cap, the batch worth most of several greedy batches
(:func:`best_within_spend`).

>>> keys = {"a": {"domain": "web"}, "b": {"domain": "web"}}
>>> swept = SweptRange(("env",), ("a", "b"), np.array([[8.0], [8.0]]), np.array([[32.0], [64.0]]))
>>> owned_sizes(keys, swept, ["a", "b"], ["env"])
{'web': {'env': 64.0}}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bayesscale import names
from bayesscale.data.extrapolation import SweptRange
from bayesscale.design.costs import Costs
from bayesscale.design.results import Array, Candidate, ChosenRun, RunCost, Valued
from bayesscale.design.run_value import ValueEngine

CACHE_BYTES = 768 * 2**20  # simulated log-likelihoods kept between greedy steps up to this size


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


def owned_sizes(
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
class RunCosts:
    """What a candidate costs, given the data already owned in its domain."""

    axes: Sequence[str]
    columns: Mapping[str, str]
    costs: Costs
    cells: float | None

    def __call__(self, c: Candidate, owned: Mapping[str, float], params_b: Any) -> RunCost:
        return _cost(c, self.axes, self.columns, owned, self.costs, params_b, self.cells)


class GreedyBatch:
    """The greedy batch: at each step every candidate is valued given the simulated outcomes
    of the runs already chosen (diminishing returns), and the best by value per cost (or by
    value) is added, until ``runs`` runs, the ``spend`` cap, or a best run whose median ESS
    is below ``stop_ess``."""

    def __init__(
        self,
        engine: ValueEngine,
        cands: Sequence[Candidate],
        keys: Mapping[str, Mapping[str, Any]],
        owned: Mapping[str, Mapping[str, float]],
        cost_of: RunCosts,
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
        self.phi_cache = [engine.phi_at(c) for c in cands]
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
            return self.engine.loglik(i, repeat, self.p_cache[i], self.phi_cache[i])
        if (i, repeat) not in self.ll_cache:
            ll = self.engine.loglik(i, repeat, self.p_cache[i], self.phi_cache[i])
            self.ll_cache[(i, repeat)] = ll.astype(np.float32)
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
            outcomes = self.engine.outcomes(i, repeats[i], self.p_cache[i], self.phi_cache[i])
            batch.append(ChosenRun(c, repeats[i], best, self.why(c, best), outcomes))
            ll_batch = ll_batch + self.loglik(i, repeats[i])
            repeats[i] += 1
            spent += best.cost.total
            for a, v in zip(self.cost_of.axes, c.sizes, strict=True):
                have[self._domain(c)][a] = max(have[self._domain(c)][a], float(v))
        return batch, first_values, ll_batch, stopped


def best_within_spend(
    batcher: GreedyBatch,
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
        """Keep ``built`` (a batch from :meth:`GreedyBatch.run`) if it is worth more."""
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
