"""The one reader of a law fit: what every consumer takes from a fitted DataTree.

A law fit (``bayesscale fit``, :func:`bayesscale.law.inference.fit`) is an
:class:`xarray.DataTree` whose ``posterior`` holds each setting's law

.. math::

    L_s(D) = L_{\\infty,s} + E (N_s/N_\\mathrm{ref})^{-\\alpha_N}
             + \\sum_a T_a(D_a/D_{a,\\mathrm{ref}};\\ A_{s,a}, \\alpha_{s,a}, k_a)

per draw (each axis's term ``T_a`` its spec's form, :func:`bayesscale.core.laws.axis_terms`:
the power law ``A (D/D_ref)^-alpha``, the offset power with the knee ``k_a``, or the
saturating form with the midpoint ``m_a``), and whose ``constant_data`` holds the reference
scales ``D_ref`` and the settings' model sizes. This module reads it, once and in one way, for the recipe, prediction, the
held-out check and the design of the next runs:

* :func:`law_layout` / :func:`fit_layout`: axes, settings, reference scales, groups (checked);
* :func:`law_draws`: the law per draw and setting in raw counts, ``K = A D_ref^alpha``, with
  the other forms' shapes where asked (what the recipe's solvers take);
* :func:`axis_knees`: the offset-power axes' knees per draw;
* :func:`read_population`: the population-level draws a new setting is drawn from;
* :func:`axis_columns`, :func:`setting_keys`: the observation column each axis counts, and
  each setting's keys;
* :func:`stack`, :func:`at_draws`: a variable as ``(S, ...)`` samples, chain-major.

Every failure is a :class:`PosteriorError` naming what the fit lacks.

>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> draws = law_draws(synthetic_fit(draws=10, spread=0.0))
>>> draws.axes, draws.coef.shape[-1]
(('env', 'task', 'traj'), 3)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray

from bayesscale import names
from bayesscale.core import allocate, laws
from bayesscale.core.form_law import FormLaw
from bayesscale.core.forms import OFFSET_POWER, SATURATING
from bayesscale.data.fitfile import fit_spec
from bayesscale.data.observations import SETTING_SEPARATOR
from bayesscale.data.spec import ModelSpec
from bayesscale.law.stack import other_forms_weight

Array = NDArray[np.float64]
SAMPLE = (names.CHAIN_DIM, names.DRAW_DIM)
# the columns the paper's axes count, for a fit that stores no spec
DEFAULT_COLUMNS = {names.ENV: names.N_ENVS, names.TASK: names.N_TASKS, names.TRAJ: names.ROLLOUTS}


class PosteriorError(ValueError):
    """A law fit lacks what is asked of it (a group, a variable, constant data, a setting)."""


class PosteriorWarning(UserWarning):
    """Posterior draws a reader leaves out (and says how many), e.g. a law that overflows."""


def stack(da: xr.DataArray, *rest: str) -> Array:
    """``(S, *rest)`` float array, chain-major over the sample dims (``S`` = chains x draws).

    >>> da = xr.DataArray(np.arange(6.0).reshape(2, 3), dims=SAMPLE)
    >>> stack(da).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    """
    extra = set(map(str, da.dims)) - {*SAMPLE, *rest}
    if extra:
        raise PosteriorError(f"{da.name}: unexpected dims {sorted(extra)}")
    arr = da.transpose(*SAMPLE, *rest).to_numpy().astype(float)
    return arr.reshape(-1, *arr.shape[2:])


def _stack_at(da: xr.DataArray, chains: Sequence[int], draws: Sequence[int]) -> Array:
    """:func:`stack` at the given chains and draws, setting and axis dims kept in that order."""
    da = da.sel({names.CHAIN_DIM: list(chains), names.DRAW_DIM: list(draws)})
    return stack(da, *(d for d in (names.SETTING_DIM, names.AXIS_DIM) if d in da.dims))


def variable(fit: xr.DataTree, name: str) -> xr.DataArray:
    """The posterior variable ``name`` (a :class:`PosteriorError` when the fit lacks it)."""
    if "posterior" not in fit.children or name not in fit["posterior"]:
        raise PosteriorError(f"the fit's posterior has no {name!r}")
    value = fit["posterior"][name]
    if not isinstance(value, xr.DataArray):
        raise PosteriorError(f"{name!r} in the fit is not a variable")
    return value


# --- what the fit holds --------------------------------------------------------------------------


def law_layout(fit: xr.DataTree) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The axes and settings of a law fit, as :func:`law_draws` reads them, after checking
    that the fit has what the recipe needs (without reading any draw)."""
    if "posterior" not in fit.children:
        raise PosteriorError("the fit has no posterior group")
    post = fit["posterior"]
    for var in (names.ALPHA, names.AMPLITUDE, names.LOSS_FLOOR):
        if var not in post:
            raise PosteriorError(f"the fit's posterior has no {var!r}")
    if "constant_data" not in fit.children or names.REFERENCE_SCALE not in fit["constant_data"]:
        raise PosteriorError(f"the fit's constant_data has no {names.REFERENCE_SCALE!r}")
    axes = tuple(str(a) for a in post[names.ALPHA][names.AXIS_DIM].to_numpy())
    settings = tuple(str(s) for s in post[names.ALPHA][names.SETTING_DIM].to_numpy())
    return axes, settings


def _check_power(fit: xr.DataTree) -> None:
    """Refuse a fit whose axes are not all power laws where the reader asked for power laws
    (``law_draws(forms=False)``, which takes ``K D^-alpha`` per axis). Every reader in the
    package reads the forms: the recipes, ``next`` and the law figure through
    :func:`bayesscale.law.mixed_draws.recipe_draws` (a stack's mixture), and prediction, the
    held-out check, cross-validation and LOO through their own readers."""
    other = fit_spec(fit).other_forms if fit.attrs.get(names.ATTR_SPEC) else {}
    stacked = other_forms_weight(fit)
    if stacked:
        raise PosteriorError(
            "the fit is a stack whose forms other than the power law carry weight ("
            + ", ".join(f"{f} {w:.2f}" for f, w in stacked.items())
            + "), and these draws are read as power laws: read the stack's mixture with "
            "bayesscale.law.mixed_draws.recipe_draws, or the power law's own fit, "
            "`fit.forms['power']` in Python"
        )
    if other:
        raise PosteriorError(
            f"the fit's spec gives axes other forms than a power law ({other}), and these "
            "draws are read as power laws: read them with law_draws(..., forms=True) or "
            "bayesscale.law.mixed_draws.recipe_draws"
        )


def axis_knees(
    fit: xr.DataTree, spec: ModelSpec, settings: Sequence[str] | None = None
) -> Array | None:
    """The knee ``k = D_0 / D_ref`` of each offset-power axis per sample and setting ``(S, G,
    A)`` (the fit's settings, or ``settings``), 0 on the other axes; ``None`` when no axis has
    the offset form. A knee shared by the settings (a fit of one setting) is repeated.

    >>> from bayesscale.recipe.synthetic import synthetic_fit
    >>> fit = synthetic_fit(draws=10, spread=0.0)
    >>> axis_knees(fit, fit_spec(fit)) is None  # power law on every axis
    True
    """
    return _axis_shape(fit, spec, OFFSET_POWER, names.KNEE, names.KNEE_AXIS_DIM, settings)


def axis_midpoints(
    fit: xr.DataTree, spec: ModelSpec, settings: Sequence[str] | None = None
) -> Array | None:
    """The midpoint ``m = log(D_mid / D_ref)`` of each saturating axis per sample and setting
    ``(S, G, A)``, 0 on the other axes; ``None`` when no axis has the saturating form."""
    return _axis_shape(fit, spec, SATURATING, names.MIDPOINT, names.MIDPOINT_AXIS_DIM, settings)


def _axis_shape(
    fit: xr.DataTree,
    spec: ModelSpec,
    form: str,
    var: str,
    dim: str,
    settings: Sequence[str] | None,
) -> Array | None:
    """:func:`_shapes` over every sample of the fit, at ``settings`` (all when ``None``)."""
    if not any(a.form == form for a in spec.axes):
        return None
    post = fit["posterior"].to_dataset()
    if settings is not None:
        post = post.sel({names.SETTING_DIM: list(settings)})
    return _shapes(post, spec, form, var, dim, spec.axis_names, *_samples(post, None))


def _shapes(
    post: xr.Dataset,
    spec: ModelSpec,
    form: str,
    var: str,
    dim: str,
    axes: Sequence[str],
    chains: Sequence[int],
    draws: Sequence[int],
) -> Array:
    """The shape parameter ``var`` (over ``dim``, and over the settings where it is per
    setting) of the spec's axes of ``form``, as ``(S, G, len(axes))`` at ``chains`` and
    ``draws``, for the settings of ``post``; 0 on the other axes (and on an axis the spec
    lacks, such as ``params_b``)."""
    n_settings = post.sizes[names.SETTING_DIM]
    out = np.zeros((len(chains) * len(draws), n_settings, len(axes)))
    chosen = [a.name for a in spec.axes if a.form == form and a.name in axes]
    if not chosen:
        return out
    if var not in post:
        raise PosteriorError(f"the spec has {form} axes but the posterior has no {var!r}")
    labels = [str(a) for a in post[var][dim].to_numpy()]
    for name in chosen:
        if name not in labels:
            raise PosteriorError(f"the posterior's {var!r} has no axis {name!r}")
        one = (
            post[var]
            .sel({dim: name})
            .sel({names.CHAIN_DIM: list(chains), names.DRAW_DIM: list(draws)})
        )
        values = stack(one, *((names.SETTING_DIM,) if names.SETTING_DIM in one.dims else ()))
        out[:, :, axes.index(name)] = values if values.ndim == 2 else values[:, None]
    return out


@dataclass(frozen=True)
class FitLayout:
    """What a law fit knows about its settings and groups (from its posterior coordinates,
    constant data and stored spec)."""

    spec: ModelSpec
    settings: tuple[str, ...]
    axes: tuple[str, ...]
    reference: Array
    size_reference: float | None
    model_size: dict[str, float]
    key_values: dict[str, tuple[str, ...]]  # setting key -> its value per fit setting
    size_groups: tuple[str, ...] | None  # coords of log_level_group, None without it
    exponent_groups: dict[str, tuple[str, ...]]
    chains: int
    draws: int

    @property
    def samples(self) -> int:
        return self.chains * self.draws


def fit_layout(fit: xr.DataTree) -> FitLayout:
    """Read a law fit's settings, reference scales and group labels; check what predicting
    needs is there."""
    kind = fit.attrs.get(names.ATTR_KIND, names.KIND_LAW_FIT)
    if kind != names.KIND_LAW_FIT:
        raise PosteriorError(f"expected a law fit ({names.KIND_LAW_FIT!r}), got a {kind!r}")
    axes, settings = law_layout(fit)
    spec_text = fit.attrs.get(names.ATTR_SPEC)
    if not spec_text:
        raise PosteriorError(f"the fit has no {names.ATTR_SPEC!r} attribute (no model spec)")
    spec = fit_spec(fit)
    post = fit["posterior"]
    const = fit["constant_data"].to_dataset()
    if axes != spec.axis_names:
        raise PosteriorError(f"the fit's axes {axes} differ from its spec's {spec.axis_names}")
    reference = const[names.REFERENCE_SCALE].sel({names.AXIS_DIM: list(axes)}).to_numpy()
    model_size: dict[str, float] = {}
    size_reference = None
    if spec.size is not None and names.SIZE_AMPLITUDE in post:
        if names.PARAMS_B not in const or names.SIZE_REFERENCE not in const:
            raise PosteriorError(
                f"the fit has a size term but constant_data lacks {names.PARAMS_B!r} or "
                f"{names.SIZE_REFERENCE!r}"
            )
        size_reference = float(const[names.SIZE_REFERENCE])
        sizes = const[names.PARAMS_B].sel({names.SETTING_DIM: list(settings)}).to_numpy()
        model_size = dict(zip(settings, sizes.astype(float).tolist(), strict=True))
    key_values = {}
    for key in spec.setting_keys:
        if key in const:
            values = const[key].sel({names.SETTING_DIM: list(settings)}).to_numpy()
            key_values[key] = tuple(str(v) for v in values)
        else:  # the setting label holds the keys in order
            pos = spec.setting_keys.index(key)
            key_values[key] = tuple(s.split(SETTING_SEPARATOR)[pos] for s in settings)
    size_groups = None
    if names.LOG_LEVEL_GROUP in post:
        size_groups = tuple(
            str(g) for g in post[names.LOG_LEVEL_GROUP][names.SIZE_GROUP_DIM].to_numpy()
        )
    exponent_groups = {}
    for key in spec.exponent_groups:
        name = names.group_effect_name(key)
        if name in post:
            dim = f"{names.EXPONENT_GROUP_DIM}_{key}"
            exponent_groups[key] = tuple(str(g) for g in post[name][dim].to_numpy())
    return FitLayout(
        spec=spec,
        settings=settings,
        axes=axes,
        reference=np.asarray(reference, dtype=float),
        size_reference=size_reference,
        model_size=model_size,
        key_values=key_values,
        size_groups=size_groups,
        exponent_groups=exponent_groups,
        chains=int(post.sizes[names.CHAIN_DIM]),
        draws=int(post.sizes[names.DRAW_DIM]),
    )


def at_draws(da: xr.DataArray, draws: LawDraws) -> Array:
    """``(chain, draw, ...)`` values at the samples of ``draws``, flattened to ``(S, ...)`` in
    their order: the draws :func:`law_draws` kept (its thinning, less any draw it left out)."""
    chains = np.unique(draws.chain).astype(int)
    kept = draws.draw[: draws.samples // chains.size].astype(int)
    arr = da.sel({names.CHAIN_DIM: chains, names.DRAW_DIM: kept})
    values = arr.transpose(names.CHAIN_DIM, names.DRAW_DIM, ...).to_numpy().astype(float)
    return values.reshape(-1, *values.shape[2:])


def setting_keys(fit: xr.DataTree, settings: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per setting: model, algorithm, domain (from constant_data, else the label) and
    params_b (None when the fit has no model size)."""
    const = fit["constant_data"].to_dataset() if "constant_data" in fit.children else xr.Dataset()
    out: dict[str, dict[str, Any]] = {}
    for s in settings:
        parts = [p.strip() for p in s.split(SETTING_SEPARATOR.strip())]
        keys: dict[str, Any] = dict(zip(names.SETTING_KEYS, parts, strict=False))
        for key in names.SETTING_KEYS:
            if key in const and names.SETTING_DIM in const[key].dims:
                keys[key] = str(const[key].sel({names.SETTING_DIM: s}).item())
        keys[names.PARAMS_B] = (
            float(const[names.PARAMS_B].sel({names.SETTING_DIM: s}))
            if names.PARAMS_B in const
            else None
        )
        out[s] = keys
    return out


def axis_columns(fit: xr.DataTree, axes: Sequence[str]) -> dict[str, str]:
    """The observation column each axis counts: the fit's spec says (``n_envs``, ``n_tasks``,
    ``rollouts`` for the default spec); the model size counts ``params_b``; a fit without a
    stored spec counts the paper's columns for the paper's axes, and the axis name otherwise.

    >>> from bayesscale.recipe.synthetic import synthetic_fit
    >>> axis_columns(synthetic_fit(draws=2, spread=0.0), ["env", "traj", "params_b"])
    {'env': 'n_envs', 'traj': 'rollouts', 'params_b': 'params_b'}
    """
    columns = {**DEFAULT_COLUMNS, names.PARAMS_B: names.PARAMS_B}
    if fit.attrs.get(names.ATTR_SPEC):
        columns.update({a.name: a.column for a in fit_spec(fit).axes})
    return {a: columns.get(a, a) for a in axes}


# --- the law per draw ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LawDraws:
    """The law's parameters per posterior sample (chain x draw flattened to ``S``).

    ``coef``, ``alpha``: (S, G, n); ``floor``: (S, G) — the loss floor plus the size term at the
    setting's model size; ``gamma`` (S, G) and ``beta`` (S, 1) with ``pair`` the interaction's
    axis positions, or ``None``. ``left_out``: posterior samples of the fit (after thinning)
    not in these draws, because a law of theirs is not finite (:func:`law_draws`).

    Axes of other forms than the power law (read with ``forms=True``) carry their shape:
    ``knee`` (S, G, n), the offset power's ``D_0 / D_ref`` (0: the power law), ``midpoint``
    (S, G, n) and ``saturating`` (S, n), the saturating form's; ``alpha`` is then a
    term's exponent or steepness, and ``coef`` stays ``A D_ref^alpha`` (``A`` the amplitude at
    ``D_ref``). A stack's mixture mixes forms across samples.
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
    left_out: int = 0
    knee: Array | None = None
    midpoint: Array | None = None
    saturating: NDArray[np.bool_] | None = None

    @property
    def samples(self) -> int:
        return int(self.coef.shape[0])

    @property
    def has_forms(self) -> bool:
        """Whether some sample's term is not a power law (a knee, or a saturating axis)."""
        knee = self.knee is not None and bool(np.any(self.knee > 0))
        return knee or (self.saturating is not None and bool(self.saturating.any()))

    def law(self, setting: int | None = None, extra: int = 0) -> allocate.PowerLaw | FormLaw:
        """The batch of laws: (S, G) for every setting, (S,) for ``setting`` alone, each with
        ``extra`` more unit dims before the axes (to broadcast over budgets or a grid). A
        :class:`~bayesscale.core.allocate.PowerLaw` where every term is a power law, else a
        :class:`~bayesscale.core.form_law.FormLaw`."""

        def sg(x: Array) -> Array:  # (S, G[, n]) -> (S[, G], 1 x extra[, n])
            y = x if setting is None else x[:, setting]
            lead = 2 if setting is None else 1
            return y.reshape(*y.shape[:lead], *(1,) * extra, *y.shape[lead:])

        def per_axis(x: NDArray[Any]) -> NDArray[Any]:  # (S, n) -> (S[, 1], 1 x extra, n)
            mid = (1,) * (extra + (setting is None))
            return x.reshape(x.shape[0], *mid, x.shape[1])

        if not self.has_forms:
            beta = None
            if self.beta is not None:
                beta = self.beta if setting is None else self.beta[:, 0]
                beta = beta.reshape(*beta.shape, *(1,) * extra)
            return allocate.PowerLaw(
                sg(self.coef),
                sg(self.alpha),
                sg(self.floor),
                None if self.gamma is None else sg(self.gamma),
                beta,
                self.pair,
            )
        if self.pair is not None:
            raise PosteriorError("a law with an interaction term has power-law axes only")
        alpha = sg(self.alpha)
        zeros = np.zeros_like(self.alpha)
        return FormLaw(
            amplitude=sg(self.coef) * self.reference ** (-alpha),
            alpha=alpha,
            reference=self.reference,
            floor=sg(self.floor),
            knee=sg(zeros if self.knee is None else self.knee),
            midpoint=sg(zeros if self.midpoint is None else self.midpoint),
            saturating=per_axis(
                np.zeros((self.samples, len(self.axes)), dtype=bool)
                if self.saturating is None
                else self.saturating
            ).astype(bool),
        )


def law_draws(
    fit: xr.DataTree,
    settings: Sequence[str] | None = None,
    max_draws: int | None = None,
    size_axis: bool = False,
    forms: bool = False,
) -> LawDraws:
    """Extract per-draw law parameters from a law fit (see the fit contract in
    ``docs/recipe.md``). ``max_draws`` thins each chain evenly to at most that many draws.

    The size term ``E (N/N_ref)^(-alpha_N)`` is a constant at each setting's model size; with
    ``size_axis`` it becomes one more axis, ``params_b`` (billions of parameters, coefficient
    ``E N_ref^alpha_N``, reference ``N_ref``), for the recipe to choose.

    A draw whose law is not finite in some setting is left out, with a :class:`PosteriorWarning`
    saying how many, and at the same draw index in every chain (the draws stay a chain x draw
    grid). The coefficient ``K = A D_ref^alpha`` overflows for exponents in the hundreds, which
    a preview's Laplace draws reach in their far tails (a spread of 7 on the log exponents);
    a sampled posterior has none.

    With ``forms`` a fit whose spec gives axes other forms reads their shapes too
    (``LawDraws.knee``, ``midpoint``, ``saturating``); without it such a fit, or a stack
    whose other forms carry weight, is refused (a reading of power laws). A
    stack's mixture is :func:`bayesscale.law.mixed_draws.recipe_draws`."""
    axes, all_settings = law_layout(fit)
    if not forms:
        _check_power(fit)
    post = fit["posterior"].to_dataset()
    const = fit["constant_data"].to_dataset()
    chosen = tuple(settings) if settings else all_settings
    missing = [s for s in chosen if s not in all_settings]
    if missing:
        raise PosteriorError(
            f"setting(s) {missing} not in the fit; its settings: {list(all_settings)}"
        )
    chains, draws = _samples(post, max_draws)
    post = post.sel({names.SETTING_DIM: list(chosen)})
    alpha = _stack_at(post[names.ALPHA].transpose(..., names.AXIS_DIM), chains, draws)
    amp = _stack_at(post[names.AMPLITUDE], chains, draws)
    reference = (
        const[names.REFERENCE_SCALE].sel({names.AXIS_DIM: list(axes)}).to_numpy().astype(float)
    )
    with np.errstate(over="ignore", invalid="ignore"):  # such a draw is left out below
        coef = laws.amplitude_at_one(amp, alpha, reference)
    law = LawDraws(
        axes=axes,
        settings=chosen,
        chain=np.repeat(chains, len(draws)).astype(float),
        draw=np.tile(draws, len(chains)).astype(float),
        coef=coef,
        alpha=alpha,
        floor=_stack_at(post[names.LOSS_FLOOR], chains, draws),
        reference=reference,
    )
    law = _with_size_term(law, post, const, chains, draws, size_axis)
    law = _with_interaction(law, fit, post, chains, draws)
    if forms:
        law = _with_forms(law, fit, post, chains, draws)
    return _finite_draws(law, len(chains), preview=bool(int(fit.attrs.get(names.ATTR_PREVIEW, 0))))


def _samples(post: xr.Dataset, max_draws: int | None) -> tuple[list[int], list[int]]:
    """The chains and draws read: every chain, each thinned evenly to ``max_draws``."""
    chains = [int(c) for c in post[names.CHAIN_DIM].to_numpy()]
    draws = [int(d) for d in post[names.DRAW_DIM].to_numpy()]
    if max_draws is not None and max_draws < len(draws):
        if max_draws < 1:
            raise PosteriorError(f"max_draws must be >= 1, got {max_draws}")
        thinned = np.unique(np.linspace(0, len(draws) - 1, max_draws).round().astype(int))
        draws = [draws[i] for i in thinned]
    return chains, draws


def _with_size_term(
    law: LawDraws,
    post: xr.Dataset,
    const: xr.Dataset,
    chains: list[int],
    draws: list[int],
    size_axis: bool,
) -> LawDraws:
    """The size term ``E (N/N_ref)^(-alpha_N)``: added to each setting's floor at its model
    size, or, with ``size_axis``, one more axis ``params_b`` for the recipe to choose."""
    if names.SIZE_AMPLITUDE not in post or names.ALPHA_SIZE not in post:
        if size_axis:
            raise PosteriorError(
                f"a price for {names.PARAMS_B!r} asks the recipe to choose the model size, but "
                "the fit has no size term"
            )
        return law
    if names.PARAMS_B not in const or names.SIZE_REFERENCE not in const:
        raise PosteriorError(
            f"the fit has a size term but constant_data lacks {names.PARAMS_B!r} or "
            f"{names.SIZE_REFERENCE!r}"
        )
    e = _stack_at(post[names.SIZE_AMPLITUDE], chains, draws)
    a_n = _stack_at(post[names.ALPHA_SIZE], chains, draws)
    n_ref = float(const[names.SIZE_REFERENCE])
    if size_axis:
        g = law.coef.shape[1]
        with np.errstate(over="ignore", invalid="ignore"):
            k_n = laws.amplitude_at_one(e, a_n, n_ref)
        return replace(
            law,
            coef=np.concatenate([law.coef, np.repeat(k_n[:, None, None], g, axis=1)], axis=-1),
            alpha=np.concatenate([law.alpha, np.repeat(a_n[:, None, None], g, axis=1)], axis=-1),
            reference=np.append(law.reference, n_ref),
            axes=(*law.axes, names.PARAMS_B),
        )
    size = const[names.PARAMS_B].sel({names.SETTING_DIM: list(law.settings)})
    with np.errstate(over="ignore", invalid="ignore"):
        term = laws.size_term(
            size.to_numpy().astype(float)[None, :], e[:, None], a_n[:, None], n_ref
        )
    return replace(law, floor=law.floor + term)


def _with_interaction(
    law: LawDraws, fit: xr.DataTree, post: xr.Dataset, chains: list[int], draws: list[int]
) -> LawDraws:
    """The interaction term's weights and exponent, where the fit has one."""
    if names.INTERACTION_GAMMA not in post or names.INTERACTION_BETA not in post:
        return law
    if not fit.attrs.get(names.ATTR_SPEC):
        raise PosteriorError(
            f"the fit has an interaction term but no {names.ATTR_SPEC!r} attribute"
        )
    spec = fit_spec(fit)
    if spec.interaction is None:
        raise PosteriorError(
            "the fit has interaction parameters but its spec declares no interaction"
        )
    axes = law.axes
    return replace(
        law,
        gamma=_stack_at(post[names.INTERACTION_GAMMA], chains, draws),
        beta=_stack_at(post[names.INTERACTION_BETA], chains, draws)[:, None],
        pair=(axes.index(spec.interaction.axes[0]), axes.index(spec.interaction.axes[1])),
    )


def _with_forms(
    law: LawDraws, fit: xr.DataTree, post: xr.Dataset, chains: list[int], draws: list[int]
) -> LawDraws:
    """The shapes of the axes whose spec form is not the power law: the offset power's knee,
    the saturating form's midpoint (per sample, setting and axis; 0 elsewhere, and on
    ``params_b``), and which axes saturate."""
    if not fit.attrs.get(names.ATTR_SPEC):
        return law
    spec = fit_spec(fit)
    knee = _shapes(
        post, spec, OFFSET_POWER, names.KNEE, names.KNEE_AXIS_DIM, law.axes, chains, draws
    )
    midpoint = _shapes(
        post, spec, SATURATING, names.MIDPOINT, names.MIDPOINT_AXIS_DIM, law.axes, chains, draws
    )
    shaped = [a.name for a in spec.axes if a.form in (OFFSET_POWER, SATURATING)]
    saturating = np.zeros((law.samples, len(law.axes)), dtype=bool)
    for a in spec.axes:
        if a.form == SATURATING and a.name in law.axes:
            saturating[:, law.axes.index(a.name)] = True
    if law.pair is not None and shaped:
        raise PosteriorError("the fit has an interaction term on axes other than power laws")
    return replace(law, knee=knee, midpoint=midpoint, saturating=saturating)


def _finite_draws(law: LawDraws, n_chain: int, preview: bool) -> LawDraws:
    """``law`` without the draw indices whose law is not finite in some setting and chain
    (the draws stay a chain x draw grid), with a :class:`PosteriorWarning` saying how many."""
    n_draw = law.samples // n_chain
    parts = [law.coef, law.alpha, law.floor] + [
        p for p in (law.gamma, law.beta, law.knee, law.midpoint) if p is not None
    ]
    finite = np.all([np.isfinite(p).reshape(len(p), -1).all(axis=1) for p in parts], axis=0)
    kept = finite.reshape(n_chain, n_draw).all(axis=0)  # a draw index kept in every chain
    if kept.all():
        return law
    why = _not_finite(law.coef[~finite], law.alpha[~finite])
    if not kept.any():
        raise PosteriorError(
            f"no posterior draw has a finite law in every setting ({why}): the fit "
            "cannot give a recipe"
        )
    left_out, bad = int((~kept).sum()) * n_chain, int((~finite).sum())
    others = (
        f", and {left_out - bad} at the same draw index in other chains" if left_out > bad else ""
    )
    warnings.warn(
        f"{left_out} of {n_chain * n_draw} posterior draws left out: {bad} whose law is "
        f"not finite in some setting ({why}){others}"
        + ("; a preview's Laplace draws reach such tails" if preview else ""),
        PosteriorWarning,
        stacklevel=3,
    )
    rows = np.tile(kept, n_chain)
    return replace(
        law,
        chain=law.chain[rows],
        draw=law.draw[rows],
        coef=law.coef[rows],
        alpha=law.alpha[rows],
        floor=law.floor[rows],
        gamma=None if law.gamma is None else law.gamma[rows],
        beta=None if law.beta is None else law.beta[rows],
        left_out=left_out,
        knee=None if law.knee is None else law.knee[rows],
        midpoint=None if law.midpoint is None else law.midpoint[rows],
        saturating=None if law.saturating is None else law.saturating[rows],
    )


def _not_finite(coef: Array, alpha: Array) -> str:
    """Why draws' laws are not finite, from their coefficients and exponents."""
    exponents = alpha[np.isfinite(alpha)]
    if np.isinf(coef).any() and exponents.size:
        return (
            f"the coefficient K = A D_ref^alpha overflows, at exponents up to {exponents.max():.3g}"
        )
    return "a parameter of the law is NaN or infinite"


# --- the population ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Population:
    """Population-level posterior draws (flattened to ``S`` samples) a new setting is drawn
    from: the pieces of :func:`bayesscale.law.model.build_law_model` below the setting level."""

    spec: ModelSpec
    log_alpha_pop: Array  # (S, A)
    alpha_spread: Array  # (S, A)
    log_slope_pop: Array  # (S, A)
    slope_spread: Array  # (S, A)
    log_level_group: Array | None  # (S, groups)
    log_level_pop: Array | None  # (S,)
    level_spread: Array  # (S,)
    group_effects: dict[str, Array]  # key -> (S, groups, A) = z * spread
    group_spreads: dict[str, Array]  # key -> (S, A)
    size_amplitude: Array | None  # (S,)
    # the offset-power axes' knee shared by the settings (S, A; 0 on other axes), or the scale
    # kappa of per-setting knees kappa |z| (knee_scale); one of the two where an axis has it
    knee: Array | None = None
    knee_scale: Array | None = None
    # the saturating axes' midpoint (S, A; 0 elsewhere): shared, or the mean mu of per-setting
    # midpoints mu + omega z (omega: midpoint_spread, S x A)
    midpoint: Array | None = None
    midpoint_spread: Array | None = None

    @property
    def shapes_per_setting(self) -> bool:
        """Whether a new setting draws its own knees or midpoints (and so needs ``z_shape``)."""
        return self.knee_scale is not None or self.midpoint_spread is not None

    def take(self, index: NDArray[np.int64]) -> Population:
        """The same population at the samples ``index``."""

        def pick(x: Array | None) -> Array | None:
            return None if x is None else x[index]

        return Population(
            spec=self.spec,
            log_alpha_pop=self.log_alpha_pop[index],
            alpha_spread=self.alpha_spread[index],
            log_slope_pop=self.log_slope_pop[index],
            slope_spread=self.slope_spread[index],
            log_level_group=pick(self.log_level_group),
            log_level_pop=pick(self.log_level_pop),
            level_spread=self.level_spread[index],
            group_effects={k: v[index] for k, v in self.group_effects.items()},
            group_spreads={k: v[index] for k, v in self.group_spreads.items()},
            size_amplitude=pick(self.size_amplitude),
            knee=pick(self.knee),
            knee_scale=pick(self.knee_scale),
            midpoint=pick(self.midpoint),
            midpoint_spread=pick(self.midpoint_spread),
        )

    def setting(
        self,
        exponent_effect: ArrayLike,
        log_level_base: ArrayLike,
        z_alpha: ArrayLike,
        z_slope: ArrayLike,
        z_level: ArrayLike,
        z_shape: ArrayLike | None = None,
    ) -> DrawnSetting:
        """One setting's law per sample from its standardised deviations, as the model
        composes them::

            log alpha = log alpha_pop + effect + tau z_alpha
            k = kappa |z_shape|,  m = mu + omega z_shape   (per-setting knees and midpoints)
            A = exp(log s_pop + sigma_s z_slope - log alpha)   (times 1 + k on an offset axis)
            L_inf = exp(log c_base + sigma_c z_level) - sum_a A_a - E

        A shared knee or midpoint is taken as it is; ``z_shape`` is ``(S, A)`` (each axis has
        one form, so one deviation per axis serves both shapes), needed only where the knees or
        midpoints are per setting.
        """
        log_alpha = (
            self.log_alpha_pop
            + np.asarray(exponent_effect, dtype=float)
            + self.alpha_spread * np.asarray(z_alpha, dtype=float)
        )
        if self.shapes_per_setting and z_shape is None:
            raise ValueError("per-setting knees or midpoints need their deviations, z_shape")
        z = np.asarray(0.0 if z_shape is None else z_shape, dtype=float)
        knee, midpoint = self.knee, self.midpoint
        if self.knee_scale is not None:
            knee = self.knee_scale * np.abs(z)
        if midpoint is not None and self.midpoint_spread is not None:
            midpoint = midpoint + self.midpoint_spread * z
        log_slope = self.log_slope_pop + self.slope_spread * np.asarray(z_slope, dtype=float)
        amplitude = np.exp(log_slope - log_alpha) * laws.amplitude_widening(
            [a.form for a in self.spec.axes], np.exp(log_alpha), knee, midpoint
        )
        level = np.exp(
            np.asarray(log_level_base, dtype=float)
            + self.level_spread * np.asarray(z_level, dtype=float)
        )
        floor = level - amplitude.sum(axis=-1)
        if self.size_amplitude is not None:
            floor = floor - self.size_amplitude
        return DrawnSetting(np.exp(log_alpha), amplitude, floor, knee, midpoint)


@dataclass(frozen=True)
class DrawnSetting:
    """One setting's law per sample (:meth:`Population.setting`): ``alpha``, ``amplitude``,
    ``knee`` and ``midpoint`` (S, A; the last two ``None`` where no axis has that form) and
    ``floor`` (S,)."""

    alpha: Array
    amplitude: Array
    floor: Array
    knee: Array | None
    midpoint: Array | None


def read_population(fit: xr.DataTree) -> Population:
    """The population-level draws of a law fit (needs the fit's free variables, so a fit of
    one setting, which has no spreads, cannot predict new settings)."""
    layout = fit_layout(fit)
    post = fit["posterior"].to_dataset()
    axis = names.AXIS_DIM
    needed = [
        names.LOG_ALPHA_POP,
        names.ALPHA_SPREAD,
        names.LOG_SLOPE_POP,
        names.SLOPE_SPREAD,
        names.LEVEL_SPREAD,
    ]
    missing = [v for v in needed if v not in post]
    if names.LOG_LEVEL_GROUP not in post and names.LOG_LEVEL_POP not in post:
        missing.append(f"{names.LOG_LEVEL_GROUP} or {names.LOG_LEVEL_POP}")
    if missing:
        why = (
            " (a fit of a single setting has no population spread)"
            if len(layout.settings) == 1
            else ""
        )
        raise PosteriorError(
            f"the fit's posterior lacks {missing}, needed to draw a new setting from the "
            f"population{why}"
        )
    effects, spreads = {}, {}
    for key in layout.exponent_groups:
        dim = f"{names.EXPONENT_GROUP_DIM}_{key}"
        spread = stack(post[names.group_spread_name(key)], axis)
        effects[key] = stack(post[names.group_effect_name(key)], dim, axis) * spread[:, None, :]
        spreads[key] = spread
    return Population(
        spec=layout.spec,
        log_alpha_pop=stack(post[names.LOG_ALPHA_POP], axis),
        alpha_spread=stack(post[names.ALPHA_SPREAD], axis),
        log_slope_pop=stack(post[names.LOG_SLOPE_POP], axis),
        slope_spread=stack(post[names.SLOPE_SPREAD], axis),
        log_level_group=(
            stack(post[names.LOG_LEVEL_GROUP], names.SIZE_GROUP_DIM)
            if names.LOG_LEVEL_GROUP in post
            else None
        ),
        log_level_pop=stack(post[names.LOG_LEVEL_POP]) if names.LOG_LEVEL_POP in post else None,
        level_spread=stack(post[names.LEVEL_SPREAD]),
        group_effects=effects,
        group_spreads=spreads,
        size_amplitude=(
            stack(post[names.SIZE_AMPLITUDE]) if names.SIZE_AMPLITUDE in post else None
        ),
        **_population_shapes(fit, layout.spec),
    )


def _population_shapes(fit: xr.DataTree, spec: ModelSpec) -> dict[str, Any]:
    """The shapes a new setting takes (:class:`Population`'s fields): shared knees and
    midpoints ``(S, A)``, or the population of per-setting ones."""
    post = fit["posterior"].to_dataset()
    samples = _samples(post, None)

    def read(form: str, var: str, dim: str) -> Array:  # a population variable, as (S, A)
        return _shapes(post, spec, form, var, dim, spec.axis_names, *samples)[:, 0]

    knee, midpoint = axis_knees(fit, spec), axis_midpoints(fit, spec)
    out: dict[str, Any] = {
        "knee": None if knee is None else knee[:, 0],
        "midpoint": None if midpoint is None else midpoint[:, 0],
    }
    if knee is not None and names.KNEE_SCALE in post:
        out["knee"] = None
        out["knee_scale"] = read(OFFSET_POWER, names.KNEE_SCALE, names.KNEE_AXIS_DIM)
    if midpoint is not None and names.MIDPOINT_POP in post:
        out["midpoint"] = read(SATURATING, names.MIDPOINT_POP, names.MIDPOINT_AXIS_DIM)
        out["midpoint_spread"] = read(SATURATING, names.MIDPOINT_SPREAD, names.MIDPOINT_AXIS_DIM)
    return out
