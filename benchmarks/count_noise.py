"""Does a coverage count's Monte Carlo error match how much the count moves from refit to refit?

Run: ``.venv/bin/python benchmarks/count_noise.py [--seeds 8] [--first-seed 0]
[--observations data/reference/observations.csv]``.

The out-of-scale check (:mod:`bayesscale.checks.out_of_scale`) counts, per axis and ratio
bucket, the left-out runs inside their 90% predictive intervals, and gives each count a Monte
Carlo standard error from a moving-block bootstrap over the refit's draws
(:mod:`bayesscale.checks.coverage_noise`); a bucket is *borderline* when its verdict changes
within two of them. That error is meant to be the count's spread over reruns of the sampler
on the same data. This script measures that spread directly: the power law and its check are
fitted ``--seeds`` times with different sampler seeds (same data, same spec), and per bucket
it prints the standard deviation of the count over the refits beside the mean bootstrap
standard error, with their ratio. A ratio near 1 validates the error; the ratio's own
uncertainty is wide with few seeds (with 8 seeds the sd has a relative standard error of about
27%), so the pooled ratio over buckets is the figure to read. About 30 s a seed on 2 cores.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np
import pandas as pd

import bayesscale as bs
from bayesscale.fits.caveats import CaveatWarning

KEYS = ["axis", "bucket"]


def _counts(observations: str, seed: int) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaveatWarning)
        fit = bs.fit(observations, seed=seed, progress=False, forms=["power"])
    evidence = fit.out_of_scale
    assert evidence is not None  # bs.fit checks out of scale by default
    frame = evidence[[*KEYS, "rows", "inside", "inside_mcse"]].to_dataframe()
    return frame.reset_index(drop=True).assign(seed=seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--observations", default="data/reference/observations.csv")
    args = ap.parse_args()
    if args.seeds < 3:
        raise SystemExit("--seeds must be at least 3: a spread needs several refits")
    runs = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        tic = time.perf_counter()
        runs.append(_counts(args.observations, seed))
        print(f"seed {seed}: {time.perf_counter() - tic:.1f} s", flush=True)
    table = pd.concat(runs, ignore_index=True)
    per = table.groupby(KEYS, sort=False).agg(
        rows=("rows", "first"),
        mean_inside=("inside", "mean"),
        sd_over_refits=("inside", "std"),
        mean_bootstrap_mcse=("inside_mcse", "mean"),
    )
    per["ratio"] = per["sd_over_refits"] / per["mean_bootstrap_mcse"]
    print(f"\n{args.seeds} refits of {args.observations} (power law, sampler seeds "
          f"{args.first_seed}..{args.first_seed + args.seeds - 1})")  # fmt: skip
    print(per.round(3).to_string())
    noisy = per[per["mean_bootstrap_mcse"] > 0]
    pooled = math.sqrt(float(np.mean(noisy["sd_over_refits"] ** 2))) / math.sqrt(
        float(np.mean(noisy["mean_bootstrap_mcse"] ** 2))
    )
    quiet = per[per["mean_bootstrap_mcse"] == 0]
    print(
        f"\npooled ratio (root mean square sd over refits / root mean square bootstrap mcse, "
        f"over the {len(noisy)} buckets with a nonzero error): {pooled:.2f}"
    )
    if len(quiet):
        print(
            f"buckets whose bootstrap error is 0: {len(quiet)}; their count's sd over refits: "
            + ", ".join(f"{v:.2f}" for v in quiet["sd_over_refits"])
        )


if __name__ == "__main__":
    main()
