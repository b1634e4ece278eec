"""``bayesscale report OBS [--pricing P] [--heldout H] --out DIR``: the whole analysis, written up."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from bayesscale.cli import (
    CommandError,
    add_new_groups,
    add_prob,
    add_strict,
    add_warn_beyond,
    check_prob,
    check_warn_beyond,
)
from bayesscale.cli._sampling import add_sampling_arguments, config_from_args
from bayesscale.cli.forms import parse_forms
from bayesscale.cli.recipe import parse_budgets
from bayesscale.data.spec import SENSITIVITY_SCALE
from bayesscale.sampling.config import PRICING_TARGET_ACCEPT


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="fit, price, allocate, check and write the report (figures, tables, fits)",
        description="Fit the pooled law to OBS (or reuse --fit), price synthetic data from "
        "--pricing (or reuse --pricing-fit), propagate the posterior through the budget recipe, "
        "check the law on --heldout runs, and write DIR/report.md with every figure (PNG) and "
        "table (Markdown and LaTeX), the fits as netCDF and a manifest of the inputs. DIR is "
        "written whole or not at all; a DIR holding a different report is never overwritten "
        "without --force, and one holding anything else never.",
    )
    parser.add_argument("observations", metavar="OBS", help="observation table (.csv or .parquet)")
    parser.add_argument("--out", required=True, metavar="DIR", help="the report directory")
    parser.add_argument("--pricing", metavar="PRICING.csv", help="synthetic-data pricing runs")
    parser.add_argument("--heldout", metavar="HELDOUT.csv", help="held-out runs to predict")
    add_new_groups(parser)
    parser.add_argument("--spec", help="law spec TOML file or bundled name (default agentic_rl)")
    parser.add_argument("--pricing-spec", help="pricing spec TOML or bundled name")
    parser.add_argument("--prices", metavar="P.toml", help="unit prices for the recipe")
    parser.add_argument("--fit", metavar="FIT.nc", help="reuse a saved law fit of OBS")
    parser.add_argument(
        "--pricing-fit", metavar="PRICE.nc", help="reuse a saved pricing fit of PRICING"
    )
    parser.add_argument(
        "--sensitivity-scale",
        type=float,
        default=SENSITIVITY_SCALE,
        metavar="K",
        help=f"the prior-sensitivity section refits the law with exponent priors K times as wide "
        f"(as `bayesscale fit --prior-scale K`) and shows the ordering and the recipe under both "
        f"(default {SENSITIVITY_SCALE:g}; 0 skips the refit and the section)",
    )
    parser.add_argument(
        "--sensitivity-fit",
        metavar="FIT.nc",
        help="reuse a saved fit of OBS made with --prior-scale K for the sensitivity section",
    )
    parser.add_argument(
        "--budget",
        default="1e3:1e6:7",
        help="recipe budgets: B, B1,B2,... or LO:HI:N log-spaced (default 1e3:1e6:7)",
    )
    add_prob(parser)
    parser.add_argument(
        "--within-data",
        type=float,
        metavar="F",
        help="bound the recipe at F times the largest swept value of every axis (without it "
        "the report shows the unbounded recipe and, beside it, the recipe within "
        "--warn-beyond times the data)",
    )
    add_warn_beyond(parser)
    parser.add_argument(
        "--out-of-scale",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="check the law out of scale (one refit per axis, as `bayesscale fit` does) "
        "unless its fit stores the check: the recipe's headline is bounded per axis at the "
        "reach measured (the default; --no-out-of-scale assumes --warn-beyond instead)",
    )
    parser.add_argument(
        "--forms",
        default=None,
        metavar="F1,F2",
        help="fit the law as a stack of these forms, as `bayesscale fit --forms`: the report "
        "adds the forms' weights and figures, and its recipe mixes the forms' draws by weight "
        "(with the prior's sensitivity, whose refit is the power law's, power among them). One "
        "form is fitted alone (--forms power). Default, as `bayesscale fit`: a spec that names "
        "no axis's form is the stack of power,offset_power",
    )
    add_strict(parser)
    add_sampling_arguments(parser)
    parser.add_argument(
        "--pricing-target-accept",
        type=float,
        default=PRICING_TARGET_ACCEPT,
        help=f"target acceptance of the pricing fit (default {PRICING_TARGET_ACCEPT})",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a different report in DIR (a DIR holding anything else is never replaced)",
    )
    parser.set_defaults(func=run, interruptible=True)


def run(args: argparse.Namespace) -> int:

    from bayesscale.pipeline.report import ReportError, build_report
    from bayesscale.pipeline.report_options import ReportOptions

    check_prob(args.prob)
    warn_beyond = check_warn_beyond(args.warn_beyond)
    if args.within_data is not None and not args.within_data >= 1:
        raise CommandError(f"--within-data must be a number >= 1, got {args.within_data:g}")
    config = config_from_args(args)
    options = ReportOptions(
        observations=Path(args.observations),
        pricing=Path(args.pricing) if args.pricing else None,
        heldout=Path(args.heldout) if args.heldout else None,
        spec=args.spec,
        pricing_spec=args.pricing_spec,
        prices=Path(args.prices) if args.prices else None,
        law_fit=Path(args.fit) if args.fit else None,
        pricing_fit=Path(args.pricing_fit) if args.pricing_fit else None,
        sensitivity_fit=Path(args.sensitivity_fit) if args.sensitivity_fit else None,
        sensitivity_scale=args.sensitivity_scale if args.sensitivity_scale > 0 else None,
        budgets=tuple(parse_budgets(args.budget)),
        prob=args.prob,
        config=config,
        pricing_config=replace(config, target_accept=args.pricing_target_accept),
        within_data=args.within_data,
        warn_beyond=warn_beyond,
        strict=args.strict,
        new_groups=args.new_groups,
        out_of_scale=args.out_of_scale,
        forms=tuple(parse_forms(args.forms, least=1)) if args.forms is not None else None,
    )
    try:
        print(build_report(options, Path(args.out), force=args.force))
    except ReportError as exc:
        raise CommandError(str(exc)) from None
    return 0
