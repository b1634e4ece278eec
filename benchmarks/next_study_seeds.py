"""How much of the `next` study's regret is the sampler's seed: the paper's full grid of a
replicate of ``benchmarks/next_study.py``, refitted with other seeds on the same data.

    PYTHONPATH=. python benchmarks/next_study_seeds.py [--replicates 0,11,15] [--seeds 1,2,3,4]

The study measures one decision per setting, from one fit, under one truth; if the sampler's
seed moved that decision's regret by as much as the differences between strategies, the
study would mostly measure Monte Carlo noise. This refits the data the study's full-grid
reference sees (the same simulated outcomes, seeded by replicate) with each seed, and prints
the regret of the recipe's decision under the truth and the posterior's EVPI per seed, with
their mean and standard deviation over seeds. Prints what it measures; asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import warnings

import numpy as np
from next_study import (
    CONFIG,
    fit_frame,
    full_grid,
    initial_sweep,
    regret,
    small_truth,
    truth_optimum,
)

from bayesscale.data.observations import DataWarning


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", default="0,11,15", help="comma-separated replicates")
    parser.add_argument("--seeds", default="1,2,3,4", help="comma-separated sampler seeds")
    parser.add_argument("--budget", type=float, default=5000.0)
    args = parser.parse_args()
    # the initial sweep has one seed per point, on purpose (as in next_study.py)
    warnings.filterwarnings("ignore", message=".*have a single seed", category=DataWarning)
    truth = small_truth()
    optimum = truth_optimum(truth, args.budget)
    seeds = [int(s) for s in args.seeds.split(",")]
    for rep in [int(r) for r in args.replicates.split(",")]:
        _, frame = full_grid(truth, initial_sweep(truth, rep), rep)
        regrets = []
        for seed in seeds:
            tic = time.perf_counter()
            tree = fit_frame(frame, config=dataclasses.replace(CONFIG, seed=seed))
            value, evpi = regret(truth, tree, args.budget, optimum)
            regrets.append(value)
            print(
                f"[rep {rep}] seed {seed}: regret {value:.5f}, posterior EVPI {evpi:.5f} "
                f"({time.perf_counter() - tic:.0f} s)",
                flush=True,
            )
        spread = np.std(regrets, ddof=1) if len(regrets) > 1 else float("nan")
        print(
            f"[rep {rep}] {len(frame)} rows: regret over {len(seeds)} seeds {np.mean(regrets):.5f}, "
            f"standard deviation {spread:.5f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
