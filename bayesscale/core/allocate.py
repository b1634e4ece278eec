"""Budget allocation under a scaling law: pure NumPy/SciPy, vectorised over leading dims.

The separable law in raw counts (``K_i = A_i D_ref,i^alpha_i``, see ``laws.amplitude_at_one``):

.. math::

    L(D) = L_0 + \\sum_i K_i D_i^{-\\alpha_i}  \\quad(- \\gamma (D_a D_b)^{-\\beta})

is minimised (success ``p = exp(-L)`` maximised) over box bounds ``lo_i <= D_i <= hi_i`` under

* an additive linear cost ``Phi = sum_i p_i D_i <= B`` (``p_i = c_i / kappa_i``), solved exactly
  by :func:`solve_additive`. KKT: ``alpha_i K_i D_i^(-alpha_i-1) = lambda p_i`` on free axes, so
  ``D_i(lambda) = clip((alpha_i K_i / (lambda p_i))^(1/(1+alpha_i)), lo_i, hi_i)``; the spend is
  monotone in ``lambda``, found by a bracketed Newton-bisection on ``log lambda``;
* a product (compute) cost ``C = c prod_i D_i^(m_i) <= B``, e.g. FLOPs proportional to
  ``N * tokens``: linear in ``log D``, so the same clip-and-bisect applies
  (:func:`solve_product`);
* non-separable laws (the interaction term): :func:`solve_interaction`, a batched Newton
  method on the KKT system with an active-set update, falling back to SLSQP per problem;
* any user loss and cost function: :func:`solve_general` (SLSQP in ``log D``, one problem).

Local recipe exponents ``e_i = d log D_i / d log B`` are closed-form at a solution
(:func:`local_exponents_additive`, :func:`local_exponents_product`).

Example
-------
>>> sol = solve_additive([1.0, 1.0], [0.5, 0.5], [1.0, 1.0], 200.0)
>>> sol.sizes.round(6).tolist()
[100.0, 100.0]
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

_LOG_TOL = 1e-13  # convergence of |log(spend / budget)|: budget met to 1e-13 relative
_MAX_ITER = 200
_CHUNK_ROWS = 16_384
_KKT_TOL = 1e-13  # max-norm of the interaction KKT residual (loss units)


@dataclass(frozen=True)
class Allocation:
    """A solved allocation, broadcast over the problem's leading dims.

    ``sizes`` (..., n) the optimal ``D_i``; ``multiplier`` (...) the budget's shadow price
    ``lambda`` (loss per unit of cost for the additive cost, per unit of ``log C`` for the product
    cost), 0 where the budget buys every upper bound; ``spent`` (...) the cost of ``sizes``;
    ``at_lower`` / ``at_upper`` (..., n) which bounds are active; ``fallbacks`` how many
    problems a vectorised solver handed to the one-by-one general solver.
    """

    sizes: Array
    multiplier: Array
    spent: Array
    at_lower: BoolArray
    at_upper: BoolArray
    fallbacks: int = 0

    @property
    def free(self) -> BoolArray:
        """Axes strictly inside their bounds."""
        return ~(self.at_lower | self.at_upper)


@dataclass(frozen=True)
class KKTResiduals:
    """Relative KKT residuals (each ~0 at an exact optimum), max over axes, shape (...).

    ``stationarity``: ``|g_i/(lambda p_i) - 1|`` on free axes (``g_i = -dL/dD_i``), and the
    sign violations ``g_i > lambda p_i`` at a lower bound / ``g_i < lambda p_i`` at an upper
    bound; ``complementarity``: ``lambda (B - spent) / (lambda B)``; ``budget``: overspend
    ``max(0, spent - B)/B``; ``bounds``: relative violation of the box.
    """

    stationarity: Array
    complementarity: Array
    budget: Array
    bounds: Array

    def max(self) -> float:
        return float(
            max(
                np.max(self.stationarity),
                np.max(self.complementarity),
                np.max(self.budget),
                np.max(self.bounds),
            )
        )


# --- the law ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PowerLaw:
    """``L(D) = floor + sum_i K_i D_i^(-alpha_i) - gamma (D_a D_b)^(-beta)``, arrays broadcast.

    ``coef`` and ``alpha`` are (..., n); ``floor``, ``gamma``, ``beta`` are (...); ``pair`` the
    two axis positions of the interaction (``None``: no interaction).

    >>> law = PowerLaw(np.array([1.0, 2.0]), np.array([0.5, 0.5]), 0.1)
    >>> float(law.loss(np.array([4.0, 16.0])))
    1.1
    """

    coef: Array
    alpha: Array
    floor: Array | float = 0.0
    gamma: Array | float | None = None
    beta: Array | float | None = None
    pair: tuple[int, int] | None = None

    def _interaction(self, sizes: Array) -> tuple[Array, Array, Array] | None:
        if self.pair is None or self.gamma is None or self.beta is None:
            return None
        a, b = self.pair
        gamma = np.asarray(self.gamma, dtype=float)
        beta = np.asarray(self.beta, dtype=float)
        z = gamma * (sizes[..., a] * sizes[..., b]) ** (-beta)
        return z, gamma, beta

    def loss(self, sizes: ArrayLike) -> Array:
        """``L(D)``; ``sizes`` (..., n)."""
        d = np.asarray(sizes, dtype=float)
        out = np.asarray(self.floor, dtype=float) + np.sum(self.coef * d ** (-self.alpha), axis=-1)
        inter = self._interaction(d)
        if inter is not None:
            out = out - inter[0]
        return np.asarray(out, dtype=float)

    def gradient(self, sizes: ArrayLike) -> Array:
        """``dL/dD_i`` (..., n)."""
        d = np.asarray(sizes, dtype=float)
        g = -self.alpha * self.coef * d ** (-self.alpha - 1.0)
        inter = self._interaction(d)
        if inter is not None and self.pair is not None:
            z, _, beta = inter
            g = np.array(g, copy=True)
            for i in self.pair:
                g[..., i] = g[..., i] + beta * z / d[..., i]
        return np.asarray(g, dtype=float)

    def log_derivatives(self, sizes: ArrayLike) -> tuple[Array, Array, Array]:
        """``L``, ``dL/dy_i`` and ``d2L/dy_i dy_j`` in ``y = log D`` ((...), (..., n),
        (..., n, n)): a term ``T_i = K_i D_i^(-alpha_i)`` gives ``-alpha_i T_i`` and
        ``alpha_i^2 T_i`` on the diagonal; the interaction ``-Z``, ``Z = gamma (D_a
        D_b)^(-beta)``, gives ``beta Z`` on ``a`` and ``b`` and ``-beta^2 Z`` on their block.

        >>> law = PowerLaw(np.array([1.0, 2.0]), np.array([0.5, 0.5]), 0.1)
        >>> [x.tolist() for x in law.log_derivatives(np.array([4.0, 16.0]))[:2]]
        [1.1, [-0.25, -0.25]]
        """
        d = np.asarray(sizes, dtype=float)
        t = self.coef * d ** (-self.alpha)
        loss = np.asarray(self.floor, dtype=float) + np.sum(t, axis=-1)
        ly = -self.alpha * t
        n = d.shape[-1]
        lyy = np.zeros((*ly.shape, n))
        idx = np.arange(n)
        lyy[..., idx, idx] = self.alpha**2 * t
        inter = self._interaction(d)
        if inter is not None and self.pair is not None:
            z, _, beta = inter
            loss = loss - z
            for i in self.pair:
                ly[..., i] = ly[..., i] + beta * z
                for j in self.pair:
                    lyy[..., i, j] = lyy[..., i, j] - beta**2 * z
        return np.asarray(loss, dtype=float), np.asarray(ly, dtype=float), lyy


# --- validation ----------------------------------------------------------------------------


def _as_float(name: str, value: ArrayLike) -> Array:
    arr = np.asarray(value, dtype=float)
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN")
    return arr


def _first_bad(mask: BoolArray) -> str:
    idx = tuple(int(i) for i in np.argwhere(mask)[0])
    return f"{int(mask.sum())} element(s), first at index {idx}"


def validate_box(lower: ArrayLike, upper: ArrayLike) -> tuple[Array, Array]:
    """Check ``0 < lower <= upper`` (``upper`` may be ``inf``) and return float arrays.

    >>> validate_box([1.0, 2.0], [384.0, np.inf])[1].tolist()
    [384.0, inf]
    """
    lo = _as_float("lower bounds", lower)
    hi = _as_float("upper bounds", upper)
    if (~np.isfinite(lo)).any() or (lo <= 0).any():
        raise ValueError(
            "lower bounds must be finite and > 0 (the law diverges at D = 0): "
            + _first_bad(~np.isfinite(lo) | (lo <= 0))
        )
    bad = lo > hi
    if bad.any():
        raise ValueError(
            f"bounds with lower > upper: {_first_bad(np.broadcast_to(bad, bad.shape))}"
        )
    return lo, hi


def _validate_law(coef: Array, alpha: Array) -> None:
    if (~np.isfinite(coef)).any() or (coef <= 0).any():
        raise ValueError("law coefficients K_i must be finite and > 0")
    if (~np.isfinite(alpha)).any() or (alpha <= 0).any():
        raise ValueError("law exponents alpha_i must be finite and > 0")


def _validate_positive(name: str, value: Array) -> None:
    bad = ~np.isfinite(value) | (value <= 0)
    if bad.any():
        raise ValueError(f"{name} must be finite and > 0: {_first_bad(bad)}")


# --- the vectorised clip-and-bisect core ---------------------------------------------------


def _solve_rows(
    a: Array,
    b: Array,
    w: Array,
    lo: Array,
    hi: Array,
    target: Array,
    exponential: bool,
    skip: BoolArray | None = None,
    guess: Array | None = None,
) -> tuple[Array, Array, Array]:
    """Find ``u`` per column with ``F(u) = 0``, ``x_i(u) = clip(a_i + b_i u, lo_i, hi_i)``.

    Arrays are (n, rows): axes first, so sums over axes are fast. ``exponential``:
    ``F = log sum_i w_i exp(x_i) - target`` (additive cost in ``log D``), solved by Halley
    steps (cubic convergence) inside a bracket that the signs of ``F`` build up; else
    ``F = sum_i w_i x_i - target`` (product cost, piecewise linear), by Newton steps inside a
    bracket computed up front. ``F`` is non-decreasing in ``u`` and the caller guarantees a
    root, except on ``skip`` columns (left at their starting value). A step that leaves the
    bracket becomes a bisection (or, before the bracket is closed, a bounded move). ``guess``
    (finite entries) replaces the default starting point. Returns ``u`` and ``F'``, ``F''`` at
    the last evaluation (the slopes a continuation in the target needs).
    """
    u, u_lo, u_hi, lw, bbar = _rows_start(a, b, w, lo, hi, target, exponential, guess)
    out = u.copy()
    df_out = np.zeros_like(u)
    d2_out = np.zeros_like(u)
    idx = np.arange(u.size)
    ca, cb, cw, clo, chi, clw = a, b, w, lo, hi, lw
    tgt, ul, uh = target, u_lo, u_hi
    max_step = 8.0 / np.maximum(bbar, 1e-3)  # at most a factor e^8 in spend per move
    if skip is not None and skip.any():
        idx = np.flatnonzero(~skip)
        ca, cb, cw, clo, chi, clw = (np.take(c, idx, axis=1) for c in (a, b, w, lo, hi, lw))
        u, tgt, ul, uh, max_step = u[idx], target[idx], u_lo[idx], u_hi[idx], max_step[idx]
    # Iterate on the unconverged columns only, compacting them as they converge.
    for _ in range(_MAX_ITER):
        if idx.size == 0:
            break
        raw = ca + cb * u
        x = np.minimum(np.maximum(raw, clo), chi)
        free = x == raw
        if exponential:
            e = np.exp(x + clw)
            s = e.sum(axis=0)
            f = np.log(s) - tgt
            eb = e * cb
            eb *= free
            df = eb.sum(axis=0) / s
            # Halley: F'' = sum_free e b^2 / S - F'^2.
            d2 = (eb * cb).sum(axis=0) / s - df * df
        else:
            f = (cw * x).sum(axis=0) - tgt
            wb = cw * cb
            wb *= free
            df = wb.sum(axis=0)
            d2 = np.zeros_like(df)
        done = np.abs(f) <= _LOG_TOL
        if done.all():
            out[idx], df_out[idx], d2_out[idx] = u, df, d2
            break
        ul = np.where(f < 0, u, ul)
        uh = np.where(f > 0, u, uh)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = -2.0 * f * df / (2.0 * df * df - f * d2)
        step = np.where(np.isfinite(step), step, np.sign(-f) * max_step)
        step = np.clip(step, -max_step, max_step)
        trial = u + step
        inside = (trial > ul) & (trial < uh)
        closed = np.isfinite(ul) & np.isfinite(uh)
        fallback = np.where(closed, 0.5 * (ul + uh), u + np.sign(-f) * max_step)
        u = np.where(done, u, np.where(inside, trial, fallback))
        if 2 * np.count_nonzero(done) > done.size:  # compact once half have converged
            fin = idx[done]
            out[fin], df_out[fin], d2_out[fin] = u[done], df[done], d2[done]
            keep = np.flatnonzero(~done)  # np.take: far faster than boolean column indexing
            idx, u, ul, uh, tgt, max_step = (
                np.take(r, keep) for r in (idx, u, ul, uh, tgt, max_step)
            )
            ca, cb, cw, clo, chi, clw = (
                np.take(c, keep, axis=1) for c in (ca, cb, cw, clo, chi, clw)
            )
    else:
        out[idx] = u
    return out, df_out, d2_out


def _rows_start(
    a: Array,
    b: Array,
    w: Array,
    lo: Array,
    hi: Array,
    target: Array,
    exponential: bool,
    guess: Array | None,
) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any]]:
    """:func:`_solve_rows`'s starting point ``u`` and bracket ``(u_lo, u_hi)``, the log weights
    (the weights themselves for the product cost) and the mean slope ``bbar`` of the moving
    axes per column."""
    moving = b > 0
    n_moving = np.maximum(moving.sum(axis=0), 1)
    bbar = np.where(moving, b, 0.0).sum(axis=0) / n_moving
    if exponential:
        # Initial guess: every axis unclipped, with a common (mean) exponent.
        with np.errstate(divide="ignore"):
            lw = np.log(w)
            spread = np.log(np.where(moving, w * np.exp(a), 0.0).sum(axis=0))
        u = (target - spread) / np.maximum(bbar, 1e-300)
        if guess is not None:
            u = np.where(np.isfinite(guess), guess, u)
        u = np.where(np.isfinite(u), u, 0.0)
        u_lo = np.full(u.shape, -np.inf)
        u_hi = np.full(u.shape, np.inf)
    else:
        lw = w
        with np.errstate(divide="ignore", invalid="ignore"):
            u_lo = np.min(np.where(moving, (lo - a) / b, np.inf), axis=0)
            # cap_i: where axis i alone (others at their lower bounds) reaches the target.
            wl = w * lo
            cap = (target - (wl.sum(axis=0) - wl)) / w
            cap = np.minimum(np.maximum(cap, lo), hi)
            u_hi = np.max(np.where(moving, (cap - a) / b, -np.inf), axis=0)
        u_lo = np.where(np.isfinite(u_lo), u_lo, 0.0)
        u_hi = np.where(np.isfinite(u_hi), np.maximum(u_hi, u_lo), u_lo)
        u = 0.5 * (u_lo + u_hi)
    return u, u_lo, u_hi, lw, bbar


def _blocks(lead: tuple[int, ...]) -> list[tuple[int | slice, ...]]:
    """Index tuples that cut the leading shape into blocks of about ``_CHUNK_ROWS`` rows."""
    if not lead:
        return [()]
    j = len(lead)
    inner = 1
    while j > 0 and inner * lead[j - 1] <= _CHUNK_ROWS:
        j -= 1
        inner *= lead[j]
    if j == 0:
        return [()]
    step = max(_CHUNK_ROWS // inner, 1)
    out: list[tuple[int | slice, ...]] = []
    for outer in np.ndindex(*lead[: j - 1]):
        for start in range(0, lead[j - 1], step):
            out.append((*outer, slice(start, min(start + step, lead[j - 1]))))
    return out


def _run_blocks(
    fn: Callable[[tuple[int | slice, ...]], None],
    lead: tuple[int, ...],
    workers: int | None,
) -> None:
    blocks = _blocks(lead)
    n_workers = workers if workers is not None else min(os.cpu_count() or 1, 8)
    if n_workers <= 1 or len(blocks) <= 1:
        for blk in blocks:
            fn(blk)
        return
    with ThreadPoolExecutor(max_workers=n_workers) as pool:
        list(pool.map(fn, blocks))


def _axis_first(x: Array, lead: tuple[int, ...], n: int) -> Array:
    """A (..., n) array as a broadcast (n, *lead) view (axes first: fast sums over axes)."""
    x = np.asarray(x, dtype=float)
    x_lead = x.shape[:-1] if x.ndim else ()
    moved = np.moveaxis(np.broadcast_to(x, (*x_lead, n)), -1, 0)
    pad = (1,) * (len(lead) - len(x_lead))
    return np.broadcast_to(moved.reshape(n, *pad, *x_lead), (n, *lead))


def _solve_batched(
    parts: tuple[Array, Array, Array, Array, Array, Array, Array],
    target: Array,
    lead: tuple[int, ...],
    n: int,
    exponential: bool,
    workers: int | None,
) -> tuple[Array, Array, BoolArray, BoolArray, Array, BoolArray]:
    """Run :func:`_solve_rows` block by block over the leading shape.

    ``parts`` = (a, b, w, log lo, log hi, lo, hi), each (..., n) at its own (small) shape.
    Returns sizes (n, *lead), ``u`` (lead), at-lower and at-upper flags (n, *lead), the spend
    (``sum w D`` or ``sum w log D``) and the saturated mask (lead).
    """
    j = _continuation_dim(parts, target, lead) if exponential else None
    if j is not None:
        return _solve_continued(parts, target, lead, n, j, workers)
    views = [_axis_first(v, lead, n) for v in parts]
    tview = np.broadcast_to(target, lead)
    sizes = np.empty((n, *lead))
    u_out = np.empty(lead)
    spend = np.empty(lead)
    sat_out = np.empty(lead, dtype=bool)
    at_lo = np.empty((n, *lead), dtype=bool)
    at_hi = np.empty((n, *lead), dtype=bool)

    def work(blk: tuple[int | slice, ...]) -> None:
        idx = (slice(None), *blk)
        shape = tview[blk].shape
        a, b, w, llog, hlog, lo, hi = (v[idx].reshape(n, -1) for v in views)
        t = tview[blk].reshape(-1)
        with np.errstate(invalid="ignore"):
            if exponential:
                saturated = (w * hi).sum(axis=0) <= np.exp(t)
            else:
                saturated = (w * hlog).sum(axis=0) <= t
        u = _solve_rows(a, b, w, llog, hlog, t, exponential, skip=saturated)[0]
        raw = np.where(saturated, np.inf, a + b * u)
        low, high = raw <= llog, raw >= hlog
        d = np.where(high, hi, np.where(low, lo, np.exp(raw)))
        sizes[idx] = d.reshape(n, *shape)
        at_lo[idx] = low.reshape(n, *shape)
        at_hi[idx] = high.reshape(n, *shape)
        u_out[blk] = u.reshape(shape)
        sat_out[blk] = saturated.reshape(shape)
        spend[blk] = ((w * d) if exponential else (w * np.log(d))).sum(axis=0).reshape(shape)

    _run_blocks(work, lead, workers)
    return sizes, u_out, at_lo, at_hi, spend, sat_out


def _continuation_dim(parts: tuple[Array, ...], target: Array, lead: tuple[int, ...]) -> int | None:
    """The one leading dim along which only the budget varies (>= 8 budgets), if any."""
    nd = len(lead)
    t_shape = (1,) * (nd - np.ndim(target)) + np.shape(target)
    varying = [k for k in range(nd) if t_shape[k] > 1]
    if len(varying) != 1 or t_shape[varying[0]] < 8:
        return None
    k = varying[0]
    for part in parts:
        p_lead = np.shape(part)[:-1] if np.ndim(part) else ()
        p_lead = (1,) * (nd - len(p_lead)) + tuple(p_lead)
        if p_lead[k] != 1:
            return None
    return k


def _solve_continued(
    parts: tuple[Array, Array, Array, Array, Array, Array, Array],
    target: Array,
    lead: tuple[int, ...],
    n: int,
    j: int,
    workers: int | None,
) -> tuple[Array, Array, BoolArray, BoolArray, Array, BoolArray]:
    """:func:`_solve_batched` (additive cost) when budgets vary along leading dim ``j`` only:
    every law is solved at its budgets in increasing order, each started from the previous
    solution moved by a second-order predictor, ``u += d/F' - F'' d^2 / (2 F'^3)`` with
    ``d`` the step in log budget, so one or two Halley steps finish most problems."""
    nb = lead[j]
    rest = lead[:j] + lead[j + 1 :]
    law_lead = (*lead[:j], 1, *lead[j + 1 :])
    laws = [np.ascontiguousarray(_axis_first(v, law_lead, n).reshape(n, -1)) for v in parts]
    n_laws = laws[0].shape[1]
    logb = np.broadcast_to(target, lead)[(0,) * j + (slice(None),) + (0,) * (len(lead) - j - 1)]
    order = np.argsort(logb, kind="stable")
    # Budget-major work layout, so that each budget's results are written contiguously.
    sizes = np.empty((n, nb, n_laws))
    u_out = np.empty((nb, n_laws))
    spend = np.empty((nb, n_laws))
    sat_out = np.empty((nb, n_laws), dtype=bool)
    at_lo = np.empty((n, nb, n_laws), dtype=bool)
    at_hi = np.empty((n, nb, n_laws), dtype=bool)
    n_workers = workers if workers is not None else min(os.cpu_count() or 1, 8)
    # Blocks of laws: big enough for NumPy to amortise its per-call cost, at least two per
    # worker so that threads stay balanced.
    step = int(min(4 * _CHUNK_ROWS, max(_CHUNK_ROWS // 4, -(-n_laws // (2 * n_workers)))))

    def work(blk: tuple[int | slice, ...]) -> None:
        cols = blk[0]
        a, b, w, llog, hlog, lo, hi = (x[:, cols] for x in laws)
        cap = (w * hi).sum(axis=0)
        u = df = d2 = prev_t = None
        for k in order:
            t = np.full(a.shape[1], logb[k])
            saturated = cap <= np.exp(t)
            guess = None
            if u is not None and df is not None and d2 is not None and prev_t is not None:
                dt = t - prev_t
                with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                    guess = u + dt / df - d2 * dt * dt / (2.0 * df**3)
                guess = np.where(df > 0, guess, np.nan)
            u, df, d2 = _solve_rows(a, b, w, llog, hlog, t, True, skip=saturated, guess=guess)
            df = np.where(saturated, 0.0, df)
            prev_t = t
            raw = np.where(saturated, np.inf, a + b * u)
            low, high = raw <= llog, raw >= hlog
            d = np.where(high, hi, np.where(low, lo, np.exp(raw)))
            sizes[:, k, cols] = d
            at_lo[:, k, cols] = low
            at_hi[:, k, cols] = high
            u_out[k, cols] = u
            sat_out[k, cols] = saturated
            spend[k, cols] = (w * d).sum(axis=0)

    blocks: list[tuple[int | slice, ...]] = [
        (slice(c, min(c + step, n_laws)),) for c in range(0, n_laws, step)
    ]
    if n_workers <= 1 or len(blocks) <= 1:
        for blk in blocks:
            work(blk)
    else:
        with ThreadPoolExecutor(max_workers=n_workers) as pool:
            list(pool.map(work, blocks))

    def place(x: NDArray[np.generic], axis_first: bool) -> NDArray[np.generic]:
        if axis_first:
            return np.moveaxis(x.reshape(n, nb, *rest), 1, 1 + j)
        return np.moveaxis(x.reshape(nb, *rest), 0, j)

    return (
        np.asarray(place(sizes, True), dtype=float),
        np.asarray(place(u_out, False), dtype=float),
        np.asarray(place(at_lo, True), dtype=bool),
        np.asarray(place(at_hi, True), dtype=bool),
        np.asarray(place(spend, False), dtype=float),
        np.asarray(place(sat_out, False), dtype=bool),
    )


def _check_axis_count(**arrays: Array) -> int:
    counts = {k: np.shape(v)[-1] for k, v in arrays.items() if np.ndim(v)}
    distinct = set(counts.values()) - {1}
    if len(distinct) > 1:
        raise ValueError(f"the last (axis) dimension differs between inputs: {counts}")
    return distinct.pop() if distinct else 1


def _lead_shape(n: int, budget: Array, *arrays: Array) -> tuple[int, ...]:
    shapes = [np.shape(x)[:-1] for x in arrays if np.ndim(x)]
    return tuple(np.broadcast_shapes(*shapes, np.shape(budget)))


def solve_additive(
    coef: ArrayLike,
    alpha: ArrayLike,
    prices: ArrayLike,
    budget: ArrayLike,
    lower: ArrayLike = 1.0,
    upper: ArrayLike = np.inf,
    *,
    workers: int | None = None,
) -> Allocation:
    """Minimise ``sum_i K_i D_i^(-alpha_i)`` s.t. ``sum_i p_i D_i <= B``, ``lo <= D <= hi``.

    Exact KKT (the law is convex in ``D``): on free axes
    ``D_i = (alpha_i K_i / (lambda p_i))^(1/(1+alpha_i))``; ``lambda`` makes the budget bind,
    or is 0 when ``sum_i p_i hi_i <= B``. ``coef``, ``alpha``, ``prices``, ``lower``,
    ``upper`` are (..., n), ``budget`` (...): all broadcast. Raises ``ValueError`` when a budget
    cannot buy the lower bounds. ``workers`` threads share the blocks (default: all cores).

    >>> sol = solve_additive([0.5, 0.2], [0.4, 0.1], [4.1, 0.02], 1000.0, upper=[100.0, np.inf])
    >>> sol.at_upper.tolist(), round(float(sol.spent), 6)
    ([True, False], 1000.0)
    """
    k = _as_float("coef", coef)
    al = _as_float("alpha", alpha)
    p = _as_float("prices", prices)
    bud = _as_float("budget", budget)
    lo, hi = validate_box(lower, upper)
    n = _check_axis_count(coef=k, alpha=al, prices=p, lower=lo, upper=hi)
    _validate_law(k, al)
    _validate_positive("prices", p)
    _validate_positive("budget", bud)
    lead = _lead_shape(n, bud, k, al, p, lo, hi)
    min_cost = np.sum(p * lo, axis=-1)
    short = np.broadcast_to(min_cost > bud * (1 + 1e-12), lead)
    if short.any():
        i = np.unravel_index(int(np.argmax(short)), short.shape)
        b_i = np.broadcast_to(bud, lead)[i]
        c_i = np.broadcast_to(min_cost, lead)[i]
        raise ValueError(
            f"budget {b_i:.6g} is too small to buy the lower bounds, which cost {c_i:.6g} "
            f"({int(short.sum())} problem(s) infeasible, first at index "
            f"{tuple(int(j) for j in i)})"
        )
    bexp = 1.0 / (1.0 + al)
    a = bexp * np.log(al * k / p)
    parts = (a, bexp, p, np.log(lo), np.log(hi), lo, hi)
    sizes, u, at_lo, at_hi, spent, saturated = _solve_batched(
        parts, np.log(bud), lead, n, True, workers
    )
    return Allocation(
        sizes=np.moveaxis(sizes, 0, -1),
        multiplier=np.where(saturated, 0.0, np.exp(-u)),
        spent=spent,
        at_lower=np.moveaxis(at_lo, 0, -1),
        at_upper=np.moveaxis(at_hi, 0, -1),
    )


def solve_product(
    coef: ArrayLike,
    alpha: ArrayLike,
    budget: ArrayLike,
    powers: ArrayLike = 1.0,
    unit_cost: ArrayLike = 1.0,
    lower: ArrayLike = 1.0,
    upper: ArrayLike = np.inf,
    *,
    workers: int | None = None,
) -> Allocation:
    """Minimise ``sum_i K_i D_i^(-alpha_i)`` s.t. ``c prod_i D_i^(m_i) <= C``, ``lo <= D <= hi``.

    A compute budget (FLOPs proportional to ``N * tokens``, tokens proportional to the data
    axes that scale them): in ``x = log D`` the constraint ``sum_i m_i x_i <= log(C/c)`` is
    linear and the law convex, so KKT is exact: ``x_i = log(alpha_i K_i / (mu m_i))/alpha_i``
    clipped. Axes with ``m_i = 0`` cost nothing and go to their (finite) upper bound. The
    ``multiplier`` is ``mu``, per unit of ``log C``.

    >>> sol = solve_product([1.0, 1.0], [0.5, 0.5], 1e4)
    >>> sol.sizes.round(6).tolist()
    [100.0, 100.0]
    """
    k = _as_float("coef", coef)
    al = _as_float("alpha", alpha)
    m = _as_float("powers", powers)
    c = _as_float("unit_cost", unit_cost)
    bud = _as_float("budget", budget)
    lo, hi = validate_box(lower, upper)
    n = _check_axis_count(coef=k, alpha=al, powers=m, lower=lo, upper=hi)
    _validate_law(k, al)
    _validate_positive("budget", bud)
    _validate_positive("unit_cost", c)
    if (~np.isfinite(m)).any() or (m < 0).any():
        raise ValueError("cost powers m_i must be finite and >= 0")
    if ((m == 0) & ~np.isfinite(hi)).any():
        raise ValueError("an axis with cost power 0 needs a finite upper bound (it costs nothing)")
    log_budget = np.log(bud) - np.log(c)
    lead = _lead_shape(n, log_budget, k, al, m, lo, hi)
    min_cost = np.sum(m * np.log(lo), axis=-1)
    short = np.broadcast_to(min_cost > log_budget + 1e-12, lead)
    if short.any():
        i = np.unravel_index(int(np.argmax(short)), short.shape)
        raise ValueError(
            f"compute budget {np.exp(np.broadcast_to(log_budget, lead)[i]):.6g} (in units of the "
            f"unit cost) is too small to buy the lower bounds, which need "
            f"{np.exp(np.broadcast_to(min_cost, lead)[i]):.6g} ({int(short.sum())} problem(s) "
            "infeasible)"
        )
    costly = m > 0
    llog, hlog = np.log(lo), np.log(hi)
    with np.errstate(divide="ignore"):
        a = np.where(costly, np.log(al * k / np.where(costly, m, 1.0)) / al, hlog)
    bexp = np.where(costly, 1.0 / al, 0.0)
    # A free axis (m = 0) sits at its upper bound: its clip range collapses to [log hi, log hi].
    parts = (a, bexp, m, np.where(costly, llog, hlog), hlog, np.where(costly, lo, hi), hi)
    sizes, u, at_lo, at_hi, log_spent, saturated = _solve_batched(
        parts, log_budget, lead, n, False, workers
    )
    at_lo &= np.moveaxis(np.broadcast_to(costly, (*lead, n)), -1, 0)
    return Allocation(
        sizes=np.moveaxis(sizes, 0, -1),
        multiplier=np.where(saturated, 0.0, np.exp(-u)),
        spent=np.exp(log_spent) * np.broadcast_to(c, lead),
        at_lower=np.moveaxis(at_lo, 0, -1),
        at_upper=np.moveaxis(at_hi, 0, -1),
    )


def switch_price_additive(
    coef: ArrayLike,
    alpha: ArrayLike,
    prices: ArrayLike,
    budget: ArrayLike,
    axis: int,
    lower: ArrayLike = 1.0,
    upper: ArrayLike = np.inf,
) -> Array:
    """The unit price of ``axis`` above which the optimum buys only its lower bound.

    At that price ``p*`` the floor ``lo_w`` is exactly optimal:
    ``m_w = alpha_w K_w lo_w^(-alpha_w-1) = lambda p*``, with every other axis at its KKT
    point for the same ``lambda`` and the budget spent, including ``p* lo_w = lo_w m_w / lambda``
    on the floor. That spend is one more term of the monotone budget equation in
    ``u = -log lambda``, so one clip-and-bisect solve gives ``p* = m_w / lambda`` exactly
    (the price of ``axis`` in ``prices`` is ignored). Shape: the leading dims.

    >>> p = switch_price_additive([0.05, 1.0], [0.4, 0.3], [9.0, 1.0], 1000.0, axis=0, lower=2.0)
    >>> sol = solve_additive([0.05, 1.0], [0.4, 0.3], [float(p) * 1.001, 1.0], 1000.0, lower=2.0)
    >>> bool(sol.at_lower[0]), bool(solve_additive([0.05, 1.0], [0.4, 0.3], [float(p) * 0.999, 1.0],
    ...                                           1000.0, lower=2.0).at_lower[0])
    (True, False)
    """
    k = _as_float("coef", coef)
    al = _as_float("alpha", alpha)
    pr = _as_float("prices", prices)
    bud = _as_float("budget", budget)
    lo, hi = validate_box(lower, upper)
    n = _check_axis_count(coef=k, alpha=al, prices=pr, lower=lo, upper=hi)
    _validate_law(k, al)
    _validate_positive("prices", pr)
    _validate_positive("budget", bud)
    if not 0 <= axis < n:
        raise ValueError(f"axis {axis} is not one of the {n} axes")
    lead = _lead_shape(n, bud, k, al, pr, lo, hi)
    full = (*lead, n)
    kk, aa, pp, ll, hh = (
        np.ascontiguousarray(np.broadcast_to(x, full).reshape(-1, n).T) for x in (k, al, pr, lo, hi)
    )
    bb = np.ascontiguousarray(np.broadcast_to(bud, lead).reshape(-1))
    others = np.arange(n) != axis
    if (np.sum(pp[others] * ll[others], axis=0) >= bb).any():
        raise ValueError("the budget cannot buy the other axes' lower bounds")
    m = aa[axis] * kk[axis] * ll[axis] ** (-aa[axis] - 1.0)
    bexp = 1.0 / (1.0 + aa)
    a = bexp * np.log(aa * kk / pp)
    llog, hlog = np.log(ll), np.log(hh)
    w = pp.copy()
    # The floor's spend lo_w m_w e^u as an unclipped pseudo-axis in row ``axis``.
    a[axis] = np.log(ll[axis] * m)
    bexp[axis] = 1.0
    w[axis] = 1.0
    llog[axis] = np.log(bb) - 700.0
    hlog[axis] = np.log(bb)
    u = _solve_rows(a, bexp, w, llog, hlog, np.log(bb), exponential=True)[0]
    return np.asarray((m * np.exp(u)).reshape(lead), dtype=float)


# --- local recipe exponents --------------------------------------------------------------


def local_exponents_additive(solution: Allocation, alpha: ArrayLike, prices: ArrayLike) -> Array:
    """``e_i = d log D_i / d log B`` at an additive-cost optimum, in closed form.

    .. math:: e_i = \\frac{(1+\\alpha_i)^{-1}}{\\sum_{j\\,\\mathrm{free}} s_j (1+\\alpha_j)^{-1}}

    on free axes (``s_j = p_j D_j / B`` the spend share), 0 on axes at a bound and everywhere
    the budget does not bind. ``sum_i s_i e_i = 1``: a 1% larger budget buys 1% more spend.

    >>> sol = solve_additive([1.0, 1.0], [0.5, 0.5], [1.0, 1.0], 200.0)
    >>> local_exponents_additive(sol, [0.5, 0.5], [1.0, 1.0]).round(9).tolist()
    [1.0, 1.0]
    """
    b = 1.0 / (1.0 + np.asarray(alpha, dtype=float))
    p = np.asarray(prices, dtype=float)
    free = solution.free & (solution.multiplier > 0)[..., None]
    share = p * solution.sizes / solution.spent[..., None]
    denom = np.sum(np.where(free, share * b, 0.0), axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where(free, b / denom, 0.0)
    return np.asarray(e, dtype=float)


def local_exponents_product(
    solution: Allocation, alpha: ArrayLike, powers: ArrayLike = 1.0
) -> Array:
    """``e_i = d log D_i / d log C`` at a product-cost optimum.

    .. math:: e_i = \\frac{\\alpha_i^{-1}}{\\sum_{j\\,\\mathrm{free}} m_j \\alpha_j^{-1}}

    (PAPER.md section 6: with all ``m = 1`` and no bound active, ``alpha_i^-1 / sum_j alpha_j^-1``).

    >>> sol = solve_product([1.0, 1.0], [0.5, 0.25], 1e4)
    >>> local_exponents_product(sol, [0.5, 0.25]).round(9).tolist()
    [0.333333333, 0.666666667]
    """
    al = np.asarray(alpha, dtype=float)
    m = np.broadcast_to(np.asarray(powers, dtype=float), solution.sizes.shape)
    free = solution.free & (solution.multiplier > 0)[..., None] & (m > 0)
    denom = np.sum(np.where(free, m / al, 0.0), axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where(free, (1.0 / al) / denom, 0.0)
    return np.asarray(e, dtype=float)


def local_exponents_central(solve_at: Callable[[Array], Allocation], budgets: ArrayLike) -> Array:
    """``e_i = d log D_i / d log B`` by central differences, step ``h = 1e-4`` in ``log B``,
    of the allocation ``solve_at(B)``: for the laws and costs the closed forms do not cover
    (the interaction, the linearised convention, laws of other forms).

    .. math:: e_i \\approx \\frac{\\log D_i(B e^h) - \\log D_i(B e^{-h})}{2h}

    >>> def solve_at(b):
    ...     return solve_product([1.0, 1.0], [0.5, 0.25], b)
    >>> local_exponents_central(solve_at, 1e4).round(6).tolist()
    [0.333333, 0.666667]
    """
    b = np.asarray(budgets, dtype=float)
    h = 1e-4
    up, down = solve_at(b * np.exp(h)), solve_at(b * np.exp(-h))
    return np.asarray((np.log(up.sizes) - np.log(down.sizes)) / (2 * h), dtype=float)


# --- KKT residuals -------------------------------------------------------------------------


def kkt_residuals(
    solution: Allocation,
    law: PowerLaw,
    prices: ArrayLike,
    budget: ArrayLike,
    lower: ArrayLike = 1.0,
    upper: ArrayLike = np.inf,
) -> KKTResiduals:
    """Relative KKT residuals of an additive-cost allocation under ``law`` (see
    :class:`KKTResiduals`); any law, so it checks :func:`solve_interaction` too.

    >>> sol = solve_additive([1.0, 2.0], [0.3, 0.2], [1.0, 1.0], 100.0)
    >>> law = PowerLaw(np.array([1.0, 2.0]), np.array([0.3, 0.2]))
    >>> kkt_residuals(sol, law, 1.0, 100.0).max() < 1e-9
    True
    """
    return kkt_residuals_at(
        solution, law, np.asarray(prices, dtype=float), solution.spent, budget, lower, upper
    )


def kkt_residuals_at(
    solution: Allocation,
    law: PowerLaw,
    price: ArrayLike,
    spent: ArrayLike,
    budget: ArrayLike,
    lower: ArrayLike = 1.0,
    upper: ArrayLike = np.inf,
) -> KKTResiduals:
    """Relative KKT residuals (:class:`KKTResiduals`) of ``solution`` for any cost, given its
    marginal price per axis at the solution, ``dPhi/dD_i`` (..., n), and what it spends: the
    unit prices for a linear cost (:func:`kkt_residuals`), the gradient of a posynomial
    (:func:`bayesscale.core.geometric.kkt_residuals_posynomial`)."""
    d = solution.sizes
    p = np.asarray(price, dtype=float)
    bud = np.asarray(budget, dtype=float)
    out = np.asarray(spent, dtype=float)
    lam = solution.multiplier[..., None]
    g = -law.gradient(d)
    lo = np.broadcast_to(np.asarray(lower, dtype=float), d.shape)
    hi = np.broadcast_to(np.asarray(upper, dtype=float), d.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = g / (lam * p)
    stat = np.where(
        lam > 0,
        np.where(
            solution.free,
            np.abs(ratio - 1.0),
            np.where(solution.at_lower, np.maximum(ratio - 1.0, 0.0), np.maximum(1.0 - ratio, 0.0)),
        ),
        np.where(solution.at_upper, 0.0, 1.0),  # lambda = 0 is optimal only with all at upper
    )
    comp = np.where(solution.multiplier > 0, np.abs(bud - out) / bud, 0.0)
    over = np.maximum(out - bud, 0.0) / bud
    viol = np.maximum(
        np.maximum(lo - d, 0.0) / lo, np.where(np.isfinite(hi), np.maximum(d - hi, 0.0) / hi, 0.0)
    )
    return KKTResiduals(
        stationarity=np.max(stat, axis=-1),
        complementarity=np.asarray(comp, dtype=float),
        budget=np.asarray(over, dtype=float),
        bounds=np.max(viol, axis=-1),
    )


# --- the general solver --------------------------------------------------------------------


def solve_general(
    loss: Callable[[Array], float],
    cost: Callable[[Array], float],
    budget: float,
    lower: ArrayLike,
    upper: ArrayLike,
    x0: ArrayLike | None = None,
    *,
    loss_grad: Callable[[Array], Array] | None = None,
    cost_grad: Callable[[Array], Array] | None = None,
    tol: float = 1e-14,
) -> Array:
    """Minimise any ``loss(D)`` s.t. ``cost(D) <= budget``, ``lower <= D <= upper``: one problem.

    SLSQP in ``y = log D`` (scale-free); gradients in ``D`` are chained for you. Use it for user
    cost functions and for laws the vectorised solvers do not cover; it is a local method, so
    give a good ``x0`` (default: the geometric middle of the box, or of ``[lower, 2 lower]``
    on unbounded axes). Returns the sizes ``D`` (n,).

    >>> d = solve_general(lambda d: float(np.sum(d ** -0.5)), lambda d: float(d.sum()), 200.0,
    ...                   [1.0, 1.0], [np.inf, np.inf], x0=[10.0, 50.0])
    >>> d.round(4).tolist()
    [100.0, 100.0]
    """
    lo, hi = validate_box(lower, upper)
    lo = np.atleast_1d(lo)
    hi = np.broadcast_to(hi, lo.shape)
    if not budget > 0:
        raise ValueError(f"budget must be > 0, got {budget}")
    if cost(lo) > budget * (1 + 1e-12):
        raise ValueError(
            f"budget {budget:.6g} is too small to buy the lower bounds (cost {cost(lo):.6g})"
        )
    if x0 is None:
        start = np.where(np.isfinite(hi), np.sqrt(lo * hi), 2.0 * lo)
    else:
        start = np.clip(np.asarray(x0, dtype=float), lo, hi)
    scale = abs(loss(start)) or 1.0

    def f(y: Array) -> float:
        return loss(np.exp(y)) / scale

    def c(y: Array) -> float:
        return 1.0 - cost(np.exp(y)) / budget

    f_jac = None
    c_jac = None
    if loss_grad is not None:
        lg = loss_grad

        def f_jac(y: Array) -> Array:
            d = np.exp(y)
            return np.asarray(lg(d), dtype=float) * d / scale

    if cost_grad is not None:
        cg = cost_grad

        def c_jac(y: Array) -> Array:
            d = np.exp(y)
            return -np.asarray(cg(d), dtype=float) * d / budget

    bounds = [
        (float(np.log(a)), float(np.log(b)) if np.isfinite(b) else None)
        for a, b in zip(lo, hi, strict=True)
    ]
    from scipy import optimize  # only here: a fallback solver; SciPy's import is 0.5 s

    res = optimize.minimize(
        f,
        np.log(start),
        jac=f_jac,
        method="SLSQP",
        bounds=bounds,
        constraints=[{"type": "ineq", "fun": c, "jac": c_jac}],
        options={"ftol": tol, "maxiter": 1000},
    )
    d = np.asarray(np.clip(np.exp(res.x), lo, hi), dtype=float)
    over = cost(d) / budget - 1.0
    # SLSQP status 8 ("positive directional derivative in linesearch") near a feasible point
    # means no descent is left at machine precision; accept it when the point is feasible to
    # 1e-6 and pull it back onto the budget below.
    if not (res.success or (res.status == 8 and over <= 1e-6)):
        raise ValueError(f"the general solver did not converge: {res.message}")
    if over > 0:
        d = _pull_back(d, lo, cost, budget)
    return d


def _pull_back(d: Array, lo: Array, cost: Callable[[Array], float], budget: float) -> Array:
    """Shrink ``d`` geometrically toward ``lo`` until ``cost(d) <= budget`` (bisection)."""
    a, b = 0.0, 1.0
    for _ in range(60):
        t = 0.5 * (a + b)
        if cost(lo ** (1 - t) * d**t) <= budget:
            a = t
        else:
            b = t
    return np.asarray(lo ** (1 - a) * d**a, dtype=float)


def solve_interaction(
    law: PowerLaw,
    prices: ArrayLike,
    budget: ArrayLike,
    lower: ArrayLike = 1.0,
    upper: ArrayLike = np.inf,
    *,
    max_rounds: int = 6,
) -> Allocation:
    """Additive-cost optimum of a law with the interaction ``-gamma (D_a D_b)^(-beta)``.

    Batched Newton on the KKT system in ``(y = log D, nu = lambda B)``:
    ``dL/dy_i + nu s_i = 0`` on free axes (``s_i = p_i D_i / B``), ``sum_i s_i = 1``, started at
    the separable optimum (interaction dropped) and its active set; axes that leave their box
    or bounds whose multiplier has the wrong sign swap status and Newton reruns. Problems that
    still fail are solved one by one with :func:`solve_general`. Without an interaction this
    is :func:`solve_additive`.

    >>> law = PowerLaw(np.array([1.0, 1.0]), np.array([0.4, 0.3]), 0.5, 0.05, 0.2, (0, 1))
    >>> sol = solve_interaction(law, [1.0, 1.0], 100.0)
    >>> kkt_residuals(sol, law, [1.0, 1.0], 100.0).max() < 1e-8
    True
    """
    coef = np.asarray(law.coef, dtype=float)
    alpha = np.asarray(law.alpha, dtype=float)
    warm = solve_additive(coef, alpha, prices, budget, lower, upper)
    if law.pair is None or law.gamma is None or law.beta is None:
        return warm
    lo, hi = validate_box(lower, upper)
    p = _as_float("prices", prices)
    bud = _as_float("budget", budget)
    gamma = _as_float("gamma", law.gamma)
    beta = _as_float("beta", law.beta)
    if (gamma < 0).any() or (beta <= 0).any():
        raise ValueError("interaction needs gamma >= 0 and beta > 0")
    lead = warm.multiplier.shape
    n = warm.sizes.shape[-1]
    rows = int(np.prod(lead, dtype=int))
    # Axis-first (n, rows) working arrays: sums over axes are fast.
    k2, a2, p2, lo2, hi2 = (
        np.ascontiguousarray(np.broadcast_to(x, (*lead, n)).reshape(rows, n).T)
        for x in (coef, alpha, p, lo, hi)
    )
    b2, g2, be2 = (
        np.ascontiguousarray(np.broadcast_to(x, lead)).reshape(-1) for x in (bud, gamma, beta)
    )
    y = np.ascontiguousarray(np.log(warm.sizes.reshape(rows, n)).T)
    fixed_lo = np.ascontiguousarray(warm.at_lower.reshape(rows, n).T)
    fixed_hi = np.ascontiguousarray(warm.at_upper.reshape(rows, n).T)
    saturated = warm.multiplier.reshape(-1) == 0
    ia, ib = law.pair
    nu = warm.multiplier.reshape(-1) * b2
    ok = np.zeros(rows, dtype=bool)
    llo, lhi = np.log(lo2), np.log(hi2)
    for c0 in range(0, rows, 4 * _CHUNK_ROWS):  # blocks of columns bound the memory
        cols = slice(c0, min(c0 + 4 * _CHUNK_ROWS, rows))
        law_c = (k2[:, cols], a2[:, cols], p2[:, cols], b2[cols], g2[cols], be2[cols])
        y[:, cols], nu[cols], fixed_lo[:, cols], fixed_hi[:, cols], ok[cols] = _active_set(
            y[:, cols],
            nu[cols],
            law_c,
            (ia, ib),
            fixed_lo[:, cols],
            fixed_hi[:, cols],
            llo[:, cols],
            lhi[:, cols],
            max_rounds,
        )
    k2, a2, p2, lo2, hi2, y, fixed_lo, fixed_hi = (
        np.ascontiguousarray(x.T) for x in (k2, a2, p2, lo2, hi2, y, fixed_lo, fixed_hi)
    )
    sizes = np.clip(np.exp(y), lo2, hi2)
    at_lo, at_hi = fixed_lo.copy(), fixed_hi.copy()
    lam = nu / b2
    _solve_rows_one_by_one(
        np.flatnonzero(~ok & ~saturated),
        law.pair,
        (k2, a2, p2, b2, g2, be2, lo2, hi2),
        sizes,
        at_lo,
        at_hi,
        lam,
    )
    sizes[saturated] = hi2[saturated]
    at_hi[saturated] = True
    at_lo[saturated] = False
    lam[saturated] = 0.0
    spent = np.sum(p2 * sizes, axis=-1)
    return Allocation(
        sizes=sizes.reshape(*lead, n),
        multiplier=lam.reshape(lead),
        spent=spent.reshape(lead),
        at_lower=at_lo.reshape(*lead, n),
        at_upper=at_hi.reshape(*lead, n),
    )


def _solve_rows_one_by_one(
    failed: NDArray[np.intp],
    pair: tuple[int, int],
    problem: tuple[Array, Array, Array, Array, Array, Array, Array, Array],
    sizes: Array,
    at_lo: BoolArray,
    at_hi: BoolArray,
    lam: Array,
) -> None:
    """The rows (problems) ``failed`` that :func:`solve_interaction`'s batched Newton left
    unsolved, each by :func:`solve_general`: writes their ``sizes``, active bounds and shadow
    price ``lam`` in place. ``problem``: the rows' ``(coef, alpha, prices, budget, gamma, beta,
    lower, upper)``, rows first."""
    k2, a2, p2, b2, g2, be2, lo2, hi2 = problem
    for i in failed:
        row = PowerLaw(k2[i], a2[i], 0.0, g2[i], be2[i], pair)
        loss_fn, cost_fn, cost_grad = _row_functions(row, p2[i])
        d = solve_general(
            loss_fn,
            cost_fn,
            float(b2[i]),
            lo2[i],
            hi2[i],
            x0=sizes[i],
            loss_grad=row.gradient,
            cost_grad=cost_grad,
        )
        sizes[i] = d
        at_lo[i] = d <= lo2[i] * (1 + 1e-9)
        at_hi[i] = d >= hi2[i] * (1 - 1e-9)
        g = -row.gradient(d)
        free_i = ~(at_lo[i] | at_hi[i])
        ratio = g / p2[i]
        lam[i] = float(np.mean(ratio[free_i])) if free_i.any() else float(np.min(ratio))


def _active_set(
    y: Array,
    nu: Array,
    law: tuple[Array, Array, Array, Array, Array, Array],
    pair: tuple[int, int],
    fixed_lo: BoolArray,
    fixed_hi: BoolArray,
    llo: Array,
    lhi: Array,
    max_rounds: int,
) -> tuple[Array, Array, BoolArray, BoolArray, BoolArray]:
    """Newton with the active set held, then swap the axes whose bound multiplier has the wrong
    sign or that left their box; repeat. Returns ``y, nu``, the active sets and which columns
    satisfy every KKT condition."""
    k, a, p, b, g, be = law
    ia, ib = pair
    ok = np.zeros(y.shape[1], dtype=bool)
    for _ in range(max_rounds):
        y, nu, conv = _newton_kkt(y, nu, law, pair, fixed_lo, fixed_hi, llo, lhi)
        grad = _grad_y(y, k, a, g, be, ia, ib)
        lag = grad + nu * (p * np.exp(y) / b)  # dLagrangian/dy
        scale = 1e-10 * np.abs(grad).max(axis=0)
        low_bad = fixed_lo & (lag < -scale)
        high_bad = fixed_hi & (lag > scale)
        free = ~(fixed_lo | fixed_hi)
        out_lo = free & (y < llo - 1e-12)
        out_hi = free & (y > lhi + 1e-12)
        ok = conv & ~(low_bad | high_bad | out_lo | out_hi).any(axis=0) & (nu > 0)
        if ok.all():
            break
        fixed_lo = (fixed_lo & ~low_bad) | out_lo
        fixed_hi = (fixed_hi & ~high_bad) | out_hi
        y = np.clip(y, llo, lhi)
    return y, nu, fixed_lo, fixed_hi, ok


def _row_functions(
    row: PowerLaw, prices: Array
) -> tuple[Callable[[Array], float], Callable[[Array], float], Callable[[Array], Array]]:
    """Loss, linear cost and its gradient of one problem, for :func:`solve_general`."""

    def loss(x: Array) -> float:
        return float(row.loss(x))

    def cost(x: Array) -> float:
        return float(np.dot(prices, x))

    def cost_grad(x: Array) -> Array:
        return np.asarray(prices, dtype=float)

    return loss, cost, cost_grad


def _grad_y(y: Array, k: Array, a: Array, g: Array, be: Array, ia: int, ib: int) -> Array:
    """``dL/dy`` (n, rows) for the interaction law, ``y = log D`` (n, rows)."""
    grad = -a * k * np.exp(-a * y)
    z = g * be * np.exp(-be * (y[ia] + y[ib]))
    grad[ia] += z
    grad[ib] += z
    return np.asarray(grad, dtype=float)


def _newton_kkt(
    y: Array,
    nu: Array,
    law: tuple[Array, Array, Array, Array, Array, Array],
    pair: tuple[int, int],
    fixed_lo: BoolArray,
    fixed_hi: BoolArray,
    llo: Array,
    lhi: Array,
    iters: int = 60,
) -> tuple[Array, Array, BoolArray]:
    """Damped Newton on the KKT equations with the active set held fixed; (n, rows) arrays.

    The Hessian of the Lagrangian in ``y`` is ``diag(h) - q v v^T`` (``v`` the pair's
    indicator, ``q = beta^2 gamma (D_a D_b)^-beta``), so each step is a bordered solve in closed
    form by Sherman-Morrison; rows where it is not positive definite are left unconverged.
    """
    ia, ib = pair
    fixed = fixed_lo | fixed_hi
    y = np.where(fixed_lo, llo, np.where(fixed_hi, lhi, y))
    rows = y.shape[1]
    y_out, nu_out = y.copy(), nu.copy()
    norm_out = np.full(rows, np.inf)
    healthy_out = np.ones(rows, dtype=bool)
    idx = np.arange(rows)
    k, a, p, b, g, be = law
    free = ~fixed

    def residual(yy: Array, vv: Array) -> tuple[Array, Array, Array]:
        s = p * np.exp(yy) / b
        grad = _grad_y(yy, k, a, g, be, ia, ib)
        stat = np.where(free, grad + vv * s, 0.0)
        rn = s.sum(axis=0) - 1.0
        norm = np.maximum(np.abs(stat).max(axis=0), np.abs(rn))
        return stat, rn, norm

    stat, rn, norm = residual(y, nu)
    healthy = np.ones(rows, dtype=bool)
    for _ in range(iters):
        done = norm < _KKT_TOL
        if 2 * np.count_nonzero(done) > done.size:  # park converged rows, iterate the rest
            sel = idx[done]
            y_out[:, sel], nu_out[sel], norm_out[sel], healthy_out[sel] = (
                y[:, done],
                nu[done],
                norm[done],
                healthy[done],
            )
            keep = ~done
            idx, y, nu, stat, rn, norm, healthy, free = (
                idx[keep],
                y[:, keep],
                nu[keep],
                stat[:, keep],
                rn[keep],
                norm[keep],
                healthy[keep],
                free[:, keep],
            )
            k, a, p, b, g, be = (x[..., keep] for x in (k, a, p, b, g, be))
        if idx.size == 0 or np.all(norm < _KKT_TOL):
            break
        s = p * np.exp(y) / b
        h = a * a * k * np.exp(-a * y) + nu * s
        q = be * be * g * np.exp(-be * (y[ia] + y[ib]))
        with np.errstate(divide="ignore", invalid="ignore"):
            inv_h = np.where(free, 1.0 / h, 0.0)
        sf = np.where(free, s, 0.0)
        c = inv_h[ia] + inv_h[ib]
        denom = 1.0 - q * c
        healthy &= (denom > 0) & (h > 0).all(axis=0)
        coeff = np.where(denom > 0, q / denom, 0.0)

        def h_solve(r: Array, inv_h: Array = inv_h, coeff: Array = coeff) -> Array:
            x = inv_h * r
            corr = coeff * (x[ia] + x[ib])
            x[ia] += inv_h[ia] * corr
            x[ib] += inv_h[ib] * corr
            return np.asarray(x, dtype=float)

        hr = h_solve(stat)
        hs = h_solve(sf)
        with np.errstate(divide="ignore", invalid="ignore"):
            dnu = (rn - (sf * hr).sum(axis=0)) / (sf * hs).sum(axis=0)
        dnu = np.where(np.isfinite(dnu), dnu, 0.0)
        dy = -(hr + hs * dnu)
        t = np.minimum(1.0, 2.0 / np.maximum(np.abs(dy).max(axis=0), 1e-300))
        for _ in range(30):
            with np.errstate(over="ignore", invalid="ignore"):
                trial = residual(y + t * dy, nu + t * dnu)
            good = (trial[2] < norm) | (norm < _KKT_TOL)
            if good.all():
                break
            t = np.where(good, t, 0.5 * t)
        y, nu = y + t * dy, nu + t * dnu
        stat, rn, norm = trial
    y_out[:, idx], nu_out[idx], norm_out[idx], healthy_out[idx] = y, nu, norm, healthy
    return y_out, nu_out, (norm_out < 1e-10) & healthy_out
