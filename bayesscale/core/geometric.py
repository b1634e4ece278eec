"""Budget allocation under a posynomial cost: a geometric program, solved exactly per problem.

What a budget buys is rarely linear in the axes. A trajectory is one rollout of one task, so
money spent on rollouts per task ``D_tau`` is ``c_traj D_T D_tau``, not ``c_traj D_tau``:

.. math::

    \\Phi(D) = \\sum_m w_m \\prod_i D_i^{a_{mi}}
             = c_E D_E + c_T D_T + c_\\mathrm{traj} D_T D_\\tau \\quad(\\text{the default}),

a posynomial (``w_m > 0``, ``a_mi >= 0``). With ``y = log D`` it is a sum of exponentials of
linear functions, so ``log Phi`` is convex in ``y``, and so is the law
``L(y) = L_0 + sum_i K_i exp(-alpha_i y_i)``. Minimising ``L`` subject to ``Phi <= B`` and a box
``lo <= D <= hi`` is therefore a convex program in ``y``: its KKT conditions

.. math::

    \\partial_{y_i} L + \\nu\\, g_i = 0 \\ (\\text{free } i),\\qquad
    \\sum_m s_m = 1,\\qquad
    s_m = w_m e^{a_m \\cdot y} / B,\\quad g_i = \\sum_m a_{mi} s_m,

(``nu = lambda B``, ``lambda`` the budget's shadow price in loss per unit of money) hold at the
optimum and only there. :func:`solve_posynomial` solves them vectorised over any leading
dims (draws x settings x budgets): where the cost is the money cost's chain (every axis
priced per unit but one, bought per unit of another) and the law separable, by the two
scalar unknowns of :mod:`bayesscale.core.chain`; otherwise, and for the problems that path does
not settle, by Newton's method on the whole KKT system with an active set for the box; a problem it cannot settle is solved on its own by SLSQP
(:func:`bayesscale.core.allocate.solve_general`) and counted. The linear cost is the special
case ``a = I`` (then :func:`bayesscale.core.allocate.solve_additive` is faster), and the
interaction term ``-gamma (D_a D_b)^(-beta)`` of :class:`~bayesscale.core.allocate.PowerLaw`
is supported too.

The local recipe exponents ``e = d y / d log B`` follow from the same KKT system
(:func:`local_exponents_posynomial`): ``e = H^{-1} g / (g^T H^{-1} g)`` on free axes, ``H`` the
Hessian of the Lagrangian in ``y``.

Example
-------
>>> import numpy as np
>>> from bayesscale.core.allocate import PowerLaw
>>> cost = Posynomial(np.array([1.0, 1.0]), np.array([[1.0, 0.0], [1.0, 1.0]]))
>>> law = PowerLaw(np.array([1.0, 1.0]), np.array([0.5, 0.5]))
>>> sol = solve_posynomial(law, cost, 100.0)
>>> round(float(cost(sol.sizes)), 9), bool(kkt_residuals_posynomial(sol, law, cost, 100.0).max() < 1e-9)
(100.0, True)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayesscale.core.allocate import (
    Allocation,
    Array,
    BoolArray,
    KKTResiduals,
    PowerLaw,
    kkt_residuals_at,
    solve_additive,
    solve_general,
    validate_box,
)
from bayesscale.core.chain import chain_shape, solve_chain

IndexArray = NDArray[np.intp]

_TOL = 1e-12  # max-norm of the KKT residual, relative to the law's gradient scale
_MAX_NEWTON = 80
_MAX_ROUNDS = 8
_BLOCK = 16384  # problems per block: the working arrays stay in cache


@dataclass(frozen=True)
class Posynomial:
    """``Phi(D) = sum_m w_m prod_i D_i^(a_mi)``: ``weights`` (..., M) > 0 broadcast over the
    problems, ``powers`` (M, n) >= 0 shared by all, each monomial using at least one axis.

    >>> cost = Posynomial(np.array([4.1, 0.18, 0.02]), np.array([[1, 0, 0], [0, 1, 0], [0, 1, 1]]))
    >>> round(float(cost(np.array([10.0, 100.0, 8.0]))), 9)
    75.0
    """

    weights: Array
    powers: Array

    def __post_init__(self) -> None:
        w = np.asarray(self.weights, dtype=float)
        a = np.asarray(self.powers, dtype=float)
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "powers", a)
        if a.ndim != 2:
            raise ValueError(f"powers must be (monomials, axes), got shape {a.shape}")
        if w.shape[-1:] != a.shape[:1]:
            raise ValueError(f"weights' last dim {w.shape[-1:]} must be the {a.shape[0]} monomials")
        if (~np.isfinite(w)).any() or (w <= 0).any():
            raise ValueError("posynomial weights must be finite and > 0")
        if (~np.isfinite(a)).any() or (a < 0).any():
            raise ValueError("posynomial powers must be finite and >= 0")
        if (a.sum(axis=1) == 0).any():
            raise ValueError("every monomial must use at least one axis (a constant buys nothing)")

    @property
    def n_axes(self) -> int:
        return int(self.powers.shape[1])

    @classmethod
    def linear(cls, prices: ArrayLike) -> Posynomial:
        """``sum_i p_i D_i`` as a posynomial.

        >>> Posynomial.linear([2.0, 3.0]).powers.tolist()
        [[1.0, 0.0], [0.0, 1.0]]
        """
        p = np.asarray(prices, dtype=float)
        return cls(p, np.eye(p.shape[-1]))

    def terms(self, sizes: ArrayLike) -> Array:
        """Spend per monomial ``w_m prod_i D_i^(a_mi)`` (..., M)."""
        logd = np.log(np.asarray(sizes, dtype=float))
        return np.asarray(self.weights * np.exp(logd @ self.powers.T), dtype=float)

    def __call__(self, sizes: ArrayLike) -> Array:
        """``Phi(D)`` (...)."""
        return np.asarray(self.terms(sizes).sum(axis=-1), dtype=float)

    def gradient(self, sizes: ArrayLike) -> Array:
        """``dPhi/dD_i`` (..., n)."""
        d = np.asarray(sizes, dtype=float)
        return np.asarray((self.terms(d) @ self.powers) / d, dtype=float)


# --- residuals and exponents ----------------------------------------------------------------


def kkt_residuals_posynomial(
    solution: Allocation,
    law: PowerLaw,
    cost: Posynomial,
    budget: ArrayLike,
    lower: ArrayLike = 1.0,
    upper: ArrayLike = np.inf,
) -> KKTResiduals:
    """Relative KKT residuals of ``solution`` (each ~0 at an exact optimum; see
    :class:`~bayesscale.core.allocate.KKTResiduals`), the marginal price of axis ``i`` being
    ``dPhi/dD_i`` at the solution.

    >>> law = PowerLaw(np.array([1.0, 2.0]), np.array([0.3, 0.2]))
    >>> cost = Posynomial(np.array([1.0, 0.5]), np.array([[1.0, 0.0], [1.0, 1.0]]))
    >>> sol = solve_posynomial(law, cost, 50.0)
    >>> kkt_residuals_posynomial(sol, law, cost, 50.0).max() < 1e-9
    True
    """
    d = solution.sizes
    return kkt_residuals_at(solution, law, cost.gradient(d), cost(d), budget, lower, upper)


def local_exponents_posynomial(
    solution: Allocation, law: PowerLaw, cost: Posynomial, budget: ArrayLike
) -> Array:
    """``e_i = d log D_i / d log B`` at a posynomial-cost optimum (..., n), 0 on axes at a bound
    and where the budget does not bind.

    Differentiating the KKT system in ``log B`` with the active set held:
    ``e = H^{-1} g / (g^T H^{-1} g)`` on the free axes, ``H`` the Hessian of the Lagrangian in
    ``y = log D`` and ``g_i = sum_m a_mi s_m``; ``sum_m s_m (a_m . e) = 1`` (a 1% larger budget buys
    1% more spend). For a linear cost this is ``(1+alpha_i)^-1 / sum_j s_j (1+alpha_j)^-1``.

    >>> law = PowerLaw(np.array([1.0, 1.0]), np.array([0.5, 0.5]))
    >>> sol = solve_posynomial(law, Posynomial.linear([1.0, 1.0]), 200.0)
    >>> local_exponents_posynomial(sol, law, Posynomial.linear([1.0, 1.0]), 200.0).round(9).tolist()
    [1.0, 1.0]
    """
    d = solution.sizes
    lead = d.shape[:-1]
    n = d.shape[-1]
    rows = int(np.prod(lead, dtype=int))
    prob = _Problem.build(law, cost, np.asarray(budget, dtype=float), lead, n)
    y = np.ascontiguousarray(np.log(d).reshape(rows, n).T)
    nu = (solution.multiplier * np.broadcast_to(np.asarray(budget, dtype=float), lead)).reshape(-1)
    free = np.ascontiguousarray(solution.free.reshape(rows, n).T) & (nu > 0)
    sl = slice(None)
    _, _, _, g, chol, ok = prob.system(y, nu, free, sl)
    z = _chol_solve(chol, g)
    denom = np.sum(g * z, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where(free & ok, z / denom, 0.0)
    return np.asarray(e.T.reshape(*lead, n), dtype=float)


# --- the solver -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Problem:
    """Every problem's data, rows flattened and axes first: ``k``, ``al`` (n, R); ``w`` (M, R);
    ``a`` (M, n); ``b`` (R,) the budgets; ``gamma``, ``beta`` (R,) or None; ``pair``."""

    k: Array
    al: Array
    w: Array
    a: Array
    b: Array
    gamma: Array | None
    beta: Array | None
    pair: tuple[int, int] | None

    @classmethod
    def build(
        cls, law: PowerLaw, cost: Posynomial, budget: Array, lead: tuple[int, ...], n: int
    ) -> _Problem:
        rows = int(np.prod(lead, dtype=int))
        m = cost.powers.shape[0]

        def flat(x: ArrayLike, width: int) -> Array:
            arr = np.broadcast_to(np.asarray(x, dtype=float), (*lead, width))
            return np.ascontiguousarray(arr.reshape(rows, width).T)

        inter = law.pair is not None and law.gamma is not None and law.beta is not None
        return cls(
            k=flat(law.coef, n),
            al=flat(law.alpha, n),
            w=flat(cost.weights, m),
            a=cost.powers,
            b=np.ascontiguousarray(np.broadcast_to(budget, lead).reshape(-1)),
            gamma=flat(np.asarray(law.gamma)[..., None], 1)[0] if inter else None,
            beta=flat(np.asarray(law.beta)[..., None], 1)[0] if inter else None,
            pair=law.pair if inter else None,
        )

    def system(
        self, y: Array, nu: Array, free: BoolArray, cols: slice | IndexArray
    ) -> tuple[Array, Array, Array, Array, Array, BoolArray]:
        """At ``(y, nu)`` for columns ``cols``: the stationarity residual on free axes (n, r),
        the budget residual (r,), the max-norm of both (r,), ``g`` on free axes (n, r), the
        Cholesky factor of the free block of the Hessian (n, n, r; identity on fixed axes) and
        whether it is positive definite (r,)."""
        k, al, w, b = self.k[:, cols], self.al[:, cols], self.w[:, cols], self.b[cols]
        n = y.shape[0]
        s = w * np.exp(self.a @ y) / b  # (M, r)
        g = self.a.T @ s  # (n, r)
        t = k * np.exp(-al * y)
        grad = -al * t
        hess_diag = al * al * t
        z = None
        if self.pair is not None and self.gamma is not None and self.beta is not None:
            ia, ib = self.pair
            gm, be = self.gamma[cols], self.beta[cols]
            z = gm * np.exp(-be * (y[ia] + y[ib]))
            grad[ia] += be * z
            grad[ib] += be * z
        stat = np.where(free, grad + nu * g, 0.0)
        rn = s.sum(axis=0) - 1.0
        norm = np.maximum(np.abs(stat).max(axis=0), np.abs(rn))
        gf = np.where(free, g, 0.0)
        h = np.empty((n, n, y.shape[1]))
        for i in range(n):
            for j in range(i + 1):
                aij = self.a[:, i] * self.a[:, j]
                hij = nu * (aij @ s) if aij.any() else np.zeros_like(nu)
                if i == j:
                    hij = hij + hess_diag[i]
                if self.pair is not None and z is not None and i in self.pair and j in self.pair:
                    hij = hij - be * be * z
                both = free[i] & free[j]
                h[i, j] = np.where(both, hij, 1.0 if i == j else 0.0)
                h[j, i] = h[i, j]
        chol, ok = _cholesky(h)
        return stat, rn, norm, gf, chol, ok

    def residual(
        self, y: Array, nu: Array, free: BoolArray, cols: slice | IndexArray
    ) -> tuple[Array, Array, Array]:
        """The stationarity and budget residuals and their max-norm only (no Hessian)."""
        k, al, w, b = self.k[:, cols], self.al[:, cols], self.w[:, cols], self.b[cols]
        s = w * np.exp(self.a @ y) / b
        g = self.a.T @ s
        grad = -al * k * np.exp(-al * y)
        if self.pair is not None and self.gamma is not None and self.beta is not None:
            ia, ib = self.pair
            be = self.beta[cols]
            z = self.gamma[cols] * np.exp(-be * (y[ia] + y[ib]))
            grad[ia] += be * z
            grad[ib] += be * z
        stat = np.where(free, grad + nu * g, 0.0)
        rn = s.sum(axis=0) - 1.0
        return stat, rn, np.maximum(np.abs(stat).max(axis=0), np.abs(rn))

    def lagrangian_gradient(self, y: Array, nu: Array, cols: slice | IndexArray) -> Array:
        """``dL/dy + nu g`` on every axis (n, r): its sign at a bound says whether to leave it."""
        stat, _, _ = self.residual(y, nu, np.ones(y.shape, dtype=bool), cols)
        return stat


def _cholesky(h: Array) -> tuple[Array, BoolArray]:
    """Lower Cholesky factors of a batch of small symmetric matrices (n, n, r), columns
    vectorised; ``ok`` is False where a matrix is not positive definite."""
    n = h.shape[0]
    low = np.zeros_like(h)
    ok = np.ones(h.shape[2], dtype=bool)
    for j in range(n):
        d = h[j, j] - np.sum(low[j, :j] ** 2, axis=0)
        ok &= d > 0
        root = np.sqrt(np.where(d > 0, d, 1.0))
        low[j, j] = root
        for i in range(j + 1, n):
            low[i, j] = (h[i, j] - np.sum(low[i, :j] * low[j, :j], axis=0)) / root
    return low, ok


def _chol_solve(low: Array, rhs: Array) -> Array:
    """Solve ``L L^T x = rhs`` for a batch (``low`` (n, n, r), ``rhs`` (n, r))."""
    n = low.shape[0]
    z = np.empty_like(rhs)
    for i in range(n):
        z[i] = (rhs[i] - np.sum(low[i, :i] * z[:i], axis=0)) / low[i, i]
    x = np.empty_like(rhs)
    for i in reversed(range(n)):
        x[i] = (z[i] - np.sum(low[i + 1 :, i] * x[i + 1 :], axis=0)) / low[i, i]
    return x


def _newton(
    prob: _Problem,
    cols: IndexArray,
    y: Array,
    nu: Array,
    at_lo: BoolArray,
    at_hi: BoolArray,
    llo: Array,
    lhi: Array,
) -> tuple[Array, Array, BoolArray]:
    """Damped Newton on the KKT equations of columns ``cols`` with the active set held (axes
    at a bound pinned there). Returns ``y``, ``nu`` and which columns converged."""
    free = ~(at_lo | at_hi)
    y = np.where(at_lo, llo, np.where(at_hi, lhi, y))
    idx = np.arange(y.shape[1])
    conv = np.zeros(y.shape[1], dtype=bool)
    y_out, nu_out = y.copy(), nu.copy()
    cy, cnu, cfree, ccols, clo, chi = y, nu, free, cols, llo, lhi
    for _ in range(_MAX_NEWTON):
        stat, rn, norm, g, chol, ok = prob.system(cy, cnu, cfree, ccols)
        scale = np.maximum(np.abs(cnu * g).max(axis=0), 1e-300)
        # A free axis that left its box: the active set is wrong, hand it back to the caller.
        left = (cfree & ((cy < clo - 1e-9) | (cy > chi + 1e-9))).any(axis=0)
        done = (norm <= _TOL * np.maximum(scale, 1.0)) | ~ok | left
        if done.any():
            fin = idx[done]
            y_out[:, fin], nu_out[fin] = cy[:, done], cnu[done]
            conv[fin] = ok[done] & ~left[done]
            keep = ~done
            idx, cy, cnu, cfree, ccols = (
                idx[keep],
                cy[:, keep],
                cnu[keep],
                cfree[:, keep],
                ccols[keep],
            )
            clo, chi = clo[:, keep], chi[:, keep]
            stat, rn, norm, g, chol = (
                stat[:, keep],
                rn[keep],
                norm[keep],
                g[:, keep],
                chol[..., keep],
            )
        if idx.size == 0:
            break
        x = _chol_solve(chol, stat)
        zz = _chol_solve(chol, g)
        with np.errstate(divide="ignore", invalid="ignore"):
            dnu = (rn - np.sum(g * x, axis=0)) / np.sum(g * zz, axis=0)
        dnu = np.where(np.isfinite(dnu), dnu, 0.0)
        dy = -(x + zz * dnu)
        # Damping: at most a factor e^2 per step in any size, nu kept positive, then halve the
        # step until the residual falls.
        t = np.minimum(1.0, 2.0 / np.maximum(np.abs(dy).max(axis=0), 1e-300))
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(dnu < 0, np.minimum(t, 0.9 * cnu / -dnu), t)
        merit = np.sum(stat * stat, axis=0) + rn * rn
        for _ in range(40):
            with np.errstate(over="ignore", invalid="ignore"):
                st, r, _ = prob.residual(cy + t * dy, cnu + t * dnu, cfree, ccols)
                trial = np.sum(st * st, axis=0) + r * r
            good = trial <= (1.0 - 1e-4 * t) * merit
            if good.all():
                break
            t = np.where(good, t, 0.5 * t)
        cy, cnu = cy + t * dy, cnu + t * dnu
    if idx.size:
        y_out[:, idx], nu_out[idx] = cy, cnu
    return y_out, nu_out, conv


def _reseed(
    prob: _Problem,
    cols: IndexArray,
    y: Array,
    at_lo: BoolArray,
    at_hi: BoolArray,
    llo: Array,
    lhi: Array,
) -> tuple[Array, Array]:
    """A start for Newton's method after the active set changed: the pinned axes at their
    bounds, the free log sizes shifted by one common ``c`` so the budget binds again
    (``sum_m s_m(y + c) = 1``, increasing in ``c``: Newton's method in one variable), and
    ``nu`` the least-squares solution of the free axes' stationarity ``grad_i + nu g_i = 0``.
    The multiplier Newton's method carries over from the previous active set can be far off
    (or push ``nu`` to its positivity guard, where the damped steps shrink to nothing); with one
    free axis this start is the optimum itself."""
    free = ~(at_lo | at_hi)
    y = np.where(at_lo, llo, np.where(at_hi, lhi, y))
    f = free.astype(float)
    w, b, a = prob.w[:, cols], prob.b[cols], prob.a
    moves = (a @ f) > 0  # (M, r): the monomials a shift of the free axes changes
    shift = np.zeros(y.shape[1])
    for _ in range(60):
        s = w * np.exp(a @ (y + shift * f)) / b
        r = s.sum(axis=0) - 1.0
        slope = ((a @ f) * s).sum(axis=0)
        step = np.where(moves.any(axis=0) & (slope > 0), r / np.maximum(slope, 1e-300), 0.0)
        shift -= np.clip(step, -2.0, 2.0)
        if np.all(np.abs(r) < 1e-14):
            break
    y = y + shift * f
    s = w * np.exp(a @ y) / b
    g = np.where(free, a.T @ s, 0.0)
    grad = np.where(free, prob.residual(y, np.zeros(y.shape[1]), free, cols)[0], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        nu = -(grad * g).sum(axis=0) / (g * g).sum(axis=0)
    return y, np.where(np.isfinite(nu) & (nu > 0), nu, 0.0)


def _start(
    prob: _Problem, cols: IndexArray, lo: Array, hi: Array, llo: Array, lhi: Array
) -> tuple[Array, Array, BoolArray, BoolArray]:
    """A starting point near the optimum, with its active set.

    First every monomial gets an equal share of the budget (least squares in ``y`` when
    monomials and axes differ in number). Then, twice, the cost is linearised at the point
    (marginal prices ``pi_i = dPhi/dD_i``) and the linear problem is solved exactly by
    clip-and-bisect (:func:`~bayesscale.core.allocate.solve_additive`), with the budget
    scaled by Euler's identity ``sum_i pi_i D_i = sum_m deg_m w_m prod D^a_m``. At a fixed
    point of this map the KKT conditions of the posynomial problem hold, so Newton starts
    close, usually with the right active set. ``lo``, ``hi`` (n, r); returns ``y``, ``nu``
    and the flags at the lower and upper bounds.
    """
    w, b, a = prob.w[:, cols], prob.b[cols], prob.a
    deg = a.sum(axis=1)[:, None]
    y = np.clip(np.linalg.pinv(a) @ (np.log(b / a.shape[0]) - np.log(w)), llo, lhi)
    r = y.shape[1]
    nu = np.zeros(r)
    at_lo, at_hi = y <= llo, y >= lhi
    for _ in range(2):
        terms = w * np.exp(a @ y)  # (M, r)
        price = (a.T @ terms) * np.exp(-y)  # (n, r)
        target = b * (deg * terms).sum(axis=0) / terms.sum(axis=0)
        # The linear surrogate must afford its lower bounds; where it cannot, keep the point.
        ok = (price * lo).sum(axis=0) < target * (1 - 1e-9)
        if not ok.any():
            break
        sol = solve_additive(
            prob.k[:, cols[ok]].T,
            prob.al[:, cols[ok]].T,
            price[:, ok].T,
            target[ok],
            lo[:, ok].T,
            hi[:, ok].T,
            workers=1,
        )
        y[:, ok] = np.log(sol.sizes.T)
        nu[ok] = sol.multiplier * b[ok]
        at_lo[:, ok], at_hi[:, ok] = sol.at_lower.T, sol.at_upper.T
    return y, nu, at_lo, at_hi


def _map(fn: Callable[[Any], None], items: Sequence[Any], workers: int) -> None:
    """``fn`` over ``items``, on ``workers`` threads (NumPy releases the GIL in its loops)."""
    if workers <= 1 or len(items) <= 1:
        for item in items:
            fn(item)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(fn, items))


def _sweep_dim(lead: tuple[int, ...], budget: Array, others: tuple[ArrayLike, ...]) -> int | None:
    """The leading dim of a budget sweep: the one along which the budget varies (at least 8
    values) and nothing else does; ``None`` if there is none."""
    nd = len(lead)
    b_shape = (1,) * (nd - budget.ndim) + budget.shape
    varying = [d for d in range(nd) if b_shape[d] > 1]
    if len(varying) != 1 or b_shape[varying[0]] < 8:
        return None
    d = varying[0]
    for x in others:
        shape = np.shape(x)[:-1] if np.ndim(x) else ()
        if ((1,) * (nd - len(shape)) + tuple(shape))[d] != 1:
            return None
    return d


@dataclass
class _Sweep:
    """The working arrays of a budget sweep under the chain cost: every law as a "line"
    (columns of ``k``, ``al``, ``w`` and the log bounds), the solutions ``y`` and multipliers
    ``lam`` per budget and line, and each line's last solution and its slopes (the
    continuation's start for the next budget)."""

    k: Array
    al: Array
    w: Array
    llo: Array
    lhi: Array
    chain: tuple[int, int]
    y: Array
    lam: Array
    ok: BoolArray
    u_prev: Array
    x_prev: Array
    slope: Array

    @classmethod
    def start(
        cls, k: Array, al: Array, w: Array, llo: Array, lhi: Array, chain: tuple[int, int], nb: int
    ) -> _Sweep:
        n, lines = k.shape
        return cls(
            k, al, w, llo, lhi, chain,
            y=np.empty((nb, n, lines)),
            lam=np.zeros((nb, lines)),
            ok=np.zeros((nb, lines), dtype=bool),
            u_prev=np.full(lines, np.nan),
            x_prev=np.full(lines, np.nan),
            slope=np.full((2, lines), np.nan),
        )  # fmt: skip

    def stage(self, part: IndexArray, j: int, b: float, step: float, saturated: BoolArray) -> None:
        """Solve budget ``j`` (``b``, ``step`` in log budget from the previous one) on the
        lines ``part``, each started from its continuation."""
        y, lam, ok = self.y, self.lam, self.ok
        u_prev, x_prev, slope, chain = self.u_prev, self.x_prev, self.slope, self.chain
        live = ~saturated[part]
        # contiguous lines are sliced, not gathered, while none of them is saturated
        cols: IndexArray | slice = (
            slice(int(part[0]), int(part[-1]) + 1) if live.all() else part[live]
        )
        start = (u_prev[cols] + slope[0, cols] * step, x_prev[cols] + slope[1, cols] * step)
        yc, uc, done, sl = solve_chain(
            self.k[:, cols],
            self.al[:, cols],
            self.w[:, cols],
            self.llo[:, cols],
            self.lhi[:, cols],
            np.full(start[0].size, b),
            *chain,
            start=start,
        )
        if isinstance(cols, slice) and done.all():  # the usual case: no gathering
            y[j][:, cols] = yc
            lam[j, cols] = np.exp(uc)
            ok[j, cols] = True
            u_prev[cols], x_prev[cols], slope[:, cols] = uc, yc[chain[1]], sl
            return
        cols = np.arange(int(part[0]), int(part[-1]) + 1) if live.all() else part[live]
        c = cols[done]
        y[j][:, c] = yc[:, done]
        lam[j, c] = np.exp(uc[done])
        ok[j, c] = True
        u_prev[part], x_prev[part], slope[:, part] = np.nan, np.nan, np.nan
        u_prev[c], x_prev[c], slope[:, c] = uc[done], yc[chain[1], done], sl[:, done]


def _per_line(x: ArrayLike, width: int, lead: tuple[int, ...], d: int) -> Array:
    """``x`` broadcast over ``lead`` with dim ``d`` dropped (nothing varies along it), as
    ``(width, lines)``."""
    full = np.broadcast_to(np.asarray(x, dtype=float), (*lead, width))
    arr = full[(slice(None),) * d + (0,)]  # a view: nothing varies along d
    return np.ascontiguousarray(arr.reshape(-1, width).T)


def _solve_chain_sweep(
    law: PowerLaw,
    cost: Posynomial,
    budget: Array,
    lo: Array,
    hi: Array,
    lead: tuple[int, ...],
    d: int,
    chain: tuple[int, int],
    workers: int | None,
) -> Allocation:
    """A budget sweep under the chain cost: every law (a "line": the leading dims but ``d``)
    once, its budgets in increasing order, each started from the previous budget's solution
    moved along its slopes (continuation: two or three Newton steps a problem). Problems the
    chain path does not settle go to :func:`solve_posynomial` without the sweep."""
    n = cost.n_axes
    m = cost.powers.shape[0]
    k, al = _per_line(law.coef, n, lead, d), _per_line(law.alpha, n, lead, d)
    w = _per_line(cost.weights, m, lead, d)
    lo_l, hi_l = _per_line(lo, n, lead, d), _per_line(hi, n, lead, d)
    llo, lhi = np.log(lo_l), np.log(hi_l)
    lines = k.shape[1]
    line_cost = Posynomial(w.T, cost.powers)
    floor = line_cost(lo_l.T)
    with np.errstate(invalid="ignore", over="ignore"):
        top = line_cost(hi_l.T)
    values = np.broadcast_to(budget, (1,) * (len(lead) - budget.ndim) + budget.shape).reshape(-1)
    order = np.argsort(values, kind="stable")
    short = floor > values.min() * (1 + 1e-12)
    if short.any():
        i = int(np.argmax(short))
        raise ValueError(
            f"budget {values.min():.6g} is too small to buy the lower bounds, which cost "
            f"{floor[i]:.6g} ({int(short.sum())} law(s) infeasible)"
        )
    nb = values.size
    sweep = _Sweep.start(k, al, w, llo, lhi, chain, nb)
    n_workers = workers if workers is not None else min(os.cpu_count() or 1, 8)
    parts = np.array_split(np.arange(lines), max(1, min(n_workers, lines // _BLOCK + 1)))
    previous = None
    for j in (int(i) for i in order):
        b = float(values[j])
        step = 0.0 if previous is None else np.log(b) - np.log(previous)
        previous = b
        saturated = top <= b
        sweep.y[j] = lhi
        sweep.ok[j] = saturated
        _map(partial(sweep.stage, j=j, b=b, step=step, saturated=saturated), parts, n_workers)
    y, lam = sweep.y, sweep.lam
    at_lo = y <= llo
    at_hi = y >= lhi
    sat = top[None, :] <= values[:, None]
    at_lo &= ~sat[:, None, :]
    fallbacks = 0
    bad_j, bad_l = np.nonzero(~sweep.ok)
    if bad_j.size:
        sub = solve_posynomial(
            PowerLaw(k[:, bad_l].T, al[:, bad_l].T),
            Posynomial(w[:, bad_l].T, cost.powers),
            values[bad_j],
            lo_l[:, bad_l].T,
            hi_l[:, bad_l].T,
            workers=workers,
            sweep=False,
        )
        y[bad_j, :, bad_l] = np.log(sub.sizes)
        lam[bad_j, bad_l] = sub.multiplier
        at_lo[bad_j, :, bad_l] = sub.at_lower
        at_hi[bad_j, :, bad_l] = sub.at_upper
        fallbacks = sub.fallbacks
    y = np.minimum(np.maximum(y, llo), lhi)
    spent = np.zeros((nb, lines))
    for mono in range(m):  # the cost of what is bought, monomial by monomial
        power = sum(cost.powers[mono, i] * y[:, i] for i in np.flatnonzero(cost.powers[mono]))
        spent += w[mono] * np.exp(power)
    place = partial(_place, rest=tuple(s for i, s in enumerate(lead) if i != d), d=d, n=n)
    return Allocation(
        sizes=place(np.exp(y), True),
        multiplier=place(lam, False),
        spent=place(spent, False),
        at_lower=place(at_lo, True),
        at_upper=place(at_hi, True),
        fallbacks=fallbacks,
    )


def _place(x: NDArray[Any], per_axis: bool, rest: tuple[int, ...], d: int, n: int) -> NDArray[Any]:
    """A sweep's ``(budgets, lines[, n])`` array back in the leading dims, budgets at ``d``."""
    nb = x.shape[0]
    arr = np.moveaxis(x, 1, -1) if per_axis else x  # (budgets, lines[, n])
    arr = arr.reshape(nb, *rest, *((n,) if per_axis else ()))
    return np.ascontiguousarray(np.moveaxis(arr, 0, d))


def _scalar(fn: Callable[[Array], Array]) -> Callable[[Array], float]:
    """``fn`` returning a Python float (for :func:`~bayesscale.core.allocate.solve_general`)."""
    return lambda x: float(fn(x))


def solve_posynomial(
    law: PowerLaw,
    cost: Posynomial,
    budget: ArrayLike,
    lower: ArrayLike = 1.0,
    upper: ArrayLike = np.inf,
    *,
    workers: int | None = None,
    sweep: bool = True,
    method: str = "auto",
) -> Allocation:
    """Minimise ``law.loss(D)`` s.t. ``cost(D) <= budget``, ``lower <= D <= upper``, exactly.

    ``law`` and ``cost.weights`` broadcast with ``budget`` and the bounds over leading dims
    (draws x settings x budgets). The ``multiplier`` is ``lambda``, loss per unit of money (0
    where the budget buys every upper bound). Infeasible budgets (below the cost of the lower
    bounds) raise ``ValueError``. Problems Newton's method does not settle are re-solved one by
    one by SLSQP from Newton's point; the result's ``fallbacks`` counts them. ``method``:
    ``"auto"`` takes the chain path (:mod:`bayesscale.core.chain`) where the cost has its
    shape and the law is separable, with a continuation along a budget sweep unless
    ``sweep=False``; ``"newton"`` always solves the whole KKT system (an independent check).

    >>> law = PowerLaw(np.array([1.0, 1.0, 1.0]), np.array([0.4, 0.3, 0.1]))
    >>> cost = Posynomial(np.array([4.1, 0.18, 0.02]), np.array([[1, 0, 0], [0, 1, 0], [0, 1, 1]]))
    >>> sol = solve_posynomial(law, cost, 1000.0)
    >>> round(float(cost(sol.sizes)), 9)
    1000.0
    """
    coef, alpha, bud, lo, hi, lead = _checked_problem(law, cost, budget, lower, upper, method)
    n = coef.shape[-1]
    chain = chain_shape(cost.powers) if law.pair is None and method == "auto" else None
    if chain is not None and sweep:
        along = _sweep_dim(lead, bud, (coef, alpha, cost.weights, lo, hi))
        if along is not None:
            return _solve_chain_sweep(law, cost, bud, lo, hi, lead, along, chain, workers)
    rows = int(np.prod(lead, dtype=int))
    lo_r = np.ascontiguousarray(np.broadcast_to(lo, (*lead, n)).reshape(rows, n))
    hi_r = np.ascontiguousarray(np.broadcast_to(hi, (*lead, n)).reshape(rows, n))
    prob = _Problem.build(law, cost, bud, lead, n)
    row_cost = Posynomial(prob.w.T, prob.a)
    floor_cost = row_cost(lo_r)
    short = floor_cost > prob.b * (1 + 1e-12)
    if short.any():
        i = int(np.argmax(short))
        raise ValueError(
            f"budget {prob.b[i]:.6g} is too small to buy the lower bounds, which cost "
            f"{floor_cost[i]:.6g} ({int(short.sum())} problem(s) infeasible, first at index "
            f"{tuple(int(j) for j in np.unravel_index(i, lead))})"
        )
    with np.errstate(invalid="ignore", over="ignore"):
        saturated = row_cost(hi_r) <= prob.b
    rs = _Rows.start(prob, lo_r, hi_r, saturated, chain)
    n_workers = workers if workers is not None else min(os.cpu_count() or 1, 8)
    _map(rs.work, list(range(0, rows, _BLOCK)), n_workers)
    sizes = np.clip(np.exp(rs.y).T, lo_r, hi_r)
    at_lo = np.ascontiguousarray(rs.fixed_lo.T)
    at_hi = np.ascontiguousarray(rs.fixed_hi.T)
    lam = rs.nu / prob.b
    bad = np.flatnonzero(~rs.ok & ~saturated)
    for i in (int(j) for j in bad):
        _solve_one(prob, i, lo_r, hi_r, sizes, at_lo, at_hi, lam)
    sizes[saturated] = hi_r[saturated]
    at_hi[saturated] = True
    at_lo[saturated] = False
    lam[saturated] = 0.0
    spent = row_cost(sizes)
    return Allocation(
        sizes=sizes.reshape(*lead, n),
        multiplier=lam.reshape(lead),
        spent=np.asarray(spent, dtype=float).reshape(lead),
        at_lower=at_lo.reshape(*lead, n),
        at_upper=at_hi.reshape(*lead, n),
        fallbacks=int(bad.size),
    )


def _checked_problem(
    law: PowerLaw,
    cost: Posynomial,
    budget: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    method: str,
) -> tuple[Array, Array, Array, Array, Array, tuple[int, ...]]:
    """The law's coefficients and exponents, the budget and the bounds as arrays, and the
    leading dims they broadcast to; ``ValueError`` for what :func:`solve_posynomial` cannot
    solve."""
    coef = np.asarray(law.coef, dtype=float)
    alpha = np.asarray(law.alpha, dtype=float)
    n = coef.shape[-1]
    if cost.n_axes != n:
        raise ValueError(f"the cost has {cost.n_axes} axes, the law {n}")
    if (~np.isfinite(coef)).any() or (coef <= 0).any():
        raise ValueError("law coefficients K_i must be finite and > 0")
    if (~np.isfinite(alpha)).any() or (alpha <= 0).any():
        raise ValueError("law exponents alpha_i must be finite and > 0")
    bud = np.asarray(budget, dtype=float)
    if (~np.isfinite(bud)).any() or (bud <= 0).any():
        raise ValueError("budget must be finite and > 0")
    lo, hi = validate_box(lower, upper)
    if (cost.powers.sum(axis=0) == 0).any():
        raise ValueError("every axis must appear in the cost (an unpriced axis is not a choice)")
    lead = np.broadcast_shapes(
        coef.shape[:-1],
        alpha.shape[:-1],
        cost.weights.shape[:-1],
        bud.shape,
        np.shape(lo)[:-1] if np.ndim(lo) else (),
        np.shape(hi)[:-1] if np.ndim(hi) else (),
    )
    if method not in ("auto", "newton"):
        raise ValueError(f"method must be 'auto' or 'newton', got {method!r}")
    return coef, alpha, bud, lo, hi, lead


@dataclass
class _Rows:
    """The working arrays of :func:`solve_posynomial` over its rows (problems), as columns:
    the bounds and their logs, the log sizes ``y``, the scaled multipliers ``nu``, which rows
    are solved and which axes sit at a bound. Blocks of rows are solved on threads, each
    writing only its own columns."""

    prob: _Problem
    saturated: BoolArray
    chain: tuple[int, int] | None
    lo_t: Array
    hi_t: Array
    llo: Array
    lhi: Array
    y: Array
    nu: Array
    ok: BoolArray
    fixed_lo: BoolArray
    fixed_hi: BoolArray

    @classmethod
    def start(
        cls,
        prob: _Problem,
        lo_r: Array,
        hi_r: Array,
        saturated: BoolArray,
        chain: tuple[int, int] | None,
    ) -> _Rows:
        n, rows = lo_r.shape[1], lo_r.shape[0]
        lo_t, hi_t = np.ascontiguousarray(lo_r.T), np.ascontiguousarray(hi_r.T)
        return cls(
            prob, saturated, chain, lo_t, hi_t, np.log(lo_t), np.log(hi_t),
            y=np.log(hi_t).copy(),
            nu=np.zeros(rows),
            ok=saturated.copy(),
            fixed_lo=np.zeros((n, rows), dtype=bool),
            fixed_hi=np.ones((n, rows), dtype=bool),
        )  # fmt: skip

    def work(self, start: int) -> None:
        """The block of rows from ``start``: by the chain path where the cost has its shape,
        the rest (and what it does not settle) by the whole KKT system."""
        prob, llo, lhi = self.prob, self.llo, self.lhi
        cols = np.arange(start, min(start + _BLOCK, self.y.shape[1]))
        cols = cols[~self.saturated[cols]]
        if cols.size and self.chain is not None:
            yc, uc, done, _ = solve_chain(
                prob.k[:, cols],
                prob.al[:, cols],
                prob.w[:, cols],
                llo[:, cols],
                lhi[:, cols],
                prob.b[cols],
                *self.chain,
            )
            c = cols[done]
            self.y[:, c] = yc[:, done]
            self.nu[c] = np.exp(uc[done]) * prob.b[c]
            self.fixed_lo[:, c] = yc[:, done] <= llo[:, c]
            self.fixed_hi[:, c] = yc[:, done] >= lhi[:, c]
            self.ok[c] = True
            cols = cols[~done]
        if cols.size:
            self.general(cols)

    def general(self, cols: IndexArray) -> None:
        """The whole KKT system by Newton's method, with an active set."""
        prob, llo, lhi = self.prob, self.llo, self.lhi
        yy, nn, flo, fhi = _start(
            prob, cols, self.lo_t[:, cols], self.hi_t[:, cols], llo[:, cols], lhi[:, cols]
        )
        todo = np.ones(cols.size, dtype=bool)
        for round_ in range(_MAX_ROUNDS):
            c = cols[todo]
            sub_lo, sub_hi = llo[:, c], lhi[:, c]
            fr = ~(flo[:, todo] | fhi[:, todo])
            if round_:  # the active set changed: a start that fits it
                yy[:, todo], nn[todo] = _reseed(
                    prob, c, yy[:, todo], flo[:, todo], fhi[:, todo], sub_lo, sub_hi
                )
            yn, nn_t, conv = _newton(
                prob, c, yy[:, todo], nn[todo], flo[:, todo], fhi[:, todo], sub_lo, sub_hi
            )
            lag = prob.lagrangian_gradient(yn, nn_t, c)
            tol = 1e-9 * np.abs(lag).max(axis=0)
            lo_bad = flo[:, todo] & (lag < -tol)
            hi_bad = fhi[:, todo] & (lag > tol)
            out_lo = fr & (yn < sub_lo - 1e-12)
            out_hi = fr & (yn > sub_hi + 1e-12)
            good = conv & ~(lo_bad | hi_bad | out_lo | out_hi).any(axis=0) & (nn_t > 0)
            yy[:, todo] = np.clip(yn, sub_lo, sub_hi)
            nn[todo] = np.where(nn_t > 0, nn_t, nn[todo])
            flo[:, todo] = (flo[:, todo] & ~lo_bad) | out_lo
            fhi[:, todo] = (fhi[:, todo] & ~hi_bad) | out_hi
            self.ok[c[good]] = True
            todo[todo] = ~good
            if not todo.any():
                break
        self.y[:, cols] = yy
        self.nu[cols] = nn
        self.fixed_lo[:, cols] = flo
        self.fixed_hi[:, cols] = fhi


def _solve_one(
    prob: _Problem,
    i: int,
    lo_r: Array,
    hi_r: Array,
    sizes: Array,
    at_lo: BoolArray,
    at_hi: BoolArray,
    lam: Array,
) -> None:
    """Row ``i``, which Newton's method did not settle, by SLSQP from Newton's point; its
    sizes, bounds hit and multiplier written in place."""
    one_cost = Posynomial(prob.w[:, i], prob.a)
    row_law = PowerLaw(
        prob.k[:, i],
        prob.al[:, i],
        0.0,
        None if prob.gamma is None else prob.gamma[i],
        None if prob.beta is None else prob.beta[i],
        prob.pair,
    )
    d = solve_general(
        _scalar(row_law.loss),
        _scalar(one_cost),
        float(prob.b[i]),
        lo_r[i],
        hi_r[i],
        x0=sizes[i],
        loss_grad=row_law.gradient,
        cost_grad=one_cost.gradient,
    )
    sizes[i] = d
    at_lo[i] = d <= lo_r[i] * (1 + 1e-9)
    at_hi[i] = d >= hi_r[i] * (1 - 1e-9)
    marginal = -row_law.gradient(d) / one_cost.gradient(d)
    free_i = ~(at_lo[i] | at_hi[i])
    lam[i] = float(np.mean(marginal[free_i])) if free_i.any() else float(np.min(marginal))
