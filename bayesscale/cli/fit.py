"""``bayesscale fit OBS --spec SPEC --out FIT.nc``: sample the pooled law and save it."""

from __future__ import annotations

import argparse
import sys

EXIT_DIAGNOSTICS = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fit",
        help="fit the hierarchical scaling law to an observation table",
        description="Fit the pooled Bayesian scaling law to OBS (CSV or parquet) and save the "
        "posterior as an ArviZ DataTree in netCDF. Prints convergence diagnostics; with "
        "--strict, failed diagnostics give exit status 3.",
    )
    parser.add_argument("observations", metavar="OBS", help="observation table (.csv or .parquet)")
    parser.add_argument(
        "--spec", default=None, help="model spec TOML file or bundled name (default: agentic_rl)"
    )
    parser.add_argument("--out", required=True, metavar="FIT.nc", help="where to write the fit")
    parser.add_argument("--sampler", default="numpyro", choices=("numpyro", "nutpie", "pymc"))
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--target-accept", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=20261129, help="random seed (default 20261129)")
    parser.add_argument("--strict", action="store_true", help="exit 3 when diagnostics fail")
    parser.add_argument("--force", action="store_true", help="replace an existing FIT.nc")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bayesscale.cli import CommandError

    out = Path(args.out)
    if out.exists() and not args.force:
        raise CommandError(f"{out} exists; pass --force to replace it")

    from bayesscale.inference import FitConfig, diagnose, fit, save_fit
    from bayesscale.observations import load_observations
    from bayesscale.spec import load_spec

    spec = load_spec(args.spec)
    table = load_observations(args.observations, spec)
    config = FitConfig(
        sampler=args.sampler,
        chains=args.chains,
        draws=args.draws,
        tune=args.tune,
        target_accept=args.target_accept,
        seed=args.seed,
        progress=not args.quiet,
    )
    print(
        f"fitting {spec.name!r} to {len(table.frame)} rows of {table.source} "
        f"({config.sampler}, {config.chains} chains x {config.draws} draws, seed {config.seed})",
        file=sys.stderr,
    )
    tree = fit(table, spec, config)
    save_fit(tree, out, overwrite=args.force)
    diagnostics = diagnose(tree)
    print(f"wrote {out} ({tree.attrs['wall_seconds']:.1f} s of sampling)")
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
    return EXIT_DIAGNOSTICS if args.strict else 0
