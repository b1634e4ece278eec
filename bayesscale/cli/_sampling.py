"""Sampler options and the diagnostics verdict shared by the commands that fit (``fit``,
``price``). A module without ``register``: the command registry skips it."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bayesscale.inference import Diagnostics, FitConfig

EXIT_DIAGNOSTICS = 3
DEFAULT_SEED = 20261129
# The pricing model's default: on data/pricing (4 x 1000 draws) NUTS diverged 10 times at
# target_accept 0.85, twice at 0.95 and never at 0.99 (about 4 min instead of 2.7 on 2 cores).
PRICING_TARGET_ACCEPT = 0.99


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    """``--sampler --chains --draws --tune --target-accept --seed --quiet``."""
    parser.add_argument("--sampler", default="numpyro", choices=("numpyro", "nutpie", "pymc"))
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--target-accept", type=float, default=0.9)
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace) -> FitConfig:
    from bayesscale.inference import FitConfig

    return FitConfig(
        sampler=args.sampler,
        chains=args.chains,
        draws=args.draws,
        tune=args.tune,
        target_accept=args.target_accept,
        seed=args.seed,
        progress=not args.quiet,
    )


def diagnostics_verdict(diagnostics: Diagnostics, strict: bool) -> int:
    """Print the convergence line; when it fails, say so loudly with what to try.
    Returns the exit status: 3 for failed diagnostics under ``--strict``, else 0."""
    print(
        f"max R-hat {diagnostics.max_rhat:.4f}, min bulk ESS {diagnostics.min_ess_bulk:.0f}, "
        f"min tail ESS {diagnostics.min_ess_tail:.0f}, divergences {diagnostics.divergences}"
    )
    if diagnostics.ok:
        return 0
    banner = "!" * 72
    print(f"{banner}\nDIAGNOSTICS FAILED: do not trust this fit yet.", file=sys.stderr)
    for problem in diagnostics.problems():
        print(f"  - {problem}", file=sys.stderr)
    print(banner, file=sys.stderr)
    return EXIT_DIAGNOSTICS if strict else 0
