"""The drift's pure math (bayesscale.core.drift): zero inside the sweep, ln r beyond, a shift
of the link that a success and a loss take as their link says."""

from __future__ import annotations

import numpy as np
from scipy import special

from bayesscale.core.drift import drift_scale, shifted_loss


def test_the_drift_is_zero_inside_the_sweep_and_grows_with_the_log_of_the_ratio() -> None:
    ratio = np.array([0.25, 1.0, 2.0, 8.0, np.nan])
    scale = drift_scale(ratio, 0.3)
    assert scale[:2].tolist() == [0.0, 0.0] and scale[4] == 0.0
    assert np.allclose(scale[2:4], 0.3 * np.log([2.0, 8.0]))
    # per axis: tau broadcasts over the last dim
    both = drift_scale(np.array([[2.0, 4.0]]), np.array([0.1, 0.2]))
    assert np.allclose(both, [[0.1 * np.log(2), 0.2 * np.log(4)]])


def test_a_shift_moves_the_logit_of_success_and_the_log_of_a_loss() -> None:
    p = np.array([0.05, 0.4, 0.97])
    loss = -np.log(p)
    shift = np.array([1.5, -0.7, 0.2])
    moved = np.exp(-shifted_loss(loss, "success", shift))
    assert np.allclose(special.logit(moved), special.logit(p) + shift)
    assert np.allclose(shifted_loss(loss, "success", 0.0), loss)
    # certain success (L <= 0) stays as the law has it
    assert shifted_loss(np.array([-0.1, 0.0]), "success", 2.0).tolist() == [-0.1, 0.0]
    assert np.allclose(np.log(shifted_loss(loss, "loss", shift)), np.log(loss) + shift)
