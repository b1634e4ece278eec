"""The reach a law fit's out-of-scale check vouches for, read from the fit.

``bayesscale fit`` (:mod:`bayesscale.checks.out_of_scale`; not with ``--no-out-of-scale``)
refits the law without each axis's largest scales and stores, per axis and ratio bucket of the left-out rows
(``<=2x``, ``2-4x``, ``4-8x``, ``>8x`` beyond the refit's data), how many rows fell inside
their central ``prob`` interval (with that count's Monte Carlo error) and whether that
coverage *holds*: not below ``prob`` at a two-sided binomial ``p < 0.05``, and not
*borderline* (the count's Monte Carlo error could move it across that line:
:func:`bayesscale.checks.out_of_scale.bucket_verdict`). The axis's **reach** is

.. math::

    \text{reach}_a = \\max \\{ r_i : i \\in b_1 \\cup \\dots \\cup b_k \\}

over the longest run of buckets ``b_1 .. b_k``, from the nearest on and without a gap, each
with at least ``MIN_ROWS`` rows and coverage that holds; ``1`` (only within the sweep) when
the nearest bucket fails or has too few rows. It never exceeds the largest ratio the check
tested: what was not tested is not vouched for.

>>> ev = xr.Dataset({AXIS: ("c", ["env", "env", "traj"]), BUCKET: ("c", ["<=2x", "2-4x", "<=2x"]),
...                  ROWS: ("c", [40, 40, 40]), HOLDS: ("c", [1, 1, 0]),
...                  MAX_RATIO: ("c", [2.0, 4.0, 2.0])})
>>> reach(ev)
{'env': 4.0, 'traj': 1.0}
"""

from __future__ import annotations

import json
from typing import Any, Final

import numpy as np
import pandas as pd
import xarray as xr

from bayesscale import names
from bayesscale.core.intervals import DEFAULT_PROB
from bayesscale.data.extrapolation import BUCKETS
from bayesscale.formatting import times
from bayesscale.law.drift import stored_drift

MIN_ROWS: Final = 10  # rows a bucket needs to vouch for its ratios
# the evidence's variables (dim names.OUT_OF_SCALE_DIM: one entry per (axis, bucket) tested)
AXIS, BUCKET, ROWS, INSIDE, P_VALUE, HOLDS, MAX_RATIO, VERDICT, RULE = (
    "axis", "bucket", "rows", "inside", "p_value", "holds", "max_ratio", "verdict", "leave_out",
)  # fmt: skip
INSIDE_MCSE = "inside_mcse"  # the Monte Carlo error of INSIDE (absent from older fit files)
ATTR_UNTESTED = "untested_axes"  # "axis: why; ..." for the axes no refit could test
ATTR_FORMS = "forms"  # a stack's check: JSON form -> weight of the mixture refitted; else ""


def records(evidence: xr.Dataset) -> pd.DataFrame:
    """The evidence as a frame, one row per (axis, bucket): axes in their stored order, each
    axis's buckets nearest first."""
    frame = pd.DataFrame({str(k): evidence[k].to_numpy() for k in evidence.data_vars})
    for column in (ROWS, INSIDE):
        if column in frame:
            frame[column] = frame[column].astype(int)
    if HOLDS in frame:
        frame[HOLDS] = frame[HOLDS].astype(bool)
    axis_rank = {a: i for i, a in enumerate(dict.fromkeys(frame[AXIS]))}
    bucket_rank = {b: i for i, b in enumerate(BUCKETS)}
    order = np.lexsort((frame[BUCKET].map(bucket_rank), frame[AXIS].map(axis_rank)))
    return frame.iloc[order].reset_index(drop=True)


def reach(evidence: xr.Dataset, min_rows: int = MIN_ROWS) -> dict[str, float]:
    """Per tested axis, how far the check vouches for the law (module docstring)."""
    frame = records(evidence)
    out: dict[str, float] = {}
    for axis, part in frame.groupby(AXIS, sort=False):
        factor = 1.0
        expected = iter(BUCKETS)
        for row in part.itertuples(index=False):
            if getattr(row, BUCKET) != next(expected):  # a gap: nothing tested in between
                break
            if getattr(row, ROWS) < min_rows or not getattr(row, HOLDS):
                break
            factor = float(getattr(row, MAX_RATIO))
        out[str(axis)] = factor
    return out


def evidence_text(evidence: xr.Dataset) -> str:
    """Per axis, its reach and the buckets behind it, as the summary and the recipe print it.

    >>> ev = xr.Dataset({AXIS: ("c", ["traj"]), BUCKET: ("c", ["<=2x"]), RULE: ("c", ["rollouts>16"]),
    ...                  ROWS: ("c", [42]), INSIDE: ("c", [34]), P_VALUE: ("c", [0.04]),
    ...                  HOLDS: ("c", [0]), VERDICT: ("c", ["over-confident"]),
    ...                  MAX_RATIO: ("c", [2.0])}, attrs={"prob": 0.9})
    >>> print(evidence_text(ev))
    traj: reach 1x (refit without rollouts>16; <=2x: 34 of 42 inside the 90% intervals, p = 0.04, over-confident)
    >>> print(evidence_text(ev.assign({INSIDE_MCSE: ("c", [1.2])})).split("; ")[1])
    <=2x: 34 ± 1.2 of 42 inside the 90% intervals, p = 0.04, over-confident)
    """
    prob = float(evidence.attrs.get(names.ATTR_PROB, DEFAULT_PROB))
    frame = records(evidence)
    factors = reach(evidence)
    lines = []
    for axis, part in frame.groupby(AXIS, sort=False):
        buckets = "; ".join(
            f"{getattr(r, BUCKET)}: {getattr(r, INSIDE)}{_error(r)} of {getattr(r, ROWS)} "
            f"inside the {prob:.0%} intervals, p = {getattr(r, P_VALUE):.2g}, "
            f"{getattr(r, VERDICT)}"
            for r in part.itertuples(index=False)
        )
        rule = part[RULE].iloc[0]
        lines.append(f"{axis}: reach {times(factors[str(axis)])} (refit without {rule}; {buckets})")
    stacked = evidence.attrs.get(ATTR_FORMS)
    if stacked:
        weights = ", ".join(f"{f} {w:.2f}" for f, w in json.loads(stacked).items())
        lines.append(f"(each refit a stack: the mixture of {weights})")
    untested = evidence.attrs.get(ATTR_UNTESTED)
    if untested:
        lines.append(f"not tested: {untested}")
    return "\n".join(lines)


def _error(row: Any) -> str:
    """`` ± e``, a count's Monte Carlo error where the evidence stores one above 0 (two
    significant digits: an error of 0.01 still moves the verdict's rounded count a row)."""
    error = float(getattr(row, INSIDE_MCSE, 0.0))
    return f" ± {error:.2g}" if error > 0 else ""


def reach_report(tree: xr.DataTree) -> dict[str, Any] | None:
    """The fit's out-of-scale check as ``bayesscale summary`` reports it (JSON-ready): the
    reach per axis, each (axis, bucket) tested, the axes not tested, the text and the drift
    beyond the sweep per axis calibrated on it (:mod:`bayesscale.law.drift`; ``None`` for a
    check stored without one); ``None`` without a check."""
    if names.OUT_OF_SCALE_GROUP not in tree.children:
        return None
    evidence = tree[names.OUT_OF_SCALE_GROUP].to_dataset()
    return {
        "reach": reach(evidence),
        "checks": records(evidence).to_dict(orient="records"),
        "untested": evidence.attrs.get(ATTR_UNTESTED, ""),
        "text": evidence_text(evidence),
        "drift": stored_drift(tree),
    }
