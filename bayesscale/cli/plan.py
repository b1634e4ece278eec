"""``bayesscale plan SPEC --out SWEEP``: plan a verl sweep into a sweep directory."""

from __future__ import annotations

import argparse
import json
import sys

from bayesscale import names


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan a verl sweep (nested grid, held-out split, aligned training sets)",
        description=(
            "Read a sweep spec (TOML) and its task pool; write a sweep directory with "
            "manifest.csv, per-grid-point train parquet files in verl's schema, the held-out "
            "val parquet and plan.json (alignment report). Never overwrites without --force, "
            "and never, even with it, a folder that holds anything but an unrun plan."
        ),
    )
    parser.add_argument("spec", help="sweep spec TOML (see docs/verl.md)")
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the sweep directory to create (its manifest, run configs and launch commands)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier plan in DIR that nothing ran from (no run launched, no file "
        "under runs/, nothing beside the plan's own files); without it DIR is never touched",
    )
    parser.add_argument("--json", action="store_true", help="print the plan report as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bayesscale.verl.plan import holdout_summary, plan_sweep
    from bayesscale.verl.sweep import load_sweep_spec

    spec = load_sweep_spec(args.spec)
    result = plan_sweep(spec, args.out, overwrite=args.force)
    if args.json:
        print(json.dumps(result.report, indent=2, default=str))
        return 0
    report, align, counting = result.report, result.report["alignment"], result.report["counting"]
    print(f"planned {report['runs']} run(s) into {result.sweep_dir}")
    for axis, points in report["grid"].items():
        print(f"  {axis:<5} grid {points}")
    hold = report["holdout"]
    print(
        f"  {holdout_summary(hold)}; training pool {hold['train_envs']} env ids "
        f"({hold['train_distinct_envs']} distinct) x "
        f"{hold['train_tasks']} task ids ({hold['train_distinct_tasks']} distinct)"
    )
    print(
        f"  counting: {names.N_ENVS} = {counting[names.N_ENVS]}; "
        f"{names.N_TASKS} = {counting[names.N_TASKS]}"
    )
    print(
        f"  alignment: every run trains on {align['cells_per_run']} task-env cells in "
        f"{align['updates']} updates of {align['train_batch_size']} "
        f"(data.train_max_samples, data.train_batch_size, trainer.total_training_steps)"
    )
    for dp in align["data_points"]:
        envs = f"{names.N_ENVS}={dp[names.N_ENVS]} ({_ids(dp[names.ENV_IDS])})"
        tasks = f"{names.N_TASKS}={dp[names.N_TASKS]} ({_ids(dp[names.TASK_IDS])})"
        print(
            f"    {envs:<22} {tasks:<24} uses {dp['distinct_cells']:>7} of "
            f"{dp['available_cells']:<7} task-env cells, each seen x{dp['repeats']}"
        )
    differ = counting["ids_differ"]
    if differ:
        shown = []
        for ids, count, what in (
            (names.ENV_IDS, names.N_ENVS, "env"),
            (names.TASK_IDS, names.N_TASKS, "task"),
        ):
            worst = [dp for dp in differ if dp[ids] != dp[count]]
            if worst:
                shown.append(f"{worst[-1][ids]} {what} ids = {worst[-1][count]} distinct")
        print(
            f"bayesscale plan: warning: {len(differ)} of {len(align['data_points'])} grid "
            f"point(s) select more ids than distinct units ({'; '.join(shown)}): "
            f"{names.N_ENVS}/{names.N_TASKS} in the manifest and ingested rows are the distinct "
            "counts; plan.json 'counting' lists every such point",
            file=sys.stderr,
        )
    leaky = hold["same_unit_in_training"]
    if leaky:
        what = {
            names.TASK: "statement",
            "task+env": "statement (a task) or structural signature (an env)",
        }.get(hold["by"], "structural signature")
        print(
            f"bayesscale plan: warning: {len(leaky)} held-out {hold['by']} id(s) share their "
            f"{what} with a training id (e.g. {leaky[0]!r}): the held-out set is not novel on "
            "that axis; plan.json 'holdout' lists them",
            file=sys.stderr,
        )
    print(f"next: bayesscale launch {result.sweep_dir} --ray-address http://HEAD:8265 (or --local)")
    return 0


def _ids(n: int) -> str:
    return f"{n} id" if n == 1 else f"{n} ids"
