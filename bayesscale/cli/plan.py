"""``bayesscale plan SPEC --out SWEEP``: plan a verl sweep into a sweep directory."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan a verl sweep (nested grid, held-out split, aligned training sets)",
        description=(
            "Read a sweep spec (TOML) and its task pool; write a sweep directory with "
            "manifest.csv, per-grid-point train parquet files in verl's schema, the held-out "
            "val parquet and plan.json (alignment report). Never overwrites without --force."
        ),
    )
    parser.add_argument("spec", help="sweep spec TOML (see docs/verl.md)")
    parser.add_argument("--out", required=True, help="sweep directory to create")
    parser.add_argument("--force", action="store_true", help="replace an existing sweep directory")
    parser.add_argument("--json", action="store_true", help="print the plan report as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bayesscale import names
    from bayesscale.verl.plan import plan_sweep
    from bayesscale.verl.sweep import load_sweep_spec

    spec = load_sweep_spec(args.spec)
    result = plan_sweep(spec, args.out, overwrite=args.force)
    if args.json:
        print(json.dumps(result.report, indent=2, default=str))
        return 0
    report, align = result.report, result.report["alignment"]
    print(f"planned {report['runs']} run(s) into {result.sweep_dir}")
    for axis, points in report["grid"].items():
        print(f"  {axis:<5} grid {points}")
    hold = report["holdout"]
    print(
        f"  held out {len(hold['held_out'])} {hold['by']}(s): {hold['val_cells']} val cells; "
        f"training pool {hold['train_envs']} envs x {hold['train_tasks']} tasks"
    )
    print(
        f"  alignment: every run trains on {align['cells_per_run']} task-env cells in "
        f"{align['updates']} updates of {align['train_batch_size']} "
        f"(data.train_max_samples, data.train_batch_size, trainer.total_training_steps)"
    )
    for dp in align["data_points"]:
        print(
            f"    {names.N_ENVS}={dp[names.N_ENVS]:<5} {names.N_TASKS}={dp[names.N_TASKS]:<6} "
            f"uses {dp['distinct_cells']:>7} of {dp['available_cells']:<7} distinct cells, "
            f"each seen x{dp['repeats']}"
        )
    print(f"next: bayesscale launch {result.sweep_dir} --ray-address http://HEAD:8265 (or --local)")
    return 0
