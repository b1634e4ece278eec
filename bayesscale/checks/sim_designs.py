"""Designs for the calibration studies: a truth restricted to some settings, a simulated
table validated and laid out for the model, and the per-axis-sweep design SBC refits.

Example
-------
>>> sorted(SMALL_GRIDS) == sorted(SMALL_ANCHORS)
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

import pandas as pd

from bayesscale import names
from bayesscale.data.observations import Design, Table, frame_sha256, prepare, validate
from bayesscale.data.simulate import PAPER_ANCHORS, PAPER_GRIDS, Truth, per_axis_design
from bayesscale.data.spec import ModelSpec


def truth_subset(truth: Truth, settings: Sequence[int]) -> Truth:
    """The same truth restricted to some of its settings (by position)."""
    idx = [int(i) for i in settings]
    if not idx or any(i < 0 or i >= len(truth.settings) for i in idx):
        raise ValueError(f"setting positions must lie in 0..{len(truth.settings) - 1}, got {idx}")
    return replace(
        truth,
        settings=[dict(truth.settings[i]) for i in idx],
        alpha=[list(truth.alpha[i]) for i in idx],
        amplitude=[list(truth.amplitude[i]) for i in idx],
        loss_floor=[truth.loss_floor[i] for i in idx],
    )


def design_of(frame: pd.DataFrame, spec: ModelSpec, source: str) -> Design:
    """Validate a simulated table (errors name ``source``) and lay it out for the model."""
    clean = validate(frame, spec, source=source)
    return prepare(Table(clean, source, frame_sha256(clean)), spec)


def sbc_design(
    spec: ModelSpec,
    truth: Truth,
    settings: Sequence[int] = (0, 1),
    grids: Mapping[str, tuple[int, ...]] | None = None,
    anchors: Mapping[str, int] | None = None,
    seeds: tuple[int, ...] = (0, 1),
) -> Design:
    """A per-axis-sweep design for SBC: the settings of ``truth`` at ``settings`` (their keys
    and model sizes only), ``grids`` swept with the others at ``anchors``. The outcome column
    is a placeholder (half the trials): SBC replaces it with data simulated from the prior."""
    sub = truth_subset(truth, settings)
    frame = per_axis_design(
        sub, dict(grids) if grids else None, dict(anchors) if anchors else None, seeds
    )
    frame[names.SUCCESSES] = frame[names.TRIALS] // 2
    return design_of(frame, spec, "<SBC design>")


SMALL_GRIDS: Final = {axis: grid[::2] for axis, grid in PAPER_GRIDS.items()}
SMALL_ANCHORS: Final = {
    axis: grid[-1] if PAPER_ANCHORS[axis] == PAPER_GRIDS[axis][-1] else grid[len(grid) // 2]
    for axis, grid in SMALL_GRIDS.items()
}
