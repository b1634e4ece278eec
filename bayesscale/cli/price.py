"""``bayesscale price PRICING --out PRICE.nc``: fit the synthetic-data pricing model and save it."""

from __future__ import annotations

import argparse
import sys
import warnings

from bayesscale.cli import add_force, output_path, refuse_failed
from bayesscale.cli._sampling import add_sampling_arguments, config_from_args, diagnostics_verdict
from bayesscale.sampling.config import PRICING_TARGET_ACCEPT


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "price",
        help="fit the discount kappa(r) and collapse ratio r* of synthetic-data methods",
        description="Fit the pricing model (models/pricing.toml: kappa(r) = kappa0 - (1 - kappa0) "
        "r / c per method, pooled within axis) to a pricing table (.csv or .parquet) and save "
        "the posterior, with r* and the peak ratio per draw, as a netCDF DataTree. Parts of the "
        "table that cannot be priced (pure-synthetic rows, methods without a pure-real baseline "
        "or with too coarse a ratio grid) are left out with a message; --strict refuses instead, "
        "refuses a --law-fit whose diagnostics failed, and gives exit status 3 when the pricing "
        "fit's diagnostics fail.",
    )
    parser.add_argument("pricing", metavar="PRICING", help="pricing table (.csv or .parquet)")
    parser.add_argument(
        "--out",
        required=True,
        metavar="PRICE.nc",
        help="the pricing fit file to write (netCDF DataTree)",
    )
    parser.add_argument(
        "--spec", default=None, help="pricing spec TOML file or bundled name (default: pricing)"
    )
    parser.add_argument(
        "--law-fit",
        metavar="FIT.nc",
        default=None,
        help="a law fit: each axis exponent's prior is its alpha_pop posterior (lognormal)",
    )
    add_sampling_arguments(parser, target_accept=PRICING_TARGET_ACCEPT)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse to leave anything out or to take priors from a failed or preview "
        "--law-fit, and exit 3 when diagnostics fail",
    )
    add_force(parser)
    parser.set_defaults(func=run, interruptible=True)


def run(args: argparse.Namespace) -> int:

    out = output_path(args.out, args.force, [args.pricing, args.law_fit, args.spec])
    assert out is not None  # --out is required

    from bayesscale.fits.caveats import verdict
    from bayesscale.fits.law import LawFit
    from bayesscale.fits.pricing import PricingFit
    from bayesscale.pricing.fit import fit_pricing
    from bayesscale.pricing.model import exponent_priors_from_law_fit
    from bayesscale.pricing.spec import PricingWarning, load_pricing_spec
    from bayesscale.pricing.table import load_pricing

    spec = load_pricing_spec(args.spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PricingWarning)
        table = load_pricing(args.pricing, spec, strict=args.strict)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    priors = None
    if args.law_fit:
        law = LawFit.load(args.law_fit)
        if args.strict:  # without it, the note below says the verdict on standard error
            refuse_failed(args.law_fit, law.diagnostics, args.strict)
        # its exponents become this fit's priors: say what they are
        for line in verdict(law.diagnostics, f"the law fit {args.law_fit}"):
            print(f"bayesscale price: note: {line}", file=sys.stderr)
        priors = exponent_priors_from_law_fit(law.tree)
    config = config_from_args(args)
    print(
        f"pricing {len(table.methods)} method(s) from {len(table.frame)} runs of {table.source} "
        f"({config.describe()})",
        file=sys.stderr,
    )
    priced = PricingFit(
        fit_pricing(table, spec, config, priors, exponent_source=args.law_fit or "")
    )
    priced.save(out, overwrite=args.force)
    print(f"wrote {out} ({priced.tree.attrs['wall_seconds']:.1f} s)")
    print(priced.summary_text())
    return diagnostics_verdict(priced.diagnostics, args.strict)
