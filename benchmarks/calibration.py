"""Calibration of the method: simulation-based calibration (SBC) of the default law on a small
design, a negative control that SBC must reject, and the coverage of 90% exponent intervals over
redraws of the reference design, pooled model vs the paper's bootstrap, side by side.

    .venv/bin/python benchmarks/calibration.py --out calibration.json [--force]
        [--sbc-datasets 100] [--sbc-settings 0,2] [--sbc-grid small|paper] [--sbc-seeds 2]
        [--broken-datasets 30] [--redraws 20] [--n-boot 500] [--compare-pm-sample]
        [--workers N | --ray-address ADDR] [--sbc-minutes M] [--ecdf-png ecdf.png]
        [--speedup-datasets 0]

Prints text rank histograms with chi-square and KS p-values, the ECDF band verdicts (where each
quantity's ECDF of normalised ranks leaves its simultaneous 95% band), the coverage/width table and the
sampling cost (compile vs sampling seconds; with --compare-pm-sample also what
``pm.sample(nuts_sampler="numpyro")`` costs per call), and writes all of it to --out as JSON
(atomic write; an existing file is replaced only with --force), with every SBC dataset's ranks
in CSV files beside it (``OUT.sbc-ranks.csv``, ``OUT.negative-ranks.csv``). It asserts nothing.

With the defaults it takes about an hour on 2 shared cores (most of it the 20 pooled fits of the
reference design, 2-3 minutes each); scale with the arguments.

The fits run as seeded jobs (:mod:`bayesscale.jobs`): serially by default, on a
throwaway local Ray instance with ``--workers N``, or on a cluster with ``--ray-address ADDR``
(``ray.init(address=ADDR)``; bayesscale installed on its nodes). The results are the same
either way. ``--sbc-minutes`` stops starting SBC fits after that long and judges the datasets
fitted (the first k of the asked ones). ``--speedup-datasets N`` first fits the same N SBC
datasets serially and on Ray (``--workers``, default 2), checks the ranks are identical and
prints the speed-up.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import bayesscale.law.inference as inference
from bayesscale import jobs, names
from bayesscale.checks.calibration_io import (
    DATASET,
    DIVERGENCES,
    ESS_BULK,
    NORMALIZED_RANK,
    QUANTITY,
    RANK,
    RANK_DRAWS,
    write_json,
)
from bayesscale.checks.coverage import coverage_study
from bayesscale.checks.ecdf_bands import plot_ecdf_difference
from bayesscale.checks.law_sampler import CompiledLawSampler
from bayesscale.checks.prior_draws import scale_variable
from bayesscale.checks.sbc import (
    DEFAULT_MAX_RANK_DRAWS,
    SBCResult,
    default_quantities,
    simulation_based_calibration,
)
from bayesscale.checks.sim_designs import SMALL_ANCHORS, SMALL_GRIDS, sbc_design
from bayesscale.data.simulate import PAPER_ANCHORS, PAPER_GRIDS, Truth
from bayesscale.data.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
TRUTH = ROOT / "data" / "reference" / "truth.json"
BROKEN_FACTOR = 4.0  # negative control: data simulated with 4x the recorded concentration


def _config(chains: int, tune: int, draws: int, seed: int) -> inference.FitConfig:
    return inference.FitConfig(chains=chains, tune=tune, draws=draws, seed=seed, progress=False)


def _print(text: str = "") -> None:
    print(text, flush=True)


def sbc_section(args: argparse.Namespace, truth: Truth) -> dict[str, Any]:
    spec = load_spec()
    small = args.sbc_grid == "small"
    design = sbc_design(
        spec,
        truth,
        [int(s) for s in args.sbc_settings.split(",")],
        SMALL_GRIDS if small else PAPER_GRIDS,
        SMALL_ANCHORS if small else PAPER_ANCHORS,
        seeds=tuple(range(args.sbc_seeds)),
    )
    config = _config(args.sbc_chains, args.sbc_tune, args.sbc_draws, args.seed)
    quantities = default_quantities(design)
    start = time.perf_counter()
    sampler = CompiledLawSampler.for_design(
        design, config, sorted({q.variable for q in quantities})
    )
    build_s = time.perf_counter() - start
    _print(
        f"SBC design: {len(design.settings)} setting(s) {list(design.settings)}, "
        f"{design.n_obs} rows; {config.chains} chains x {config.draws} draws (+{config.tune} "
        f"warm-up); {args.sbc_datasets} datasets"
    )
    out: dict[str, Any] = {}
    if args.speedup_datasets > 0:
        out["speedup"] = speedup(args, design, config, sampler)
    every = max(1, args.sbc_datasets // 20)

    def progress(done: int, total: int) -> None:
        if done % every == 0 or done == total:
            _print(f"  {done}/{total} datasets fitted ({time.perf_counter() - tic:.0f} s)")

    tic = time.perf_counter()
    with jobs.ray_session(args.ray_address, args.workers):
        result = simulation_based_calibration(
            design,
            args.sbc_datasets,
            config,
            seed=args.seed,
            sampler=sampler,
            max_rank_draws=args.sbc_rank_draws,
            ray_address=args.ray_address,
            workers=args.workers,
            progress=progress,
            time_limit=None if args.sbc_minutes is None else 60 * args.sbc_minutes,
        )
    n = result.config["n_datasets"]
    _print(
        f"fitted {n} of {args.sbc_datasets} datasets in {result.timing['jobs_wall_s']:.0f} s "
        f"({result.config['mode']}, {result.config['workers']} worker(s))"
    )
    _print(result.report())
    divergent = int((result.ranks.groupby(DATASET)[DIVERGENCES].first() > 0).sum())
    _print(
        f"prior acceptance (wall and validity) {result.acceptance:.3f}; fits with divergences "
        f"{divergent}/{n}; min bulk ESS {result.ranks[ESS_BULK].min():.0f}; "
        f"min p over quantities and tests {result.min_p:.3g}; ECDF inside the band for "
        f"{sum(v.inside for v in result.ecdf.values())} of {len(result.ecdf)} quantities"
    )
    if args.ecdf_png is not None:
        path = plot_ecdf_difference(
            result.normalized(),
            args.ecdf_png,
            seed=args.seed,
            title=f"SBC, {n} datasets: ECDF difference with simultaneous 95% bands",
        )
        _print(f"wrote {path}")
    _print(
        f"cost: graph build {build_s:.1f} s, compile {result.timing['compile_s']:.1f} s once, "
        f"prior draws {result.timing['prior_draws_s']:.1f} s, sampling "
        f"{result.timing['sampling_s_per_dataset']:.2f} s per dataset"
    )
    out["sbc"] = result.to_dict()
    out["sbc"]["timing"]["graph_build_s"] = build_s
    out["sbc"]["ranks_csv"] = str(_write_ranks(result, args.out, "sbc"))
    out["sbc"]["design_settings"] = list(design.settings)
    if args.broken_datasets > 0:
        with jobs.ray_session(args.ray_address, args.workers):
            broken = simulation_based_calibration(
                design,
                args.broken_datasets,
                config,
                seed=args.seed + 1,
                sampler=sampler,
                max_rank_draws=args.sbc_rank_draws,
                perturb=scale_variable(names.CONCENTRATION, BROKEN_FACTOR),
                ray_address=args.ray_address,
                workers=args.workers,
            )
        _print(
            f"\nnegative control: data simulated with {BROKEN_FACTOR:g}x the recorded "
            f"concentration, {args.broken_datasets} datasets"
        )
        _print(broken.report())
        out["negative_control"] = {"perturbation": f"concentration x {BROKEN_FACTOR:g}"}
        out["negative_control"].update(broken.to_dict())
        out["negative_control"]["ranks_csv"] = str(_write_ranks(broken, args.out, "negative"))
    if args.compare_pm_sample:
        out["sampler_cost"] = compare_pm_sample(design, config, sampler)
    return out


def _write_ranks(result: SBCResult, out: Path, what: str) -> Path:
    """Every dataset's ranks (one row per dataset and quantity) beside ``--out``:
    ``calibration.json`` -> ``calibration.sbc-ranks.csv``, to re-judge or re-plot later."""
    path = out.with_name(f"{out.stem}.{what}-ranks.csv")
    path.parent.mkdir(parents=True, exist_ok=True)
    result.ranks.to_csv(path, index=False)
    return path


def speedup(
    args: argparse.Namespace, design: Any, config: inference.FitConfig, sampler: Any
) -> dict[str, Any]:
    """The same SBC datasets fitted serially (this process, its sampler compiled already) and
    as Ray tasks (``--ray-address``, else a local instance of ``--workers``, default 2,
    started and compiled inside the timing): wall seconds, speed-up, identical ranks."""
    n = args.speedup_datasets
    workers = args.workers if args.workers > 1 else 2
    seed = args.seed + 2
    tic = time.perf_counter()
    serial = simulation_based_calibration(design, n, config, seed=seed, sampler=sampler)
    serial_s = time.perf_counter() - tic
    tic = time.perf_counter()
    with jobs.ray_session(args.ray_address, workers):
        started_s = time.perf_counter() - tic
        ray = simulation_based_calibration(
            design, n, config, seed=seed, sampler=sampler, ray_address=args.ray_address,
            workers=workers,
        )  # fmt: skip
    ray_s = time.perf_counter() - tic
    columns = [DATASET, QUANTITY, RANK, RANK_DRAWS, NORMALIZED_RANK]
    same = serial.ranks[columns].equals(ray.ranks[columns])
    prior_s = serial.timing["prior_draws_s"]
    jobs_serial, jobs_ray = serial.timing["jobs_wall_s"], ray.timing["jobs_wall_s"]
    _print(
        f"\nspeed-up, the same {n} SBC datasets: serial {jobs_serial:.1f} s of fits; Ray with "
        f"{workers} workers {jobs_ray:.1f} s of fits (workers compile their sampler inside "
        f"this), {started_s:.1f} s to start Ray; speed-up of the fits "
        f"{jobs_serial / jobs_ray:.2f}x, end to end {serial_s / ray_s:.2f}x (both include "
        f"{prior_s:.1f} s of prior draws); ranks identical: {same}; load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    return {
        "datasets": n,
        "workers": workers,
        "serial_jobs_s": jobs_serial,
        "ray_jobs_s": jobs_ray,
        "ray_start_s": started_s,
        "serial_total_s": serial_s,
        "ray_total_s": ray_s,
        "speedup_jobs": jobs_serial / jobs_ray,
        "speedup_total": serial_s / ray_s,
        "identical_ranks": bool(same),
        "load_average": list(os.getloadavg()),
    }


def compare_pm_sample(
    design: Any, config: inference.FitConfig, sampler: CompiledLawSampler
) -> dict[str, Any]:
    """Wall seconds of two pm.sample(nuts_sampler="numpyro") calls on one model and data, and
    of two fits with the compiled sampler (compiled already, so both are sampling only)."""
    from bayesscale.law.model import build_law_model

    model = build_law_model(design)
    walls = []
    for i in range(2):
        _, timing = inference.sample(model, _config(config.chains, config.tune, config.draws, i))
        walls.append(timing.wall)
    compiled = [sampler.fit(design.successes, seed=i).seconds for i in range(2)]
    _print(
        f"\npm.sample(nuts_sampler='numpyro'), same model twice: {walls[0]:.1f} s, "
        f"{walls[1]:.1f} s (it rebuilds and recompiles the JAX program on every call); "
        f"compiled sampler: compile {sampler.compile_seconds or 0.0:.1f} s once, then "
        f"{compiled[0]:.1f} s, {compiled[1]:.1f} s per fit"
    )
    return {
        "pm_sample_wall_s": walls,
        "compiled_compile_s": sampler.compile_seconds,
        "compiled_fit_s": compiled,
    }


def coverage_section(args: argparse.Namespace, truth: Truth) -> dict[str, Any]:
    config = _config(args.cov_chains, args.cov_tune, args.cov_draws, args.seed)
    _print(
        f"\ncoverage: {args.redraws} redraws of the reference design ({len(truth.settings)} "
        f"settings); pooled {config.chains} chains x {config.draws} draws (+{config.tune} "
        f"warm-up), bootstrap {args.n_boot} replicates; 90% intervals"
    )
    with jobs.ray_session(args.ray_address, args.workers):
        result = coverage_study(
            truth,
            load_spec(),
            args.redraws,
            config,
            seed=args.seed,
            n_boot=args.n_boot,
            prob=0.9,
            progress=_print,
            ray_address=args.ray_address,
            workers=args.workers,
        )
    _print(result.report())
    _print(
        f"cost: compile {result.timing['compile_s']:.1f} s once, pooled sampling "
        f"{result.timing['pooled_s'] / args.redraws:.1f} s per redraw, bootstrap "
        f"{result.timing['bootstrap_s'] / args.redraws:.1f} s per redraw"
    )
    return {"coverage": result.to_dict()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sbc-datasets", type=int, default=100)
    parser.add_argument(
        "--sbc-settings", default="0,2", help="positions of reference-truth settings"
    )
    parser.add_argument("--sbc-grid", choices=("small", "paper"), default="small")
    parser.add_argument("--sbc-seeds", type=int, default=2)
    parser.add_argument("--sbc-chains", type=int, default=2)
    parser.add_argument("--sbc-tune", type=int, default=200)
    parser.add_argument("--sbc-draws", type=int, default=200)
    parser.add_argument("--sbc-rank-draws", type=int, default=DEFAULT_MAX_RANK_DRAWS)
    parser.add_argument("--broken-datasets", type=int, default=30, help="0 skips the control")
    parser.add_argument("--redraws", type=int, default=20, help="0 skips the coverage study")
    parser.add_argument("--cov-chains", type=int, default=2)
    parser.add_argument("--cov-tune", type=int, default=300)
    parser.add_argument("--cov-draws", type=int, default=300)
    parser.add_argument("--n-boot", type=int, default=500)
    parser.add_argument("--compare-pm-sample", action="store_true")
    parser.add_argument(
        "--ray-address",
        default=None,
        help="run the fits as Ray tasks on this cluster (ray.init(address=...)); default: "
        "serial, or a local instance with --workers > 1",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="Ray tasks in flight (1 and no address: serial)"
    )
    parser.add_argument(
        "--sbc-minutes",
        type=float,
        default=None,
        help="start no SBC fit after this many minutes; judge the datasets fitted",
    )
    parser.add_argument("--ecdf-png", type=Path, default=None, help="plot the SBC ECDFs here")
    parser.add_argument(
        "--speedup-datasets",
        type=int,
        default=0,
        help="first fit this many SBC datasets serially and on Ray, compare (0: skip)",
    )
    args = parser.parse_args()
    if args.out.exists() and not args.force:
        parser.error(f"{args.out} exists; pass --force to replace it")

    truth = Truth.from_json(TRUTH)
    start = time.perf_counter()
    payload: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_at_start": list(os.getloadavg()),
        },
        "arguments": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    }
    if args.sbc_datasets > 0:
        payload.update(sbc_section(args, truth))
    if args.redraws > 0:
        payload.update(coverage_section(args, truth))
    payload["machine"]["load_average_at_end"] = list(os.getloadavg())
    payload["wall_s"] = time.perf_counter() - start
    path = write_json(payload, args.out, overwrite=args.force)
    _print(f"\ntotal {payload['wall_s'] / 60:.1f} min; wrote {path}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
