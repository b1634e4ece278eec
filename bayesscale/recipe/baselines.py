"""Allocations to compare the recipe against, at equal money, and the budget each needs.

Two baselines, in purchased units ``u`` under the money cost ``Phi`` (a posynomial,
:func:`~bayesscale.core.prices.money_cost`):

* ``traj_heavy``: every axis at its anchor but one (the trajectory axis by default); the
  rest of the money buys that axis. Every monomial is linear in each axis, so
  ``Phi = A_0 + A_1 u_g`` and ``u_g = (B - A_0) / A_1``, capped at its upper bound;
* ``chinchilla``: every axis scaled from its anchor by one common factor ``s`` (as Chinchilla
  scales N and D together): ``Phi(s u_0) = sum_m T_m s^(deg_m) = B``, solved by Newton in
  ``log s``, then clipped to the box (NaN where raising an axis to its lower bound would
  spend more than ``B``).

:func:`budget_multiplier` finds, per draw, the budget factor at which a baseline's loss falls
to a target (the decision's).

>>> from bayesscale.core.prices import default_prices, money_cost
>>> cost = money_cost(["task", "traj"], ["n_tasks", "rollouts"], default_prices())
>>> u, _ = baseline_units("traj_heavy", np.array(34.0), cost, np.array([100.0, 8.0]),
...                       np.ones(2), np.full(2, np.inf), grow=1)
>>> u.round(9).tolist()  # 18 USD of tasks, 16 USD of trajectories: the anchors
[100.0, 8.0]
"""

from __future__ import annotations

import numpy as np

from bayesscale import names
from bayesscale.core.form_law import Law
from bayesscale.core.geometric import Posynomial
from bayesscale.recipe.draws import _MULTIPLIER_RANGE, Array


def baseline_units(
    kind: str,
    money: Array,
    cost: Posynomial,
    anchor: Array,
    lo: Array,
    hi: Array,
    grow: int,
) -> tuple[Array, Array]:
    """Purchased units (..., n) of a baseline at budgets ``money`` (...), NaN where the budget
    cannot fund it, and their derivative in ``log money``."""
    money = np.asarray(money, dtype=float)
    terms = cost.terms(anchor)  # (M,)
    deg = cost.powers.sum(axis=1)
    if kind == names.CHINCHILLA:
        log_s = np.log(money / terms.sum()) / max(float(np.max(deg)), 1.0)
        for _ in range(100):
            t = terms * np.exp(np.multiply.outer(log_s, deg))  # (..., M)
            total = t.sum(axis=-1)
            f = np.log(total / money)
            slope = (t * deg).sum(axis=-1) / total
            log_s = log_s - f / slope
            if np.all(np.abs(f) < 1e-13):
                break
        s = np.exp(log_s)
        raw = s[..., None] * anchor
        u = np.clip(raw, lo, hi)
        du = np.where((raw > lo) & (raw < hi), raw / slope[..., None], 0.0)
        # an axis raised to its lower bound costs more than the common factor bought: that
        # is no longer a comparison at equal money
        over = cost(u) > money * (1 + 1e-9)
        u[over] = np.nan
        return u, du
    uses = cost.powers[:, grow] > 0
    if (cost.powers[uses, grow] != 1).any():
        raise ValueError("the trajectory-heavy baseline needs a cost linear in its growing axis")
    a0 = float(terms[~uses].sum())
    a1 = float(terms[uses].sum()) / anchor[grow]
    u = np.broadcast_to(anchor, (*money.shape, anchor.size)).copy()
    ug = (money - a0) / a1
    u[..., grow] = np.minimum(ug, hi[grow])
    du = np.zeros_like(u)
    du[..., grow] = np.where(ug < hi[grow], money / a1, 0.0)
    u[ug < lo[grow]] = np.nan
    return u, du


def budget_multiplier(
    law: Law,
    kappa: Array,
    target_loss: Array,
    kind: str,
    budget: float,
    cost: Posynomial,
    anchor: Array,
    lo: Array,
    hi: Array,
    grow: int,
) -> Array:
    """Per draw (S, G): the smallest budget factor ``M`` at which the baseline's loss falls to
    ``target_loss``: bisection on ``log M`` with Newton steps where the loss moves (it falls
    as ``M`` grows, and is flat where the box clips the baseline). ``inf`` where even ``1e6 B``
    does not reach it; below 1 where a baseline matches the decision with less money."""
    t_lo = np.full(target_loss.shape, np.log(_MULTIPLIER_RANGE[0]))
    t_hi = np.full(target_loss.shape, np.log(_MULTIPLIER_RANGE[1]))
    kap = kappa[:, None, :]

    def f(t: Array) -> tuple[Array, Array]:
        u, du = baseline_units(kind, budget * np.exp(t), cost, anchor, lo, hi, grow)
        d = kap * u
        with np.errstate(invalid="ignore"):
            loss = law.loss(d)
            slope = np.sum(law.gradient(d) * kap * du, axis=-1)
        loss = np.where(np.isnan(u).any(axis=-1), np.inf, loss)
        return loss - target_loss, slope

    tol = 1e-12 * np.abs(target_loss)
    never = f(t_hi)[0] > tol
    below = f(t_lo)[0] <= tol  # even 1e-3 B matches: report the range's end
    # The smallest factor that reaches the target: the loss falls with M but may be flat
    # where the box clips the baseline, so bisect on "reached", with Newton steps where the
    # loss still moves.
    t = 0.5 * (t_lo + t_hi)
    for _ in range(200):
        val, slope = f(t)
        reached = val <= tol
        t_hi = np.where(reached, t, t_hi)
        t_lo = np.where(reached, t_lo, t)
        exact = (np.abs(val) <= tol) & (slope < 0)
        if np.all((t_hi - t_lo < 1e-12) | exact | never | below):
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = t - val / slope
        inside = np.isfinite(newton) & (newton > t_lo) & (newton < t_hi) & (slope < 0)
        t = np.where(exact, t, np.where(inside, newton, 0.5 * (t_lo + t_hi)))
    t = np.where(np.abs(f(t)[0]) <= tol, t, t_hi)
    m = np.where(below, _MULTIPLIER_RANGE[0], np.exp(t))
    return np.asarray(np.where(never, np.inf, m), dtype=float)
