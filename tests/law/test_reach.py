"""The reach read from a fit's out-of-scale check (bayesscale.law.reach): the longest run of
buckets, nearest first, with enough rows and coverage that holds; never past what was tested."""

from __future__ import annotations

import xarray as xr

from bayesscale.law.reach import AXIS, BUCKET, HOLDS, MAX_RATIO, ROWS, reach


def _evidence(rows: list[tuple[str, str, int, int, float]]) -> xr.Dataset:
    """(axis, bucket, rows, holds, max_ratio) per entry."""
    axis, bucket, n, holds, ratio = zip(*rows, strict=True)
    return xr.Dataset(
        {
            AXIS: ("c", list(axis)),
            BUCKET: ("c", list(bucket)),
            ROWS: ("c", list(n)),
            HOLDS: ("c", list(holds)),
            MAX_RATIO: ("c", list(ratio)),
        }
    )


def test_the_reach_is_the_farthest_ratio_of_the_unbroken_run_of_buckets_that_hold() -> None:
    ev = _evidence(
        [
            ("env", "2-4x", 30, 1, 4.0),  # stored out of order: read nearest first
            ("env", "<=2x", 30, 1, 2.0),
            ("env", "4-8x", 30, 0, 8.0),  # fails: the reach stops at 4x
            ("task", "<=2x", 30, 0, 1.5),  # the nearest fails: within the sweep only
            ("task", "2-4x", 30, 1, 3.0),
            ("traj", "<=2x", 30, 1, 1.8),
            ("traj", "4-8x", 30, 1, 6.0),  # nothing tested at 2-4x: no jump over the gap
            ("size", "<=2x", 9, 1, 2.0),  # too few rows to vouch for anything
        ]
    )
    assert reach(ev) == {"env": 4.0, "task": 1.0, "traj": 1.8, "size": 1.0}
    assert reach(ev, min_rows=5)["size"] == 2.0


def test_no_tested_axis_gives_no_reach() -> None:
    empty = xr.Dataset({k: ("c", []) for k in (AXIS, BUCKET, ROWS, HOLDS, MAX_RATIO)})
    assert reach(empty) == {}
