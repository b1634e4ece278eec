"""How much of the `next` study's regret is the sampler's seed: the paper's full grid of a
replicate of ``benchmarks/next_study.py``, refitted with other seeds on the same data.

    PYTHONPATH=. python benchmarks/next_study_seeds.py [--replicates 0,11,15] [--seeds 1,2,3,4]
        [--workers N | --ray-address ADDR]

The study measures one decision per setting, from one fit, under one truth; if the sampler's
seed moved that decision's regret by as much as the differences between strategies, the
study would mostly measure Monte Carlo noise. This refits the data the study's full-grid
reference sees (the same simulated outcomes, seeded by replicate) with each seed, and prints
the regret of the recipe's decision under the truth and the posterior's EVPI per seed, with
their mean and standard deviation over seeds. Prints what it measures; asserts nothing.

Each (replicate, seed) refit is a job of :func:`bayesscale.checks.jobs.run_jobs`, serially
by default or as Ray tasks (``--workers N`` on a local instance, ``--ray-address ADDR`` on a
cluster); the refit is seeded by its sampler seed alone, so the numbers do not depend on
where it ran (run serially with ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1`` to match the
workers, which use one BLAS thread, in the last bits).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings
from typing import Any

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

from bayesscale import jobs
from bayesscale.data.observations import DataWarning


def refit_job(shared: tuple[Any, Any, float], item: tuple[int, int], _seed: int) -> dict:
    """Refit one replicate's full grid with one sampler seed: regret, EVPI, seconds."""
    truth, optimum, budget = shared
    rep, seed = item
    warnings.filterwarnings("ignore", message=".*have a single seed", category=DataWarning)
    tic = time.perf_counter()
    _, frame = full_grid(truth, initial_sweep(truth, rep), rep)
    tree = fit_frame(frame, config=dataclasses.replace(CONFIG, seed=seed))
    value, evpi = regret(truth, tree, budget, optimum)
    return {"regret": value, "evpi": evpi, "rows": len(frame), "s": time.perf_counter() - tic}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", default="0,11,15", help="comma-separated replicates")
    parser.add_argument("--seeds", default="1,2,3,4", help="comma-separated sampler seeds")
    parser.add_argument("--budget", type=float, default=5000.0)
    parser.add_argument("--ray-address", default=None, help="refit as Ray tasks on this cluster")
    parser.add_argument("--workers", type=int, default=1, help="refits in flight (1: serial)")
    args = parser.parse_args()
    # the initial sweep has one seed per point, on purpose (as in next_study.py)
    warnings.filterwarnings("ignore", message=".*have a single seed", category=DataWarning)
    truth = small_truth()
    optimum = truth_optimum(truth, args.budget)
    seeds = [int(s) for s in args.seeds.split(",")]
    reps = [int(r) for r in args.replicates.split(",")]
    items = [(rep, seed) for rep in reps for seed in seeds]
    if args.ray_address is not None or args.workers > 1:
        import ray.cloudpickle

        # the job's helpers live in next_study (a script's folder, not on the workers' path)
        ray.cloudpickle.register_pickle_by_value(sys.modules["next_study"])
    with jobs.ray_session(args.ray_address, args.workers):
        done = jobs.run_jobs(
            refit_job,
            items,
            seed=0,
            shared=(truth, optimum, args.budget),
            ray_address=args.ray_address,
            workers=args.workers,
        )
    for rep in reps:
        regrets = []
        for (r, seed), got in zip(items, done, strict=True):
            if r != rep:
                continue
            regrets.append(got["regret"])
            print(
                f"[rep {rep}] seed {seed}: regret {got['regret']:.5f}, posterior EVPI "
                f"{got['evpi']:.5f} ({got['s']:.0f} s)",
                flush=True,
            )
        spread = np.std(regrets, ddof=1) if len(regrets) > 1 else float("nan")
        rows = done[items.index((rep, seeds[0]))]["rows"]
        print(
            f"[rep {rep}] {rows} rows: regret over {len(seeds)} seeds {np.mean(regrets):.5f}, "
            f"standard deviation {spread:.5f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
