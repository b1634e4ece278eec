"""``bayesscale check FIT.nc HELDOUT.csv``: posterior-predictive check on held-out runs."""

from __future__ import annotations

import argparse
import json
import sys

from bayesscale.cli import (
    add_force,
    add_new_groups,
    add_prob,
    add_strict,
    add_warn_beyond,
    check_prob,
    check_warn_beyond,
    output_path,
    refuse_failed,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check a fit's predictions on held-out (larger-scale) runs",
        description="Predict every row of HELDOUT (CSV or parquet, same columns as the "
        "observations) from the fit's posterior and report, per row, the observed success rate, "
        "the predictive median and central interval (seed spread and binomial noise included), "
        "the interval of the expected rate (law only), the observation's predictive percentile "
        "and whether the interval covers it; overall and per-setting coverage and MAE. "
        "docs/checks.md explains how to read it.",
    )
    parser.add_argument("fit", metavar="FIT.nc")
    parser.add_argument("heldout", metavar="HELDOUT.csv")
    add_prob(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--out",
        metavar="TABLE.csv",
        help="also write the per-row table to this file (.csv or .parquet; rows numbered from 1 "
        "as in error messages, with the CSV file line); the summary still goes to standard output",
    )
    add_force(parser)
    add_warn_beyond(parser)
    add_strict(parser)
    add_new_groups(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of the predictive draws")
    parser.add_argument(
        "--no-drift",
        action="store_true",
        help="check the law's own posterior predictive, without the drift beyond the sweep the "
        "fit calibrated on its out-of-scale check (docs/checks.md)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    check_prob(args.prob)
    warn_beyond = check_warn_beyond(args.warn_beyond)
    out = output_path(args.out, args.force, [args.fit, args.heldout])

    from bayesscale.checks.heldout import format_text, summary
    from bayesscale.data.fitfile import verdict
    from bayesscale.data.observations import write_table
    from bayesscale.fits.law import LawFit

    fit = LawFit.load(args.fit)
    diagnostics = fit.diagnostics
    refuse_failed(args.fit, diagnostics, args.strict)
    table, notes = fit.check_result(
        args.heldout,
        args.prob,
        warn_beyond,
        new_groups=args.new_groups,
        seed=args.seed,
        drift=not args.no_drift,
    )
    result = summary(table, warn_beyond)
    result["fit_diagnostics"] = diagnostics.to_dict()
    said = verdict(diagnostics, "law fit")  # refuse_failed said it, naming the file
    for note in notes:
        if note not in said:
            print(f"bayesscale check: {note}", file=sys.stderr)
    if out is not None:
        write_table(table, out, overwrite=args.force)
        result["table"] = str(out)
    headline = diagnostics.headline()
    text = format_text(result) if headline is None else f"{headline}\n{format_text(result)}"
    print(json.dumps(result, indent=2) if args.json else text)
    if out is not None and not args.json:
        print(f"wrote {out}")
    return 0
