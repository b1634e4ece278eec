"""The budget recipe under uncertainty: the allocator propagated through a law fit's posterior.

For every posterior draw ``d`` and setting, the law in raw counts is

.. math::

    L_d(D) = L_{\\infty,d} + E_d (N/N_\\mathrm{ref})^{-\\alpha_N}
             + \\sum_i K_{d,i} D_i^{-\\alpha_{d,i}} - \\gamma_d (D_a D_b)^{-\\beta_d},
    \\qquad K_{d,i} = A_{d,i} D_{\\mathrm{ref},i}^{\\alpha_{d,i}},

and success is ``p = exp(-L)``. Money buys *purchased* units ``u_i`` at unit price ``c_i``;
the law sees effective units ``D_i = kappa_i u_i`` (``kappa`` the discount of synthetic data,
1 for real data), so the effective price is ``c_i / kappa_i``. :func:`recipe` returns

* the optimal allocation of every draw (:mod:`bayesscale.allocate`, exact KKT), hence credible
  intervals on the allocation itself, the success it buys, and the local recipe exponents
  ``e_i = d log D_i / d log B`` at each budget;
* the single decision that maximises posterior expected success ``E_d[p_d(D)]``, and the
  distribution of success it yields;
* comparisons at equal budget against a trajectory-heavy and a Chinchilla-style allocation,
  and the budget multiplier each would need to match the decision;
* the regime switch of an axis (for a world axis: the price per world above which buying
  more than the minimum number of worlds is no longer worth it).

Example
-------
>>> from bayesscale.recipe import synthetic_fit
>>> fit = synthetic_fit(draws=50, spread=0.0)
>>> ds = recipe(fit, [1e5])
>>> sorted(ds.sizes)
['axis', 'baseline', 'budget', 'chain', 'draw', 'setting']
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from bayesscale import allocate, laws, names
from bayesscale.extrapolation import WARN_FACTOR, SweptRange, check_threshold, outside
from bayesscale.prices import Prices, check_kappa, default_prices
from bayesscale.spec import parse_spec

Array = NDArray[np.float64]
COST_ADDITIVE = "additive linear: sum_i (c_i / kappa_i) D_i"
DEFAULT_PROB = 0.9
_MULTIPLIER_RANGE = (1e-3, 1e6)


class RecipeError(ValueError):
    """Inputs that the recipe cannot use (missing variables, unknown axes, bad bounds)."""


# --- reading a fit ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LawDraws:
    """The law's parameters per posterior sample (chain x draw flattened to ``S``).

    ``coef``, ``alpha``: (S, G, n); ``floor``: (S, G) — the loss floor plus the size term at the
    setting's model size; ``gamma`` (S, G) and ``beta`` (S, 1) with ``pair`` the interaction's
    axis positions, or ``None``.
    """

    axes: tuple[str, ...]
    settings: tuple[str, ...]
    chain: Array
    draw: Array
    coef: Array
    alpha: Array
    floor: Array
    reference: Array
    gamma: Array | None = None
    beta: Array | None = None
    pair: tuple[int, int] | None = None

    @property
    def samples(self) -> int:
        return int(self.coef.shape[0])

    def law(self) -> allocate.PowerLaw:
        """The (S, G) batch of laws."""
        return allocate.PowerLaw(
            self.coef, self.alpha, self.floor, self.gamma, self.beta, self.pair
        )


def _stack(da: xr.DataArray, chains: Sequence[int], draws: Sequence[int]) -> Array:
    da = da.sel({names.CHAIN_DIM: list(chains), names.DRAW_DIM: list(draws)})
    lead = (names.CHAIN_DIM, names.DRAW_DIM)
    rest = [d for d in (names.SETTING_DIM, names.AXIS_DIM) if d in da.dims]
    other = set(da.dims) - set(lead) - set(rest)
    if other:
        raise RecipeError(f"{da.name}: unexpected dims {sorted(map(str, other))}")
    arr = da.transpose(*lead, *rest).to_numpy().astype(float)
    return arr.reshape(-1, *arr.shape[2:])


def law_draws(
    fit: xr.DataTree,
    settings: Sequence[str] | None = None,
    max_draws: int | None = None,
    size_axis: bool = False,
) -> LawDraws:
    """Extract per-draw law parameters from a law fit (see the fit contract in
    ``docs/recipe.md``). ``max_draws`` thins each chain evenly to at most that many draws.

    The size term ``E (N/N_ref)^(-alpha_N)`` is a constant at each setting's model size; with
    ``size_axis`` it becomes one more axis, ``params_b`` (billions of parameters, coefficient
    ``E N_ref^alpha_N``, reference ``N_ref``), for the recipe to choose."""
    if "posterior" not in fit.children:
        raise RecipeError("the fit has no posterior group")
    post = fit["posterior"].to_dataset()
    const = fit["constant_data"].to_dataset() if "constant_data" in fit.children else xr.Dataset()
    for var in (names.ALPHA, names.AMPLITUDE, names.LOSS_FLOOR):
        if var not in post:
            raise RecipeError(f"the fit's posterior has no {var!r}")
    if names.REFERENCE_SCALE not in const:
        raise RecipeError(f"the fit's constant_data has no {names.REFERENCE_SCALE!r}")
    axes = tuple(str(a) for a in post[names.ALPHA][names.AXIS_DIM].to_numpy())
    all_settings = tuple(str(s) for s in post[names.ALPHA][names.SETTING_DIM].to_numpy())
    chosen = tuple(settings) if settings else all_settings
    missing = [s for s in chosen if s not in all_settings]
    if missing:
        raise RecipeError(
            f"setting(s) {missing} not in the fit; its settings: {list(all_settings)}"
        )
    chains = [int(c) for c in post[names.CHAIN_DIM].to_numpy()]
    draws = [int(d) for d in post[names.DRAW_DIM].to_numpy()]
    if max_draws is not None and max_draws < len(draws):
        if max_draws < 1:
            raise RecipeError(f"max_draws must be >= 1, got {max_draws}")
        keep = np.unique(np.linspace(0, len(draws) - 1, max_draws).round().astype(int))
        draws = [draws[i] for i in keep]
    post = post.sel({names.SETTING_DIM: list(chosen)})
    alpha = _stack(post[names.ALPHA].transpose(..., names.AXIS_DIM), chains, draws)
    amp = _stack(post[names.AMPLITUDE], chains, draws)
    reference = (
        const[names.REFERENCE_SCALE].sel({names.AXIS_DIM: list(axes)}).to_numpy().astype(float)
    )
    coef = laws.amplitude_at_one(amp, alpha, reference)
    floor = _stack(post[names.LOSS_FLOOR], chains, draws)
    if names.SIZE_AMPLITUDE in post and names.ALPHA_SIZE in post:
        if names.PARAMS_B not in const or names.SIZE_REFERENCE not in const:
            raise RecipeError(
                f"the fit has a size term but constant_data lacks {names.PARAMS_B!r} or "
                f"{names.SIZE_REFERENCE!r}"
            )
        e = _stack(post[names.SIZE_AMPLITUDE], chains, draws)
        a_n = _stack(post[names.ALPHA_SIZE], chains, draws)
        n_ref = float(const[names.SIZE_REFERENCE])
        if size_axis:
            g = coef.shape[1]
            k_n = laws.amplitude_at_one(e, a_n, n_ref)
            coef = np.concatenate([coef, np.repeat(k_n[:, None, None], g, axis=1)], axis=-1)
            alpha = np.concatenate([alpha, np.repeat(a_n[:, None, None], g, axis=1)], axis=-1)
            reference = np.append(reference, n_ref)
            axes = (*axes, names.PARAMS_B)
        else:
            size = const[names.PARAMS_B].sel({names.SETTING_DIM: list(chosen)})
            floor = floor + laws.size_term(
                size.to_numpy().astype(float)[None, :], e[:, None], a_n[:, None], n_ref
            )
    elif size_axis:
        raise RecipeError(
            f"a price for {names.PARAMS_B!r} asks the recipe to choose the model size, but the "
            "fit has no size term"
        )
    gamma = beta = None
    pair = None
    if names.INTERACTION_GAMMA in post and names.INTERACTION_BETA in post:
        spec_text = fit.attrs.get(names.ATTR_SPEC)
        if not spec_text:
            raise RecipeError(
                f"the fit has an interaction term but no {names.ATTR_SPEC!r} attribute"
            )
        spec = parse_spec(str(spec_text), source="fit attribute")
        if spec.interaction is None:
            raise RecipeError(
                "the fit has interaction parameters but its spec declares no interaction"
            )
        pair = (axes.index(spec.interaction.axes[0]), axes.index(spec.interaction.axes[1]))
        gamma = _stack(post[names.INTERACTION_GAMMA], chains, draws)
        beta = _stack(post[names.INTERACTION_BETA], chains, draws)[:, None]
    n_chain, n_draw = len(chains), len(draws)
    return LawDraws(
        axes=axes,
        settings=chosen,
        chain=np.repeat(chains, n_draw).astype(float),
        draw=np.tile(draws, n_chain).astype(float),
        coef=coef,
        alpha=alpha,
        floor=floor,
        reference=reference,
        gamma=gamma,
        beta=beta,
        pair=pair,
    )


def kappa_draws(
    axes: Sequence[str],
    samples: int,
    pricing: xr.DataTree | None = None,
    kappa: Mapping[str, float] | None = None,
    seed: int = 0,
) -> tuple[Array, str]:
    """Discounts per sample and axis (S, n), and a description of where they came from.

    User values win over a pricing fit's ``kappa0_axis`` posterior; axes neither names get 1
    (real data). Pricing-fit draws are paired with law-fit draws by a seeded random
    permutation (independent posteriors), cycled when there are fewer of them.
    """
    out = np.ones((samples, len(axes)))
    sources = []
    if pricing is not None:
        if "posterior" not in pricing.children or names.KAPPA0_AXIS not in pricing["posterior"]:
            raise RecipeError(f"the pricing fit's posterior has no {names.KAPPA0_AXIS!r}")
        da = pricing["posterior"][names.KAPPA0_AXIS]
        da = da.stack(_s=(names.CHAIN_DIM, names.DRAW_DIM)).transpose("_s", names.PRICED_AXIS_DIM)
        priced = [str(a) for a in da[names.PRICED_AXIS_DIM].to_numpy()]
        vals = da.to_numpy().astype(float)
        rng = np.random.default_rng(seed)
        pick = rng.permutation(np.resize(np.arange(vals.shape[0]), samples))
        for j, axis in enumerate(priced):
            if axis in axes:
                col = vals[pick, j]
                if (~np.isfinite(col) | (col <= 0)).any():
                    raise RecipeError(
                        f"pricing fit: {names.KAPPA0_AXIS}[{axis}] has values <= 0 or NaN"
                    )
                out[:, list(axes).index(axis)] = col
                sources.append(f"{axis}: pricing fit")
    if kappa:
        checked = check_kappa(kappa)
        unknown = sorted(set(checked) - set(axes))
        if unknown:
            raise RecipeError(
                f"kappa names axis/axes {unknown} that the fit does not have: {list(axes)}"
            )
        for axis, value in checked.items():
            out[:, list(axes).index(axis)] = value
            sources.append(f"{axis}: user {value:g}")
    return out, "; ".join(sources) or "none (real data, kappa = 1)"


def bounds_arrays(
    axes: Sequence[str], bounds: Mapping[str, tuple[float | None, float | None]] | None
) -> tuple[Array, Array]:
    """Box bounds (purchased units) per axis: default ``[1, inf)``; validated.

    >>> bounds_arrays(["env", "task"], {"env": (1, 384)})[1].tolist()
    [384.0, inf]
    """
    lo = np.ones(len(axes))
    hi = np.full(len(axes), np.inf)
    for axis, (a, b) in (bounds or {}).items():
        if axis not in axes:
            raise RecipeError(f"bounds name axis {axis!r} that the fit does not have: {list(axes)}")
        i = list(axes).index(axis)
        if a is not None:
            lo[i] = float(a)
        if b is not None:
            hi[i] = float(b)
        if not lo[i] > 0:
            raise RecipeError(f"bounds {axis}: lower bound must be > 0, got {lo[i]:g}")
        if lo[i] > hi[i]:
            raise RecipeError(f"bounds {axis}: lower {lo[i]:g} > upper {hi[i]:g}")
    return lo, hi


def bounds_within_data(
    fit: xr.DataTree,
    factor: float,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    settings: Sequence[str] | None = None,
    size_axis: bool = False,
) -> dict[str, tuple[float | None, float | None]]:
    """``bounds`` with every axis capped at ``factor`` times its largest swept value (the
    model size too, with ``size_axis``: when the recipe chooses it).

    The cap is in purchased units, at the largest value of the axis in the rows of the chosen
    settings (the widest of them, where their swept ranges differ: run one setting at a time for
    each one's own). A user's tighter upper bound is kept. With a discount ``kappa < 1`` the law
    sees ``kappa`` times the purchase, which stays inside the cap.

    >>> fit = synthetic_fit(draws=5, spread=0.0)
    >>> bounds_within_data(fit, 4.0, {"env": (2, None)})["env"]
    (2, 1024.0)
    """
    if not (np.isfinite(factor) and factor >= 1):
        raise RecipeError(f"within_data must be a number >= 1, got {factor:g}")
    swept = SweptRange.from_fit(fit)
    if swept is None:
        raise RecipeError(
            "the fit stores no swept range (it was written by an older version): refit it to "
            "keep the recipe within the data"
        )
    chosen = list(settings) if settings else list(swept.settings)
    unknown = [s for s in chosen if s not in swept.settings]
    if unknown:
        raise RecipeError(f"setting(s) {unknown} not in the fit")
    rows = [swept.settings.index(s) for s in chosen]
    out = dict(bounds or {})
    for i, axis in enumerate(swept.axes):
        if axis == names.PARAMS_B and not size_axis:
            continue
        cap = factor * float(np.nanmax(swept.hi[rows, i]))
        lo, hi = out.get(axis, (None, None))
        out[axis] = (lo, cap if hi is None else min(float(hi), cap))
    return out


def add_data_extent(ds: xr.Dataset, fit: xr.DataTree) -> xr.Dataset:
    """Add to a recipe result how far it lies beyond the data, and what its units buy.

    * ``swept_min`` / ``swept_max`` (setting, axis): the fit's swept range (absent for fits
      written before it was stored);
    * ``extrapolation`` per draw: the optimum the law sees (effective units) over the largest
      swept value, ``D*_i / D_max,i``; ``decision_extrapolation`` (setting, budget, axis): the
      median over draws of the decision's ``kappa_i x_i / D_max,i``;
    * ``trajectories`` per draw (and ``decision_trajectories``): purchased tasks times
      rollouts per task, the rollouts one pass over the tasks generates, where the fit has
      both axes;
    * ``units_json``: what one unit of each axis is.
    """
    axes = [str(a) for a in ds[names.AXIS_DIM].to_numpy()]
    settings = [str(s) for s in ds[names.SETTING_DIM].to_numpy()]
    columns = _axis_columns(fit, axes)
    ds.attrs["units_json"] = json.dumps(
        {a: names.UNIT_LONG.get(c, f"units of {c}") for a, c in columns.items()}
    )
    ds.attrs["units_short_json"] = json.dumps(
        {a: names.UNIT_SHORT.get(c, c) for a, c in columns.items()}
    )
    by_column = {c: a for a, c in columns.items()}
    task, traj = by_column.get(names.N_TASKS), by_column.get(names.ROLLOUTS)
    if task is not None and traj is not None:
        bought = ds[names.PURCHASED]
        ds[names.TRAJECTORIES] = bought.sel({names.AXIS_DIM: task}, drop=True) * bought.sel(
            {names.AXIS_DIM: traj}, drop=True
        )
        if names.DECISION in ds:
            dec = ds[names.DECISION]
            ds[names.DECISION_TRAJECTORIES] = dec.sel({names.AXIS_DIM: task}, drop=True) * dec.sel(
                {names.AXIS_DIM: traj}, drop=True
            )
    swept = SweptRange.from_fit(fit)
    if swept is None:
        return ds
    missing = [a for a in axes if a not in swept.axes]
    if missing:
        raise RecipeError(f"the fit's swept range has no axis {missing}")
    swept = swept.select(settings, axes)
    dims = (names.SETTING_DIM, names.AXIS_DIM)
    ds[names.SWEPT_MIN] = (dims, swept.lo)
    ds[names.SWEPT_MAX] = (dims, swept.hi)
    ds[names.EXTRAPOLATION] = ds[names.ALLOCATION] / ds[names.SWEPT_MAX]
    if names.DECISION in ds:
        with np.errstate(divide="ignore", invalid="ignore"):
            kappa = ds[names.ALLOCATION] / ds[names.PURCHASED]  # per draw: 1 for real data
        seen = (ds[names.DECISION] * kappa).median((names.CHAIN_DIM, names.DRAW_DIM))
        ds[names.DECISION_EXTRAPOLATION] = seen / ds[names.SWEPT_MAX]
    return ds


def _axis_columns(fit: xr.DataTree, axes: Sequence[str]) -> dict[str, str]:
    """The observation column each axis counts (from the fit's spec; the axis name otherwise)."""
    text = fit.attrs.get(names.ATTR_SPEC)
    columns = {}
    if text:
        spec = parse_spec(str(text), source="fit attribute")
        columns = {a.name: a.column for a in spec.axes}
    columns[names.PARAMS_B] = names.PARAMS_B
    return {a: columns.get(a, a) for a in axes}


# --- the recipe ------------------------------------------------------------------------------


def _success(law: allocate.PowerLaw, sizes: Array) -> Array:
    return np.asarray(laws.success_from_loss(law.loss(sizes)), dtype=float)


def _baseline_purchases(
    kind: str,
    budget: float,
    prices: Array,
    anchor: Array,
    lo: Array,
    hi: Array,
    grow: int,
) -> Array:
    """Purchased units of a baseline at ``budget`` (n,); NaN where the budget cannot fund it.

    ``traj_heavy``: every axis but ``grow`` at its anchor, the rest of the money to ``grow``
    (capped at its upper bound). ``chinchilla``: every axis scaled from its anchor by one
    common factor (as Chinchilla scales N and D together), clipped to the box.
    """
    return _baseline_vec(kind, np.asarray(budget, dtype=float), prices, anchor, lo, hi, grow)[0]


def _decision(
    law: allocate.PowerLaw,
    kappa: Array,
    prices: Array,
    budget: float,
    lo: Array,
    hi: Array,
    start: Array,
) -> tuple[Array, bool]:
    """Money per axis (n,) maximising ``mean_d exp(-L_d(kappa_d * x / c))`` s.t. ``sum x <= B``,
    and whether the solver converged.

    SLSQP in budget fractions ``f = x / B`` (the budget constraint is then linear), with the
    objective and its gradient from one pass over the draws, started at ``start`` (the median
    of the per-draw optimal spends). Status 8 (no descent left at machine precision) counts
    as converged; on any other failure the better of SLSQP's point and the start is returned.
    """
    scale = kappa * (budget / prices)

    def fun(f: Array) -> tuple[float, Array]:
        d = scale * f
        p = _success(law, d)
        g = np.mean(law.gradient(d) * scale * p[:, None], axis=0)
        return float(1.0 - np.mean(p)), np.asarray(g, dtype=float)

    f_lo = prices * lo / budget
    f_hi = np.minimum(prices * hi / budget, 1.0)
    f0 = _onto_budget(np.clip(start / budget, f_lo, f_hi), f_lo)
    res = optimize.minimize(
        fun,
        f0,
        jac=True,
        method="SLSQP",
        bounds=list(zip(f_lo, f_hi, strict=True)),
        constraints=[
            {"type": "ineq", "fun": lambda f: 1.0 - f.sum(), "jac": lambda f: -np.ones_like(f)}
        ],
        options={"ftol": 1e-15, "maxiter": 500},
    )
    f = _onto_budget(np.clip(res.x, f_lo, f_hi), f_lo)
    if not res.success and fun(f0)[0] < fun(f)[0]:
        f = f0
    return np.asarray(f * budget, dtype=float), bool(res.success or res.status == 8)


def _onto_budget(f: Array, f_lo: Array) -> Array:
    """Pull budget fractions back onto ``sum f <= 1`` (SLSQP may overshoot by ~1e-9),
    shrinking each share's excess over its lower bound in proportion."""
    total = float(f.sum())
    if total <= 1.0:
        return f
    floor = float(f_lo.sum())
    return np.asarray(f_lo + (f - f_lo) * (1.0 - floor) / (total - floor), dtype=float)


def _baseline_vec(
    kind: str,
    money: Array,
    prices: Array,
    anchor: Array,
    lo: Array,
    hi: Array,
    grow: int,
) -> tuple[Array, Array]:
    """Vectorised :func:`_baseline_purchases` over budgets ``money`` (...): purchased units
    (..., n) (NaN where unfundable) and their derivative in ``log money``."""
    if kind == names.CHINCHILLA:
        raw = (money / float(prices @ anchor))[..., None] * anchor
        u = np.clip(raw, lo, hi)
        du = np.where((raw > lo) & (raw < hi), u, 0.0)
        return u, du
    fixed = float(np.delete(prices, grow) @ np.delete(anchor, grow))
    u = np.broadcast_to(anchor, (*money.shape, anchor.size)).copy()
    ug = (money - fixed) / prices[grow]
    u[..., grow] = np.minimum(ug, hi[grow])
    du = np.zeros_like(u)
    du[..., grow] = np.where(ug < hi[grow], money / prices[grow], 0.0)
    bad = ug < lo[grow]
    u[bad] = np.nan
    return u, du


def _multiplier(
    law: allocate.PowerLaw,
    kappa: Array,
    target_loss: Array,
    kind: str,
    budget: float,
    prices: Array,
    anchor: Array,
    lo: Array,
    hi: Array,
    grow: int,
) -> Array:
    """Per draw (S, G): the budget factor ``M`` at which the baseline's loss falls to
    ``target_loss``: bracketed Newton on ``log M`` (the loss falls as ``M`` grows). ``inf``
    where even ``1e6 B`` does not reach it."""
    t_lo = np.full(target_loss.shape, np.log(_MULTIPLIER_RANGE[0]))
    t_hi = np.full(target_loss.shape, np.log(_MULTIPLIER_RANGE[1]))
    kap = kappa[:, None, :]

    def f(t: Array) -> tuple[Array, Array]:
        u, du = _baseline_vec(kind, budget * np.exp(t), prices, anchor, lo, hi, grow)
        d = kap * u
        with np.errstate(invalid="ignore"):
            loss = law.loss(d)
            slope = np.sum(law.gradient(d) * kap * du, axis=-1)
        loss = np.where(np.isnan(u).any(axis=-1), np.inf, loss)
        return loss - target_loss, slope

    never = f(t_hi)[0] > 0
    below = f(t_lo)[0] <= 0  # even 1e-3 B matches: report the range's end
    t = 0.5 * (t_lo + t_hi)
    for _ in range(100):
        val, slope = f(t)
        if np.all((np.abs(val) <= 1e-12 * np.abs(target_loss)) | never | below):
            break
        t_lo = np.where(val > 0, t, t_lo)
        t_hi = np.where(val < 0, t, t_hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = t - val / slope
        inside = np.isfinite(newton) & (newton > t_lo) & (newton < t_hi)
        t = np.where(val == 0, t, np.where(inside, newton, 0.5 * (t_lo + t_hi)))
    m = np.where(below, _MULTIPLIER_RANGE[0], np.exp(t))
    return np.asarray(np.where(never, np.inf, m), dtype=float)


def recipe(
    fit: xr.DataTree,
    budgets: ArrayLike,
    *,
    prices: Prices | None = None,
    pricing: xr.DataTree | None = None,
    kappa: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    settings: Sequence[str] | None = None,
    grow_axis: str | None = None,
    switch_axes: Sequence[str] | None = None,
    max_draws: int | None = None,
    decision: bool = True,
    multipliers: bool = True,
    within_data: float | None = None,
    seed: int = 0,
) -> xr.Dataset:
    """Propagate a law fit's posterior through the allocator at each budget.

    ``prices`` default to the paper's; ``pricing`` (a pricing fit) and/or ``kappa`` give
    discounts; ``bounds`` are in purchased units; ``within_data`` caps every axis at that many
    times its largest swept value (:func:`bounds_within_data`); ``grow_axis`` is the trajectory-heavy
    baseline's growing axis (default ``traj`` if the fit has it, else its last axis);
    ``switch_axes`` get a regime-switch price (default: the fit's world axis, if any).
    Returns per-draw variables (chain, draw, setting, budget[, axis | baseline]) and the
    decision (setting, budget, axis), and how far it lies beyond the data
    (:func:`add_data_extent`); :func:`summarize` turns it into intervals.
    """
    budgets_arr = np.atleast_1d(np.asarray(budgets, dtype=float))
    if budgets_arr.ndim != 1 or (~np.isfinite(budgets_arr) | (budgets_arr <= 0)).any():
        raise RecipeError(f"budgets must be finite and > 0, got {budgets_arr.tolist()}")
    prices = prices or default_prices()
    size_axis = names.PARAMS_B in prices.explicit
    if within_data is not None:
        bounds = bounds_within_data(fit, within_data, bounds, settings, size_axis)
    draws = law_draws(fit, settings, max_draws, size_axis=size_axis)
    axes = draws.axes
    c = prices.for_axes(axes)
    kap, kappa_source = kappa_draws(axes, draws.samples, pricing, kappa, seed)
    lo, hi = bounds_arrays(axes, bounds)
    floor_cost = float(c @ lo)
    if (budgets_arr < floor_cost * (1 - 1e-12)).any():
        raise RecipeError(
            f"budget {budgets_arr.min():g} is too small to buy the lower bounds "
            f"({', '.join(f'{a} >= {v:g}' for a, v in zip(axes, lo, strict=True))}), which cost "
            f"{floor_cost:g} {prices.currency}"
        )
    grow = _grow_index(axes, grow_axis)
    anchor = np.clip(draws.reference, lo, hi)
    law = draws.law()
    S, G, n, B = draws.samples, len(draws.settings), len(axes), budgets_arr.size
    eff_price = (c / kap)[:, None, None, :]  # (S, 1, 1, n)
    eff_lo = (kap * lo)[:, None, None, :]
    eff_hi = (kap * hi)[:, None, None, :]
    batched = allocate.PowerLaw(
        draws.coef[:, :, None, :],
        draws.alpha[:, :, None, :],
        draws.floor[:, :, None],
        None if draws.gamma is None else draws.gamma[:, :, None],
        None if draws.beta is None else draws.beta[:, :, None],
        draws.pair,
    )
    sol = allocate.solve_interaction(batched, eff_price, budgets_arr, eff_lo, eff_hi)
    if draws.pair is None:
        expo = allocate.local_exponents_additive(sol, batched.alpha, eff_price)
    else:
        expo = _fd_exponents(batched, eff_price, budgets_arr, eff_lo, eff_hi, sol)
    success_opt = _success(batched, sol.sizes)
    spend = eff_price * sol.sizes

    dims_sgb = (names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM, names.BUDGET_DIM)
    chains = np.unique(draws.chain).astype(int)
    n_chain = chains.size
    n_draw = S // n_chain

    def per_draw(arr: Array, extra: tuple[str, ...] = ()) -> tuple[tuple[str, ...], Array]:
        return (*dims_sgb, *extra), arr.reshape(n_chain, n_draw, *arr.shape[1:])

    data: dict[str, tuple[tuple[str, ...], Array]] = {
        names.ALLOCATION: per_draw(sol.sizes, (names.AXIS_DIM,)),
        names.PURCHASED: per_draw(sol.sizes / kap[:, None, None, :], (names.AXIS_DIM,)),
        names.SPEND_SHARE: per_draw(spend / budgets_arr[None, None, :, None], (names.AXIS_DIM,)),
        names.SHADOW_PRICE: per_draw(sol.multiplier),
        names.SUCCESS_OPTIMUM: per_draw(success_opt),
        names.RECIPE_EXPONENT: per_draw(expo, (names.AXIS_DIM,)),
    }
    baselines = (names.TRAJ_HEAVY, names.CHINCHILLA)
    base_success = np.full((S, G, B, len(baselines)), np.nan)
    for j, b in enumerate(budgets_arr):
        for k, kind in enumerate(baselines):
            u = _baseline_purchases(kind, b, c, anchor, lo, hi, grow)
            if not np.isnan(u).any():
                base_success[:, :, j, k] = _success(law, kap[:, None, :] * u)
    data[names.SUCCESS_BASELINE] = per_draw(base_success, (names.BASELINE_DIM,))

    failures = 0
    if decision:
        dec = np.empty((G, B, n))
        dec_success = np.empty((S, G, B))
        mult = np.full((S, G, B, len(baselines)), np.nan)
        for g in range(G):
            law_g = allocate.PowerLaw(
                draws.coef[:, g],
                draws.alpha[:, g],
                draws.floor[:, g],
                None if draws.gamma is None else draws.gamma[:, g],
                None if draws.beta is None else draws.beta[:, 0],
                draws.pair,
            )
            for j, b in enumerate(budgets_arr):
                start = np.median(spend[:, g, j], axis=0)
                start = start * (b / start.sum())
                x, converged = _decision(law_g, kap, c, b, lo, hi, start)
                failures += not converged
                dec[g, j] = x
                dec_success[:, g, j] = _success(law_g, kap * (x / c))
        data[names.SUCCESS_DECISION] = per_draw(dec_success)
        data[names.SUCCESS_GAIN] = per_draw(
            dec_success[..., None] - base_success, (names.BASELINE_DIM,)
        )
        if multipliers:
            target = -np.log(dec_success)
            for j, b in enumerate(budgets_arr):
                for k, kind in enumerate(baselines):
                    mult[:, :, j, k] = _multiplier(
                        law, kap, target[:, :, j], kind, b, c, anchor, lo, hi, grow
                    )
            data[names.COMPUTE_MULTIPLIER] = per_draw(mult, (names.BASELINE_DIM,))
    switch = list(switch_axes) if switch_axes is not None else _world_axes(fit, axes)
    coords: dict[str, object] = {
        names.CHAIN_DIM: chains,
        names.DRAW_DIM: draws.draw[:n_draw].astype(int),
        names.SETTING_DIM: list(draws.settings),
        names.BUDGET_DIM: budgets_arr,
        names.AXIS_DIM: list(axes),
        names.BASELINE_DIM: list(baselines),
    }
    ds = xr.Dataset({k: xr.Variable(*v) for k, v in data.items()}, coords=coords)
    if decision:
        ds[names.DECISION_SPEND] = ((names.SETTING_DIM, names.BUDGET_DIM, names.AXIS_DIM), dec)
        ds[names.DECISION] = ds[names.DECISION_SPEND] / xr.DataArray(c, dims=names.AXIS_DIM)
        ds[names.EXPECTED_SUCCESS] = ds[names.SUCCESS_DECISION].mean(
            (names.CHAIN_DIM, names.DRAW_DIM)
        )
    for axis in switch:
        if axis not in axes:
            raise RecipeError(f"switch axis {axis!r} is not an axis of the fit: {list(axes)}")
        price = _switch_price(
            batched, eff_price, budgets_arr, eff_lo, eff_hi, kap, axes.index(axis)
        )
        ds[f"{names.SWITCH_PRICE}_{axis}"] = per_draw(price)
    ds.attrs = {
        names.ATTR_COST_MODEL: COST_ADDITIVE,
        names.ATTR_CURRENCY: prices.currency,
        names.ATTR_PRICES: json.dumps(dict(zip(axes, c.tolist(), strict=True))),
        names.ATTR_KAPPA_SOURCE: kappa_source,
        "grow_axis": axes[grow],
        "decision_solver_failures": failures,
        "anchors": json.dumps(dict(zip(axes, anchor.tolist(), strict=True))),
        "bounds": json.dumps(
            {a: [lo[i], None if np.isinf(hi[i]) else hi[i]] for i, a in enumerate(axes)}
        ),
        "within_data": "none" if within_data is None else float(within_data),
    }
    return add_data_extent(ds, fit)


def _grow_index(axes: Sequence[str], grow_axis: str | None) -> int:
    if grow_axis is None:
        return list(axes).index(names.TRAJ) if names.TRAJ in axes else len(axes) - 1
    if grow_axis not in axes:
        raise RecipeError(f"grow axis {grow_axis!r} is not an axis of the fit: {list(axes)}")
    return list(axes).index(grow_axis)


def _world_axes(fit: xr.DataTree, axes: Sequence[str]) -> list[str]:
    text = fit.attrs.get(names.ATTR_SPEC)
    if not text:
        return []
    spec = parse_spec(str(text), source="fit attribute")
    return [a.name for a in spec.axes if a.column == names.N_WORLDS and a.name in axes]


def _fd_exponents(
    law: allocate.PowerLaw,
    prices: Array,
    budgets: Array,
    lo: Array,
    hi: Array,
    sol: allocate.Allocation,
) -> Array:
    """Local exponents by central differences in log B (laws the closed form does not cover)."""
    h = 1e-4
    up = allocate.solve_interaction(law, prices, budgets * np.exp(h), lo, hi)
    down = allocate.solve_interaction(law, prices, budgets * np.exp(-h), lo, hi)
    return np.asarray((np.log(up.sizes) - np.log(down.sizes)) / (2 * h), dtype=float)


def _switch_price(
    law: allocate.PowerLaw,
    prices: Array,
    budgets: Array,
    lo: Array,
    hi: Array,
    kappa: Array,
    i: int,
) -> Array:
    """Per draw: the unit price of axis ``i`` (purchased units) above which the optimum buys
    only its lower bound. Separable laws: exact (:func:`allocate.switch_price_additive`).
    With an interaction: a damped fixed point ``p <- sqrt(p * m_i / lambda(p))``, where
    ``lambda(p)`` is the shadow price with axis ``i`` held at its floor at price ``p``."""
    k_i = kappa[:, None, None, i]
    if law.pair is None:
        eff = allocate.switch_price_additive(law.coef, law.alpha, prices, budgets, i, lo, hi)
        return np.asarray(k_i * eff, dtype=float)
    n = law.coef.shape[-1]
    shape = np.broadcast_shapes((*law.coef.shape[:-2], budgets.size, n), hi.shape, lo.shape)
    hi_fixed = np.array(np.broadcast_to(hi, shape), copy=True)
    hi_fixed[..., i] = np.broadcast_to(lo, shape)[..., i]
    price = np.array(np.broadcast_to(prices, shape), copy=True)
    p_i = price[..., i].copy()
    for _ in range(60):
        price[..., i] = p_i
        sol = allocate.solve_interaction(law, price, budgets, lo, hi_fixed)
        marginal = -law.gradient(sol.sizes)[..., i]
        target = marginal / sol.multiplier
        new = np.sqrt(p_i * target)
        done = np.max(np.abs(np.log(new / p_i))) < 1e-12
        p_i = new
        if done:
            break
    return np.asarray(k_i * p_i, dtype=float)


# --- summaries --------------------------------------------------------------------------------


def quantiles(values: ArrayLike, q: Sequence[float], axis: int = 0) -> Array:
    """Linear-interpolated quantiles along ``axis`` that ignore NaN and keep ``inf`` (a
    baseline that can never match the recipe has multiplier ``inf``); all-NaN slices give NaN.
    The quantile dim comes first.

    >>> quantiles([1.0, 2.0, np.inf, np.nan], [0.0, 0.5, 1.0]).tolist()
    [1.0, 2.0, inf]
    """
    arr = np.moveaxis(np.asarray(values, dtype=float), axis, 0)
    srt = np.sort(arr, axis=0)  # NaN last
    count = np.sum(~np.isnan(arr), axis=0)
    out = np.full((len(q), *arr.shape[1:]), np.nan)
    for k, qk in enumerate(q):
        pos = qk * np.maximum(count - 1, 0)
        i0 = np.floor(pos).astype(int)
        i1 = np.minimum(i0 + 1, np.maximum(count - 1, 0))
        a = np.take_along_axis(srt, i0[None], axis=0)[0]
        b = np.take_along_axis(srt, i1[None], axis=0)[0]
        frac = pos - i0
        with np.errstate(invalid="ignore"):
            val = np.where((a == b) | (frac == 0), a, a + (b - a) * frac)
        out[k] = np.where(count > 0, val, np.nan)
    return out


def summarize(ds: xr.Dataset, prob: float = DEFAULT_PROB) -> xr.Dataset:
    """Median and equal-tailed credible interval over draws of every per-draw variable.

    Returns variables with a ``quantile`` dim (lower, median, upper); decision variables pass
    through unchanged. NaN draws (an unfundable baseline) are ignored; ``inf`` is kept.
    """
    if not 0 < prob < 1:
        raise RecipeError(f"prob must be in (0, 1), got {prob}")
    q = [(1 - prob) / 2, 0.5, (1 + prob) / 2]
    out = {name: _summarize_var(da, q) for name, da in ds.data_vars.items()}
    res = xr.Dataset(out)
    res.attrs = {**ds.attrs, "prob": prob}
    return res


def _summarize_var(da: xr.DataArray, q: Sequence[float]) -> xr.DataArray:
    sample = (names.CHAIN_DIM, names.DRAW_DIM)
    if not set(sample) <= set(da.dims):
        return da
    rest = [d for d in da.dims if d not in sample]
    arr = da.transpose(*sample, *rest).to_numpy()
    vals = quantiles(arr.reshape(-1, *arr.shape[2:]), q, axis=0)
    coords = {d: da[d] for d in rest if d in da.coords}
    return xr.DataArray(
        vals, dims=(names.QUANTILE_DIM, *rest), coords={names.QUANTILE_DIM: list(q), **coords}
    )


def _json_number(x: float) -> float | str | None:
    """Strict-JSON number: NaN (undefined, e.g. an unfundable baseline) -> null, +-inf -> "inf"."""
    if np.isnan(x):
        return None
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def to_json(
    ds: xr.Dataset, prob: float = DEFAULT_PROB, warn_factor: float = WARN_FACTOR
) -> dict[str, object]:
    """A JSON-ready summary: per setting and budget, intervals per axis and per baseline, and
    per axis how far the optimum and the decision lie beyond the swept range (``beyond``: the
    axes more than ``warn_factor`` times outside it)."""
    warn_factor = check_threshold(warn_factor)
    s = summarize(ds, prob)
    axes = [str(a) for a in ds[names.AXIS_DIM].to_numpy()]
    baselines = (
        [str(b) for b in ds[names.BASELINE_DIM].to_numpy()] if names.BASELINE_DIM in ds.dims else []
    )

    def trio(da: xr.DataArray) -> dict[str, float | str | None]:
        return {
            k: _json_number(x)
            for k, x in zip(("lower", "median", "upper"), da.to_numpy().astype(float), strict=True)
        }

    rows = []
    for setting in s[names.SETTING_DIM].to_numpy():
        for budget in s[names.BUDGET_DIM].to_numpy():
            sel = {names.SETTING_DIM: setting, names.BUDGET_DIM: budget}
            row: dict[str, object] = {"setting": str(setting), "budget": float(budget)}
            row["allocation"] = {
                a: trio(s[names.PURCHASED].sel({**sel, names.AXIS_DIM: a})) for a in axes
            }
            if names.SPEND_SHARE in s:
                row["spend_share"] = {
                    a: trio(s[names.SPEND_SHARE].sel({**sel, names.AXIS_DIM: a})) for a in axes
                }
            row["recipe_exponent"] = {
                a: trio(s[names.RECIPE_EXPONENT].sel({**sel, names.AXIS_DIM: a})) for a in axes
            }
            row["success_at_own_optimum"] = trio(s[names.SUCCESS_OPTIMUM].sel(sel))
            if names.DECISION in s:
                row["decision"] = {
                    a: _json_number(float(s[names.DECISION].sel({**sel, names.AXIS_DIM: a})))
                    for a in axes
                }
                row["decision_spend"] = {
                    a: _json_number(float(s[names.DECISION_SPEND].sel({**sel, names.AXIS_DIM: a})))
                    for a in axes
                }
                row["expected_success"] = _json_number(float(s[names.EXPECTED_SUCCESS].sel(sel)))
                row["success_at_decision"] = trio(s[names.SUCCESS_DECISION].sel(sel))
            row["baselines"] = {}
            for b in baselines:
                entry = {
                    "success": trio(s[names.SUCCESS_BASELINE].sel({**sel, names.BASELINE_DIM: b}))
                }
                if names.SUCCESS_GAIN in s:
                    entry["gain_of_decision"] = trio(
                        s[names.SUCCESS_GAIN].sel({**sel, names.BASELINE_DIM: b})
                    )
                if names.COMPUTE_MULTIPLIER in s:
                    entry["compute_multiplier"] = trio(
                        s[names.COMPUTE_MULTIPLIER].sel({**sel, names.BASELINE_DIM: b})
                    )
                row["baselines"][b] = entry  # type: ignore[index]
            for name in s.data_vars:
                if str(name).startswith(names.SWITCH_PRICE):
                    row[str(name)] = trio(s[name].sel(sel))
            if names.TRAJECTORIES in s:
                trajectories: dict[str, object] = {"optimum": trio(s[names.TRAJECTORIES].sel(sel))}
                if names.DECISION_TRAJECTORIES in s:
                    trajectories["decision"] = _json_number(
                        float(s[names.DECISION_TRAJECTORIES].sel(sel))
                    )
                row["trajectories"] = trajectories
            if names.DECISION_SPEND in s:
                spent = float(s[names.DECISION_SPEND].sel(sel).sum())
            elif names.SPEND_SHARE in ds:
                shares = ds[names.SPEND_SHARE].sel(sel).sum(names.AXIS_DIM)
                spent = float(shares.median()) * float(budget)
            else:
                spent = float("nan")  # a compute budget: spent in full by construction
            row["budget_spent"] = _json_number(spent)
            row["extrapolation"] = _extent_json(s, sel, axes, warn_factor)
            rows.append(row)
    return {
        "prob": prob,
        "cost_model": ds.attrs.get(names.ATTR_COST_MODEL),
        "currency": ds.attrs.get(names.ATTR_CURRENCY),
        "unit_prices": json.loads(ds.attrs.get(names.ATTR_PRICES, "{}")),
        "cost_powers": json.loads(ds.attrs.get("cost_powers", "null")),
        "kappa": ds.attrs.get(names.ATTR_KAPPA_SOURCE),
        "bounds": json.loads(ds.attrs.get("bounds", "{}")),
        "anchors": json.loads(ds.attrs.get("anchors", "{}")),
        "decision_solver_failures": int(ds.attrs.get("decision_solver_failures", 0)),
        "units": json.loads(ds.attrs.get("units_json", "{}")),
        "within_data": _json_attr(ds.attrs.get("within_data", "none")),
        "extrapolation_warn_factor": warn_factor,
        "results": rows,
    }


def _json_attr(value: object) -> object:
    return None if value == "none" else float(value)  # type: ignore[arg-type]


def _extent_json(
    s: xr.Dataset, sel: Mapping[str, object], axes: Sequence[str], warn_factor: float
) -> dict[str, object] | None:
    """Per axis: the swept range, the optimum's and the decision's factor over its largest
    value, and how far outside the range the decision (else the optimum's median) lies."""
    if names.SWEPT_MAX not in s:
        return None
    per_axis: dict[str, object] = {}
    beyond = []
    for a in axes:
        at = {**sel, names.AXIS_DIM: a}
        lo = float(
            s[names.SWEPT_MIN].sel({names.SETTING_DIM: sel[names.SETTING_DIM], names.AXIS_DIM: a})
        )
        hi = float(
            s[names.SWEPT_MAX].sel({names.SETTING_DIM: sel[names.SETTING_DIM], names.AXIS_DIM: a})
        )
        opt = s[names.EXTRAPOLATION].sel(at)
        entry: dict[str, object] = {
            "swept_min": lo,
            "swept_max": hi,
            "optimum_over_max": {
                k: _json_number(x)
                for k, x in zip(
                    ("lower", "median", "upper"), opt.to_numpy().astype(float), strict=True
                )
            },
        }
        factor = float(opt.sel({names.QUANTILE_DIM: 0.5}))
        if names.DECISION_EXTRAPOLATION in s:
            factor = float(s[names.DECISION_EXTRAPOLATION].sel(at))
            entry["decision_over_max"] = _json_number(factor)
        far = float(outside(factor * hi, lo, hi))
        entry["outside"] = _json_number(far)
        if far > warn_factor:
            beyond.append(a)
        per_axis[a] = entry
    return {"axes": per_axis, "beyond": beyond}


# --- iso-budget curves --------------------------------------------------------------------------


def iso_budget(
    fit: xr.DataTree,
    budget: float,
    *,
    prices: Prices | None = None,
    pricing: xr.DataTree | None = None,
    kappa: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    settings: Sequence[str] | None = None,
    shares: ArrayLike | None = None,
    reference_spend: Mapping[str, float] | ArrayLike | None = None,
    max_draws: int | None = None,
    within_data: float | None = None,
    seed: int = 0,
) -> xr.Dataset:
    """Success along a fixed budget as one axis's share of it varies (an iso-budget curve).

    For axis ``i`` and share ``s``, axis ``i`` gets ``s B`` and the other axes split
    ``(1 - s) B`` in the proportions of ``reference_spend``: a mapping axis -> money (the same
    for every setting), an array (setting, axis) — e.g. the recipe's ``decision_spend`` at
    this budget, so that each curve passes through the decision — or ``None`` (equal money).
    Returns the per-draw success (chain, draw, setting, axis, share); bands come from
    :func:`summarize`. Points outside the box (``bounds``, capped by ``within_data`` as in
    :func:`recipe`) are NaN.
    """
    prices = prices or default_prices()
    size_axis = names.PARAMS_B in prices.explicit
    if within_data is not None:
        bounds = bounds_within_data(fit, within_data, bounds, settings, size_axis)
    draws = law_draws(fit, settings, max_draws, size_axis=size_axis)
    axes = draws.axes
    c = prices.for_axes(axes)
    kap, _ = kappa_draws(axes, draws.samples, pricing, kappa, seed)
    lo, hi = bounds_arrays(axes, bounds)
    grid = np.linspace(0.02, 0.98, 25) if shares is None else np.asarray(shares, dtype=float)
    if ((grid <= 0) | (grid >= 1)).any():
        raise RecipeError("shares must lie strictly between 0 and 1")
    n, g = len(axes), len(draws.settings)
    if reference_spend is None:
        ref = np.ones((g, n))
    elif isinstance(reference_spend, Mapping):
        ref = np.broadcast_to(np.array([float(reference_spend[a]) for a in axes]), (g, n))
    else:
        ref = np.broadcast_to(np.asarray(reference_spend, dtype=float), (g, n))
    if (~np.isfinite(ref) | (ref < 0)).any():
        raise RecipeError("reference spends must be finite and >= 0")
    law = draws.law()
    out = np.full((draws.samples, g, n, grid.size), np.nan)
    for i in range(n):
        others = np.delete(np.arange(n), i)
        w = ref[:, others] / np.maximum(ref[:, others].sum(axis=1, keepdims=True), 1e-300)
        for k, s in enumerate(grid):
            money = np.empty((g, n))
            money[:, i] = s * budget
            money[:, others] = (1 - s) * budget * w
            u = money / c
            inside = ((u >= lo * (1 - 1e-12)) & (u <= hi * (1 + 1e-12))).all(axis=1)
            p = _success(law, kap[:, None, :] * np.maximum(u, lo))
            out[:, :, i, k] = np.where(inside, p, np.nan)
    n_chain = np.unique(draws.chain).size
    arr = out.reshape(n_chain, -1, *out.shape[1:])
    return xr.Dataset(
        {
            names.ISO_SUCCESS: (
                (
                    names.CHAIN_DIM,
                    names.DRAW_DIM,
                    names.SETTING_DIM,
                    names.AXIS_DIM,
                    names.SHARE_DIM,
                ),
                arr,
            )
        },
        coords={
            names.SETTING_DIM: list(draws.settings),
            names.AXIS_DIM: list(axes),
            names.SHARE_DIM: grid,
            names.BUDGET_DIM: budget,
        },
    )


# --- a hand-made fit (tests, docs, examples) ---------------------------------------------------

_SYNTH_SPEC = """
[model]
name = "synthetic"
[outcome]
kind = "success"
[settings]
keys = ["model", "algorithm", "domain"]
[[axes]]
name = "env"
column = "n_envs"
[[axes]]
name = "task"
column = "n_tasks"
[[axes]]
name = "traj"
column = "rollouts"
"""


def synthetic_fit(
    draws: int = 200,
    chains: int = 2,
    spread: float = 0.05,
    seed: int = 0,
    alpha: Sequence[Sequence[float]] = ((0.41, 0.26, 0.11), (0.38, 0.24, 0.12)),
    amplitude: Sequence[Sequence[float]] = ((0.35, 0.30, 0.12), (0.30, 0.25, 0.10)),
    floor: Sequence[float] = (0.45, 0.55),
    reference: Sequence[float] = (45.25, 1810.2, 11.31),
    interaction: tuple[float, float] | None = None,
    spec_text: str = _SYNTH_SPEC,
    swept: tuple[Sequence[float], Sequence[float]] | None = None,
) -> xr.DataTree:
    """A law-fit DataTree whose posterior is lognormal around a known truth (``spread`` is the
    sd of log parameters; 0 gives a point mass). ``interaction = (gamma, beta)`` adds the
    env x task term (the spec text must then declare it). ``swept`` = (lowest, highest) value
    per axis, the same for every setting (default: the paper's grids, 8-256 environments,
    320-10,240 tasks, 2-64 rollouts per task). Settings are ``"S0 | grpo | math"``, ... For tests and examples, not a fit of any
    data."""
    rng = np.random.default_rng(seed)
    a = np.asarray(alpha, dtype=float)
    amp = np.asarray(amplitude, dtype=float)
    fl = np.asarray(floor, dtype=float)
    g, n = a.shape

    def jitter(x: Array) -> Array:
        return np.asarray(
            x * np.exp(spread * rng.standard_normal((chains, draws, *x.shape))), dtype=float
        )

    settings = [f"S{i} | grpo | math" for i in range(g)]
    axes = list(names.PAPER_AXES)[:n]
    post: dict[str, tuple[tuple[str, ...], Array]] = {
        names.ALPHA: (
            (names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM, names.AXIS_DIM),
            jitter(a),
        ),
        names.AMPLITUDE: (
            (names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM, names.AXIS_DIM),
            jitter(amp),
        ),
        names.LOSS_FLOOR: ((names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM), jitter(fl)),
        names.ALPHA_POP: (
            (names.CHAIN_DIM, names.DRAW_DIM, names.AXIS_DIM),
            jitter(a.mean(axis=0)),
        ),
    }
    if interaction is not None:
        post[names.INTERACTION_GAMMA] = (
            (names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM),
            jitter(np.full(g, interaction[0])),
        )
        post[names.INTERACTION_BETA] = (
            (names.CHAIN_DIM, names.DRAW_DIM),
            jitter(np.array(interaction[1])),
        )
    coords = {
        names.CHAIN_DIM: np.arange(chains),
        names.DRAW_DIM: np.arange(draws),
        names.SETTING_DIM: settings,
        names.AXIS_DIM: axes,
    }
    ref = np.asarray(reference, dtype=float)
    swept = swept or ((8.0, 320.0, 2.0)[:n], (256.0, 10240.0, 64.0)[:n])
    const = xr.merge(
        [
            xr.Dataset(
                {names.REFERENCE_SCALE: ((names.AXIS_DIM,), ref)}, coords={names.AXIS_DIM: axes}
            ),
            SweptRange(
                tuple(axes),
                tuple(settings),
                np.broadcast_to(np.asarray(swept[0], dtype=float), (g, n)).copy(),
                np.broadcast_to(np.asarray(swept[1], dtype=float), (g, n)).copy(),
            ).dataset(),
        ]
    )
    tree = xr.DataTree.from_dict(
        {"posterior": xr.Dataset(post, coords=coords), "constant_data": const}
    )
    tree.attrs = {names.ATTR_KIND: names.KIND_LAW_FIT, names.ATTR_SPEC: spec_text}
    return tree
