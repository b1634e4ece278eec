"""``bayesscale compare FIT_A.nc FIT_B.nc [...]``: PSIS-LOO comparison of fits of the same data."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bayesscale.cli import CommandError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="compare fits of the same data by PSIS-LOO",
        description="Estimate each fit's expected log predictive density by PSIS-LOO (ArviZ) and "
        "compare them: the best fit against each other one, 'A is better than B by d ± SE' "
        "only for a clear difference (|d| > 2 SE); otherwise 'A and B cannot be told apart', "
        "and two fits with identical pointwise LOO terms are 'the same'. Rows whose Pareto k "
        "exceeds ArviZ's threshold are counted and named. Each fit's convergence diagnostics "
        "are checked: a fit that failed them (or a --preview fit) is named on the first line "
        "(JSON: failed_diagnostics, and diagnostics per fit). The fits must be of the same data "
        "(same data_sha256); the data are re-read from each fit's data_source unless --data "
        "is given.",
    )
    parser.add_argument("fits", nargs="+", metavar="FIT.nc", help="two or more law fits")
    parser.add_argument(
        "--data", metavar="OBS.csv", help="the observation table the fits were made from"
    )
    parser.add_argument(
        "--name",
        action="append",
        metavar="NAME",
        help="a name per fit, in order (default: the file names)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse (exit 3, one line) when any fit's diagnostics failed or it is a preview; "
        "without it each failed verdict goes to standard error",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if len(args.fits) < 2:
        raise CommandError(f"compare needs at least two fits, got {len(args.fits)}")
    labels = args.name or [Path(f).name for f in args.fits]
    if len(labels) != len(args.fits):
        raise CommandError(f"{len(labels)} --name value(s) for {len(args.fits)} fits")
    if len(set(labels)) != len(labels):
        raise CommandError(f"fit names must be distinct, got {labels}; pass --name per fit")

    from bayesscale.checks.compare import compare_fits, diagnostics_of, format_text
    from bayesscale.data.fitfile import load_fit

    fits = {label: load_fit(path) for label, path in zip(labels, args.fits, strict=True)}
    failed = {n: d["headline"] for n, d in diagnostics_of(fits).items() if not d["ok"]}
    if failed and args.strict:
        from bayesscale.data.fitfile import DiagnosticsRefusedError

        raise DiagnosticsRefusedError(
            "--strict: not comparing, "
            + "; ".join(f"{name}: {headline}" for name, headline in failed.items())
        )
    for name, headline in failed.items():
        print(f"bayesscale compare: warning: {name}: {headline}", file=sys.stderr)
    result = compare_fits(fits, data=args.data).to_dict()
    print(json.dumps(result, indent=2) if args.json else format_text(result))
    return 0
