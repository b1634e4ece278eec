"""``bayesscale pricing-table PRICE.nc``: kappa0, r* and the peak ratio per method, pooled
kappa0 per axis, and the share of kappa0 variance that axis membership explains."""

from __future__ import annotations

import argparse
import json

from bayesscale.cli import add_prob, check_prob


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pricing-table",
        help="per-method kappa0, r* and peak ratio of a saved pricing fit",
        description="Per method: kappa0, r* and the ratio of peak benefit with equal-tailed "
        "credible intervals at --prob; per axis: the pooled kappa0; the share of kappa0 variance "
        "that axis membership explains (eta^2, per posterior draw, over methods on axes with two "
        "or more methods) with its interval. --json prints the same as JSON: methods.<name>."
        "kappa0 / r_star / peak_ratio as mean, median, lower, upper; axes.<axis>.kappa0; "
        "axis_share_of_kappa0_variance.eta_squared. JSON numbers follow the convention of "
        '`bayesscale recipe --json`: an infinite value is the string "inf" (or "-inf"; e.g. '
        "the upper bound of r* when some draws never collapse), an undefined one (NaN) null.",
    )
    parser.add_argument("fit", metavar="PRICE.nc")
    add_prob(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    from bayesscale.fits.pricing import PricingFit
    from bayesscale.pricing.summary import format_pricing_text, json_ready

    check_prob(args.prob)
    result = PricingFit.load(args.fit).summary(prob=args.prob)
    if args.json:
        print(json.dumps(json_ready(result), indent=2, allow_nan=False))
    else:
        print(format_pricing_text(result))
    return 0
