"""What `next`'s batch construction buys in the simulation study's first round, by its own measure.

    PYTHONPATH=. python benchmarks/next_first_round.py [--replicates 0 1 2 3 4 5 11]

For each replicate of ``next_study.py`` (its initial sweep: 3 points per axis over 4x, one
seed, fitted with the package's default fit), the first round's batch (3,000 USD, up to 48
runs, seed 0, the study's bounds and candidate caps) under five settings of
:func:`bayesscale.design.next_runs.next_runs`:

* ``400 draws, greedy``: 400 draws per chain reweighted, the greedy by value per cost and the
  greedy by value only (the defaults before stop 24);
* ``1,000 draws, greedy``: 1,000 draws per chain, the two greedy batches only;
* ``first picks 1``: as stop 24's defaults, with batches started only from the best first
  run by value and the best by value per cost (``--first-picks 1``);
* ``stop 24's defaults``: 1,000 draws; batches started from the 3 best first runs by value
  and the 3 best by value per cost;
* ``defaults``: the current defaults (stop 24's, with the candidates' other axes at the
  paper's anchors, ``--anchors paper``, since stop 26).

All but the last hold the candidates' other axes by the ``swept`` rule, the default until
stop 26.

Prints, per replicate and setting, the command's own estimate of the batch's expected
reduction of the EVPI at 5,000 USD, what the batch costs, its runs, which construction was
kept, and the seconds it took; then the means. These are Monte Carlo estimates on the
posterior's draws, not regrets under the truth (``next_study.py`` measures those). About 40 s
per replicate on 2 cores.
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np
from next_study import BOUNDS, MAX_SIZES, fit_frame, initial_sweep, small_truth

from bayesscale.data.observations import DataWarning
from bayesscale.design.defaults import ANCHORS_SWEPT
from bayesscale.design.next_runs import next_runs
from bayesscale.design.results import NextRuns

SWEPT = {"anchor_rule": ANCHORS_SWEPT}  # the candidates' anchors until stop 26
SETTINGS: dict[str, dict[str, Any]] = {
    "400 draws, greedy": {"max_draws": 400, "first_picks": 0, **SWEPT},
    "1,000 draws, greedy": {"max_draws": 1000, "first_picks": 0, **SWEPT},
    "first picks 1": {"first_picks": 1, **SWEPT},
    "stop 24's defaults": dict(SWEPT),
    "defaults": {},
}


def kept(result: NextRuns) -> str:
    """Which construction the kept batch came from, read from the command's notes."""
    if any("starts with a run" in n for n in result.notes):
        return "started"
    if any("greedy by value (not value per cost)" in n for n in result.notes):
        return "by value"
    return "by value per cost"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--replicates", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5, 11])
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*have a single seed", category=DataWarning)
    truth = small_truth()
    reductions: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for rep in args.replicates:
        tree = fit_frame(initial_sweep(truth, rep))
        for name, options in SETTINGS.items():
            start = time.perf_counter()
            result = next_runs(
                tree,
                5000.0,
                runs=48,
                spend=3000.0,
                bounds=BOUNDS,
                max_sizes=MAX_SIZES,
                trials=truth.trials,
                seed=0,
                **options,
            )
            seconds = time.perf_counter() - start
            reduction = result.target_now - result.target_after
            reductions[name].append(reduction)
            spent = sum(r.valued.cost.total for r in result.chosen)
            print(
                f"replicate {rep:>2}, {name:<24}: EVPI {result.target_now:.5f} -> "
                f"{result.target_after:.5f} (reduction {reduction:.5f}), {spent:,.0f} USD, "
                f"{len(result.chosen)} runs, {kept(result)}, {seconds:.1f} s",
                flush=True,
            )
    print("mean reduction: " + "; ".join(f"{k} {np.mean(v):.5f}" for k, v in reductions.items()))


if __name__ == "__main__":
    main()
