"""The candidate runs of ``next``: one axis at a time from per-setting anchors (the paper's or
the swept range's), plus the recipe's decision; and reading the fit's posterior for them.

>>> s = SweptRange(("env",), ("S",), np.array([[8.0]]), np.array([[32.0]]))
>>> [c.sizes for c in candidate_grid(["S"], ["env"], s, np.array([[32.0]]), beyond=2.0)]
[(8,), (16,), (32,), (64,)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.data.extrapolation import SweptRange
from bayesscale.data.simulate import AXIS_COLUMNS, PAPER_ANCHORS
from bayesscale.design.defaults import (
    ANCHOR_RULES,
    ANCHORS_PAPER,
    ANCHORS_SWEPT,
    DEFAULT_BEYOND,
    DEFAULT_STEP,
)
from bayesscale.design.results import DECISION_AXIS, Array, Candidate, DesignError

# --- reading the fit ---------------------------------------------------------------------------


def with_concentration(fit: xr.DataTree, value: float) -> xr.DataTree:
    """A copy of ``fit`` whose posterior has a constant beta-binomial ``concentration``
    (for hand-made fits such as :func:`bayesscale.recipe.synthetic`)."""
    post = fit["posterior"].to_dataset()
    shape = (post.sizes[names.CHAIN_DIM], post.sizes[names.DRAW_DIM])
    post[names.CONCENTRATION] = ((names.CHAIN_DIM, names.DRAW_DIM), np.full(shape, float(value)))
    out = fit.copy()
    out["posterior"] = xr.DataTree(post)
    return out


def posterior_variable(fit: xr.DataTree, name: str) -> xr.DataArray:
    """The posterior variable ``name`` of ``fit`` (a :class:`~bayesscale.design.results.DesignError` if it is not one)."""
    value = fit["posterior"][name]
    if not isinstance(value, xr.DataArray):
        raise DesignError(f"{name!r} in the fit is not a variable")
    return value


# --- candidates --------------------------------------------------------------------------------


def default_anchors(
    swept: SweptRange,
    axes: Sequence[str],
    columns: Mapping[str, str],
    rule: str = ANCHORS_PAPER,
) -> Array:
    """Per setting and axis (G, n), where a one-axis candidate holds the other axes.

    ``rule="paper"`` (the default): the paper's anchors (256 / 10,240 / 8) unless the setting's
    sweep lies wholly above one, so that after a thin first sweep the runs are made nearer to
    where the recipe's decision lies, as the paper's grid makes them; ``"swept"``: the paper's
    anchors only where they lie inside the setting's swept range. Otherwise, and on an axis
    without a paper anchor, the largest swept value.

    >>> s = SweptRange(("env", "task"), ("S",), np.array([[8.0, 320.0]]), np.array([[32.0, 1280.0]]))
    >>> default_anchors(s, ("env", "task"), {"env": "n_envs", "task": "n_tasks"}).tolist()
    [[256.0, 10240.0]]
    >>> default_anchors(s, ("env", "task"), {"env": "n_envs", "task": "n_tasks"}, "swept").tolist()
    [[32.0, 1280.0]]
    """
    if rule not in ANCHOR_RULES:
        raise DesignError(f"anchor rule must be one of {ANCHOR_RULES}, got {rule!r}")
    out = np.array(swept.hi, dtype=float, copy=True)
    paper = {AXIS_COLUMNS[a]: v for a, v in PAPER_ANCHORS.items()}
    for i, axis in enumerate(axes):
        value = paper.get(columns.get(axis, axis))
        if value is not None:
            usable = swept.lo[:, i] <= value
            if rule == ANCHORS_SWEPT:
                usable &= value <= swept.hi[:, i]
            out[:, i] = np.where(usable, value, out[:, i])
    return out


def candidate_grid(
    settings: Sequence[str],
    axes: Sequence[str],
    swept: SweptRange,
    anchors: Array,
    beyond: float = DEFAULT_BEYOND,
    step: float = DEFAULT_STEP,
    max_sizes: Mapping[str, float] | None = None,
    extra: Mapping[str, Sequence[Sequence[float]]] | None = None,
) -> list[Candidate]:
    """Candidate runs, one axis at a time as ``plan`` sweeps: per setting and axis, sizes from
    the smallest swept value up to ``beyond`` times the largest, a factor ``step`` apart (the
    top always included), the other axes at ``anchors`` (G, n); plus ``extra`` points per
    setting (e.g. the recipe's decision). Sizes are whole numbers, capped at ``max_sizes``
    (e.g. what the pool holds)."""
    if not (beyond >= 1 and step > 1):
        raise DesignError(f"beyond must be >= 1 and step > 1, got {beyond:g}, {step:g}")
    cap = np.array([float((max_sizes or {}).get(a, np.inf)) for a in axes])
    out: list[Candidate] = []
    seen: set[tuple[str, tuple[int, ...]]] = set()
    sel = swept.select(list(settings), list(axes))

    def add(setting: str, g: int, sizes: Array, axis: str) -> None:
        s = tuple(int(v) for v in np.maximum(np.round(np.minimum(sizes, cap)), 1))
        if (setting, s) in seen:
            return
        seen.add((setting, s))
        size = np.asarray(s, dtype=float)
        out.append(
            Candidate(
                setting,
                s,
                axis,
                float(np.max(size / sel.hi[g])),
                float(np.min(size / sel.lo[g])),
                tuple(float(v) for v in sel.lo[g]),
                tuple(float(v) for v in sel.hi[g]),
            )
        )

    for g, setting in enumerate(settings):
        for i, axis in enumerate(axes):
            lo, hi = float(sel.lo[g, i]), float(sel.hi[g, i])
            top = min(beyond * hi, cap[i])
            k = np.arange(int(np.floor(np.log(top / lo) / np.log(step) + 1e-9)) + 1)
            values = np.unique(np.append(lo * step**k, top))
            for v in values:
                sizes = anchors[g].astype(float).copy()
                sizes[i] = v
                add(setting, g, sizes, axis)
        for point in (extra or {}).get(setting, ()):
            add(setting, g, np.asarray(point, dtype=float), DECISION_AXIS)
    return out
