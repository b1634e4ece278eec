"""A fast exact path for the money cost's shape: every axis priced per unit, except one axis
bought per unit of one other (rollouts per task, bought as tasks x rollouts per task).

The cost is ``Phi = sum_(i != tau) w_i D_i + w_tau D_p D_tau`` (``p`` the parent axis, tasks).
For a separable law, at a shadow price ``lambda = e^u`` every axis but the parent has its
optimum in closed form, clipped to its box:

.. math::

    y_i(u) = \\mathrm{clip}\\Big(\\frac{\\log(\\alpha_i K_i / w_i) - u}{1+\\alpha_i}\\Big),\\qquad
    y_\\tau(u, x) = \\mathrm{clip}\\Big(\\frac{\\log(\\alpha_\\tau K_\\tau / w_\\tau) - u - x}{1+\\alpha_\\tau}\\Big),

and the parent's log size ``x`` solves the monotone equation
``phi(x) = -alpha_p K_p e^(-alpha_p x) + lambda (w_p e^x + w_tau e^(x + y_tau)) = 0`` (clipped to its
box: a partial minimum of a convex function is convex). The spend ``S(u)`` then falls with
``u``, and :func:`solve_chain` solves ``log S(u, x) = log B`` and ``phi = 0`` by Newton's method
on the two scalar unknowns (``x`` eliminated from the step), the step on ``u`` kept inside
a bracket built from the spend's sign where ``phi = 0`` holds: two unknowns per problem
instead of the whole KKT system. :func:`bayesscale.core.geometric.solve_posynomial` uses it
where the cost has this shape and the law no interaction, checks every problem's KKT
residuals, and hands the few it does not settle to its general Newton method.

>>> import numpy as np
>>> k, al = np.array([[1.0], [1.0], [1.0]]), np.array([[0.4], [0.3], [0.1]])
>>> w = np.array([[4.1], [0.18], [0.02]])
>>> y, u, ok, _ = solve_chain(k, al, w, np.zeros((3, 1)), np.full((3, 1), np.inf), np.array([1e3]), 2, 1)
>>> bool(ok[0]), round(float(4.1 * np.exp(y[0, 0]) + 0.18 * np.exp(y[1, 0])
...                          + 0.02 * np.exp(y[1, 0] + y[2, 0])), 9)
(True, 1000.0)
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

_LOG_TOL = 1e-12  # |log(spend / budget)|: the budget met to 1e-12, relative
_MAX_ITER = 100


def chain_shape(powers: Array) -> tuple[int, int] | None:
    """``(tau, parent)`` when the cost's powers are the identity plus one entry
    ``a[tau, parent] = 1`` (one axis bought per unit of one other), else ``None``.

    >>> chain_shape(np.array([[1.0, 0, 0], [0, 1, 0], [0, 1, 1]]))
    (2, 1)
    """
    a = np.asarray(powers, dtype=float)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        return None
    off = a - np.eye(a.shape[0])
    if not np.array_equal(np.diag(a), np.ones(a.shape[0])):
        return None
    hits = np.argwhere(off != 0)
    if hits.shape[0] != 1 or off[hits[0, 0], hits[0, 1]] != 1:
        return None
    return int(hits[0, 0]), int(hits[0, 1])


def solve_chain(
    k: Array,
    al: Array,
    w: Array,
    llo: Array,
    lhi: Array,
    budget: Array,
    tau: int,
    parent: int,
    start: tuple[Array, Array] | None = None,
) -> tuple[Array, Array, BoolArray, Array]:
    """Solve problems (columns) of the chain cost exactly: ``k``, ``al``, ``w`` (the weight
    of each axis's own monomial), ``llo``, ``lhi`` (log bounds) are (n, r), ``budget`` (r,).
    ``start``: ``(u, x)`` to start from where finite (a neighbouring budget's solution moved
    by its slopes). Returns ``y = log D`` (n, r), ``u = log lambda`` (r,), which columns
    converged (the budget met to 1e-12 and the parent's equation to 1e-12 of its terms) and,
    per column, the slopes ``(du, dx) / d log B`` at the solution (2, r), for a continuation
    in the budget. Columns whose budget buys every upper bound must not be passed."""
    # One function on purpose (over 100 lines): a single batched Newton loop on (u = log
    # lambda, x = the parent's log size) over all columns. Each pass evaluates the sizes, the
    # budget and stationarity residuals and their derivatives, writes out the columns that
    # converged, narrows u's bracket, steps and compacts; every one of those steps reads and
    # rewrites the same ~20 per-column arrays (cc, oo, kk, aa, ww, lo_, hi_, lb, idx, u, x,
    # u_lo, u_hi, stored, ...), which helpers would have to take and hand back every pass.
    n, r = k.shape
    lin = [i for i in range(n) if i not in (tau, parent)]
    c = np.log(al * k / w)
    one = 1.0 + al
    log_b = np.log(budget)
    # Start: an equal share of the budget per monomial; u from the linear axes' stationarity.
    share = log_b - np.log(n)
    x = np.clip(share - np.log(w[parent]), llo[parent], lhi[parent])
    guess = [c[i] - one[i] * np.clip(share - np.log(w[i]), llo[i], lhi[i]) for i in (*lin, parent)]
    u = np.mean(guess, axis=0)
    if start is not None:
        u = np.where(np.isfinite(start[0]), start[0], u)
        x = np.where(np.isfinite(start[1]), np.clip(start[1], llo[parent], lhi[parent]), x)
    u_lo = np.full(r, -np.inf)
    u_hi = np.full(r, np.inf)
    y_out = np.empty((n, r))
    u_out = np.empty(r)
    slopes = np.full((2, r), np.nan)
    ok = np.zeros(r, dtype=bool)
    idx = np.arange(r)
    stored = np.zeros(r, dtype=bool)  # converged and written out, kept until compacted
    cc, oo, kk, aa, ww, lo_, hi_, lb = c, one, k, al, w, llo, lhi, log_b
    for _ in range(_MAX_ITER):
        lam = np.exp(u)
        raw_t = (cc[tau] - u - x) / oo[tau]
        yt = np.minimum(np.maximum(raw_t, lo_[tau]), hi_[tau])
        g_t = np.where(yt == raw_t, 1.0 - 1.0 / oo[tau], 1.0)  # d(x + y_tau)/dx
        sp = ww[parent] * np.exp(x)
        st = ww[tau] * np.exp(yt + x)
        tp = aa[parent] * kk[parent] * np.exp(-aa[parent] * x)
        phi = lam * (sp + st) - tp
        phi_u = lam * (sp + st * g_t)  # at fixed x
        phi_x = aa[parent] * tp + phi_u
        # The parent at a bound that its equation pushes against stays there.
        pinned = ((x <= lo_[parent]) & (phi >= 0)) | ((x >= hi_[parent]) & (phi <= 0))
        spend = sp + st
        s_u = st * np.where(yt == raw_t, -1.0 / oo[tau], 0.0)  # d spend / du at fixed x
        ys = []
        for i in lin:
            raw = (cc[i] - u) / oo[i]
            yi = np.minimum(np.maximum(raw, lo_[i]), hi_[i])
            si = ww[i] * np.exp(yi)
            spend = spend + si
            s_u = s_u - np.where(yi == raw, si / oo[i], 0.0)
            ys.append(yi)
        s_x = np.where(pinned, 0.0, sp + st * g_t)
        dx = np.where(pinned, 0.0, -phi_u / phi_x)  # dx/du along phi = 0
        dspend = s_u + s_x * dx  # total d spend / du
        f = np.log(spend) - lb
        settled = (np.abs(phi) <= 1e-12 * (tp + lam * (sp + st))) | pinned
        done = (np.abs(f) <= _LOG_TOL) & settled
        new = done & ~stored
        if new.any():
            fin = idx[new]
            for j, i in enumerate(lin):
                y_out[i, fin] = ys[j][new]
            y_out[parent, fin] = x[new]
            y_out[tau, fin] = yt[new]
            u_out[fin] = u[new]
            ok[fin] = True
            with np.errstate(divide="ignore", invalid="ignore"):
                du = (spend / dspend)[new]
            slopes[0, fin] = du
            slopes[1, fin] = dx[new] * du
            stored |= new
        if stored.all():
            break
        # Newton on (u, x) for (log spend = log B, phi = 0), the x-equation eliminated:
        # du = (-f + (s_x / spend) phi / phi_x) / (dspend / spend), dx = -(phi + phi_u du) / phi_x.
        # The spend's sign brackets u only where the parent's equation holds.
        u_lo = np.where((f > 0) & settled, u, u_lo)
        u_hi = np.where((f < 0) & settled, u, u_hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = (-f + np.where(pinned, 0.0, s_x * phi / phi_x) / spend) / (dspend / spend)
        step = np.where(
            np.isfinite(step), np.minimum(np.maximum(step, -8.0), 8.0), np.sign(f) * 8.0
        )
        trial = u + step
        inside = (trial > u_lo) & (trial < u_hi)
        closed = np.isfinite(u_lo) & np.isfinite(u_hi)
        middle = np.where(
            closed, 0.5 * (np.where(closed, u_lo, 0.0) + np.where(closed, u_hi, 0.0)), u
        )
        u_new = np.where(inside, trial, np.where(closed, middle, u + np.sign(f) * 8.0))
        x_step = np.where(pinned, 0.0, -(phi + phi_u * (u_new - u)) / phi_x)
        x_step = np.minimum(np.maximum(x_step, -8.0), 8.0)
        x = np.minimum(np.maximum(x + x_step, lo_[parent]), hi_[parent])
        u = u_new
        if 2 * np.count_nonzero(stored) > stored.size:  # compact once half are stored
            keep = ~stored
            idx, u, x, u_lo, u_hi, lb, stored = (
                v[keep] for v in (idx, u, x, u_lo, u_hi, lb, stored)
            )
            cc, oo, kk, aa, ww, lo_, hi_ = (v[:, keep] for v in (cc, oo, kk, aa, ww, lo_, hi_))
    rest = idx[~stored]
    y_out[:, rest] = np.nan
    u_out[rest] = u[~stored]
    return y_out, u_out, ok, slopes
