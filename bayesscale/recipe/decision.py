"""The single decision that maximises posterior expected success, for every (setting, budget).

In purchased units ``u = exp(y)`` (the law sees ``D_d = kappa_d u`` in draw ``d``):

.. math::

    \\max_y\\ F(y) = \\frac{1}{S} \\sum_d p_d(y),\\quad p_d = e^{-\\max(L_d(\\kappa_d e^y), 0)}
    \\quad\\text{s.t.}\\quad c(y) = \\log \\Phi(e^y) - \\log B \\le 0,\\quad
    \\log lo \\le y \\le \\log hi.

``F`` is smooth where no draw sits at ``L = 0``; with ``L_y`` and ``L_yy`` the law's
derivatives in ``y`` (:meth:`~bayesscale.core.allocate.PowerLaw.log_derivatives`, or a form law's),
``F_y = -mean_d p_d L_y`` and ``F_yy = mean_d p_d (L_y L_y^T - L_yy)`` over the draws with
``L > 0``. :func:`decide` solves the KKT system of all problems at once by Newton's method
with an active set (the budget and the box), from the median of the per-draw optima:
``(W, s; s^T, 0) (dy, mu) = -(-F_y, c)``, ``W = -F_yy + mu c_yy``, ``s = c_y``, with a merit
line search. A problem is accepted only where the result is a strict local maximum (first
order residual at rounding level, multipliers of the right sign, the reduced Hessian
negative definite) no worse than the start; the rest go to SLSQP one by one
(``bayesscale.recipe.solve._decision``), as before.

>>> import numpy as np
>>> from bayesscale.core.allocate import PowerLaw
>>> from bayesscale.core.geometric import Posynomial
>>> rng = np.random.default_rng(0)
>>> law = PowerLaw(np.exp(0.2 * rng.standard_normal((100, 1, 1, 2))), np.full((100, 1, 1, 2), 0.5))
>>> u, ok = decide(law, np.ones((100, 2)), Posynomial.linear([1.0, 1.0]), np.array([100.0]),
...                np.ones(2), np.full(2, np.inf), np.full((1, 1, 2), 50.0))
>>> bool(ok.all()), round(float(u.sum()), 9)
(True, 100.0)
"""

from __future__ import annotations

import contextlib

import numpy as np

from bayesscale.core.allocate import Array, BoolArray
from bayesscale.core.form_law import Law
from bayesscale.core.geometric import Posynomial

_MAX_ITER = 60
_STEP_TOL = 1e-11  # max |dy| of the last Newton step at convergence
_GRAD_TOL = 1e-12  # first-order residual, relative to the gradient's scale


def objective(law: Law, kappa: Array, y: Array) -> tuple[Array, Array, Array]:
    """``1 - F``, its gradient and Hessian in ``y`` (problems..., n): ``law`` (S, problems...,
    n) per draw, ``kappa`` (S, n)."""
    lead = (slice(None),) + (None,) * (y.ndim - 1)
    d = kappa[lead] * np.exp(y)[None]
    loss, ly, lyy = law.log_derivatives(d)
    p = np.exp(-np.maximum(loss, 0.0))
    w = np.where(loss > 0.0, p, 0.0)
    f = 1.0 - np.mean(p, axis=0)
    g = np.mean(w[..., None] * ly, axis=0)
    h = np.mean(w[..., None, None] * (lyy - ly[..., :, None] * ly[..., None, :]), axis=0)
    return f, g, h


def _value(law: Law, kappa: Array, y: Array) -> Array:
    """``1 - F`` alone (the line search's)."""
    lead = (slice(None),) + (None,) * (y.ndim - 1)
    return np.asarray(
        1.0 - np.mean(np.exp(-np.maximum(law.loss(kappa[lead] * np.exp(y)[None]), 0.0)), axis=0)
    )


def _constraint(cost: Posynomial, y: Array, log_b: Array) -> tuple[Array, Array, Array]:
    """``c = log Phi(e^y) - log B``, its gradient and Hessian in ``y``."""
    logt = np.log(cost.weights) + y @ cost.powers.T  # (..., M)
    top = logt.max(axis=-1, keepdims=True)
    e = np.exp(logt - top)
    total = e.sum(axis=-1, keepdims=True)
    share = e / total
    c = (np.log(total) + top)[..., 0] - log_b
    s = share @ cost.powers
    a = cost.powers
    hc = np.einsum("...m,mi,mj->...ij", share, a, a) - s[..., :, None] * s[..., None, :]
    return c, s, hc


def _onto_budget(cost: Posynomial, y: Array, log_b: Array, y_lo: Array) -> Array:
    """Pull every ``y`` over the budget back onto it, geometrically toward the lower bounds."""
    over = _constraint(cost, y, log_b)[0] > 0
    if not over.any():
        return y
    a, b = np.zeros(y.shape[:-1]), np.ones(y.shape[:-1])
    for _ in range(80):
        t = 0.5 * (a + b)
        trial = y_lo + t[..., None] * (y - y_lo)
        ok = _constraint(cost, trial, log_b)[0] <= 0
        a, b = np.where(ok, t, a), np.where(ok, b, t)
    return np.where(over[..., None], y_lo + a[..., None] * (y - y_lo), y)


def _newton_step(
    g: Array, h: Array, s: Array, hc: Array, c: Array, mu: Array, free: BoolArray, on: BoolArray
) -> tuple[Array, Array]:
    """The KKT Newton step on the free axes (fixed axes do not move) and the new multiplier
    (0 where the budget is not active)."""
    n = g.shape[-1]
    both = free[..., :, None] & free[..., None, :]
    k = np.zeros((*g.shape[:-1], n + 1, n + 1))
    w = h + mu[..., None, None] * hc
    k[..., :n, :n] = np.where(both, w, 0.0) + np.eye(n) * (~free)[..., None, :]
    col = np.where(free & on[..., None], s, 0.0)
    k[..., :n, n] = col
    k[..., n, :n] = col
    k[..., n, n] = np.where(on, 0.0, 1.0)
    rhs = np.concatenate([np.where(free, -g, 0.0), np.where(on, -c, 0.0)[..., None]], axis=-1)
    k[..., n, n] = np.where(on & ~col.any(axis=-1), 1.0, k[..., n, n])  # nothing free to move
    try:
        sol = np.linalg.solve(k, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:  # a singular system somewhere: solve one by one, NaN there
        sol = np.full(rhs.shape, np.nan)
        for idx in np.ndindex(*rhs.shape[:-1]):
            with contextlib.suppress(np.linalg.LinAlgError):
                sol[idx] = np.linalg.solve(k[idx], rhs[idx])
    return sol[..., :n], np.where(on, sol[..., n], 0.0)


def _reduced_curvature_ok(w: Array, s: Array, free: BoolArray, on: BoolArray) -> BoolArray:
    """Whether ``W`` is positive definite on the directions that keep the fixed axes and (if
    active) the budget: the second-order condition of a strict local minimum of ``1 - F``."""
    n = w.shape[-1]
    out = np.ones(w.shape[:-2], dtype=bool)
    for idx in np.ndindex(*w.shape[:-2]):
        f = np.flatnonzero(free[idx])
        if f.size == 0:
            continue
        basis = np.eye(n)[:, f]
        if on[idx]:
            # null space of s restricted to the free axes
            _, _, vt = np.linalg.svd(s[idx][f][None, :])
            basis = basis @ vt[1:].T
        if basis.shape[1] == 0:
            continue
        red = basis.T @ w[idx] @ basis
        scale = max(float(np.max(np.abs(w[idx]))), 1e-300)
        out[idx] = bool(np.linalg.eigvalsh(red).min() > -1e-10 * scale)
    return out


def _line_search(
    law: Law,
    kappa: Array,
    cost: Posynomial,
    log_b: Array,
    box: tuple[Array, Array],
    y: Array,
    dy: Array,
    step: Array,
    merit: Array,
    rho: Array,
) -> tuple[Array, Array, BoolArray]:
    """Backtracking along ``dy`` from ``step`` (halved up to 30 times) until the merit
    ``1 - F + rho |c|`` does not rise: the trial point in the box, its step, and where it fell."""
    trial_y, better = y, np.zeros(step.shape, dtype=bool)
    for _ in range(30):
        trial_y = np.clip(y + step[..., None] * dy, *box)
        f_t = _value(law, kappa, trial_y)
        c_t = _constraint(cost, trial_y, log_b)[0]
        better = f_t + rho * np.abs(c_t) <= merit + 1e-15 * (1.0 + np.abs(merit))
        if better.all():
            break
        step = np.where(better, step, 0.5 * step)
    return trial_y, step, better


def decide(
    law: Law,
    kappa: Array,
    cost: Posynomial,
    budgets: Array,
    lo: Array,
    hi: Array,
    start: Array,
) -> tuple[Array, BoolArray]:
    """Purchased units (G, B, n) maximising mean expected success per setting and budget, and
    where Newton's method settled (elsewhere the caller solves one by one).

    ``law``: per draw and setting, broadcasting to (S, G, B, n) (the recipe's batched law);
    ``kappa`` (S, n); ``cost`` in purchased units (weights (M,)); ``budgets`` (B,);
    ``lo``/``hi`` (n,); ``start`` (G, B, n) purchased units inside the box.
    """
    y_lo, y_hi = np.log(lo), np.log(hi)
    log_b = np.log(budgets)[None, :]
    y = _onto_budget(cost, np.clip(np.log(start), y_lo, y_hi), log_b, y_lo)
    f0 = _value(law, kappa, y)
    # the budget binds unless it buys every upper bound
    on = np.ones(y.shape[:-1], dtype=bool)
    if np.isfinite(y_hi).all():
        on = _constraint(cost, np.broadcast_to(y_hi, y.shape), log_b)[0] > 0
    at_lo, at_hi = y <= y_lo, y >= y_hi
    f, g, h = objective(law, kappa, y)
    c, s, hc = _constraint(cost, y, log_b)
    free = ~(at_lo | at_hi)
    mu = np.where(
        on,
        -np.sum(np.where(free, g * s, 0.0), -1)
        / np.maximum(np.sum(np.where(free, s * s, 0.0), -1), 1e-300),
        0.0,
    )
    mu = np.maximum(mu, 0.0)
    done = np.zeros(y.shape[:-1], dtype=bool)
    broken = np.zeros(y.shape[:-1], dtype=bool)
    for _ in range(_MAX_ITER):
        free = ~(at_lo | at_hi)
        dy, mu_new = _newton_step(g, h, s, hc, c, mu, free, on)
        broken = broken | ~np.isfinite(dy).all(axis=-1) | ~np.isfinite(mu_new)
        done = done | broken  # a singular system: left where it is, for SLSQP
        dy, mu_new = np.where(done[..., None], 0.0, dy), np.where(done, mu, mu_new)
        # the longest step keeping the free axes in the box; a blocking axis joins the set
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(dy < 0, (y_lo - y) / dy, np.where(dy > 0, (y_hi - y) / dy, np.inf))
        room = np.where(free, room, np.inf)
        t = np.minimum(1.0, room.min(axis=-1))
        rho = 2.0 * np.maximum(np.abs(mu_new), np.abs(mu)) + 1e-12
        trial_y, step, better = _line_search(
            law, kappa, cost, log_b, (y_lo, y_hi), y, dy, t, f + rho * np.abs(c), rho
        )
        # no step along Newton's direction lowers the merit (a non-convex objective, as a
        # stack's forms give): left where it is, for SLSQP, not searched again every round
        stuck = ~better & ~done
        broken, done = broken | stuck, done | stuck
        small = np.max(np.abs(dy), axis=-1) < _STEP_TOL
        blocked = step >= room.min(axis=-1) * (1 - 1e-12)
        y = np.where(done[..., None], y, trial_y)
        mu = np.where(done, mu, mu_new)
        at_lo = at_lo | (free & blocked[..., None] & (y <= y_lo))
        at_hi = at_hi | (free & blocked[..., None] & (y >= y_hi))
        f, g, h = objective(law, kappa, y)
        c, s, hc = _constraint(cost, y, log_b)
        # at a fixed point of the active set: release a bound (or the budget) whose
        # multiplier has the wrong sign, the worst first
        grad = g + mu[..., None] * s
        wrong = np.where(at_lo, np.maximum(-grad, 0.0), 0.0) + np.where(
            at_hi, np.maximum(grad, 0.0), 0.0
        )
        scale = np.max(np.abs(g), axis=-1) + 1e-300
        release = small & ~done & (wrong.max(axis=-1) > _GRAD_TOL * scale)
        worst = np.argmax(wrong, axis=-1)
        let_go = release[..., None] & (np.arange(y.shape[-1]) == worst[..., None])
        at_lo, at_hi = at_lo & ~let_go, at_hi & ~let_go
        drop = small & ~done & ~release & on & (mu < 0)
        on = on & ~drop
        mu = np.where(drop, 0.0, mu)
        done = done | (small & ~release & ~drop)
        if done.all():
            break
    free = ~(at_lo | at_hi)
    grad = np.where(free, g + mu[..., None] * s, 0.0)
    scale = np.max(np.abs(g), axis=-1) + 1e-300
    settled = (
        done
        & ~broken
        & (np.max(np.abs(grad), axis=-1) <= 1e-8 * scale)
        & (~on | (np.abs(c) < 1e-10))
        & (f <= f0 + 1e-15)
        & _reduced_curvature_ok(h + mu[..., None, None] * hc, s, free, on)
    )
    y = _onto_budget(cost, np.clip(y, y_lo, y_hi), log_b, y_lo)
    return np.clip(np.exp(y), lo, hi), settled
