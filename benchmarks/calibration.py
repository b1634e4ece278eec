"""Calibration of the method: simulation-based calibration (SBC) of the default law on a small
design, a negative control that SBC must reject, and the coverage of 90% exponent intervals over
redraws of the reference design, pooled model vs the paper's bootstrap, side by side.

    .venv/bin/python benchmarks/calibration.py --out calibration.json [--force]
        [--sbc-datasets 100] [--sbc-settings 0,2] [--sbc-grid small|paper] [--sbc-seeds 2]
        [--broken-datasets 30] [--redraws 20] [--n-boot 500] [--compare-pm-sample]

Prints text rank histograms with chi-square and KS p-values, the coverage/width table and the
sampling cost (compile vs sampling seconds; with --compare-pm-sample also what
``pm.sample(nuts_sampler="numpyro")`` costs per call), and writes all of it to --out as JSON
(atomic write; an existing file is replaced only with --force). It asserts nothing.

With the defaults it takes about an hour on 2 shared cores (most of it the 20 pooled fits of the
reference design, 2-3 minutes each); scale with the arguments.
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
from bayesscale import names
from bayesscale.checks import calibration as cal
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
    design = cal.sbc_design(
        spec,
        truth,
        [int(s) for s in args.sbc_settings.split(",")],
        cal.SMALL_GRIDS if small else PAPER_GRIDS,
        cal.SMALL_ANCHORS if small else PAPER_ANCHORS,
        seeds=tuple(range(args.sbc_seeds)),
    )
    config = _config(args.sbc_chains, args.sbc_tune, args.sbc_draws, args.seed)
    quantities = cal.default_quantities(design)
    start = time.perf_counter()
    sampler = cal.CompiledLawSampler.for_design(
        design, config, sorted({q.variable for q in quantities})
    )
    build_s = time.perf_counter() - start
    _print(
        f"SBC design: {len(design.settings)} setting(s) {list(design.settings)}, "
        f"{design.n_obs} rows; {config.chains} chains x {config.draws} draws (+{config.tune} "
        f"warm-up); {args.sbc_datasets} datasets"
    )
    result = cal.simulation_based_calibration(
        design,
        args.sbc_datasets,
        config,
        seed=args.seed,
        sampler=sampler,
        max_rank_draws=args.sbc_rank_draws,
    )
    _print(result.report())
    divergent = int((result.ranks.groupby(cal.DATASET)[cal.DIVERGENCES].first() > 0).sum())
    _print(
        f"prior acceptance (wall and validity) {result.acceptance:.3f}; fits with divergences "
        f"{divergent}/{args.sbc_datasets}; min bulk ESS {result.ranks[cal.ESS_BULK].min():.0f}; "
        f"min p over quantities and tests {result.min_p:.3g}"
    )
    _print(
        f"cost: graph build {build_s:.1f} s, compile {result.timing['compile_s']:.1f} s once, "
        f"prior draws {result.timing['prior_draws_s']:.1f} s, sampling "
        f"{result.timing['sampling_s_per_dataset']:.2f} s per dataset"
    )
    out: dict[str, Any] = {"sbc": result.to_dict()}
    out["sbc"]["timing"]["graph_build_s"] = build_s
    out["sbc"]["design_settings"] = list(design.settings)
    if args.broken_datasets > 0:
        broken = cal.simulation_based_calibration(
            design,
            args.broken_datasets,
            config,
            seed=args.seed + 1,
            sampler=sampler,
            max_rank_draws=args.sbc_rank_draws,
            perturb=cal.scale_variable(names.CONCENTRATION, BROKEN_FACTOR),
        )
        _print(
            f"\nnegative control: data simulated with {BROKEN_FACTOR:g}x the recorded "
            f"concentration, {args.broken_datasets} datasets"
        )
        _print(broken.report())
        out["negative_control"] = {"perturbation": f"concentration x {BROKEN_FACTOR:g}"}
        out["negative_control"].update(broken.to_dict())
    if args.compare_pm_sample:
        out["sampler_cost"] = compare_pm_sample(design, config, sampler)
    return out


def compare_pm_sample(
    design: Any, config: inference.FitConfig, sampler: cal.CompiledLawSampler
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
    result = cal.coverage_study(
        truth,
        load_spec(),
        args.redraws,
        config,
        seed=args.seed,
        n_boot=args.n_boot,
        prob=0.9,
        progress=_print,
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
    parser.add_argument("--sbc-rank-draws", type=int, default=cal.DEFAULT_MAX_RANK_DRAWS)
    parser.add_argument("--broken-datasets", type=int, default=30, help="0 skips the control")
    parser.add_argument("--redraws", type=int, default=20, help="0 skips the coverage study")
    parser.add_argument("--cov-chains", type=int, default=2)
    parser.add_argument("--cov-tune", type=int, default=300)
    parser.add_argument("--cov-draws", type=int, default=300)
    parser.add_argument("--n-boot", type=int, default=500)
    parser.add_argument("--compare-pm-sample", action="store_true")
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
    path = cal.write_json(payload, args.out, overwrite=args.force)
    _print(f"\ntotal {payload['wall_s'] / 60:.1f} min; wrote {path}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
