"""``bayesscale forms OBS``: which law form predicts the next scale (LOO, out-of-scale scores,
stacking weights)."""

from __future__ import annotations

import argparse
import json
import sys

from bayesscale.atomic import write_atomically
from bayesscale.cli import CommandError, add_force, check_prob, output_path
from bayesscale.cli._sampling import add_sampling_arguments, config_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "forms",
        help="compare law forms: LOO, out-of-scale scores and stacking weights",
        description="Fit the law with each --forms form on every axis, once to all rows (its "
        "PSIS-LOO) and once per --leave-out rule (default: each axis's largest value, "
        "COLUMN=max), predicting the left-out rows from the refit: their log predictive "
        "density, the coverage of the central --prob interval and the MAE. The stacking "
        "weights maximise the mixture's log score on those out-of-scale rows, with 90% "
        "Bayesian-bootstrap intervals that say whether the data separate the forms. Each fit "
        "is a job: serially, on --workers local Ray workers, or on the Ray cluster at "
        "--ray-address.",
    )
    parser.add_argument("observations", metavar="OBS", help="observation table (.csv or .parquet)")
    parser.add_argument(
        "--spec", default=None, help="model spec TOML file or bundled name (default: agentic_rl)"
    )
    parser.add_argument(
        "--forms",
        default="power,offset_power",
        help="comma-separated forms to compare, of power, offset_power and saturating "
        "(default power,offset_power)",
    )
    parser.add_argument(
        "--leave-out",
        action="append",
        default=None,
        metavar="COLUMN=VALUE|max",
        help="a leave-out rule (repeat; default: COLUMN=max for every axis)",
    )
    parser.add_argument(
        "--prob", type=float, default=0.9, help="central interval mass (default 0.9)"
    )
    parser.add_argument(
        "--heldout",
        metavar="HELDOUT.csv",
        default=None,
        help="runs beyond the sweep that no fit sees, predicted by each form's fit to every "
        "row and scored with the out-of-scale points (no --leave-out rule then, unless given)",
    )
    parser.add_argument("--workers", type=int, default=None, help="local Ray workers")
    parser.add_argument("--ray-address", default=None, help="a Ray cluster to run the fits on")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--out", metavar="FORMS.json", help="also write the JSON to this file")
    add_force(parser)
    add_sampling_arguments(parser)
    parser.set_defaults(func=run, interruptible=True)


def parse_forms(text: str, least: int = 2) -> list[str]:
    """``--forms power,offset_power``: at least ``least`` law forms, each named once.

    >>> parse_forms("power, saturating")
    ['power', 'saturating']
    >>> parse_forms("power", least=1)
    ['power']
    """
    from bayesscale.core.forms import FORM_NAMES

    forms = [f.strip() for f in str(text).split(",") if f.strip()]
    unknown = [f for f in forms if f not in FORM_NAMES]
    if unknown or len(set(forms)) < least or len(set(forms)) != len(forms):
        many = "two or more" if least == 2 else "one or more"
        raise CommandError(
            f"--forms {text!r}: name {many} of {list(FORM_NAMES)}, each once"
            + (f" (unknown: {unknown})" if unknown else "")
        )
    return forms


def run(args: argparse.Namespace) -> int:
    check_prob(args.prob)
    out = output_path(args.out, args.force, [args.observations, args.spec])

    from bayesscale.checks.form_scores import compare_forms, format_text
    from bayesscale.data.observations import Table, load_observations, read_table
    from bayesscale.data.spec import load_spec
    from bayesscale.law.predict import validate_rows

    forms = parse_forms(args.forms)
    spec = load_spec(args.spec)
    table = load_observations(args.observations, spec)
    config = config_from_args(args)
    heldout = None
    if args.heldout is not None:
        frame, digest = read_table(args.heldout)
        heldout = Table(
            validate_rows(frame, spec, args.heldout, observed=True), args.heldout, digest
        )
    print(
        f"comparing forms {forms} of {spec.name!r} on {table.source}: each fitted to every row "
        f"and refitted per leave-out rule ({config.describe()})",
        file=sys.stderr,
    )
    scores = compare_forms(
        table, spec, forms, args.leave_out, config, args.prob, args.workers, args.ray_address,
        heldout=heldout,
    )  # fmt: skip
    data = scores.to_dict()
    text = json.dumps(data, indent=2)
    if out is not None:
        write_atomically(out, lambda p: p.write_text(text + "\n"), args.force)
    print(text if args.json else format_text(data))
    if out is not None and not args.json:
        print(f"wrote {out}")
    return 0
