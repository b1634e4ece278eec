"""Fit the bundled reference data with each sampler and with the bootstrap baseline, and
print wall time, compile time, min bulk/tail ESS, max R-hat and divergences per engine.

    .venv/bin/python benchmarks/fit_reference.py [--draws 1000] [--tune 1000] [--samplers numpyro,nutpie,pymc]

Targets (issue 2, 2 cores): bulk ESS >= 400 for every parameter, R-hat <= 1.01, no
divergences, <= 30 s wall, and >= 3x faster than PyMC's default sampler on the same model.
This prints what it measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import bayesscale.inference as inference  # first: sets XLA's host device count
from bayesscale.baseline import bootstrap_fit
from bayesscale.models import build_law_model
from bayesscale.observations import load_observations, prepare
from bayesscale.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--samplers", default="numpyro,nutpie,pymc")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = parser.parse_args()

    spec = load_spec()
    table = load_observations(ROOT / "data" / "reference" / "observations.csv", spec)
    design = prepare(table, spec)
    rows = []
    for sampler in args.samplers.split(","):
        config = inference.FitConfig(
            sampler=sampler,
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            seed=1,
            progress=False,
        )
        tree, timing = inference.sample(build_law_model(design), config)
        d = inference.diagnose(tree)
        rows.append(
            {
                "engine": sampler,
                "wall_s": round(timing.wall, 1),
                "compile_s": None if timing.compile is None else round(timing.compile, 1),
                "min_ess_bulk": round(d.min_ess_bulk),
                "min_ess_tail": round(d.min_ess_tail),
                "max_rhat": round(d.max_rhat, 4),
                "divergences": d.divergences,
                "mean_leapfrog_steps": round(float(tree["sample_stats"]["n_steps"].mean()), 1)
                if "n_steps" in tree["sample_stats"]
                else None,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    start = time.perf_counter()
    bootstrap_fit(table.frame, spec, n_boot=args.n_boot, seed=0)
    rows.append(
        {
            "engine": f"bootstrap baseline ({args.n_boot} replicates)",
            "wall_s": round(time.perf_counter() - start, 1),
        }
    )
    print(json.dumps(rows[-1]), flush=True)

    print(
        f"\nreference fit, {args.chains} chains x {args.draws} draws (+{args.tune} tune), {os.cpu_count()} cores"
    )
    header = [
        "engine",
        "wall_s",
        "compile_s",
        "min_ess_bulk",
        "min_ess_tail",
        "max_rhat",
        "divergences",
        "mean_leapfrog_steps",
    ]
    print(" | ".join(header))
    for row in rows:
        print(" | ".join(str(row.get(h, "")) for h in header))
    pymc_row = next((r for r in rows if r["engine"] == "pymc"), None)
    for row in rows:
        if pymc_row and row["engine"] in ("numpyro", "nutpie"):
            print(
                f"speed-up of {row['engine']} over PyMC's default sampler: {pymc_row['wall_s'] / row['wall_s']:.2f}x"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
