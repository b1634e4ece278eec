"""``bayesscale crossval OBS --leave-out COLUMN=VALUE|max``: refit without a slice, predict it."""

from __future__ import annotations

import argparse
import json
import sys

from bayesscale import names
from bayesscale.cli import add_force, check_prob, output_path
from bayesscale.cli._sampling import add_sampling_arguments, config_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "crossval",
        help="out-of-scale cross-validation: refit without the largest scale, predict it",
        description="For each --leave-out rule, refit the law without the matching rows and "
        "predict them from the refit: per held-out setting and overall, the number of rows, the "
        "MAE of the predictive median, the coverage of the central --prob predictive interval "
        "and the mean predictive percentile. COLUMN=max leaves out the column's largest value "
        "(n_envs=max, params_b=max); COLUMN=VALUE a chosen value (params_b=14, domain=search). "
        "An axis name stands for its column (env=max). Each rule is one refit.",
    )
    parser.add_argument("observations", metavar="OBS", help="observation table (.csv or .parquet)")
    parser.add_argument(
        "--leave-out",
        action="append",
        required=True,
        metavar="COLUMN=VALUE|max",
        help="rows to leave out (repeat for several folds)",
    )
    parser.add_argument(
        "--spec", default=None, help="model spec TOML file or bundled name (default: agentic_rl)"
    )
    parser.add_argument(
        "--prob", type=float, default=0.9, help="central interval mass (default 0.9)"
    )
    parser.add_argument(
        "--new-groups",
        choices=(names.NEW_GROUPS_POOLED,),
        default=None,
        help="allow held-out settings of groups the refit does not know (drawn from the spreads)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--out",
        metavar="TABLE.csv",
        help="also write the per-row table to this file (.csv or .parquet); the summary still "
        "goes to standard output",
    )
    add_force(parser)
    add_sampling_arguments(parser)
    parser.set_defaults(func=run, interruptible=True)


def run(args: argparse.Namespace) -> int:

    check_prob(args.prob)
    out = output_path(args.out, args.force, [args.observations, args.spec])

    from bayesscale.checks.crossval import crossval, format_text
    from bayesscale.data.observations import load_observations, write_table
    from bayesscale.data.spec import load_spec

    spec = load_spec(args.spec)
    table = load_observations(args.observations, spec)
    config = config_from_args(args)
    print(
        f"cross-validating {spec.name!r} on {table.source}: {len(args.leave_out)} refit(s) "
        f"({config.describe()})",
        file=sys.stderr,
    )
    result = crossval(
        table,
        spec,
        args.leave_out,
        config,
        prob=args.prob,
        new_groups=args.new_groups,
    )
    data = result.to_dict()
    if out is not None:
        write_table(result.rows(), out, overwrite=args.force)
        data["table"] = str(out)
    print(json.dumps(data, indent=2) if args.json else format_text(data))
    if out is not None and not args.json:
        print(f"wrote {out}")
    return 0
