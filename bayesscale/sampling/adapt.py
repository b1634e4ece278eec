"""Warm-up: the schedule of adaptation windows and the diagonal mass matrix estimate.

The inverse mass of each coordinate is estimated from the draws *and* gradients of the last
window, as nutpie does (Seyboldt 2023, "nutpie: mass matrix adaptation using gradients"):

.. math::

    m_i = \\sqrt{\\mathrm{Var}(z_i) / \\mathrm{Var}(\\partial_i U)}

which for a Gaussian posterior equals the posterior variance, and is far less noisy than
the draw variance alone after few draws. It starts from ``1 / |grad U(z_0)|``. The windows
grow (Stan's doubling scheme, shortened: about 6% + 6% + 12% + 25% + 38% of the warm-up),
the step size is re-tuned by dual averaging in each and in a final window with the mass
fixed, and the tree depth is capped early so a poorly scaled start cannot cost thousands of
gradient evaluations per transition.

Example
-------
>>> windows(400)
[25, 25, 50, 100, 150, 50]
>>> depth_cap(0), depth_cap(3)
(6, 10)
"""

from __future__ import annotations

import numpy as np

WINDOW_FRACTIONS = (1 / 16, 1 / 16, 1 / 8, 1 / 4, 3 / 8)  # mass windows; the rest tunes the step
DEPTH_CAPS = (6, 7, 8)  # tree depth caps of the first windows; 10 after
MIN_WINDOWED_TUNE = 80  # below this: one window (step size only, mass from the start point)
INV_MASS_CLIP = (1e-10, 1e10)


def windows(tune: int) -> list[int]:
    """Iterations per warm-up window; the last entry tunes only the step size."""
    if tune <= 0:
        return []
    if tune < MIN_WINDOWED_TUNE:
        return [tune]
    sizes = [max(round(tune * f), 5) for f in WINDOW_FRACTIONS]
    final = tune - sum(sizes)
    if final < 10:
        sizes[-1] -= 10 - final
        final = 10
    return [*sizes, final]


def depth_cap(window: int) -> int:
    """Maximum tree depth during warm-up window ``window`` (0-based)."""
    return DEPTH_CAPS[window] if window < len(DEPTH_CAPS) else 10


def initial_inv_mass(grad: np.ndarray) -> np.ndarray:
    """``1 / |grad U(z0)|`` per chain and coordinate, clipped (nutpie's start)."""
    scale = np.abs(np.asarray(grad, dtype=float))
    return 1.0 / np.clip(scale, 1e-3, 1e3)


def pooled_inv_mass(draws: np.ndarray, grads: np.ndarray) -> np.ndarray:
    """One inverse mass for every chain: the geometric mean over chains of
    :func:`inv_mass_from_window`. Per-chain estimates from a short window are noisy, and
    the chain whose estimate happens to allow the largest step is the one that diverges
    (measured on the reference data: 1-3 divergences per fit per chain, none pooled)."""
    per_chain = inv_mass_from_window(draws, grads)
    pooled = np.exp(np.log(per_chain).mean(axis=0))
    return np.broadcast_to(pooled, per_chain.shape).copy()


def inv_mass_from_window(draws: np.ndarray, grads: np.ndarray) -> np.ndarray:
    """``sqrt(Var z / Var grad)`` per chain and coordinate from ``(chain, draw, dim)`` arrays."""
    var_z = np.var(draws, axis=1)
    var_g = np.var(grads, axis=1)
    ratio = np.sqrt(np.clip(var_z, 1e-300, None) / np.clip(var_g, 1e-300, None))
    ratio = np.where(np.isfinite(ratio) & (var_z > 0) & (var_g > 0), ratio, 1.0)
    return np.clip(ratio, *INV_MASS_CLIP)


LENGTH_FACTOR = 0.5  # MAMS: trajectory length = this x the distance per effective draw
LENGTH_CHANGE = 4.0  # one window changes the trajectory length at most by this factor


def trajectory_length(draws: np.ndarray, travelled: float) -> float:
    """MAMS's trajectory length from a warm-up window: ``LENGTH_FACTOR`` times the distance
    the chains travel per effective draw, ``travelled * mean(tau)``, where ``travelled`` is
    the mean trajectory length of the window's transitions and ``tau = draws / ESS`` the
    integrated autocorrelation time of each coordinate (Robnik et al. 2023's rule for MCLMC),
    changed at most ``LENGTH_CHANGE``-fold.
    """
    from bayesscale.sampling.diagnostics import ess_bulk

    chains, n, _ = draws.shape
    ess = ess_bulk(np.moveaxis(draws, 2, 0))
    tau = chains * n / np.clip(ess[np.isfinite(ess)], 1e-3, None)
    if tau.size == 0:
        return travelled
    proposed = LENGTH_FACTOR * travelled * float(np.mean(tau))
    return float(np.clip(proposed, travelled / LENGTH_CHANGE, travelled * LENGTH_CHANGE))


STEP_CORRECTION = (0.5, 2.0)  # one probe rescales the step size at most this much
# How fast MAMS's rejection rate grows with the step size near the target, ``1 - accept ~
# eps^STEP_POWER``. A second-order integrator's energy error grows as eps^2 per step, but the
# rejection rate of whole trajectories grew faster: on the reference law fit, probes at two
# step sizes gave powers of 2.5-4.2. With the power 2 the probe overshot (a probe accepting
# 0.96-0.98 doubled the step size and the draws then accepted 0.73-0.80, where the
# divergences were); with 3 it lands near the target from either side.
STEP_POWER = 3.0


def step_correction(accept: float, target: float) -> float:
    """The factor that brings MAMS's step size from acceptance ``accept`` (measured at a fixed
    step size) to ``target``, for ``1 - accept`` growing as ``eps^STEP_POWER``:
    ``((1 - target) / (1 - accept))^(1 / STEP_POWER)``, clipped to ``STEP_CORRECTION``.

    >>> round(step_correction(0.97, 0.95), 3)
    1.186
    >>> round(step_correction(0.8, 0.9), 3)
    0.794
    """
    ratio = (max(1 - target, 1e-6) / max(1 - accept, 1e-6)) ** (1 / STEP_POWER)
    return float(np.clip(ratio, *STEP_CORRECTION))
