"""Do the default fit's settings hold across designs and seeds? Divergences and R-hat per fit.

    .venv/bin/python benchmarks/robust_defaults.py [--seeds 10] [--first-seed 0]
        [--designs reference,thin,twelve] [--target-accept A] [--ray-address ADDR]

Three designs, each fitted as the power law with the sampler's defaults
(``bs.fit(table, seed=s, forms=["power"])``: MAMS,
4 chains where the machine has the devices, ESS target 400, R-hat 1.01) for seeds
``0 .. --seeds - 1``:

* ``reference``: ``data/reference/observations.csv`` (21 settings, 1,008 runs);
* ``thin``: the same runs thinned to a sweep a lab would start with: seed 0 only, and on each
  axis the smallest, a middle and the largest swept value (the anchors elsewhere);
* ``twelve``: a 12-setting design of the paper's shape simulated from
  :func:`bayesscale.data.simulate.paper_truth` (its first 12 settings, the paper's per-axis grid,
  3 seeds; simulation seed 12).

Per fit: divergences, max R-hat, min bulk and tail ESS, the sampler's wall time and whether it
passed (0 divergences and R-hat <= 1.01). Per design: fits passing; the target is >= 95% of
fits. ``--target-accept`` fits with another target acceptance than the default's (to
compare); ``--first-seed K`` fits seeds ``K .. K + --seeds - 1`` (fresh seeds, to check a
setting chosen on the first ten). With ``--ray-address`` the fits run as Ray tasks
(:mod:`bayesscale.jobs`); each is seeded by its own (design, seed), so the results
are the same serially (with one BLAS thread per process, as Ray's workers have). The figures
of ``docs/speed.md`` are from a serial run. Nothing is written.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesscale import names

ROOT = Path(__file__).resolve().parents[1]
DESIGNS = ("reference", "thin", "twelve")
RHAT_MAX = 1.01


def design_frame(name: str) -> pd.DataFrame:
    """The observations of a design (see the module docstring)."""
    reference = pd.read_csv(ROOT / "data" / "reference" / "observations.csv")
    if name == "reference":
        return reference
    if name == "thin":
        from bayesscale.data.simulate import AXIS_COLUMNS, PAPER_ANCHORS

        keep = np.zeros(len(reference), dtype=bool)
        anchors = {AXIS_COLUMNS[a]: v for a, v in PAPER_ANCHORS.items()}
        for column in anchors:
            values = sorted(reference[column].unique())
            chosen = {values[0], values[len(values) // 2], values[-1]}
            others = [c for c in anchors if c != column]
            at_anchor = np.all([reference[c].eq(anchors[c]) for c in others], axis=0)
            keep |= at_anchor & reference[column].isin(chosen)
        return reference[keep & reference[names.SEED].eq(0)].reset_index(drop=True)
    if name == "twelve":
        from bayesscale.data.simulate import paper_truth, per_axis_design, simulate

        truth = paper_truth()
        truth.settings = truth.settings[:12]
        for key in ("alpha", "amplitude", "loss_floor"):
            setattr(truth, key, list(getattr(truth, key))[:12])
        return simulate(truth, per_axis_design(truth), seed=12)
    raise SystemExit(f"unknown design {name!r}; known: {', '.join(DESIGNS)}")


def one_fit(name: str, seed: int, target_accept: float | None = None) -> dict[str, Any]:
    """Fit design ``name`` with the defaults at ``seed`` (and ``target_accept``, ``None``
    for the default's); its diagnostics."""
    import bayesscale as bs
    from bayesscale.data.observations import DataWarning
    from bayesscale.fits.caveats import CaveatWarning

    frame = design_frame(name)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaveatWarning)  # a failed fit is what is counted here
        warnings.simplefilter("ignore", DataWarning)  # the thin design has one seed, as meant
        fit = bs.fit(  # the sampler's defaults, on the power law's single fit
            frame, seed=seed, progress=False, target_accept=target_accept, out_of_scale=False,
            forms=["power"],
        )  # fmt: skip
    seconds = time.perf_counter() - start
    d = fit.diagnostics
    return {
        "design": name,
        "seed": seed,
        "rows": len(frame),
        "divergences": int(d.divergences),
        "max_rhat": float(d.max_rhat),
        "min_ess_bulk": float(d.min_ess_bulk),
        "min_ess_tail": float(d.min_ess_tail),
        "seconds": seconds,
        "passed": bool(d.divergences == 0 and d.max_rhat <= RHAT_MAX),
        "worst": dict(d.worst),
    }


def fit_job(target_accept: float | None, job: tuple[str, int], _seed: int) -> dict[str, Any]:
    """:func:`one_fit` as a fan-out job: the fit's seed is the job's own ``(design, seed)``."""
    return one_fit(*job, target_accept)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument("--target-accept", type=float, default=None)
    parser.add_argument("--ray-address", default=None)
    args = parser.parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(d, s) for d in args.designs.split(",") for s in seeds]
    for d, _ in jobs[:: args.seeds]:
        design_frame(d)  # a bad design name is said before any fit
    start = time.perf_counter()
    if args.ray_address:
        from bayesscale.jobs import run_jobs

        results = run_jobs(
            fit_job, jobs, seed=0, shared=args.target_accept, ray_address=args.ray_address
        )
    else:
        results = [one_fit(d, s, args.target_accept) for d, s in jobs]
    wall = time.perf_counter() - start
    table = pd.DataFrame(results)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.drop(columns=["worst"]).to_string(index=False, float_format="%.4g"))
    print()
    for name, group in table.groupby("design", sort=False):
        failed = group[~group["passed"]]
        print(
            f"{name:9s} ({int(group['rows'].iloc[0])} runs): {int(group['passed'].sum())} of "
            f"{len(group)} fits pass (0 divergences, R-hat <= {RHAT_MAX}); divergences "
            f"{int(group['divergences'].sum())} in all; max R-hat "
            f"{group['max_rhat'].max():.4f}; median {group['seconds'].median():.1f} s a fit"
            + (
                "; failed: "
                + ", ".join(
                    f"seed {r.seed} ({r.divergences} div, R-hat {r.max_rhat:.4f})"
                    for r in failed.itertuples()
                )
                if len(failed)
                else ""
            )
        )
    share = table["passed"].mean()
    print(
        f"all designs: {int(table['passed'].sum())} of {len(table)} fits pass ({share:.0%}; "
        f"target >= 95%); {wall:.0f} s wall"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
