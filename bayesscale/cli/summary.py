"""``bayesscale summary FIT.nc``: exponents with credible intervals and the ordering."""

from __future__ import annotations

import argparse
import json

from bayesscale.cli import add_prob, add_strict, check_prob, refuse_failed


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "summary",
        help="population and per-setting exponents of a saved fit",
        description="Population and per-setting exponents with equal-tailed credible intervals "
        "at --prob, and the posterior probability of the exponent ordering (axes in the spec's "
        "order). Each exponent also shows how far the data moved it from its prior: prior "
        "contraction and power-scaling sensitivity, flagged prior-dominated (‡) or "
        "prior-sensitive (†) (docs/identification.md). --json prints the same as JSON; "
        "population exponents sit under exponents.population.<axis> as mean, lower, upper, "
        "contraction, prior_sensitivity, likelihood_sensitivity and flag; the rule under "
        "identification.",
    )
    parser.add_argument("fit", metavar="FIT.nc")
    add_prob(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_strict(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    from bayesscale.fits.law import LawFit
    from bayesscale.law.summary import format_text

    check_prob(args.prob)
    fit = LawFit.load(args.fit)
    refuse_failed(args.fit, fit.diagnostics, args.strict)
    result = fit.summary(prob=args.prob)
    print(json.dumps(result, indent=2) if args.json else format_text(result))
    return 0
