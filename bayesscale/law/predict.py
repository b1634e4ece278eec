"""Posterior prediction of a law fit for arbitrary rows, in NumPy from the saved posterior.

No PyMC model is rebuilt or compiled: every posterior draw ``d`` gives the law exactly as
:func:`bayesscale.law.model.build_law_model` defines it,

.. math::

    L_{d,i} = L_{\\infty,d,s} + E_d (N_s/N_\\mathrm{ref})^{-\\alpha_{N,d}}
              + \\sum_a A_{d,s,a} (m_d^{[i\\,\\mathrm{dense}]} D_{i,a}/D_{a,\\mathrm{ref}})^{-\\alpha_{d,s,a}}
              - \\gamma_{d,s} (D_{i,E} D_{i,T})^{-\\beta_d}

(``m`` multiplies the dense-reward axis on dense rows; terms the spec lacks are absent), the
expected success ``p = exp(-L)`` and the predictive outcome

.. math::

    k_i \\sim \\mathrm{BetaBinomial}(n_i, p_{d,i} \\phi_d, (1 - p_{d,i}) \\phi_d)
    \\qquad\\text{or}\\qquad
    \\log y_i \\sim \\mathrm{StudentT}(\\nu, \\log L_{d,i}, \\sigma_d).

Settings the fit knows use their own posterior (``alpha``, ``amplitude``, ``loss_floor``,
``interaction_gamma``). A setting it does not know is an error, except

* a new model of a known size group (with the default spec: a new model size for a known
  algorithm and domain) when the law has a size term: the setting is drawn from the population,
  ``log alpha = log alpha_pop + sum_g b_g + tau z``, ``log s = log s_pop + sigma_s z'``,
  ``log c = log c_group + sigma_c z''`` with fresh ``z ~ N(0, 1)`` per draw, its interaction
  weight from its Beta prior, and the floor's soft wall applied by rejection (the population
  prior of a setting is ``N(z) sigmoid(L_inf(z) / epsilon)``); its ``params_b`` enters the
  size term;
* with ``new_groups="pooled"``, any new setting: unknown exponent groups get fresh effects
  ``b ~ N(0, tau_g)`` and an unknown size group a level from the spec's level prior (the model
  does not pool group levels, so that prior is what a new group's level is known to be).

Example
-------
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> import pandas as pd
>>> row = pd.DataFrame({"model": ["S0"], "algorithm": ["grpo"], "domain": ["math"],
...                     "n_envs": [256], "n_tasks": [10240], "rollouts": [8], "trials": [2000]})
>>> pred = predict(synthetic_fit(draws=20, spread=0.0), row)  # doctest: +SKIP
>>> pred.expected().shape  # (samples, rows)  # doctest: +SKIP
(40, 1)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike, NDArray
from scipy import special

from bayesscale import names
from bayesscale.core import laws
from bayesscale.data.observations import (
    SETTING_SEPARATOR,
    ObservationError,
    Table,
    axis_sizes,
    column_error,
    outcome_columns,
    prepare,
    rows_text,
    setting_labels,
    validate,
)
from bayesscale.data.spec import ModelSpec
from bayesscale.law.posterior import (
    SAMPLE,
    FitLayout,
    PosteriorError,
    axis_knees,
    axis_midpoints,
    fit_layout,
    read_population,
    stack,
)
from bayesscale.law.stack import members

Array = NDArray[np.float64]

NEW_GROUPS = (None, names.NEW_GROUPS_POOLED)
MIN_LOSS = 1e-12  # predictions of draws whose law gives L <= 0 (p >= 1) use this loss
MAX_WALL_TRIES = 1000  # rejection rounds for the floor's soft wall of a new setting


class PredictError(PosteriorError):
    """A prediction the fit cannot make (a population too wide for a new setting, rows without
    the outcome or trials a likelihood needs), or a fit that lacks what it needs."""


# --- validating rows to predict --------------------------------------------------------------


def validate_rows(
    frame: pd.DataFrame, spec: ModelSpec, source: str = "<table>", observed: bool = True
) -> pd.DataFrame:
    """:func:`bayesscale.data.observations.validate` for rows to *predict*, not to fit: every
    per-row rule, none of the fitting-only ones; ``observed=False`` allows rows without
    outcomes (see there)."""
    return validate(frame, spec, source, for_fitting=False, observed=observed)


def table_layout(table: Table, spec: ModelSpec) -> FitLayout:
    """The layout a fit of ``table`` would have (settings, groups, model sizes), without
    fitting: to check held-out settings before sampling (no draws: ``chains = draws = 0``)."""
    design = prepare(table, spec)
    labels = setting_labels(table.frame, spec)
    first = _setting_values(table.frame, spec, labels).reindex(list(design.settings))
    model_size = {}
    if design.model_size is not None:
        model_size = dict(
            zip(design.settings, design.model_size.astype(float).tolist(), strict=True)
        )
    return FitLayout(
        spec=spec,
        settings=design.settings,
        axes=spec.axis_names,
        reference=design.reference,
        size_reference=design.size_reference,
        model_size=model_size,
        key_values={k: tuple(first[k].astype(str)) for k in spec.setting_keys},
        size_groups=design.size_groups if design.size_group_index is not None else None,
        exponent_groups={k: v[0] for k, v in design.exponent_groups.items()},
        chains=0,
        draws=0,
    )


def size_group_label(values: dict[str, str], spec: ModelSpec) -> str:
    """A setting's size-group label: the size term's group keys joined by ``' | '``."""
    if spec.size is None or not spec.size.groups:
        return "all"
    return SETTING_SEPARATOR.join(str(values[g]) for g in spec.size.groups)


# --- settings of the rows: known ones and new ones ---------------------------------------------


@dataclass(frozen=True)
class NewSetting:
    """A setting the fit does not know, with its group labels (``None``: unknown to the fit)."""

    label: str
    size_group: int | None  # index into the fit's size groups
    size_group_label: str
    exponent_groups: dict[str, int | None]
    exponent_group_labels: dict[str, str]


def _setting_values(frame: pd.DataFrame, spec: ModelSpec, labels: pd.Series) -> pd.DataFrame:
    first = frame.groupby(labels.to_numpy(), sort=False).head(1)
    return first.set_axis(labels[first.index].to_numpy())


def classify_settings(
    frame: pd.DataFrame,
    layout: FitLayout,
    labels: pd.Series,
    new_groups: str | None,
    source: str,
) -> list[NewSetting]:
    """Check every row's setting against the fit; return the new settings that may be
    predicted from the population, raise ``ObservationError`` (naming ``source``, the column
    and the rows by ``frame``'s index as 0-based positions) for the others."""
    spec = layout.spec
    known = set(layout.settings)
    first = _setting_values(frame, spec, labels)
    if spec.size is not None and layout.model_size:
        column = spec.size.column
        for label, fitted in layout.model_size.items():
            rows = frame.index[(labels == label).to_numpy()]
            if len(rows):
                given = frame.loc[rows, column].to_numpy(float)
                bad = rows[~np.isclose(given, fitted, rtol=1e-9, atol=0.0)]
                if len(bad):
                    raise column_error(
                        source,
                        column,
                        bad,
                        f"setting {label!r} was fitted with {column} = {fitted:g}, these rows give "
                        f"{frame.loc[bad[0], column]:g}; a different model is a different setting "
                        "(another value in the setting keys)",
                    )
    new: list[NewSetting] = []
    for label in dict.fromkeys(labels):
        if label in known:
            continue
        values = {k: str(first.loc[label, k]) for k in spec.setting_keys}
        rows = frame.index[(labels == label).to_numpy()]
        size_label = size_group_label(values, spec)
        size_index = None
        if layout.size_groups is not None and size_label in layout.size_groups:
            size_index = layout.size_groups.index(size_label)
        exp_index = {
            key: (groups.index(values[key]) if values[key] in groups else None)
            for key, groups in layout.exponent_groups.items()
        }
        groups_known = (layout.size_groups is None or size_index is not None) and all(
            i is not None for i in exp_index.values()
        )
        new_model = spec.size is not None and layout.size_groups is not None and groups_known
        if new_groups != names.NEW_GROUPS_POOLED and not new_model:
            raise _unknown_setting(frame, layout, label, values, rows, size_label, source)
        new.append(
            NewSetting(
                label=label,
                size_group=size_index,
                size_group_label=size_label,
                exponent_groups=exp_index,
                exponent_group_labels={k: values[k] for k in layout.exponent_groups},
            )
        )
    return new


def _unknown_setting(
    frame: pd.DataFrame,
    layout: FitLayout,
    label: str,
    values: dict[str, str],
    rows: pd.Index,
    size_label: str,
    source: str,
) -> ObservationError:
    spec = layout.spec
    hint = (
        f"Pass new_groups={names.NEW_GROUPS_POOLED!r} (--new-groups {names.NEW_GROUPS_POOLED}) to "
        "draw it, and any unknown group, from the population's spreads."
    )
    for key in spec.setting_keys:
        fitted = sorted(set(layout.key_values.get(key, ())))
        if values[key] not in fitted:
            where = rows_text(rows, source)
            detail = (
                f"setting {label!r} is not in the fit, and {values[key]!r} is not among the fit's "
                f"{key} values {fitted}."
            )
            if spec.size is None:
                detail += " The law has no size term, so no new setting is predicted by default."
            elif key not in spec.size.groups:
                detail += (
                    f" (A new {key} of a known {list(spec.size.groups)} group is predicted from "
                    "the population.)"
                )
            return ObservationError(f"{source}: column {key!r}, {where}: {detail} {hint}")
    if spec.size is not None and layout.size_groups is not None:
        cols = ",".join(spec.size.groups)
        return ObservationError(
            f"{source}: column {cols!r}, {rows_text(rows, source)}: setting {label!r} is not in "
            f"the fit, and its {list(spec.size.groups)} group {size_label!r} is not among the "
            f"fit's {list(layout.size_groups)}. {hint}"
        )
    cols = ",".join(spec.setting_keys)
    why = (
        "the law has no size term, so a new model is a new setting too"
        if spec.size is None
        else "its groups are not all known"
    )
    return ObservationError(
        f"{source}: column {cols!r}, {rows_text(rows, source)}: setting {label!r} is not among "
        f"the fit's settings {list(layout.settings)} ({why}). {hint}"
    )


# --- per-setting parameter draws ----------------------------------------------------------------


@dataclass(frozen=True)
class SettingDraws:
    """Law parameters per sample and setting: ``alpha``, ``amplitude`` (S, G, A),
    ``floor`` (S, G) (the loss floor without the size term), ``gamma`` (S, G) or None, the
    offset-power knees ``knee`` and saturating midpoints ``midpoint`` (S, G, A), ``None``
    where no axis has that form, and ``concentration`` (S, G) where each setting has its own
    (``[outcome] concentration_spread``; else ``None``, the fit's one)."""

    settings: tuple[str, ...]
    alpha: Array
    amplitude: Array
    floor: Array
    gamma: Array | None
    knee: Array | None = None
    midpoint: Array | None = None
    concentration: Array | None = None


def _own_concentration(post: xr.Dataset) -> bool:
    """Whether each setting has its own concentration (a ``setting`` dim)."""
    return names.CONCENTRATION in post and names.SETTING_DIM in post[names.CONCENTRATION].dims


def _known_draws(fit: xr.DataTree, settings: Sequence[str], layout: FitLayout) -> SettingDraws:
    post = fit["posterior"].to_dataset().sel({names.SETTING_DIM: list(settings)})
    s, a = names.SETTING_DIM, names.AXIS_DIM
    gamma = None
    if layout.spec.interaction is not None:
        if names.INTERACTION_GAMMA not in post:
            raise PredictError(
                f"the spec has an interaction but the fit has no {names.INTERACTION_GAMMA!r}"
            )
        gamma = stack(post[names.INTERACTION_GAMMA], s)
    return SettingDraws(
        settings=tuple(settings),
        alpha=stack(post[names.ALPHA], s, a),
        amplitude=stack(post[names.AMPLITUDE], s, a),
        floor=stack(post[names.LOSS_FLOOR], s),
        gamma=gamma,
        knee=axis_knees(fit, layout.spec, settings),
        midpoint=axis_midpoints(fit, layout.spec, settings),
        concentration=stack(post[names.CONCENTRATION], s) if _own_concentration(post) else None,
    )


def _new_draws(
    fit: xr.DataTree, new: Sequence[NewSetting], layout: FitLayout, rng: np.random.Generator
) -> SettingDraws:
    """Draw each new setting (and each new group, shared by its settings) from the population;
    the floors' soft wall by rejection, jointly per sample."""
    pop = read_population(fit)
    spec = layout.spec
    n_s, n_a, n_g = layout.samples, len(layout.axes), len(new)
    level_mu, level_sd = float(np.log(spec.level.median)), spec.level.log_sd
    new_size = sorted({n.size_group_label for n in new if n.size_group is None})
    new_exp = {
        key: sorted({n.exponent_group_labels[key] for n in new if n.exponent_groups[key] is None})
        for key in layout.exponent_groups
    }
    alpha = np.empty((n_s, n_g, n_a))
    amplitude = np.empty((n_s, n_g, n_a))
    has_knee = pop.knee is not None or pop.knee_scale is not None
    knee = np.empty((n_s, n_g, n_a)) if has_knee else None
    midpoint = None if pop.midpoint is None else np.empty((n_s, n_g, n_a))
    floor = np.empty((n_s, n_g))
    gamma = np.empty((n_s, n_g)) if spec.interaction is not None else None
    todo = np.arange(n_s)
    for _ in range(MAX_WALL_TRIES):
        m = len(todo)
        sub = pop.take(todo)
        size_draw = {g: rng.normal(level_mu, level_sd, m) for g in new_size}
        exp_draw = {
            key: {g: rng.standard_normal((m, n_a)) * sub.group_spreads[key] for g in groups}
            for key, groups in new_exp.items()
        }
        a_t = np.empty((m, n_g, n_a))
        amp_t = np.empty((m, n_g, n_a))
        k_t = np.zeros((m, n_g, n_a))
        m_t = np.zeros((m, n_g, n_a))
        fl_t = np.empty((m, n_g))
        for j, setting in enumerate(new):
            effect = np.zeros((m, n_a))
            for key, index in setting.exponent_groups.items():
                if index is None:
                    effect += exp_draw[key][setting.exponent_group_labels[key]]
                else:
                    effect += sub.group_effects[key][:, index]
            if sub.log_level_group is None:
                if sub.log_level_pop is None:  # read_population checked one exists
                    raise PredictError("the fit has neither a group level nor a population level")
                base = sub.log_level_pop
            elif setting.size_group is not None:
                base = sub.log_level_group[:, setting.size_group]
            else:
                base = size_draw[setting.size_group_label]
            drawn = sub.setting(
                effect,
                base,
                rng.standard_normal((m, n_a)),
                rng.standard_normal((m, n_a)),
                rng.standard_normal(m),
                rng.standard_normal((m, n_a)) if sub.shapes_per_setting else None,
            )
            a_t[:, j], amp_t[:, j], fl_t[:, j] = drawn.alpha, drawn.amplitude, drawn.floor
            if drawn.knee is not None:
                k_t[:, j] = drawn.knee
            if drawn.midpoint is not None:
                m_t[:, j] = drawn.midpoint
        # soft wall: accept with probability prod_s sigmoid(L_inf,s / softness)
        log_accept = -np.logaddexp(0.0, -fl_t / spec.floor_softness).sum(axis=1)
        ok = np.log(rng.uniform(size=m)) < log_accept
        done = todo[ok]
        alpha[done], amplitude[done], floor[done] = a_t[ok], amp_t[ok], fl_t[ok]
        if knee is not None:
            knee[done] = k_t[ok]
        if midpoint is not None:
            midpoint[done] = m_t[ok]
        if gamma is not None and spec.interaction is not None:
            weight = rng.beta(*spec.interaction.weight_beta, size=(int(ok.sum()), n_g))
            gamma[done] = weight * np.maximum(fl_t[ok], 0.0)
        todo = todo[~ok]
        if len(todo) == 0:
            break
    else:
        raise PredictError(
            f"{len(todo)} of {n_s} posterior samples put no mass on a positive loss floor for new "
            f"setting(s) {[n.label for n in new]} after {MAX_WALL_TRIES} tries; the population "
            "is too wide to predict them"
        )
    concentration = None
    post = fit["posterior"].to_dataset()
    if _own_concentration(post):  # exp(log phi_pop + sigma z), after the laws' draws
        log_pop = stack(post[names.LOG_CONCENTRATION_POP])[:, None]
        spread = stack(post[names.CONCENTRATION_SPREAD])[:, None]
        concentration = np.exp(log_pop + spread * rng.standard_normal((n_s, n_g)))
    return SettingDraws(
        settings=tuple(n.label for n in new),
        alpha=alpha,
        amplitude=amplitude,
        floor=floor,
        gamma=gamma,
        knee=knee,
        midpoint=midpoint,
        concentration=concentration,
    )


# --- the prediction ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    """Per-draw predictions for the rows of a table: ``loss`` is ``(S, R)`` (``S`` = chains x
    draws, chain-major; ``R`` rows in table order)."""

    frame: pd.DataFrame
    source: str
    outcome: str
    chains: int
    draws: int
    setting: tuple[str, ...]  # per row
    new_setting: NDArray[np.bool_]  # per row
    loss: Array
    trials: NDArray[np.int64] | None
    concentration: Array | None  # (S,), or (S, R) where each setting has its own
    log_loss_sigma: Array | None  # (S,)
    student_nu: float
    observed: Array | None = field(default=None)  # successes or loss per row, when given
    contamination: Array | None = None  # (S,): the share of collapsed runs, where modelled

    @property
    def rows(self) -> int:
        return int(self.loss.shape[1])

    @property
    def nonpositive(self) -> int:
        """How many (draw, row) pairs have ``L <= 0`` (``p >= 1``): possible where the floor's
        soft wall lets a draw's floor dip below zero and the row is far beyond the data. Their
        predictions use ``L = MIN_LOSS``; their likelihood is undefined (NaN), as in PyMC."""
        return int(np.sum(~(self.loss > 0)))

    def _clipped(self) -> Array:
        return np.maximum(self.loss, MIN_LOSS)

    def expected(self) -> Array:
        """The law's expected outcome per draw: ``p = exp(-L)`` (success) or ``L`` (loss)."""
        loss = self._clipped()
        return laws.success_from_loss(loss) if self.outcome == "success" else loss

    def _beta_parameters(self, loss: Array) -> tuple[Array, Array]:
        if self.concentration is None:
            raise PredictError(f"the fit has no {names.CONCENTRATION!r}")
        with np.errstate(invalid="ignore"):  # L <= 0: NaN, as the model's own logp
            logit = laws.logit_from_loss(loss)
        phi = self.concentration[:, None] if self.concentration.ndim == 1 else self.concentration
        return special.expit(logit) * phi, special.expit(-logit) * phi

    def sample(self, seed: int | np.random.Generator = 0, replicates: int = 1) -> Array:
        """Posterior predictive draws ``(replicates * S, R)``: successes ``k`` (beta-binomial:
        seed-to-seed spread and binomial noise) or a loss ``y`` (Student-t on ``log y``)."""
        rng = np.random.default_rng(seed)
        if replicates < 1:
            raise ValueError(f"replicates must be >= 1, got {replicates}")
        if self.outcome == "success":
            a, b = self._beta_parameters(self._clipped())
            if self.trials is None:
                raise PredictError("predicting success counts needs the trials column")
            a, b = np.tile(a, (replicates, 1)), np.tile(b, (replicates, 1))
            # p = exp(-L) underflows to 0 where the loss is huge (a law with an exponent of
            # 1e7 far below its reference: a preview's far tails): the beta is then a point
            # mass at 0, as in the limit a -> 0 (likewise at 1 for b -> 0)
            at_zero, at_one = a == 0, b == 0
            point = at_zero | at_one
            q = rng.beta(np.where(point, 1.0, a), np.where(point, 1.0, b))
            q = np.where(at_zero, 0.0, np.where(at_one, 1.0, q))
            counts = rng.binomial(self.trials[None, :], q).astype(float)
            if self.contamination is not None:  # a collapsed run: uniform on 0..n
                eps = np.tile(self.contamination[:, None], (replicates, 1))
                collapsed = rng.uniform(size=counts.shape) < eps
                uniform = rng.integers(0, self.trials[None, :] + 1, size=counts.shape)
                counts = np.where(collapsed, uniform, counts)
            return counts
        if self.log_loss_sigma is None:
            raise PredictError(f"the fit has no {names.LOG_LOSS_SIGMA!r}")
        log_l = np.tile(np.log(self._clipped()), (replicates, 1))
        sigma = np.tile(self.log_loss_sigma[:, None], (replicates, 1))
        return np.exp(log_l + sigma * rng.standard_t(self.student_nu, size=log_l.shape))

    def log_likelihood(self, observed: ArrayLike | None = None, clip: bool = False) -> Array:
        """Pointwise log-likelihood ``(S, R)`` of the observed outcome (the rows' own unless
        given), the density the model's ``outcome`` variable has: the beta-binomial pmf of
        ``k`` (mixed with the uniform ``1/(n+1)`` by the contamination, where modelled), or
        the Student-t density of ``log y``. A draw whose law gives ``L <= 0`` has NaN there,
        as in PyMC; with ``clip`` it is evaluated at ``L = MIN_LOSS``, as the predictive
        draws (:meth:`sample`) and so the held-out scores take it."""
        obs = self.observed if observed is None else np.asarray(observed, dtype=float)
        if obs is None:
            raise PredictError("the rows have no observed outcome")
        if self.outcome == "success":
            if self.trials is None:
                raise PredictError("the beta-binomial likelihood needs the trials column")
            a, b = self._beta_parameters(self._clipped() if clip else self.loss)
            ll = beta_binomial_logpmf(obs[None, :], self.trials[None, :], a, b)
            if self.contamination is None:
                return ll
            return with_collapses(ll, self.trials[None, :], self.contamination[:, None])
        if self.log_loss_sigma is None:
            raise PredictError(f"the fit has no {names.LOG_LOSS_SIGMA!r}")
        with np.errstate(invalid="ignore", divide="ignore"):
            log_loss = np.where(self.loss > 0, np.log(np.abs(self.loss)), np.nan)
        return student_t_logpdf(
            np.log(obs)[None, :], self.student_nu, log_loss, self.log_loss_sigma[:, None]
        )

    def log_predictive_density(self) -> Array:
        """Each row's log predictive density ``log mean_d p(y | theta_d)`` (R,): the score of
        the posterior predictive that :meth:`sample` draws from (clipped loss)."""
        log_lik = self.log_likelihood(clip=True)
        return np.asarray(special.logsumexp(log_lik, axis=0) - np.log(log_lik.shape[0]))

    def to_dataarray(self, values: Array, name: str) -> xr.DataArray:
        """``(S, R)`` values as a ``(chain, draw, obs)`` DataArray."""
        shaped = np.asarray(values).reshape(self.chains, self.draws, self.rows)
        return xr.DataArray(
            shaped,
            dims=(*SAMPLE, names.OBS_DIM),
            coords={
                names.CHAIN_DIM: np.arange(self.chains),
                names.DRAW_DIM: np.arange(self.draws),
                names.OBS_DIM: np.arange(self.rows),
            },
            name=name,
        )


def with_collapses(loglik: ArrayLike, trials: ArrayLike, contamination: ArrayLike) -> Array:
    """``log((1 - eps) f(k) + eps / (n + 1))``: a beta-binomial log pmf mixed with a collapsed
    run's uniform count (``[outcome] seed_noise = "contaminated"``, :mod:`bayesscale.law.likelihood`),
    broadcast.

    >>> round(float(with_collapses(np.log(0.2), 9, 0.5)), 12) == round(float(np.log(0.15)), 12)
    True
    """
    eps = np.asarray(contamination, dtype=float)
    with np.errstate(divide="ignore"):  # eps = 0 (a mixture's draw without collapses) or 1
        log_eps, log_rest = np.log(eps), np.log1p(-eps)
    n = np.asarray(trials, dtype=float)
    return np.asarray(np.logaddexp(log_rest + loglik, log_eps - np.log1p(n)), dtype=float)


def beta_binomial_logpmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike) -> Array:
    """``log C(n, k) + log B(k + a, n - k + b) - log B(a, b)``, written as PyMC writes it
    (``log C(n, k) = -log(n + 1) - log B(n - k + 1, k + 1)``).

    >>> round(float(beta_binomial_logpmf(1, 2, 1.0, 1.0)), 12) == round(float(np.log(1 / 3)), 12)
    True
    """
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    binom = -np.log1p(n) - special.betaln(n - k + 1, k + 1)
    return np.asarray(binom + special.betaln(k + a, n - k + b) - special.betaln(a, b), dtype=float)


def student_t_logpdf(x: ArrayLike, nu: float, mu: ArrayLike, sigma: ArrayLike) -> Array:
    """Log density of ``StudentT(nu, mu, sigma)`` at ``x``."""
    z = (np.asarray(x) - np.asarray(mu)) / np.asarray(sigma)
    return np.asarray(
        special.gammaln((nu + 1) / 2)
        - special.gammaln(nu / 2)
        - 0.5 * np.log(nu * np.pi)
        - np.log(sigma)
        - (nu + 1) / 2 * np.log1p(z * z / nu),
        dtype=float,
    )


def _joined(parts: Sequence[SettingDraws], name: str) -> Array | None:
    """The parts' ``knee``, ``midpoint`` or ``concentration`` joined over their settings
    (S, G[, A]); ``None`` when the fit has none per setting (then no part has it)."""
    values = [getattr(p, name) for p in parts]
    if any(v is None for v in values):
        return None
    return np.concatenate(values, axis=1)


def _law_loss(
    fit: xr.DataTree,
    post: xr.Dataset,
    layout: FitLayout,
    frame: pd.DataFrame,
    parts: Sequence[SettingDraws],
    sidx: NDArray[np.int64],
) -> Array:
    """The law's loss ``(S, R)`` at each row, its setting's draws at ``sidx`` (into the
    settings of ``parts`` in order): each axis's term by its form (dense reward scaling its
    axis), the size term and the interaction."""
    spec = layout.spec
    alpha = np.concatenate([p.alpha for p in parts], axis=1)
    amplitude = np.concatenate([p.amplitude for p in parts], axis=1)
    floor = np.concatenate([p.floor for p in parts], axis=1)
    sizes = axis_sizes(frame, spec)
    log_x = np.log(sizes / layout.reference)[None, :, :] * np.ones((layout.samples, 1, 1))
    if spec.dense_reward is not None:
        if names.DENSE_MULTIPLIER not in post:
            raise PredictError(
                f"the spec has dense reward but the fit has no {names.DENSE_MULTIPLIER!r}"
            )
        j = spec.axis_names.index(spec.dense_reward.axis)
        dense = (frame[names.REWARD] == names.DENSE).to_numpy()
        log_m = np.log(stack(post[names.DENSE_MULTIPLIER]))
        log_x[:, dense, j] += log_m[:, None]
    knee, midpoint = (_joined(parts, name) for name in ("knee", "midpoint"))
    loss = floor[:, sidx] + laws.axis_terms(
        [a.form for a in spec.axes],
        log_x,
        amplitude[:, sidx],
        alpha[:, sidx],
        None if knee is None else knee[:, sidx],
        None if midpoint is None else midpoint[:, sidx],
    )
    if layout.size_reference is not None and spec.size is not None:
        e = stack(post[names.SIZE_AMPLITUDE])
        a_n = stack(post[names.ALPHA_SIZE])
        n_rows = frame[spec.size.column].to_numpy(float)
        loss = loss + laws.size_term(
            n_rows[None, :], e[:, None], a_n[:, None], layout.size_reference
        )
    if spec.interaction is not None:
        gammas = [p.gamma for p in parts]
        if any(g is None for g in gammas):
            raise PredictError("interaction weights are missing for some settings")
        gamma = np.concatenate([g for g in gammas if g is not None], axis=1)
        i, k = (spec.axis_names.index(a) for a in spec.interaction.axes)
        beta = stack(post[names.INTERACTION_BETA])
        loss = loss + laws.interaction_term(
            sizes[None, :, i], sizes[None, :, k], gamma[:, sidx], beta[:, None]
        )
    return np.asarray(loss, dtype=float)


def predict(
    fit: xr.DataTree,
    rows: Table | pd.DataFrame,
    new_groups: str | None = None,
    seed: int = 0,
    source: str | None = None,
    observed: bool | None = None,
    drift: bool = True,
) -> Prediction:
    """Per-draw law and predictive parameters for ``rows`` (validated here, errors naming
    ``source``, column and rows). ``new_groups``: ``None`` (a new setting only as a new model
    of a known size group, when the law has a size term) or ``"pooled"`` (any new setting,
    unknown groups drawn from their spreads). ``seed`` drives the draws of new settings.
    ``observed``: require the outcome columns (default: when present). A stacked fit
    (:mod:`bayesscale.law.stack`) predicts the mixture of its forms' predictions by weight.
    A fit that stores a drift beyond the sweep (:mod:`bayesscale.law.drift`) has it applied,
    seeded by ``seed``: rows past the swept range get wider predictions (``drift=False``: the
    law's own posterior predictive)."""
    # imported here: the drift's module works on this module's Prediction
    from bayesscale.law.drift import with_drift

    if new_groups not in NEW_GROUPS:
        raise ValueError(f"new_groups must be one of {NEW_GROUPS}, got {new_groups!r}")
    stacked = members(fit)
    if stacked is not None:
        weights = np.array([m.weight for m in stacked])
        by_form = [predict(m.tree, rows, new_groups, seed, source, observed) for m in stacked]
        mixed = mixture(by_form, weights / weights.sum())
        return with_drift(fit, mixed, seed) if drift else mixed
    layout = fit_layout(fit)
    spec = layout.spec
    if isinstance(rows, Table):
        frame, src = rows.frame, source or rows.source
    else:
        frame, src = rows, source or "<table>"
    if observed is None:
        observed = all(c in frame.columns for c in outcome_columns(spec))
    frame = validate_rows(frame, spec, src, observed=observed)
    labels = setting_labels(frame, spec)
    new = classify_settings(frame, layout, labels, new_groups, src)
    known = [s for s in dict.fromkeys(labels) if s in set(layout.settings)]
    rng = np.random.default_rng(seed)
    parts = []
    if known:
        parts.append(_known_draws(fit, known, layout))
    if new:
        try:
            parts.append(_new_draws(fit, new, layout, rng))
        except PosteriorError as exc:  # say where the new settings are
            rows_of_new = np.flatnonzero(labels.isin([n.label for n in new]).to_numpy())
            raise PredictError(
                f"{src}: column(s) {', '.join(spec.setting_keys)!s}, "
                f"{rows_text(rows_of_new, src)}: {exc}"
            ) from None
    order = [s for part in parts for s in part.settings]
    index_of = {s: i for i, s in enumerate(order)}
    sidx = labels.map(index_of).to_numpy(np.int64)
    post = fit["posterior"].to_dataset()
    loss = _law_loss(fit, post, layout, frame, parts, sidx)

    success = spec.outcome == "success"
    obs_values = None
    if observed:
        column = names.SUCCESSES if success else names.LOSS
        obs_values = frame[column].to_numpy(float)
    new_labels = {n.label for n in new}
    pred = Prediction(
        frame=frame,
        source=src,
        outcome=spec.outcome,
        chains=layout.chains,
        draws=layout.draws,
        setting=tuple(labels),
        new_setting=labels.isin(new_labels).to_numpy(),
        loss=np.asarray(loss, dtype=float),
        trials=frame[names.TRIALS].to_numpy(np.int64) if success else None,
        concentration=_row_concentration(post, parts, sidx),
        log_loss_sigma=stack(post[names.LOG_LOSS_SIGMA]) if names.LOG_LOSS_SIGMA in post else None,
        student_nu=spec.student_nu,
        observed=obs_values,
        contamination=stack(post[names.CONTAMINATION]) if names.CONTAMINATION in post else None,
    )
    return with_drift(fit, pred, seed) if drift else pred


def _row_concentration(
    post: xr.Dataset, parts: Sequence[SettingDraws], sidx: NDArray[np.int64]
) -> Array | None:
    """The beta-binomial concentration per draw ``(S,)``, or, where each setting has its own
    (``[outcome] concentration_spread``), per draw and row ``(S, R)``: a fitted setting's
    own, a new setting's drawn from the population (:class:`SettingDraws`)."""
    if names.CONCENTRATION not in post:
        return None
    per_setting = _joined(parts, "concentration")
    return stack(post[names.CONCENTRATION]) if per_setting is None else per_setting[:, sidx]


def draw_shares(weights: ArrayLike, samples: int) -> NDArray[np.int64]:
    """How many of ``samples`` draws each candidate gives a mixture with ``weights``: the
    largest-remainder rounding of ``w_k samples`` (the shares sum to ``samples``).

    >>> draw_shares([0.5, 0.3, 0.2], 7).tolist()
    [4, 2, 1]
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
        raise ValueError(f"weights must be >= 0 and sum to 1, got {w.tolist()}")
    raw = w * samples
    shares = np.floor(raw).astype(np.int64)
    left = samples - int(shares.sum())
    shares[np.argsort(-(raw - shares), kind="stable")[:left]] += 1
    return shares


def mixture(predictions: Sequence[Prediction], weights: ArrayLike) -> Prediction:
    """The stacked prediction: draws of each candidate's prediction (the same rows) in
    proportion to ``weights`` (:func:`draw_shares` of the smallest candidate's draw count, taken
    evenly spaced), one chain. Its draws are the mixture ``sum_k w_k p_k``: its expected
    outcomes, predictive counts and log predictive density are the stack's."""
    if not predictions:
        raise ValueError("a mixture needs at least one prediction")
    first = predictions[0]
    for other in predictions[1:]:
        if other.rows != first.rows or other.outcome != first.outcome:
            raise ValueError("the predictions to mix must be of the same rows and outcome")
    samples = min(p.chains * p.draws for p in predictions)
    shares = draw_shares(weights, samples)
    picks = []
    for pred, n in zip(predictions, shares, strict=True):
        if n:
            total = pred.chains * pred.draws
            picks.append((pred, np.linspace(0, total - 1, int(n)).round().astype(np.int64)))

    def joined(name: str, fill: float | None = None) -> Array | None:
        """The picked draws of a per-draw parameter; a candidate without it gets ``fill``."""
        parts = [getattr(p, name) for p, _ in picks]
        if all(x is None for x in parts):
            return None
        if any(x is None for x in parts) and fill is None:
            raise ValueError(f"some of the predictions to mix have no {name}")
        full = [
            np.full(p.chains * p.draws, fill) if x is None else x
            for x, (p, _) in zip(parts, picks, strict=True)
        ]
        return np.concatenate([x[i] for x, (_, i) in zip(full, picks, strict=True)])

    return replace(
        first,
        chains=1,
        draws=samples,
        loss=np.concatenate([p.loss[i] for p, i in picks]),
        concentration=joined("concentration"),
        log_loss_sigma=joined("log_loss_sigma"),
        contamination=joined("contamination", fill=0.0),
    )


def pointwise_log_likelihood(fit: xr.DataTree, table: Table | pd.DataFrame) -> xr.DataArray:
    """The fit's pointwise log-likelihood of ``table`` (its own data: the model's ``outcome``),
    ``(chain, draw, obs)``, named like the observed variable."""
    pred = predict(fit, table, observed=True)
    return pred.to_dataarray(pred.log_likelihood(), names.OUTCOME)
