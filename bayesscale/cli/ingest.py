"""``bayesscale ingest SWEEP --out OBS``: finished verl runs -> observation rows."""

from __future__ import annotations

import argparse
import warnings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="read a sweep's finished verl logs into an observation table",
        description=(
            "Read each succeeded run's file-logger JSONL (all attempts), take the held-out "
            "metric at the final validated step, convert to successes/trials with the held-out "
            "set size, compute = 6*N*tokens, and merge into OBS by run_id (idempotent). Runs "
            "that cannot be used are listed with the reason."
        ),
    )
    parser.add_argument("sweep", help="sweep directory")
    parser.add_argument(
        "--out",
        required=True,
        metavar="OBS",
        help="the observation table (.csv or .parquet) to merge the rows into: created when "
        "absent; rows already there are kept, new runs appended (by run_id)",
    )
    parser.add_argument(
        "--step",
        choices=("final", "best"),
        default="final",
        help="final validated step (default) or best one (biased upward: selects on held-out)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace rows of OBS whose run now reads differently (without it such a row is an "
        "error and nothing is written)",
    )
    parser.add_argument("--replace", dest="force", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bayesscale.verl.ingest import BiasedSelectionWarning, ingest_sweep, write_observations

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BiasedSelectionWarning)
        result = ingest_sweep(args.sweep, step=args.step)
    if caught:
        print(
            f"warning: --step best chose steps by held-out score for {len(caught)} run(s); "
            "success is biased upward. Use --step final for the law."
        )
    print(result.report())
    following = result.next_command()
    if result.rows.empty:
        print(f"nothing written to {args.out}: no run has finished with a usable log")
        if following:
            print(f"next: {following}")
        return 0
    merged = write_observations(result.rows, args.out, replace=args.force)
    print(
        f"{args.out}: {len(merged.added)} added, {len(merged.replaced)} replaced, "
        f"{len(merged.unchanged)} unchanged; {len(merged.frame)} row(s) in all"
    )
    if following:
        print(f"next: {following}")
    return 0
