"""``bayesscale fit OBS --spec SPEC --out FIT.nc``: sample the pooled law and save it."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from bayesscale.cli import add_force, output_path
from bayesscale.cli._sampling import (
    add_prior_scale_argument,
    add_sampling_arguments,
    config_from_args,
    diagnostics_verdict,
    spec_with_prior_scale,
)
from bayesscale.cli.forms import parse_forms

if TYPE_CHECKING:
    from bayesscale.data.observations import Table
    from bayesscale.data.spec import ModelSpec
    from bayesscale.fits.law import LawFit
    from bayesscale.sampling.config import FitConfig


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
    parser.add_argument(
        "--out", required=True, metavar="FIT.nc", help="the fit file to write (netCDF DataTree)"
    )
    add_prior_scale_argument(parser)
    add_sampling_arguments(parser)
    parser.add_argument(
        "--out-of-scale",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also refit without each axis's largest scales and check them (one refit per "
        "axis that can be tested), and store the result: the recipe's headline is bounded "
        "per axis at the reach that check measured (the default; --no-out-of-scale skips the "
        "refits, and the recipe then assumes its --warn-beyond, default 4x, on every axis)",
    )
    parser.add_argument(
        "--forms",
        default=None,
        metavar="F1,F2",
        help="fit each of these law forms (of power, offset_power, saturating) on every axis, "
        "score each on its out-of-scale refits and write their stack: predictions are the "
        "mixture by weight (bayesscale forms shows the same comparison). One form is fitted "
        "alone (--forms power: the power law's single fit). Default: a spec that names no "
        "axis's form is the stack of power,offset_power; one that names them is fitted as "
        "written",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local Ray workers for the refits of --out-of-scale and --forms",
    )
    parser.add_argument(
        "--ray-address", default=None, help="a Ray cluster for the refits of those options"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 when diagnostics fail (the fit is still written, to inspect; the commands "
        "that read it refuse it with their own --strict)",
    )
    add_force(parser)
    parser.set_defaults(func=run, interruptible=True)


def run(args: argparse.Namespace) -> int:

    out = output_path(args.out, args.force, [args.observations, args.spec])
    assert out is not None  # --out is required

    from bayesscale.data.observations import load_observations
    from bayesscale.data.spec import forms_to_fit, load_spec
    from bayesscale.fits.caveats import single_setting
    from bayesscale.fits.law import LawFit

    forms = parse_forms(args.forms, least=1) if args.forms is not None else None
    config = config_from_args(args)
    spec = spec_with_prior_scale(load_spec(args.spec), args.prior_scale)
    spec, stack = forms_to_fit(spec, forms, config.preview)
    if config.preview and not stack and forms_to_fit(spec, forms)[1]:
        print("a preview fits one law (the spec's, here the power law); without --preview the "
              "fit is the stack of the forms", file=sys.stderr)  # fmt: skip
    table = load_observations(args.observations, spec)
    # PyMC and JAX load only once the input is known to be good (bad input fails in a second)
    from bayesscale.law.inference import fit

    wider = (
        f", exponent priors {spec.exponent_prior_scale:g}x as wide"
        if spec.exponent_prior_scale != 1
        else ""
    )
    print(
        f"fitting {spec.name!r} to {len(table.frame)} rows of {table.source} "
        f"({config.describe()}{wider})",
        file=sys.stderr,
    )
    started = time.perf_counter()
    if stack:
        law = _stacked(table, spec, config, list(stack), args)
    else:
        law = LawFit(fit(table, spec, config), table=table)
    if args.out_of_scale:
        law = _with_out_of_scale(law, table, spec, config, args)
    law.save(out, overwrite=args.force)
    took = f"{law.tree.attrs['wall_seconds']:.1f} s"
    if stack or args.out_of_scale:
        took = f"the fit {took}; {time.perf_counter() - started:.1f} s with its refits"
    print(f"wrote {out} ({took})")
    for note in single_setting(len(law.settings)):
        print(f"bayesscale fit: {note}", file=sys.stderr)
    return diagnostics_verdict(law.diagnostics, args.strict)


def _stacked(
    table: Table, spec: ModelSpec, config: FitConfig, forms: list[str], args: argparse.Namespace
) -> LawFit:
    """The stack of ``--forms`` (:meth:`LawFit.stacked`), its comparison printed."""
    from bayesscale.fits.law import LawFit

    default = (
        ""
        if args.forms
        else " (the default for a spec that names no form; --forms power fits the power law alone)"
    )
    print(f"stacking forms {forms}{default}: each fitted to every row and refitted per "
          "leave-out rule", file=sys.stderr)  # fmt: skip
    law, scores = LawFit.stacked(
        table, spec, forms, config, workers=args.workers, ray_address=args.ray_address
    )
    print(scores.summary_text(), file=sys.stderr)
    return law


def _with_out_of_scale(
    law: LawFit, table: Table, spec: ModelSpec, config: FitConfig, args: argparse.Namespace
) -> LawFit:
    """The fit with its out-of-scale check (:meth:`LawFit.checked_out_of_scale`), printed as
    it is stored."""
    from bayesscale.law.reach import evidence_text

    print("checking out of scale: one refit per axis that can be tested", file=sys.stderr)
    start = time.perf_counter()
    checked = law.checked_out_of_scale(
        table, spec, config, workers=args.workers, ray_address=args.ray_address
    )
    evidence = checked.out_of_scale
    assert evidence is not None  # just stored
    print(
        f"out-of-scale check ({time.perf_counter() - start:.1f} s):\n{evidence_text(evidence)}",
        file=sys.stderr,
    )
    return checked
