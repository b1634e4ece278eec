"""PyMC model builders: one function per model, ``build_*(design) -> pm.Model``.

``build_law_model`` is the hierarchical scaling law of ``models/*.toml`` specs:

.. math::

    \\log \\alpha_{s,a} &= \\log \\bar\\alpha_a + \\sum_g b_{g[s],a} + \\tau_a z_{s,a} \\\\
    \\log s_{s,a} &= \\log \\bar s_a + \\sigma_{s,a} z'_{s,a}, \\quad A_{s,a} = s_{s,a} / \\alpha_{s,a} \\\\
    \\log \\ell_s &= \\log \\bar\\ell_{g[s]} + \\sigma_\\ell z''_s, \\quad
          c_s = \\ell_s + E ((N_s/N_\\mathrm{ref})^{-\\alpha_N} - 1) \\\\
    L_i &= c_s + \\sum_a s_{s,a} \\frac{(D_{i,a}/D_{a,\\mathrm{ref}})^{-\\alpha_{s,a}} - 1}{\\alpha_{s,a}}
          - \\gamma_s (D_{i,E} D_{i,T})^{-\\beta} \\\\
    L_{\\infty,s} &= c_s - \\sum_a A_{s,a} - E (N_s/N_\\mathrm{ref})^{-\\alpha_N}
          \\quad\\text{(soft wall: } \\log\\sigma(L_{\\infty,s}/\\epsilon)\\text{)} \\\\
    k_i &\\sim \\mathrm{BetaBinomial}(n_i, p_i \\phi, (1-p_i) \\phi), \\quad
          \\mathrm{logit}\\, p_i = -L_i - \\log(-\\mathrm{expm1}(-L_i))

or, for a continuous loss, ``log loss_i ~ StudentT(nu, log L_i, sigma)``. Every
hierarchy is non-centered. This is the law ``L = L_inf + E N^-alpha_N + sum_a A_a D_a^-alpha_a``
rewritten in the quantities a sweep pins down: the level ``c`` at the reference point and
the slopes ``s = A alpha`` there (DESIGN.md: amplitudes at a reference scale). The floor
and amplitudes are derived; the floor is kept positive by a soft wall.

Example
-------
>>> from bayesscale.spec import load_spec
>>> model = build_law_model(prepare(table, load_spec()))  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayesscale import names
from bayesscale.observations import Design
from bayesscale.spec import LogNormalPrior

AXIS = names.AXIS_DIM
SETTING = names.SETTING_DIM


def _lognormal_location(prior: LogNormalPrior) -> tuple[float, float]:
    return float(np.log(prior.median)), prior.log_sd


def build_law_model(design: Design) -> pm.Model:
    """The pooled hierarchical law for a prepared observation design."""
    spec = design.spec
    n_settings, n_axes = len(design.settings), len(spec.axes)
    sidx = design.setting_index
    with pm.Model(coords=design.coords()) as model:
        # --- exponents ---------------------------------------------------------------
        alpha_mu = np.log([a.exponent.median for a in spec.axes])
        alpha_sd = np.array([a.exponent.log_sd for a in spec.axes])
        log_alpha_pop = pm.Normal("log_alpha_pop", alpha_mu, alpha_sd, dims=AXIS)
        pm.Deterministic(names.ALPHA_POP, pt.exp(log_alpha_pop), dims=AXIS)
        log_alpha = pt.broadcast_to(log_alpha_pop, (n_settings, n_axes))
        for key, (_, group_index) in design.exponent_groups.items():
            dim = f"{names.EXPONENT_GROUP_DIM}_{key}"
            scale = pm.HalfNormal(
                f"alpha_{key}_spread", sigma=spec.exponent_group_spread, dims=AXIS
            )
            effect = pm.Normal(f"alpha_{key}_z", 0.0, 1.0, dims=(dim, AXIS)) * scale
            log_alpha = log_alpha + effect[group_index]
        if n_settings > 1:
            spread = pm.HalfNormal(
                names.ALPHA_SPREAD, sigma=[a.exponent_spread for a in spec.axes], dims=AXIS
            )
            log_alpha = log_alpha + spread * pm.Normal("alpha_z", 0.0, 1.0, dims=(SETTING, AXIS))
        alpha = pm.Deterministic(names.ALPHA, pt.exp(log_alpha), dims=(SETTING, AXIS))

        # --- slopes at the reference scale; amplitudes follow ---------------------------------
        # s = A * alpha = -dT/dlog D at D_ref is what a sweep pins down; sampling (log s,
        # log alpha) instead of (log A, log alpha) removes the A ~ 1/alpha banana of
        # shallow axes, where only the product is identified.
        slope_mu, slope_sd = _lognormal_location(spec.slope)
        log_slope_pop = pm.Normal("log_slope_pop", slope_mu, slope_sd, dims=AXIS)
        log_slope = pt.broadcast_to(log_slope_pop, (n_settings, n_axes))
        if n_settings > 1:
            slope_spread = pm.HalfNormal("slope_spread", sigma=spec.slope_spread, dims=AXIS)
            log_slope = log_slope + slope_spread * pm.Normal(
                "slope_z", 0.0, 1.0, dims=(SETTING, AXIS)
            )
        pm.Deterministic(names.AMPLITUDE_POP, pt.exp(log_slope_pop - log_alpha_pop), dims=AXIS)
        amplitude = pm.Deterministic(
            names.AMPLITUDE, pt.exp(log_slope - log_alpha), dims=(SETTING, AXIS)
        )

        # --- level at the reference point (and the model-size term) ------------------------------
        # c_s = L of setting s with every axis at its reference scale: what the data pin down
        # best. The floor L_inf is derived from it, so the floor-amplitude ridge of shallow
        # axes (only A * alpha and floor + A are identified) is not a sampled direction.
        level_mu, level_sd = _lognormal_location(spec.level)
        if spec.size is not None and design.size_group_index is not None:
            log_level_group = pm.Normal(
                "log_level_group", level_mu, level_sd, dims=names.SIZE_GROUP_DIM
            )
            log_level = log_level_group[design.size_group_index]
        else:
            log_level = pm.Normal("log_level_pop", level_mu, level_sd)
        if n_settings > 1:
            level_spread = pm.HalfNormal("level_spread", sigma=spec.level_spread)
            log_level = log_level + level_spread * pm.Normal("level_z", 0.0, 1.0, dims=SETTING)
        else:
            log_level = pt.reshape(log_level, (1,))
        level = pt.exp(log_level)
        floor = level - amplitude.sum(axis=1)
        if spec.size is not None and design.model_size is not None:
            # E ((N/N_ref)^-alpha_N - 1) is zero at N_ref: the group level is the level at N_ref.
            a_mu, a_sd = _lognormal_location(spec.size.exponent)
            log_alpha_size = pm.Normal("log_alpha_size", a_mu, a_sd)
            alpha_size = pm.Deterministic(names.ALPHA_SIZE, pt.exp(log_alpha_size))
            s_mu, s_sd = _lognormal_location(spec.size.slope)
            log_size_slope = pm.Normal("log_size_slope", s_mu, s_sd)
            size_amp = pm.Deterministic(
                names.SIZE_AMPLITUDE, pt.exp(log_size_slope - log_alpha_size)
            )
            log_ratio = np.log(design.model_size / design.size_reference)
            level = level + size_amp * pt.expm1(-alpha_size * log_ratio)
            floor = level - amplitude.sum(axis=1) - size_amp * pt.exp(-alpha_size * log_ratio)
        loss_floor = pm.Deterministic(names.LOSS_FLOOR, floor, dims=SETTING)
        # The asymptote must not be negative (success above 1 with infinite data): a soft
        # wall, log sigmoid(L_inf / softness) = -log1pexp(-L_inf / softness), keeps the prior
        # on the physical region (about 0 above the wall, linear below it, stable everywhere).
        pm.Potential("floor_positive", -pm.math.log1pexp(-loss_floor / spec.floor_softness).sum())

        # --- per-row law: L = c + sum_a s_a ((D/D_ref)^-alpha_a - 1) / alpha_a ------------------
        log_x = np.log(design.sizes / design.reference)
        if spec.dense_reward is not None and design.dense is not None:
            m_mu, m_sd = _lognormal_location(spec.dense_reward.multiplier)
            log_multiplier = pm.Normal("log_dense_multiplier", m_mu, m_sd)
            pm.Deterministic(names.DENSE_MULTIPLIER, pt.exp(log_multiplier))
            j = spec.axis_names.index(spec.dense_reward.axis)
            shift = np.zeros_like(log_x)
            shift[:, j] = design.dense.astype(float)
            log_x = pt.as_tensor(log_x) + log_multiplier * shift
        slope = pt.exp(log_slope)
        a_row = alpha[sidx]
        terms = (slope[sidx] * pt.expm1(-a_row * log_x) / a_row).sum(axis=1)
        loss = level[sidx] + terms
        if spec.interaction is not None:
            i, k = (spec.axis_names.index(a) for a in spec.interaction.axes)
            b_mu, b_sd = _lognormal_location(spec.interaction.exponent)
            beta = pm.LogNormal(names.INTERACTION_BETA, b_mu, b_sd)
            weight = pm.Beta("interaction_weight", *spec.interaction.weight_beta, dims=SETTING)
            # gamma < floor and (D_a D_b)^-beta <= 1 for raw counts >= 1, so L > 0 always.
            gamma = pm.Deterministic(
                names.INTERACTION_GAMMA, weight * pt.maximum(loss_floor, 0.0), dims=SETTING
            )
            raw = design.sizes[:, i] * design.sizes[:, k]
            loss = loss - gamma[sidx] * pt.as_tensor(raw) ** (-beta)

        # --- likelihood ----------------------------------------------------------------------------
        if spec.outcome == "success":
            success_likelihood(loss, design.trials, design.successes, spec.concentration)
        else:
            if design.loss is None:
                raise ValueError("a loss-outcome design needs the loss column (prepare() fills it)")
            log_loss_likelihood(loss, design.loss, spec.log_loss_sigma, spec.student_nu)
    return model


def success_likelihood(
    loss: pt.TensorVariable,
    trials: np.ndarray | None,
    successes: np.ndarray | None,
    concentration: LogNormalPrior,
) -> None:
    """Beta-binomial held-out successes in logits form (inside a model context):
    ``logit p = -L - log(-expm1(-L))``, ``k ~ BetaBinomial(n, p phi, (1 - p) phi)``."""
    c_mu, c_sd = _lognormal_location(concentration)
    phi = pm.LogNormal(names.CONCENTRATION, c_mu, c_sd)
    logit_p = -loss - pt.log(-pt.expm1(-loss))
    p, q = pm.math.sigmoid(logit_p), pm.math.sigmoid(-logit_p)
    pm.BetaBinomial(
        names.OUTCOME,
        n=trials,
        alpha=p * phi,
        beta=q * phi,
        observed=successes,
        dims=names.OBS_DIM,
    )


def log_loss_likelihood(
    loss: pt.TensorVariable, observed: np.ndarray, sigma_scale: float, nu: float
) -> None:
    """Robust likelihood of a continuous loss: ``log y ~ StudentT(nu, log L, sigma)``."""
    sigma = pm.HalfNormal(names.LOG_LOSS_SIGMA, sigma=sigma_scale)
    pm.StudentT(
        names.OUTCOME,
        nu=nu,
        mu=pt.log(loss),
        sigma=sigma,
        observed=np.log(observed),
        dims=names.OBS_DIM,
    )
