"""PyMC model builders: one function per model, ``build_*(design) -> pm.Model``.

``build_law_model`` is the hierarchical scaling law of ``models/*.toml`` specs:

.. math::

    \\log \\alpha_{s,a} &= \\log \\bar\\alpha_a + \\sum_g b_{g[s],a} + \\tau_a z_{s,a} \\\\
    \\log s_{s,a} &= \\log \\bar s_a + \\sigma_{s,a} z'_{s,a}, \\quad A_{s,a} = s_{s,a} / \\alpha_{s,a} \\\\
    c_s &= E ((N_s/N_\\mathrm{ref})^{-\\alpha_N} - 1) + \\ell_s, \\quad
          \\log \\ell_s \\sim \\mathcal{N}(\\log \\bar\\ell_{g[s]}, \\sigma_\\ell) \\\\
    L_i &= c_s + \\sum_a s_{s,a} \\frac{(D_{i,a}/D_{a,\\mathrm{ref}})^{-\\alpha_{s,a}} - 1}{\\alpha_{s,a}}
          - \\gamma_s (D_{i,E} D_{i,T})^{-\\beta} \\\\
    L_{\\infty,s} &= c_s - \\sum_a A_{s,a} - E (N_s/N_\\mathrm{ref})^{-\\alpha_N}
          \\quad\\text{(soft wall: } \\log\\sigma(L_{\\infty,s}/\\epsilon)\\text{)} \\\\
    k_i &\\sim \\mathrm{BetaBinomial}(n_i, p_i \\phi, (1-p_i) \\phi), \\quad
          \\mathrm{logit}\\, p_i = -L_i - \\log(-\\mathrm{expm1}(-L_i))

or, for a continuous loss, ``log loss_i ~ StudentT(nu, log L_i, sigma)``. An axis whose spec
says ``form = "offset_power"`` has the term ``s (1 + k) (u^{-alpha} - 1) / alpha`` with
``u = (D/D_ref + k) / (1 + k)`` and a knee ``k = D_0 / D_ref`` per setting, ``k = kappa z``
with ``kappa ~ HalfNormal(1)`` per axis and ``z ~ HalfNormal(1)``
(:mod:`bayesscale.core.forms`; ``k = 0`` is the power law), and amplitude ``A = s (1 + k) /
alpha``. An axis with ``form = "saturating"`` has the logistic term in log size, its
per-setting exponent the steepness ``beta`` and a midpoint ``m = log(D_mid / D_ref)`` per
setting, ``m = mu + omega z`` with ``mu ~ Normal(0, 2)`` and ``omega ~ HalfNormal(1)`` per
axis: ``s (q_0 - q) / (beta q_0 (1 - q_0))`` with ``q = sigmoid(beta (x - m))``,
``q_0 = sigmoid(-beta m)``, ``x = log(D / D_ref)``, and amplitude ``A = s / (beta
q_0)``: a plateau at small sizes, a power law of exponent ``beta`` far above the midpoint.
This is the law
``L = L_inf + E N^-alpha_N + sum_a A_a D_a^-alpha_a`` rewritten in the quantities a sweep
pins down: the level ``c`` at the reference point and the slopes ``s = A alpha`` there
(DESIGN.md: amplitudes at a reference scale). The floor and amplitudes are derived; the
floor is kept positive by a soft wall.

**Parametrisation** (what the sampler sees; the distribution is the same either way),
chosen by measurement on the reference data (``benchmarks/fit_reference.py``):

* exponents and slopes non-centred (``z``): per setting they are weakly identified, and
  their spreads have mass near zero;
* the level ``c_s`` centred and sampled on ``log c_s``, *including* the size term: ``c_s`` is
  what each setting's runs pin down. Declared as ``c_s = shift_s + LogNormal(...)`` (a
  shifted lognormal, ``shift_s = E ((N_s/N_ref)^-alpha_N - 1)``), so changing ``E`` or
  ``alpha_N`` does not drag every setting's level along (sampling ``log l_s`` instead left
  the size slope with an ESS of 0.09 per draw).

The law is evaluated once per *cell* (distinct setting and sizes; seeds share it) and the
likelihood is :func:`bayesscale.law.likelihood.success_likelihood`.

Example
-------
>>> from bayesscale.data.spec import load_spec
>>> model = build_law_model(prepare(table, load_spec()))  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayesscale import names
from bayesscale.core import forms
from bayesscale.data.observations import Cells, Design
from bayesscale.data.spec import LogNormalPrior, SpecError
from bayesscale.law.likelihood import log_loss_likelihood, observe, success_likelihood

AXIS = names.AXIS_DIM
SETTING = names.SETTING_DIM

GROUP_LEVEL_SUFFIX = "_z"  # non-centred standard-normal deviations: ``alpha_z``, ``slope_z``, ...
KNEE = names.KNEE
KNEE_AXIS_DIM = names.KNEE_AXIS_DIM
MIDPOINT = names.MIDPOINT
MIDPOINT_AXIS_DIM = names.MIDPOINT_AXIS_DIM
FITTED_FORMS = (forms.POWER, forms.OFFSET_POWER, forms.SATURATING)

__all__ = [
    "build_law_model",
    "log_loss_likelihood",
    "shifted_lognormal",
    "success_likelihood",
    "top_level_priors",
]


def top_level_priors(model: pm.Model) -> list[str]:
    """The free variables whose priors the spec declares outright: every free variable except
    the group-level ones (the non-centred deviations ``*_z`` and the centred ``level``, whose
    distributions are the pooling structure, not a prior choice). Power-scaling sensitivity
    scales these priors only, as Kallioinen et al. (2024) recommend for hierarchical models.
    """
    return [
        rv.name
        for rv in model.free_RVs
        if not rv.name.endswith(GROUP_LEVEL_SUFFIX) and rv.name != names.LEVEL
    ]


def _lognormal_location(prior: LogNormalPrior) -> tuple[float, float]:
    return float(np.log(prior.median)), prior.log_sd


def build_law_model(design: Design) -> pm.Model:
    """The pooled hierarchical law for a prepared observation design."""
    spec = design.spec
    cells = design.cells()
    for axis in spec.axes:
        if axis.form not in FITTED_FORMS:
            raise SpecError(
                f"{spec.source}: axis {axis.name!r}: form {axis.form!r} is not fitted yet; the "
                f"model fits {list(FITTED_FORMS)}"
            )
    with pm.Model(coords=design.coords()) as model:
        log_alpha_pop, log_alpha, alpha = _exponents(design)
        shape = _Shape(design, _knees(design), _midpoints(design))
        log_slope, amplitude = _slopes(design, log_alpha_pop, log_alpha, shape)
        level, floor = _level_and_floor(design, amplitude)
        loss = _law_at_cells(design, cells, alpha, log_slope, level, floor, shape)
        observe(loss, cells.index, design, spec, _concentration_by_setting(design, cells))
    return model


def _concentration_by_setting(design: Design, cells: Cells) -> tuple[np.ndarray, float] | None:
    """Each cell's setting and the spread's scale where the spec gives each setting its own
    concentration (``[outcome] concentration_spread > 0``, several settings); else ``None``."""
    scale = design.spec.concentration_spread
    if scale <= 0 or len(design.settings) == 1:
        return None
    return design.setting_index[cells.first_row], scale


def _exponents(design: Design) -> tuple[pt.TensorVariable, pt.TensorVariable, pt.TensorVariable]:
    """``log alpha[s, a] = log alpha_pop[a] + sum_g b[g(s), a] + tau[a] z[s, a]`` (non-centred)."""
    spec = design.spec
    n_settings, n_axes = len(design.settings), len(spec.axes)
    alpha_mu = np.log([a.exponent.median for a in spec.axes])
    alpha_sd = np.array([a.exponent.log_sd for a in spec.axes])
    log_alpha_pop = pm.Normal(names.LOG_ALPHA_POP, alpha_mu, alpha_sd, dims=AXIS)
    pm.Deterministic(names.ALPHA_POP, pt.exp(log_alpha_pop), dims=AXIS)
    log_alpha = pt.broadcast_to(log_alpha_pop, (n_settings, n_axes))
    for key, (_, group_index) in design.exponent_groups.items():
        dim = f"{names.EXPONENT_GROUP_DIM}_{key}"
        scale = pm.HalfNormal(
            names.group_spread_name(key), sigma=spec.exponent_group_spread, dims=AXIS
        )
        effect = pm.Normal(names.group_effect_name(key), 0.0, 1.0, dims=(dim, AXIS)) * scale
        log_alpha = log_alpha + effect[group_index]
    if n_settings > 1:
        spread = pm.HalfNormal(
            names.ALPHA_SPREAD, sigma=[a.exponent_spread for a in spec.axes], dims=AXIS
        )
        log_alpha = log_alpha + spread * pm.Normal(names.ALPHA_Z, 0.0, 1.0, dims=(SETTING, AXIS))
    alpha = pm.Deterministic(names.ALPHA, pt.exp(log_alpha), dims=(SETTING, AXIS))
    return log_alpha_pop, log_alpha, alpha


def _knees(design: Design) -> tuple[pt.TensorVariable, pt.TensorVariable] | None:
    """The knees ``k = D_0 / D_ref`` of the offset-power axes and their population median.

    Per setting where there are several: ``k[s, a] = kappa_a z[s, a]`` with ``kappa_a ~
    HalfNormal(1)`` and ``z[s, a] ~ HalfNormal(1)`` (non-centred: each setting's knee pooled
    towards its axis's scale, with mass at 0, the power law), population median ``kappa_a
    z_50`` (``z_50`` the half-normal's median). One ``k_a ~ HalfNormal(1)`` per axis in a fit
    of one setting. The knees as a ``(settings, axes)`` (or ``(axes,)``) tensor and the median
    as ``(axes,)``, 0 on other axes; ``None`` when no axis has the offset form (the model is
    then exactly the power law's)."""
    chosen = _form_axes(design, forms.OFFSET_POWER, KNEE_AXIS_DIM)
    if not chosen:
        return None
    if len(design.settings) == 1:
        knee = pm.HalfNormal(KNEE, sigma=forms.KNEE_PRIOR_SCALE, dims=KNEE_AXIS_DIM)
        return _padded(design, chosen, knee), _padded(design, chosen, knee)
    scale = pm.HalfNormal(names.KNEE_SCALE, sigma=forms.KNEE_PRIOR_SCALE, dims=KNEE_AXIS_DIM)
    z = pm.HalfNormal(names.KNEE_Z, sigma=1.0, dims=(SETTING, KNEE_AXIS_DIM))
    knee = pm.Deterministic(KNEE, scale * z, dims=(SETTING, KNEE_AXIS_DIM))
    median = scale * forms.HALF_NORMAL_MEDIAN
    return _padded(design, chosen, knee), _padded(design, chosen, median)


def _midpoints(design: Design) -> tuple[pt.TensorVariable, pt.TensorVariable] | None:
    """The midpoints ``m = log(D_mid / D_ref)`` of the saturating axes and their population
    mean.

    Per setting where there are several: ``m[s, a] = mu_a + omega_a z[s, a]`` with ``mu_a ~
    Normal(0, 2)``, ``omega_a ~ HalfNormal(1)`` and ``z[s, a] ~ Normal(0, 1)`` (non-centred,
    pooled as the exponents are); one ``m_a ~ Normal(0, 2)`` per axis in a fit of one setting.
    The midpoints as a ``(settings, axes)`` (or ``(axes,)``) tensor and the mean as
    ``(axes,)``, 0 on other axes; ``None`` when no axis has the saturating form."""
    chosen = _form_axes(design, forms.SATURATING, MIDPOINT_AXIS_DIM)
    if not chosen:
        return None
    if len(design.settings) == 1:
        midpoint = pm.Normal(MIDPOINT, 0.0, forms.MIDPOINT_PRIOR_SCALE, dims=MIDPOINT_AXIS_DIM)
        return _padded(design, chosen, midpoint), _padded(design, chosen, midpoint)
    mean = pm.Normal(names.MIDPOINT_POP, 0.0, forms.MIDPOINT_PRIOR_SCALE, dims=MIDPOINT_AXIS_DIM)
    spread = pm.HalfNormal(
        names.MIDPOINT_SPREAD, sigma=forms.MIDPOINT_SPREAD_SCALE, dims=MIDPOINT_AXIS_DIM
    )
    z = pm.Normal(names.MIDPOINT_Z, 0.0, 1.0, dims=(SETTING, MIDPOINT_AXIS_DIM))
    midpoint = pm.Deterministic(MIDPOINT, mean + spread * z, dims=(SETTING, MIDPOINT_AXIS_DIM))
    return _padded(design, chosen, midpoint), _padded(design, chosen, mean)


def _form_axes(design: Design, form: str, dim: str) -> list[int]:
    """The positions of the axes of ``form``, declared as the model's coordinate ``dim`` (their
    names) when there are any."""
    spec = design.spec
    chosen = [i for i, a in enumerate(spec.axes) if a.form == form]
    if chosen:
        pm.modelcontext(None).add_coord(dim, [spec.axes[i].name for i in chosen])
    return chosen


def _padded(design: Design, chosen: list[int], values: pt.TensorLike) -> pt.TensorVariable:
    """``values`` (last dimension over the axes at ``chosen``) as an ``(axes,)`` or
    ``(settings, axes)`` tensor with 0 on the other axes."""
    values = pt.as_tensor(values)
    lead = (len(design.settings),) * (values.ndim - 1)
    return pt.set_subtensor(
        pt.zeros((*lead, len(design.spec.axes)))[..., np.asarray(chosen)], values
    )


class _Shape:
    """Each axis's form in the model: the offset-power knees and the saturating midpoints
    (``(axes,)``, or ``(settings, axes)`` per setting, each with its population value per
    axis), ``None`` where no axis has that form, and the masks of those axes."""

    def __init__(
        self,
        design: Design,
        knees: tuple[pt.TensorVariable, pt.TensorVariable] | None,
        midpoints: tuple[pt.TensorVariable, pt.TensorVariable] | None,
    ) -> None:
        axis_forms = [a.form for a in design.spec.axes]
        self.knees, self.midpoints = knees, midpoints
        self.offset = np.array([f == forms.OFFSET_POWER for f in axis_forms])
        self.saturating = np.array([f == forms.SATURATING for f in axis_forms])

    @staticmethod
    def _at(
        shape: tuple[pt.TensorVariable, pt.TensorVariable], setting: np.ndarray | None
    ) -> pt.TensorVariable:
        """The per-setting values at ``setting`` (cells), or the population's (``None``)."""
        values, population = shape
        if setting is None:
            return population
        return values[setting] if values.ndim == 2 else values

    def widen(
        self, alpha: pt.TensorVariable, setting: np.ndarray | None = None
    ) -> pt.TensorVariable | float:
        """``A alpha / s``, the amplitude over the power law's at the same slope: ``1 + k`` on
        an offset-power axis, ``1 / q_0 = 1 + e^(beta m)`` on a saturating one, 1 elsewhere;
        with ``alpha`` per setting (``setting`` the settings' own index) or per axis at the
        population's knee and midpoint (``setting`` ``None``)."""
        out: pt.TensorVariable | float = 1.0
        if self.knees is not None:
            out = out + self._at(self.knees, setting)
        if self.midpoints is not None:
            m = self._at(self.midpoints, setting)
            out = out * pt.switch(self.saturating, 1.0 + pt.exp(alpha * m), 1.0)
        return out

    def terms(
        self,
        slope: pt.TensorVariable,
        alpha: pt.TensorVariable,
        log_x: pt.TensorLike,
        setting: np.ndarray,
    ) -> pt.TensorVariable:
        """Each axis's term less its value at ``D_ref`` (cells x axes; ``setting`` the cells'
        setting index, which picks per-setting knees and midpoints)."""
        power = slope * pt.expm1(-alpha * log_x) / alpha
        if self.knees is not None:
            knee = self._at(self.knees, setting)
            log_u = pt.log(pt.exp(log_x) + knee) - pt.log1p(knee)
            offset = slope * (1.0 + knee) * pt.expm1(-alpha * log_u) / alpha
            power = pt.switch(self.offset, offset, power)
        if self.midpoints is not None:
            m = self._at(self.midpoints, setting)
            q = pt.sigmoid(alpha * (log_x - m))
            q0 = pt.sigmoid(-alpha * m)
            saturating = slope * (q0 - q) / (alpha * q0 * (1.0 - q0))
            power = pt.switch(self.saturating, saturating, power)
        return power


def _slopes(
    design: Design,
    log_alpha_pop: pt.TensorVariable,
    log_alpha: pt.TensorVariable,
    shape: _Shape,
) -> tuple[pt.TensorVariable, pt.TensorVariable]:
    """Slopes at the reference scale, ``log s[s, a] = log s_pop[a] + sigma[a] z'[s, a]``, and
    amplitudes ``A = s / alpha`` (``A = s (1 + k) / alpha`` on an offset-power axis, whose
    slope at ``D_ref`` is ``alpha A / (1 + k)``; ``A = s (1 + e^(beta m)) / beta`` on a
    saturating one).

    ``s = A alpha = -dL/dlog D`` at ``D_ref`` is what a sweep pins down; sampling (log s, log
    alpha) instead of (log A, log alpha) removes the ``A ~ 1/alpha`` banana of shallow axes,
    where only the product is identified.
    """
    spec = design.spec
    n_settings, n_axes = len(design.settings), len(spec.axes)
    slope_mu, slope_sd = _lognormal_location(spec.slope)
    log_slope_pop = pm.Normal(names.LOG_SLOPE_POP, slope_mu, slope_sd, dims=AXIS)
    log_slope = pt.broadcast_to(log_slope_pop, (n_settings, n_axes))
    if n_settings > 1:
        slope_spread = pm.HalfNormal(names.SLOPE_SPREAD, sigma=spec.slope_spread, dims=AXIS)
        log_slope = log_slope + slope_spread * pm.Normal(
            names.SLOPE_Z, 0.0, 1.0, dims=(SETTING, AXIS)
        )
    pm.Deterministic(
        names.AMPLITUDE_POP,
        pt.exp(log_slope_pop - log_alpha_pop) * shape.widen(pt.exp(log_alpha_pop)),
        dims=AXIS,
    )
    amplitude = pm.Deterministic(
        names.AMPLITUDE,
        pt.exp(log_slope - log_alpha) * shape.widen(pt.exp(log_alpha), np.arange(n_settings)),
        dims=(SETTING, AXIS),
    )
    return log_slope, amplitude


def shifted_lognormal(
    name: str, mu: pt.TensorLike, sigma: pt.TensorLike, shift: pt.TensorLike, dims: str
) -> pt.TensorVariable:
    """``x = shift + LogNormal(mu, sigma)``, sampled on ``log x``.

    The log density is the lognormal's at ``x - shift`` (``-inf`` where ``x <= shift``);
    random draws are ``shift`` plus a lognormal draw. With ``shift = 0`` this is a plain
    centred ``LogNormal``.
    """

    def logp(
        value: pt.TensorVariable,
        mu_: pt.TensorVariable,
        sigma_: pt.TensorVariable,
        shift_: pt.TensorVariable,
    ) -> pt.TensorVariable:
        x = value - shift_
        log_x = pt.log(pt.maximum(x, 1e-300))
        density = (
            -log_x - pt.log(sigma_) - 0.5 * np.log(2 * np.pi) - 0.5 * ((log_x - mu_) / sigma_) ** 2
        )
        return pt.switch(pt.gt(x, 0.0), density, -np.inf)

    def dist(
        mu_: pt.TensorVariable,
        sigma_: pt.TensorVariable,
        shift_: pt.TensorVariable,
        size: pt.TensorVariable,
    ) -> pt.TensorVariable:
        return shift_ + pm.LogNormal.dist(mu_, sigma_)

    return pm.CustomDist(
        name,
        mu,
        sigma,
        shift,
        dist=dist,
        logp=logp,
        transform=pm.distributions.transforms.log,
        signature="(),(),()->()",
        dims=dims,
    )


def _level_and_floor(
    design: Design, amplitude: pt.TensorVariable
) -> tuple[pt.TensorVariable, pt.TensorVariable]:
    """The level ``c_s`` at the reference point (size term included) and the floor.

    ``c_s = E ((N_s/N_ref)^-alpha_N - 1) + l_s``: with a size term, the levels ``l_s`` of one
    size group are pooled (``log l_s ~ N(log l_group, sigma_l)``) and the change of ``c`` with
    model size identifies ``E`` and ``alpha_N``. ``L_inf = c - sum_a A_a - E (N/N_ref)^-alpha_N``
    must not be negative (success above 1 with infinite data): a soft wall, ``log
    sigmoid(L_inf / softness)``, keeps the prior on the physical region.
    """
    spec = design.spec
    n_settings = len(design.settings)
    level_mu, level_sd = _lognormal_location(spec.level)
    grouped = spec.size is not None and design.size_group_index is not None
    if grouped:
        log_level_group = pm.Normal(
            names.LOG_LEVEL_GROUP, level_mu, level_sd, dims=names.SIZE_GROUP_DIM
        )
        log_level_mean = log_level_group[design.size_group_index]
    else:
        log_level_mean = pt.broadcast_to(
            pm.Normal(names.LOG_LEVEL_POP, level_mu, level_sd), (n_settings,)
        )

    shift = pt.zeros(n_settings)
    size_floor = pt.zeros(n_settings)
    if spec.size is not None and design.model_size is not None:
        a_mu, a_sd = _lognormal_location(spec.size.exponent)
        log_alpha_size = pm.Normal(names.LOG_ALPHA_SIZE, a_mu, a_sd)
        alpha_size = pm.Deterministic(names.ALPHA_SIZE, pt.exp(log_alpha_size))
        s_mu, s_sd = _lognormal_location(spec.size.slope)
        log_size_slope = pm.Normal(names.LOG_SIZE_SLOPE, s_mu, s_sd)
        size_amp = pm.Deterministic(names.SIZE_AMPLITUDE, pt.exp(log_size_slope - log_alpha_size))
        log_ratio = np.log(design.model_size / design.size_reference)
        # E ((N/N_ref)^-alpha_N - 1) is zero at N_ref: the group level is the level at N_ref.
        shift = size_amp * pt.expm1(-alpha_size * log_ratio)
        size_floor = size_amp * pt.exp(-alpha_size * log_ratio)

    if n_settings > 1:
        level_spread = pm.HalfNormal(names.LEVEL_SPREAD, sigma=spec.level_spread)
        level = shifted_lognormal(names.LEVEL, log_level_mean, level_spread, shift, dims=SETTING)
    else:
        level = pt.exp(log_level_mean) + shift
    floor = level - amplitude.sum(axis=1) - size_floor
    loss_floor = pm.Deterministic(names.LOSS_FLOOR, floor, dims=SETTING)
    pm.Potential(names.FLOOR_POSITIVE, -pm.math.log1pexp(-loss_floor / spec.floor_softness).sum())
    return level, loss_floor


def _law_at_cells(
    design: Design,
    cells: Cells,
    alpha: pt.TensorVariable,
    log_slope: pt.TensorVariable,
    level: pt.TensorVariable,
    floor: pt.TensorVariable,
    shape: _Shape,
) -> pt.TensorVariable:
    """``L = c + sum_a s_a ((D/D_ref)^-alpha_a - 1) / alpha_a`` (and the interaction) per cell;
    on an offset-power axis ``s_a (1 + k_a) (u^-alpha_a - 1) / alpha_a`` with ``u = (D/D_ref +
    k_a) / (1 + k_a)`` (:mod:`bayesscale.core.forms`), which is the power law at ``k_a = 0``;
    on a saturating axis the logistic term (module docstring)."""
    spec = design.spec
    rows = cells.first_row
    setting = design.setting_index[rows]
    log_x = np.log(design.sizes[rows] / design.reference)
    if spec.dense_reward is not None and design.dense is not None:
        m_mu, m_sd = _lognormal_location(spec.dense_reward.multiplier)
        log_multiplier = pm.Normal(names.LOG_DENSE_MULTIPLIER, m_mu, m_sd)
        pm.Deterministic(names.DENSE_MULTIPLIER, pt.exp(log_multiplier))
        j = spec.axis_names.index(spec.dense_reward.axis)
        shift = np.zeros_like(log_x)
        shift[:, j] = design.dense[rows].astype(float)
        log_x = pt.as_tensor(log_x) + log_multiplier * shift
    slope = pt.exp(log_slope)
    loss = level[setting] + shape.terms(slope[setting], alpha[setting], log_x, setting).sum(axis=1)
    if spec.interaction is not None:
        i, k = (spec.axis_names.index(a) for a in spec.interaction.axes)
        b_mu, b_sd = _lognormal_location(spec.interaction.exponent)
        beta = pm.LogNormal(names.INTERACTION_BETA, b_mu, b_sd)
        weight = pm.Beta(names.INTERACTION_WEIGHT, *spec.interaction.weight_beta, dims=SETTING)
        # gamma < floor and (D_a D_b)^-beta <= 1 for raw counts >= 1, so L > 0 always.
        gamma = pm.Deterministic(
            names.INTERACTION_GAMMA, weight * pt.maximum(floor, 0.0), dims=SETTING
        )
        raw = design.sizes[rows, i] * design.sizes[rows, k]
        loss = loss - gamma[setting] * pt.as_tensor(raw) ** (-beta)
    return loss
