"""Which design identifies a shallow axis: the rollout exponent's posterior by design.

    PYTHONPATH=. python benchmarks/identification.py [--designs A,B,...] [--json OUT.json]

Simulates data from ``simulate.paper_truth`` (population exponents 0.41 / 0.26 / 0.11: the
rollout axis is the shallow one) on the paper's per-axis design, varying one thing at a time
(settings, held-out trials per run, seeds, the rollout axis's swept range, the exponent prior's
width), fits each with the package's defaults and prints, for the population rollout
exponent: median and 90% interval, whether the interval covers the truth, prior contraction,
power-scaling sensitivity and the flag (:mod:`bayesscale.law.sensitivity`). The numbers in
docs/identification.md come from this script (seeded: truth 20261129, data 1, fit 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bayesscale import names
from bayesscale.data.observations import load_observations
from bayesscale.data.simulate import (
    PAPER_GRIDS,
    REFERENCE_TRUTH_SEED,
    paper_truth,
    per_axis_design,
    simulate,
)
from bayesscale.data.spec import load_spec, with_exponent_prior_scale
from bayesscale.law.inference import FitConfig, fit
from bayesscale.law.sensitivity import assess

WIDE_RANGE = (2, 6, 18, 56, 169, 512)  # 256x in six points instead of 32x
DESIGNS: dict[str, dict[str, Any]] = {
    "A": {"settings": 12, "trials": 400, "seeds": 3, "traj": PAPER_GRIDS[names.TRAJ]},
    "B": {"settings": 12, "trials": 2000, "seeds": 3, "traj": PAPER_GRIDS[names.TRAJ]},
    "C": {"settings": 12, "trials": 400, "seeds": 9, "traj": PAPER_GRIDS[names.TRAJ]},
    "D": {"settings": 12, "trials": 400, "seeds": 3, "traj": WIDE_RANGE},
    "E": {"settings": 12, "trials": 2000, "seeds": 3, "traj": WIDE_RANGE},
    "F": {"settings": 21, "trials": 2000, "seeds": 3, "traj": PAPER_GRIDS[names.TRAJ]},
    "A2": {"settings": 12, "trials": 400, "seeds": 3, "traj": PAPER_GRIDS[names.TRAJ], "scale": 2},
    "E2": {"settings": 12, "trials": 2000, "seeds": 3, "traj": WIDE_RANGE, "scale": 2},
    "F2": {"settings": 21, "trials": 2000, "seeds": 3, "traj": PAPER_GRIDS[names.TRAJ], "scale": 2},
}


def run(key: str, folder: Path) -> dict[str, Any]:
    d = DESIGNS[key]
    n = d["settings"]
    truth = paper_truth(seed=REFERENCE_TRUTH_SEED)
    truth = dataclasses.replace(
        truth,
        settings=truth.settings[:n],
        alpha=truth.alpha[:n],
        amplitude=truth.amplitude[:n],
        loss_floor=truth.loss_floor[:n],
        trials=d["trials"],
    )
    grids = {**PAPER_GRIDS, names.TRAJ: d["traj"]}
    design = per_axis_design(truth, grids=grids, seeds=tuple(range(d["seeds"])))
    frame = simulate(truth, design, seed=1)
    path = folder / f"{key}.csv"
    frame.to_csv(path, index=False)
    spec = with_exponent_prior_scale(load_spec(), float(d.get("scale", 1.0)))
    start = time.perf_counter()
    tree = fit(load_observations(path, spec), spec, FitConfig(seed=1, progress=False))
    seconds = time.perf_counter() - start
    draws = tree["posterior"][names.ALPHA_POP].sel(axis=names.TRAJ).to_numpy().ravel()
    lo, med, hi = np.quantile(draws, [0.05, 0.5, 0.95])
    ident = assess(tree, spec)["population"][names.TRAJ]
    j = list(truth.axes).index(names.TRAJ)
    truth_median = float(np.median([row[j] for row in truth.alpha]))
    return {
        "design": key,
        **{k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()},
        "rows": len(frame),
        "range": d["traj"][-1] / d["traj"][0],
        "median": float(med),
        "lower": float(lo),
        "upper": float(hi),
        "truth_alpha_pop": truth.alpha_pop[j],
        "truth_settings_median": truth_median,
        "covers": bool(lo <= truth.alpha_pop[j] <= hi),
        **ident,
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.designs.split(","):
            r = run(key, Path(tmp))
            results.append(r)
            print(
                f"{key:>3} {r['settings']:>2} settings, {r['trials']:>4} trials, "
                f"{r['seeds']} seeds, rollouts {r['range']:.0f}x, prior x{r.get('scale', 1)}: "
                f"alpha_traj {r['median']:.2f} [{r['lower']:.2f}, {r['upper']:.2f}] "
                f"(truth {r['truth_alpha_pop']:.2f}, covered {r['covers']}), contraction "
                f"{r['contraction']:.2f}, psense prior {r['prior_sensitivity']:.3f} / likelihood "
                f"{r['likelihood_sensitivity']:.3f}, {r['flag']}; {r['seconds']:.0f} s",
                flush=True,
            )
            if args.json:
                args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
