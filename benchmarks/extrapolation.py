"""Extrapolation on real learning curves (LCDB's development half): the law against the rules
researchers use.

    PYTHONPATH=. python benchmarks/extrapolation.py [--curves 200] [--seed 0] [--cutoffs 8,32]
        [--group-size 0] [--form power | --stack power,offset_power] [--workers N | --ray-address ADDR] [--chains C --tune T --draws D
        --ess-target E] [--out FOLDER [--force]] [--lcdb FILE]

A seeded sample (``--seed``) of ``--curves`` LCDB curves (dataset x learner) whose largest
training size is >= 2,048 with >= 12 distinct sizes; for each cutoff ``1/c`` the runs at
sizes up to ``1/c`` of each curve's largest are fitted and every larger size predicted
(:mod:`bayesscale.checks.lcdb_study`). Methods: the package's pooled law with its default
priors (one fit per cutoff, pooled across all curves, or across groups of ``--group-size``
curves in sample order), the last observed value, per-curve least-squares POW4 and MMF4
(:mod:`bayesscale.checks.curve_baselines`: how their predictive intervals are made).
``--form offset_power`` fits the law with that form on the size axis (method
``law (offset_power)``; :mod:`bayesscale.core.forms`). ``--stack power,offset_power`` fits
every named form and stacks them (method ``stack``, and each form's own scores from the same
fits): each form is refitted on each curve's sizes up to half its largest fitted size, the
larger fitted sizes scored (the out-of-scale scores: leave-future-out along size), and the
stacking weights (:mod:`bayesscale.checks.stacking`) maximise the mixture's log score on them;
the weights, with their Bayesian-bootstrap 90% intervals, are printed and in ``study.json``.
Scores per extrapolation-ratio bucket (<=2x, 2-4x, 4-8x, >8x;
:mod:`bayesscale.checks.extrapolation_score`): MAE of the predicted success against the seeds'
mean, 90% per-run predictive coverage, mean log predictive probability of a run's count.

The law's fits are jobs of :func:`bayesscale.jobs.run_jobs` (serially by default,
``--workers N`` local Ray workers, ``--ray-address`` a cluster), job ``i`` seeded by
``job_seed(--seed, i)``. The package's default fit (ESS 400, R-hat 1.01) unless the sampler
options are given. Prints the headline table (MAE pooled over 2-4x and 4-8x; the law's
coverage per bucket), every method's bucket table, and the fits' wall time; ``--out`` writes
``scores.csv`` (one row per method and held-out run), ``buckets.csv`` and ``study.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import pandas as pd

from bayesscale.atomic import write_atomically
from bayesscale.checks import extrapolation_score as es
from bayesscale.checks.lcdb_study import STACK, STACK_DRIFT, FitSettings, LcdbStudy
from bayesscale.data.lcdb import read_lcdb


def headline(scores: pd.DataFrame) -> list[dict[str, Any]]:
    """Per cutoff: each method's MAE over 2-4x and 4-8x together, the lead method's coverage
    per bucket (the lead: ``stack + drift`` where the stack was run, else the first, ``law`` or
    ``law (FORM)``)."""
    out = []
    methods = scores[es.METHOD].unique()
    law = next((m for m in (STACK_DRIFT, STACK) if m in methods), str(methods[0]))
    for cutoff, part in scores.groupby("cutoff", sort=False):
        mae = es.pooled_mae(part)
        table = es.bucket_table(part[part[es.METHOD] == law])
        coverage = dict(zip(table[es.BUCKET], table[es.COVERAGE], strict=True))
        out.append(
            {
                "cutoff": float(cutoff),
                "mae": {str(m): float(v) for m, v in mae.items()},
                "lead": law,
                "law_coverage": {b: coverage.get(b, float("nan")) for b in es.BUCKETS},
            }
        )
    return out


def format_headline(rows: list[dict[str, Any]]) -> str:
    methods = list(rows[0]["mae"])
    head = " | ".join(methods)
    buckets = " / ".join(es.BUCKETS)
    lines = [
        f"| fitted on sizes up to | {head} | 90% per-run coverage of the {rows[0]['lead']}, "
        f"{buckets} |",
        "| --- | " + " | ".join("---" for _ in methods) + " | --- |",
    ]
    for r in rows:
        mae = " | ".join(f"{r['mae'].get(m, float('nan')):.4f}" for m in methods)
        cov = " / ".join(f"{r['law_coverage'][b]:.2f}" for b in es.BUCKETS)
        lines.append(f"| 1/{round(1 / r['cutoff'])} of the largest | {mae} | {cov} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--curves", type=int, default=200, help="curves in the sample (default 200)")
    p.add_argument("--seed", type=int, default=0, help="the sample's and the fits' seed")
    p.add_argument("--cutoffs", default="8,32", help="fit sizes up to 1/c of the largest, c in")
    p.add_argument("--group-size", type=int, default=0, help="curves per pooled fit (0: all)")
    p.add_argument("--form", default="power", help="the law's form on the size axis")
    p.add_argument("--stack", default=None, help="forms to fit and stack, e.g. power,offset_power")
    p.add_argument(
        "--concentration-spread", type=float, default=0.0,
        help="> 0: a concentration per curve ([outcome] concentration_spread)",
    )  # fmt: skip
    p.add_argument("--workers", type=int, default=None, help="local Ray workers")
    p.add_argument("--ray-address", default=None, help="a Ray cluster to run the fits on")
    for name in ("chains", "tune", "draws", "max-draws"):
        p.add_argument(f"--{name}", type=int, default=None, help="sampler (package default)")
    p.add_argument("--ess-target", type=float, default=None, help="sampler (package default)")
    p.add_argument("--prob", type=float, default=0.9, help="predictive interval mass")
    p.add_argument("--lcdb", type=Path, default=None, help="LCDB accuracy CSV (default: dev half)")
    p.add_argument("--out", type=Path, default=None, help="folder for scores, buckets, study")
    p.add_argument("--force", action="store_true", help="replace files in --out")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole study; returns what ``study.json`` holds, with the score frame."""
    fractions = [1.0 / float(c) for c in str(args.cutoffs).split(",")]
    study = LcdbStudy.sample(read_lcdb(args.lcdb), args.curves, seed=args.seed)
    settings = FitSettings(
        chains=args.chains, draws=args.draws, tune=args.tune, ess_target=args.ess_target,
        max_draws=args.max_draws, prob=args.prob,
    )  # fmt: skip
    start = time.perf_counter()

    def progress(done: int, total: int) -> None:
        print(f"law fits done: {done} of {total}, {time.perf_counter() - start:.0f} s", flush=True)

    if args.stack:
        law = study.stack(
            fractions, settings, str(args.stack).split(","), args.group_size, args.seed,
            args.ray_address, args.workers, args.concentration_spread,
        )  # fmt: skip
    else:
        law = study.law(
            fractions, settings, args.group_size, args.seed, args.ray_address, args.workers,
            args.form, progress, args.concentration_spread,
        )  # fmt: skip
    law_seconds = time.perf_counter() - start
    start = time.perf_counter()
    baselines = pd.concat([study.baselines(f, args.prob) for f in fractions], ignore_index=True)
    baseline_seconds = time.perf_counter() - start
    scores = pd.concat([law, baselines], ignore_index=True)
    buckets = pd.concat(
        [es.bucket_table(p).assign(cutoff=c) for c, p in scores.groupby("cutoff", sort=False)],
        ignore_index=True,
    )
    return {
        "curves": len(study.curves),
        "seed": args.seed,
        "cutoffs": fractions,
        "group_size": args.group_size or len(study.curves),
        "concentration_spread": args.concentration_spread,
        "settings": vars(settings),
        "law_wall_seconds": law_seconds,
        "baseline_wall_seconds": baseline_seconds,
        "fits": study.jobs_info,
        "headline": headline(scores),
        "buckets": buckets,
        "scores": scores,
    }


def write(out: Path, result: dict[str, Any], force: bool) -> None:
    write_atomically(out / "scores.csv", lambda p: result["scores"].to_csv(p, index=False), force)
    write_atomically(out / "buckets.csv", lambda p: result["buckets"].to_csv(p, index=False), force)
    plain = {k: v for k, v in result.items() if k not in ("scores", "buckets")}
    text = json.dumps(plain, indent=2, default=str)
    write_atomically(out / "study.json", lambda p: p.write_text(text), force)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    result = run(args)
    print(f"{result['curves']} curves, seed {args.seed}; fits: {len(result['fits'])}")
    print(format_headline(result["headline"]))
    print()
    with pd.option_context("display.width", 160, "display.max_rows", 200):
        print(result["buckets"].round(4).to_string(index=False))
    print()
    for f in result["fits"]:
        if "stack" in f:
            w = f["stack"]
            spread = ", ".join(
                f"{m} {v:.2f} [{w['interval'][m][0]:.2f}, {w['interval'][m][1]:.2f}]"
                for m, v in w["weights"].items()
            )
            print(
                f"stack 1/{round(1 / f['cutoff'])}: {f['curves']} curves, {f['rows']} runs, "
                f"{f['out_of_scale_rows']} scored out of scale; weights {spread}"
                f"{'' if w['separated'] else ' (the data do not separate the forms)'}; "
                f"drift tau {f['drift_tau']:.3f} per e-fold; "
                f"{f['divergences']} divergences, {f['seconds']:.0f} s of fits"
            )
            continue
        print(
            f"law fit 1/{round(1 / f['cutoff'])}: {f['curves']} curves, {f['rows']} runs, "
            f"{f['draws']} draws, {f['divergences']} divergences, {f['seconds']:.0f} s"
        )
    print(
        f"law fits' wall time {result['law_wall_seconds']:.0f} s; baselines "
        f"{result['baseline_wall_seconds']:.1f} s"
    )
    if args.out is not None:
        write(args.out, result, args.force)
        print(f"wrote {args.out}/scores.csv, buckets.csv, study.json")


if __name__ == "__main__":
    main()
