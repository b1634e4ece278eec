"""Sampler options and the diagnostics verdict shared by the commands that fit (``fit``,
``price``, ``crossval``, ``report``). A module without ``register``: the command registry
skips it. Every default shown comes from :class:`bayesscale.sampling.config.FitConfig`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from bayesscale.cli import CommandError
from bayesscale.sampling.config import (
    DEFAULT_DRAWS,
    DEFAULT_MAX_DRAWS,
    DEFAULT_SEED,
    DEFAULT_TARGET_ACCEPT,
    DEFAULT_TUNE,
    ESS_TARGET,
    MAMS_TARGET_ACCEPT,
    PREVIEW_DRAWS,
    SAMPLERS,
    FitConfig,
    default_chains,
)

if TYPE_CHECKING:
    from bayesscale.data.fitfile import Diagnostics
    from bayesscale.data.spec import ModelSpec

from bayesscale.cli import EXIT_DIAGNOSTICS as EXIT_DIAGNOSTICS  # one status, every command


def add_sampling_arguments(
    parser: argparse.ArgumentParser, target_accept: float | None = None
) -> None:
    """``--sampler --chains --draws --tune --ess-target --max-draws --target-accept --seed
    --preview --quiet``, each with its default in the help. ``target_accept=None`` leaves
    the target acceptance to the sampler: :attr:`FitConfig.accept`, 0.95 for MAMS and 0.8
    for NUTS (the pricing command passes its model's 0.95)."""
    group = parser.add_argument_group("sampling")
    group.add_argument(
        "--sampler",
        default=SAMPLERS[0],
        choices=SAMPLERS,
        help=f"sampler (default {SAMPLERS[0]}: the package's own, MAMS on the model's JAX "
        "log density; nuts: the same with NUTS transitions; numpyro, nutpie and pymc run "
        "NUTS through PyMC and take exactly --draws)",
    )
    group.add_argument(
        "--chains",
        type=int,
        default=default_chains(),
        help=f"chains, run in parallel (default {default_chains()}: one per core, 2 to 4)",
    )
    group.add_argument(
        "--draws",
        type=int,
        default=DEFAULT_DRAWS,
        help=f"draws per chain before the ESS check (default {DEFAULT_DRAWS})",
    )
    group.add_argument(
        "--tune",
        type=int,
        default=DEFAULT_TUNE,
        help=f"warm-up iterations per chain (default {DEFAULT_TUNE})",
    )
    group.add_argument(
        "--ess-target",
        type=float,
        default=ESS_TARGET,
        help=f"keep sampling until every quantity has bulk and tail ESS >= this and R-hat <= "
        f"1.01 (default {ESS_TARGET}; 0 keeps exactly --draws)",
    )
    group.add_argument(
        "--max-draws",
        type=int,
        default=DEFAULT_MAX_DRAWS,
        help=f"draws per chain at most while reaching --ess-target (default {DEFAULT_MAX_DRAWS})",
    )
    group.add_argument(
        "--target-accept",
        type=float,
        default=target_accept,
        help=(
            f"target acceptance probability (default {target_accept})"
            if target_accept is not None
            else f"target acceptance probability (default {MAMS_TARGET_ACCEPT} with the default "
            f"sampler, MAMS, whose target is a whole trajectory's Metropolis acceptance; "
            f"{DEFAULT_TARGET_ACCEPT} with the NUTS samplers)"
        ),
    )
    group.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})"
    )
    group.add_argument(
        "--preview",
        action="store_true",
        help=f"a quick look while iterating on a spec, in seconds: {PREVIEW_DRAWS} draws from the "
        "Laplace approximation at the posterior mode instead of NUTS; marked as a preview in "
        "the fit and in everything that reads it (docs/speed.md: how far it is from a fit)",
    )
    group.add_argument("--quiet", action="store_true", help="no progress bar")


PRIOR_SCALE_HELP = (
    "multiply the width of every exponent prior by K (default 1): each axis's exponent.log_sd "
    "(the population exponent's lognormal prior; the median is kept), its exponent_spread (the "
    "half-normal scale of per-setting deviations of log alpha) and [pooling] group_spread. The "
    "variance of each log exponent's prior grows K^2-fold. Combines with the spec key [priors] "
    "exponent_scale by multiplication; recorded in the fit (spec text and attribute "
    "exponent_prior_scale). Refit with K = 2 to see what the data do not identify"
)


def add_prior_scale_argument(parser: argparse.ArgumentParser) -> None:
    """``--prior-scale K``: wider (K > 1) or narrower exponent priors."""
    parser.add_argument(
        "--prior-scale", type=float, default=1.0, metavar="K", help=PRIOR_SCALE_HELP
    )


def spec_with_prior_scale(spec: ModelSpec, factor: float) -> ModelSpec:
    """``spec`` with its exponent priors ``factor`` times wider; a bad factor is a
    one-line command error."""
    from bayesscale.data.spec import SpecError, with_exponent_prior_scale

    try:
        return with_exponent_prior_scale(spec, factor)
    except SpecError as exc:
        raise CommandError(f"--prior-scale: {exc}") from None


def config_from_args(args: argparse.Namespace) -> FitConfig:
    """The :class:`FitConfig` the options ask for (a preview if ``--preview``)."""
    try:
        config = FitConfig(
            sampler=args.sampler,
            chains=args.chains,
            draws=args.draws,
            tune=args.tune,
            target_accept=args.target_accept,
            seed=args.seed,
            progress=not args.quiet,
            ess_target=args.ess_target,
            max_draws=max(args.max_draws, args.draws),
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return config.as_preview() if args.preview else config


def diagnostics_verdict(diagnostics: Diagnostics, strict: bool) -> int:
    """Print the convergence line; when it fails, say so loudly with what to try.
    Returns the exit status: 3 for failed diagnostics under ``--strict``, else 0."""
    if diagnostics.preview:
        print(
            "PREVIEW (Laplace approximation, not a posterior sample): no convergence "
            "diagnostics apply; refit without --preview before drawing conclusions"
        )
        return EXIT_DIAGNOSTICS if strict else 0
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
