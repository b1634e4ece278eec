"""Budget allocation under a law of any forms: majorize-minimize over exact geometric programs.

Minimise ``L(D) = L_inf + sum_i T_i(D_i)`` (:class:`~bayesscale.core.form_law.FormLaw`: offset
power or saturating terms, chosen per draw and axis) subject to a posynomial cost
``Phi(D) <= B`` and a box ``lo <= D <= hi``. Neither form keeps the problem convex in
``y = log D`` (below its knee or midpoint a term flattens), but both are log-concave in ``y``,
so at any point ``y_k`` the power law ``P_k`` touching ``L`` there lies above it
(:meth:`~bayesscale.core.form_law.FormLaw.power_majorizer`). Each round solves the convex
program of that bound exactly (:func:`~bayesscale.core.geometric.solve_posynomial`):

.. math::

    y_{k+1} = \\arg\\min_{\\Phi(e^y) \\le B,\\ \\mathrm{box}} P_k(y), \\qquad
    L(y_{k+1}) \\le P_k(y_{k+1}) \\le P_k(y_k) = L(y_k),

so the loss never rises, and where the rounds stop moving the bound's KKT conditions, whose
gradient is the law's at ``y_k``, are the law's: a KKT point of the true problem (its
multiplier is the bound's). Power terms are their own bound, so a power law settles in one
round. Where the bound is far more curved than the law the rounds converge slowly, so every
``_POLISH_EVERY`` rounds Newton's method on the law's own KKT system settles the problems it
can certify (``_polish``). A non-convex problem may have more than one KKT point, so the
rounds start from five points (the reference scales; the optimum of each term's large-size
power law, its tail; that optimum with each axis in turn held at its lower bound) and keep
the lowest loss per problem; the tests compare it with a brute-force search, and show that
one start is not enough.

Example
-------
>>> from bayesscale.core.geometric import Posynomial
>>> law = FormLaw(amplitude=np.array([0.3, 0.3]), alpha=np.array([0.5, 1.5]),
...               reference=np.array([10.0, 10.0]), midpoint=np.array([0.0, 1.0]),
...               saturating=np.array([False, True]))
>>> sol = solve_forms(law, Posynomial.linear([1.0, 1.0]), 100.0)
>>> round(float(sol.spent), 9), sol.sizes.round(2).tolist()
(100.0, [41.98, 58.02])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayesscale.core.allocate import Allocation, PowerLaw, validate_box
from bayesscale.core.form_law import Array, BoolArray, FormLaw
from bayesscale.core.geometric import Posynomial, solve_posynomial

IndexArray = NDArray[np.intp]

_TOL = 1e-11  # max |log D| a round moves at convergence
_MAX_ROUNDS = 2000
_ONE_THREAD = 4096  # rows below which a round runs on one thread
_POLISH_EVERY = 10  # rounds between Newton's tries on the rows still moving
_POLISH_STEPS = 12
_KKT_TOL = 1e-10  # a polished row's KKT residual, relative to nu * g
_MIN_EXPONENT = 1e-12  # a flat term's bound keeps a positive exponent (the GP's domain)


def tail_law(law: FormLaw) -> PowerLaw:
    """Each term's large-size power law, which it approaches above its knee or midpoint: the
    offset power ``A (1+k)^alpha (D / D_ref)^-alpha``, the saturating
    ``A (1 + e^(-beta m)) e^(beta m) (D / D_ref)^-beta``; raw-unit coefficients."""
    sat = np.asarray(law.saturating, dtype=bool)
    a, k, m = law.alpha, np.asarray(law.knee), np.asarray(law.midpoint)
    with np.errstate(over="ignore"):
        scale = np.where(sat, (1.0 + np.exp(-a * m)) * np.exp(a * m), (1.0 + k) ** a)
        coef = law.amplitude * scale * law.reference**a
    return PowerLaw(coef, a, law.floor)


def _default_starts(
    law: FormLaw, cost: Posynomial, budget: Array, lo: Array, hi: Array
) -> list[Array]:
    """The reference scales (in the box), the tail laws' optimum, and that optimum with each
    axis in turn held at its lower bound (a flat term's optimum may buy none of it)."""
    tail = tail_law(law)
    points = [np.clip(law.reference, lo, hi)]
    for i in range(-1, lo.shape[1]):
        top = hi.copy()
        if i >= 0:
            top[:, i] = lo[:, i]
        points.append(solve_posynomial(tail, cost, budget, lo, top, sweep=False).sizes)
    return points


def _rows(x: ArrayLike, lead: tuple[int, ...], width: int) -> Array:
    arr = np.broadcast_to(np.asarray(x, dtype=float), (*lead, width))
    return np.ascontiguousarray(arr.reshape(-1, width))


def _row_law(law: FormLaw, lead: tuple[int, ...], n: int) -> FormLaw:
    """The law broadcast over the problems ``lead``, one row each (R, n)."""

    def rows(x: NDArray[Any]) -> NDArray[Any]:
        return np.ascontiguousarray(np.broadcast_to(x, (*lead, n)).reshape(-1, n))

    return law.map_axes(rows, floor=_rows(np.asarray(law.floor)[..., None], lead, 1)[:, 0])


def _take(law: FormLaw, rows: IndexArray) -> FormLaw:
    """The rows ``rows`` of a law of rows."""
    return law.map_axes(lambda x: x[rows], floor=np.asarray(law.floor)[rows])


def _bound(law: FormLaw, sizes: Array) -> PowerLaw:
    p = law.power_majorizer(sizes)
    alpha = np.maximum(p.alpha, _MIN_EXPONENT)
    return PowerLaw(p.coef, alpha, p.floor)


class _Rounds:
    """The rounds from one start, every problem a row (R, n)."""

    def __init__(self, law: FormLaw, cost: Posynomial, budget: Array, lo: Array, hi: Array):
        self.law, self.cost, self.budget, self.lo, self.hi = law, cost, budget, lo, hi
        self.fallbacks = 0

    def solve(self, rows: IndexArray, sizes: Array) -> Allocation:
        law = _take(self.law, rows)
        cost = Posynomial(self.cost.weights[rows], self.cost.powers)
        sol = solve_posynomial(
            _bound(law, sizes),
            cost,
            self.budget[rows],
            self.lo[rows],
            self.hi[rows],
            sweep=False,
            workers=None if rows.size > _ONE_THREAD else 1,  # a pool costs more than it saves
        )
        self.fallbacks += sol.fallbacks
        return sol

    def run(self, start: Array, max_rounds: int, tol: float) -> tuple[Allocation, BoolArray]:
        """Rounds from ``start`` (R, n) until no row moves more than ``tol`` in ``log D``; every
        ``_POLISH_EVERY`` rounds, Newton's method on the law's own KKT system settles the rows
        it can certify (:func:`_polish`: the rounds converge linearly where the bound is much
        more curved than the law). Returns the allocation and which rows settled."""
        r = start.shape[0]
        every = np.arange(r)
        sol = self.solve(every, start)
        sizes, mult = sol.sizes.copy(), sol.multiplier.copy()
        at_lo, at_hi = sol.at_lower.copy(), sol.at_upper.copy()
        moved = np.max(np.abs(np.log(sizes) - np.log(start)), axis=1)
        active = every[moved > tol]
        done = 0
        while active.size and done < max_rounds:
            done += 1
            step = self.solve(active, sizes[active])
            moved = np.max(np.abs(np.log(step.sizes) - np.log(sizes[active])), axis=1)
            sizes[active], mult[active] = step.sizes, step.multiplier
            at_lo[active], at_hi[active] = step.at_lower, step.at_upper
            active = active[moved > tol]
            if active.size and done % _POLISH_EVERY == 0:
                y, nu, ok = _polish(
                    _take(self.law, active),
                    Posynomial(self.cost.weights[active], self.cost.powers),
                    self.budget[active],
                    np.log(sizes[active]),
                    mult[active] * self.budget[active],
                    (at_lo[active], at_hi[active]),
                    (np.log(self.lo[active]), np.log(self.hi[active])),
                )
                won = active[ok]
                sizes[won], mult[won] = np.exp(y[ok]), nu[ok] / self.budget[won]
                active = active[~ok]
        settled: BoolArray = np.ones(r, dtype=bool)
        settled[active] = False
        alloc = Allocation(sizes, mult, np.asarray(self.cost(sizes)), at_lo, at_hi, self.fallbacks)
        return alloc, settled


def _kkt(
    law: FormLaw, cost: Posynomial, budget: Array, y: Array, nu: Array, fixed: BoolArray
) -> tuple[Array, Array, Array]:
    """The law's KKT system in ``y = log D`` with the axes ``fixed`` held: the residual
    ``(dL/dy_i + nu g_i` on free axes, sum_m s_m - 1)`` (R, n+1) and its Jacobian
    (R, n+1, n+1), ``s_m = w_m e^(a_m . y) / B``, ``g = a^T s``; and ``g`` (R, n)."""
    a = cost.powers
    s = cost.weights * np.exp(y @ a.T) / budget[:, None]
    g = s @ a
    _, t1, t2 = law.terms(np.exp(y))
    n = y.shape[1]
    res = np.concatenate([np.where(fixed, 0.0, t1 + nu[:, None] * g), s.sum(1)[:, None] - 1], 1)
    jac = np.zeros((y.shape[0], n + 1, n + 1))
    jac[:, :n, :n] = nu[:, None, None] * np.einsum("rm,mi,mj->rij", s, a, a)
    jac[:, np.arange(n), np.arange(n)] += t2
    jac[:, :n, n] = g
    jac[:, n, :n] = g
    both = ~fixed[:, :, None] & ~fixed[:, None, :]
    jac[:, :n, :n] = np.where(both, jac[:, :n, :n], np.eye(n)[None])
    jac[:, :n, n] = np.where(fixed, 0.0, g)
    jac[:, n, :n] = np.where(fixed, 0.0, g)
    return res, jac, g


def _polish(
    law: FormLaw,
    cost: Posynomial,
    budget: Array,
    y: Array,
    nu: Array,
    active_set: tuple[BoolArray, BoolArray],
    box: tuple[Array, Array],
) -> tuple[Array, Array, BoolArray]:
    """Newton's method on the law's KKT system from the rounds' point, the active set (axes at
    their lower, upper bound) held. A row counts as settled only where it converged (residual
    below ``_KKT_TOL`` of the gradient's scale), ``nu > 0``, its free axes stayed inside the
    box (``log`` bounds), the held axes' multipliers have the right sign, and its loss is no
    higher than the rounds' point: a KKT point at least as good as the descent reached."""
    at_lo, at_hi = active_set
    fixed = at_lo | at_hi
    start_loss = law.loss(np.exp(y))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for _ in range(_POLISH_STEPS):
            res, jac, _ = _kkt(law, cost, budget, y, nu, fixed)
            try:
                step = np.linalg.solve(jac, -res[..., None])[..., 0]
            except np.linalg.LinAlgError:
                break
            step = np.where(np.isfinite(step), step, 0.0)
            y = y + np.where(fixed, 0.0, step[:, :-1])
            nu = nu + step[:, -1]
        res, _, g = _kkt(law, cost, budget, y, nu, fixed)
        scale = np.maximum(np.abs(nu[:, None] * g).max(1), 1e-300)
        ok = np.all(np.isfinite(res), axis=1) & (np.abs(res).max(1) <= _KKT_TOL * scale)
        ok &= (nu > 0) & (law.loss(np.exp(y)) <= start_loss + 1e-12 * np.abs(start_loss))
        inside = (y >= box[0] - 1e-12) & (y <= box[1] + 1e-12)
        ok &= np.all(fixed | inside, axis=1)
        # d(L + nu log Phi)/dy_i: >= 0 where held at the lower bound, <= 0 at the upper
        lagrange = law.terms(np.exp(y))[1] + nu[:, None] * g
        wrong = (at_lo & (lagrange < -_KKT_TOL * scale[:, None])) | (
            at_hi & (lagrange > _KKT_TOL * scale[:, None])
        )
        ok &= ~wrong.any(axis=1)
    return y, nu, ok


def solve_forms(
    law: FormLaw,
    cost: Posynomial,
    budget: ArrayLike,
    lower: ArrayLike = 1.0,
    upper: ArrayLike = np.inf,
    *,
    starts: Sequence[ArrayLike] | None = None,
    tol: float = _TOL,
    max_rounds: int = _MAX_ROUNDS,
) -> Allocation:
    """Minimise ``law.loss(D)`` s.t. ``cost(D) <= budget``, ``lower <= D <= upper``: rounds of
    exact power-law bounds (module docstring) from each of ``starts`` (sizes broadcast over the
    problems; default: the five starts of the module docstring, in the box),
    keeping the lower loss per problem. ``law``, ``cost.weights``, ``budget`` and the bounds
    broadcast over leading dims; ``multiplier`` is the budget's shadow price (loss per unit of
    money). ``fallbacks`` counts the problems the geometric programs handed to SLSQP and those
    whose best start did not settle in ``max_rounds`` (their last point is returned: in the
    box, on the budget, its loss no higher than where the rounds began).

    >>> law = FormLaw(amplitude=np.array([0.2, 0.2]), alpha=np.array([0.5, 0.5]),
    ...               reference=np.array([1.0, 1.0]))
    >>> solve_forms(law, Posynomial.linear([1.0, 1.0]), 200.0).sizes.round(6).tolist()
    [100.0, 100.0]
    """
    n = law.amplitude.shape[-1]
    lo, hi = validate_box(lower, upper)
    bud = np.asarray(budget, dtype=float)
    lead = np.broadcast_shapes(
        law.amplitude.shape[:-1],
        law.alpha.shape[:-1],
        np.shape(law.floor),
        np.shape(law.knee)[:-1],
        np.shape(law.midpoint)[:-1],
        np.shape(law.saturating)[:-1],
        cost.weights.shape[:-1],
        bud.shape,
        np.shape(lo)[:-1],
        np.shape(hi)[:-1],
    )
    rows_law = _row_law(law, lead, n)
    m = cost.powers.shape[0]
    row_cost = Posynomial(_rows(cost.weights, lead, m), cost.powers)
    b = _rows(bud[..., None], lead, 1)[:, 0]
    lo_r, hi_r = _rows(lo, lead, n), _rows(hi, lead, n)
    rounds = _Rounds(rows_law, row_cost, b, lo_r, hi_r)
    if starts is None:
        points = _default_starts(rows_law, row_cost, b, lo_r, hi_r)
    else:
        points = [np.clip(_rows(s, lead, n), lo_r, hi_r) for s in starts]
    best: Allocation | None = None
    unsettled: BoolArray = np.zeros(b.shape, dtype=bool)
    for point in points:
        alloc, settled = rounds.run(point, max_rounds, tol)
        if best is None:
            unsettled = ~settled
            best = alloc
            continue
        better = rows_law.loss(alloc.sizes) < rows_law.loss(best.sizes)
        unsettled = np.where(better, ~settled, unsettled)
        best = Allocation(
            np.where(better[:, None], alloc.sizes, best.sizes),
            np.where(better, alloc.multiplier, best.multiplier),
            np.where(better, alloc.spent, best.spent),
            np.where(better[:, None], alloc.at_lower, best.at_lower),
            np.where(better[:, None], alloc.at_upper, best.at_upper),
        )
    assert best is not None
    return Allocation(
        best.sizes.reshape(*lead, n),
        best.multiplier.reshape(lead),
        best.spent.reshape(lead),
        best.at_lower.reshape(*lead, n),
        best.at_upper.reshape(*lead, n),
        rounds.fallbacks + int(unsettled.sum()),
    )
