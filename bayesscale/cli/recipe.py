"""``bayesscale recipe FIT.nc --budget B``: the budget allocation with credible intervals.

Examples::

    bayesscale recipe out/fit.nc --budget 1e5
    bayesscale recipe out/fit.nc --budget 1e4:1e8:20 --bounds env=1:384,traj=2: --json
    bayesscale recipe out/fit.nc --budget 5e4 --kappa env=0.71 --prices my_prices.toml
    bayesscale recipe out/fit.nc --cost compute --budget 1e9:1e12:4 --powers env=0 --bounds env=1:384
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bayesscale.atomic import write_atomically
from bayesscale.cli import (
    CommandError,
    add_force,
    add_prob,
    add_strict,
    add_warn_beyond,
    check_prob,
    check_warn_beyond,
    output_path,
    refuse_failed,
)

if TYPE_CHECKING:
    from bayesscale.fits.law import LawFit

DESCRIPTION = (
    "Propagate a law fit's posterior through the budget allocator: the optimal allocation per "
    "axis with credible intervals, the single decision that maximises expected success, local "
    "recipe exponents, and comparisons with trajectory-heavy and Chinchilla-style allocations. "
    "Money is what is bought (--cost exact, the default): c_env u_env + c_task u_task + "
    "c_traj u_task u_traj, a trajectory being one rollout of one task ([cost] trajectories in a "
    'prices file: "cells" or "fixed-cells" for other counts), solved exactly per draw '
    "(a geometric program). --cost linearised is the paper's convention for reproduction (an "
    "additive cost whose traj price is c_traj times the optimum's tasks); --cost compute "
    "allocates a compute budget c prod_i D_i^m_i instead (FLOPs grow with each axis to the "
    "power m_i, default 1; --powers params_b=1 makes the model size an axis). "
    "Units: env = distinct environments (structural signatures), task = distinct task "
    "statements, traj = rollouts per task (the GRPO group size). The recipe leads with what the "
    "data vouch for: where the optimum lies more than --warn-beyond times outside the swept "
    "range, the table is the recipe bounded to that factor, and the unbounded one follows as a "
    "labelled extrapolation with what to sweep first."
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "recipe", help="budget allocation with credible intervals", description=DESCRIPTION
    )
    p.add_argument("fit", metavar="FIT.nc", help="a law fit saved by `bayesscale fit`")
    _add_cost_options(p)
    _add_scope_options(p)
    _add_output_options(p)
    _add_sweep_options(p)
    p.set_defaults(func=run)


def _add_cost_options(p: argparse.ArgumentParser) -> None:
    """The budgets, the cost model and its prices, discounts and bounds."""
    p.add_argument(
        "--budget",
        required=True,
        help="a budget (1e5), a list (1e4,1e5) or a log-spaced sweep LO:HI:N (1e4:1e8:20)",
    )
    p.add_argument(
        "--cost",
        choices=("exact", "linearised", "compute"),
        default="exact",
        help="exact: money, trajectories priced per trajectory (default); linearised: the "
        "paper's additive convention (no decision); compute: c prod_i D_i^m_i",
    )
    p.add_argument(
        "--powers",
        metavar="AXIS=M,...",
        help="with --cost compute: how compute grows with each axis (default 1 on every axis)",
    )
    p.add_argument(
        "--unit-cost",
        type=float,
        default=1.0,
        help="with --cost compute: the compute of one unit of every axis (default 1)",
    )
    p.add_argument(
        "--prices",
        metavar="P.toml",
        help="unit prices overriding the defaults (models/prices.toml)",
    )
    p.add_argument(
        "--pricing", metavar="PRICE.nc", help="a pricing fit: kappa per axis from its posterior"
    )
    p.add_argument(
        "--kappa", metavar="AXIS=K,...", help="discounts of synthetic data, e.g. env=0.71,traj=0.42"
    )
    p.add_argument(
        "--bounds",
        metavar="AXIS=LO:HI,...",
        help="box bounds in purchased units, e.g. env=1:384,traj=2: (default: every axis >= 1)",
    )


def _add_scope_options(p: argparse.ArgumentParser) -> None:
    """Which settings and draws, the interval, the data bounds and what is computed."""
    p.add_argument("--setting", action="append", help="a setting label (repeatable; default: all)")
    add_prob(p)
    p.add_argument("--credible", dest="prob", type=float, help=argparse.SUPPRESS)  # old name
    p.add_argument(
        "--within-data",
        type=float,
        metavar="F",
        help="keep the recipe within F times the largest swept value of every axis (an upper "
        "bound in purchased units, combined with --bounds); a law fitted over a 32x range says "
        "little far beyond it",
    )
    add_warn_beyond(p)
    add_strict(p)
    p.add_argument("--max-draws", type=int, help="thin each chain to at most this many draws")
    p.add_argument(
        "--form",
        metavar="F",
        help="of a stacked fit (`bayesscale fit --forms`), the recipe of form F's own fit alone "
        "(default: the stack's mixture, every draw under its own form, mixed by weight)",
    )
    p.add_argument(
        "--grow-axis", help="the trajectory-heavy baseline's growing axis (default traj)"
    )
    p.add_argument(
        "--no-decision", action="store_true", help="skip the expected-success decision (faster)"
    )
    p.add_argument(
        "--iso",
        action="store_true",
        help="add iso-budget curves (success as one axis's budget share varies, the others in "
        "the decision's proportions) with bands to the JSON output",
    )


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """Where the results go and in which form."""
    p.add_argument(
        "--out",
        metavar="RECIPE.nc",
        help="also write the per-draw results to this netCDF file (the table or JSON still goes "
        "to standard output); with --sweep, a .toml name is the decision's sweep file "
        "(--sweep-out)",
    )
    add_force(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_sweep_options(p: argparse.ArgumentParser) -> None:
    """The decision as a sweep file (bayesscale.design.decision_sweep)."""
    p.add_argument(
        "--sweep",
        metavar="BASE.toml",
        help="with --sweep-out: the sweep spec the decision's runs extend (its pool, models, "
        "algorithms, domain and verl settings, as `bayesscale next --sweep`)",
    )
    p.add_argument(
        "--sweep-out",
        metavar="DECISION.toml",
        help="write the decision as a sweep file that `bayesscale plan` accepts: BASE.toml with "
        "its grid replaced by one [[grid.point]] per setting it runs (settings it does not run "
        "are left out and listed), sizes rounded to whole numbers (nearest, at least 1) and "
        "environments and tasks capped, with a warning, at the distinct ones its pool holds for "
        "training (as plan counts them); "
        "needs --sweep (--out stays the per-draw netCDF)",
    )
    p.add_argument(
        "--decision-budget",
        type=float,
        metavar="B",
        help="with --sweep-out and several budgets: the one (of --budget's) whose decision is "
        "written",
    )
    p.add_argument(
        "--seeds",
        type=int,
        metavar="N",
        help="with --sweep-out: seeds per decision run, numbered after BASE.toml's largest "
        f"seed (default {DECISION_SEEDS}, the paper's protocol)",
    )
    p.add_argument(
        "--with-baselines",
        action="store_true",
        help="with --sweep-out: also write the trajectory-heavy and Chinchilla-style baselines "
        "at the same budget, to run the decision against them at equal money",
    )


def parse_budgets(text: str) -> list[float]:
    """``1e5`` | ``1e4,1e5`` | ``LO:HI:N`` (N log-spaced points, both ends included).

    >>> parse_budgets("1e4:1e6:3")
    [10000.0, 100000.0, 1000000.0]
    """
    form = "expected B, B1,B2,... or LO:HI:N (N log-spaced budgets, 0 < LO <= HI, N >= 1)"
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) != 3:
                raise CommandError(f"--budget {text!r}: {len(parts)} parts; {form}")
            lo, hi, n = float(parts[0]), float(parts[1]), int(parts[2])
            wrong = (
                f"N = {n}: the number of budgets must be >= 1"
                if n < 1
                else f"LO = {lo:g} must be > 0"
                if not lo > 0
                else f"HI = {hi:g} is below LO = {lo:g}"
                if not hi >= lo
                else None
            )
            if wrong is not None:
                raise CommandError(f"--budget {text!r}: {wrong}; {form}")
            if n == 1:
                return [lo]
            step = (math.log(hi) - math.log(lo)) / (n - 1)
            # 12 significant digits: 1e4:1e6:3 gives 1e5, not 100000.00000000001
            inner = [float(f"{math.exp(math.log(lo) + i * step):.12g}") for i in range(n - 1)]
            return [*inner, hi]
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:  # float("abc"): "could not convert string to float: 'abc'"
        word = str(exc).rpartition(": ")[2]
        raise CommandError(f"--budget {text!r}: {word} is not a number; {form}") from None
    if not values or any(not (math.isfinite(v) and v > 0) for v in values):
        raise CommandError(f"--budget {text!r}: budgets must be finite and > 0")
    return values


def _pairs(text: str, flag: str) -> list[tuple[str, str]]:
    out = []
    for item in text.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise CommandError(f"{flag} {text!r}: expected AXIS=VALUE items separated by commas")
        key, value = item.split("=", 1)
        out.append((key.strip(), value.strip()))
    return out


def parse_kappa(text: str, flag: str = "--kappa") -> dict[str, float]:
    """``env=0.71,traj=0.42`` -> ``{"env": 0.71, "traj": 0.42}`` (also ``--powers``)."""
    out = {}
    for key, value in _pairs(text, flag):
        try:
            out[key] = float(value)
        except ValueError:
            raise CommandError(f"{flag} {key}={value!r}: not a number") from None
    return out


def parse_bounds(text: str) -> dict[str, tuple[float | None, float | None]]:
    """``env=1:384,traj=2:`` -> ``{"env": (1.0, 384.0), "traj": (2.0, None)}``.

    >>> parse_bounds("env=1:384,traj=2:")
    {'env': (1.0, 384.0), 'traj': (2.0, None)}
    """
    out: dict[str, tuple[float | None, float | None]] = {}
    for key, value in _pairs(text, "--bounds"):
        if ":" not in value:
            raise CommandError(f"--bounds {key}={value!r}: expected LO:HI, LO: or :HI")
        lo_s, hi_s = value.split(":", 1)
        try:
            lo = float(lo_s) if lo_s else None
            hi = float(hi_s) if hi_s else None
        except ValueError:
            raise CommandError(f"--bounds {key}={value!r}: bounds must be numbers") from None
        out[key] = (lo, hi)
    return out


def run(args: argparse.Namespace) -> int:
    from bayesscale.core.prices import load_prices
    from bayesscale.fits.law import LawFit
    from bayesscale.fits.pricing import PricingFit

    check_prob(args.prob)
    warn_beyond = check_warn_beyond(args.warn_beyond)
    if args.within_data is not None and not args.within_data >= 1:
        raise CommandError(f"--within-data must be a number >= 1, got {args.within_data:g}")
    budgets = parse_budgets(args.budget)
    bounds = parse_bounds(args.bounds) if args.bounds else None
    output_path(args.out, args.force, [args.fit, args.pricing, args.prices])
    sweep_request = _decision_sweep_request(args, budgets)  # --sweep-out: see the file's end
    if args.cost == "compute":
        money_only = [
            flag
            for flag, value in (
                ("--prices", args.prices),
                ("--pricing", args.pricing),
                ("--kappa", args.kappa),
                ("--grow-axis", args.grow_axis),
                ("--iso", args.iso),
            )
            if value
        ]
        if money_only:
            raise CommandError(f"{', '.join(money_only)} apply to the money cost only")
        options: dict[str, Any] = {
            "powers": parse_kappa(args.powers, "--powers") if args.powers else None,
            "unit_cost": args.unit_cost,
            "cost_model": args.cost,
        }
    else:
        if args.powers or args.unit_cost != 1.0:
            raise CommandError("--powers and --unit-cost apply to --cost compute only")
        options = {
            "prices": load_prices(args.prices),
            "kappa": parse_kappa(args.kappa) if args.kappa else None,
            "grow_axis": args.grow_axis,
            "decision": not args.no_decision,
            "cost_model": args.cost,
        }
    law = _chosen_form(LawFit.load(args.fit), args.fit, args.form)  # no PyMC: quick
    priced = PricingFit.load(args.pricing) if args.pricing else None
    refuse_failed(args.fit, law.diagnostics, args.strict)
    if priced is not None:
        refuse_failed(args.pricing, priced.diagnostics, args.strict)
    result = law.recipe_result(
        budgets,
        pricing=priced,
        warn_beyond=warn_beyond,
        bounds=bounds,
        settings=args.setting,
        max_draws=args.max_draws,
        within_data=args.within_data,
        where="the unbounded recipe follows each bounded row as an EXTRAPOLATION",
        **options,
    )
    summary = result.to_json(args.prob)
    if args.iso:
        from bayesscale.recipe.iso_budget import add_iso_budget

        add_iso_budget(
            summary,
            result.ds,
            law.tree,
            args.prob,
            prices=options["prices"],
            pricing=priced.tree if priced is not None else None,
            kappa=options["kappa"],
            bounds=bounds,
            max_draws=args.max_draws,
            within_data=result.within,
        )
    for line in result.notes:
        if line not in result.verdict_notes:  # refuse_failed said it, naming the file
            _note(line)
    written = (
        _write_decision_sweep(sweep_request, result.ds, law.tree, summary)
        if sweep_request
        else None
    )
    _emit(result.ds, summary, args)
    if written is not None and not args.json:  # --sweep-out: what was written, after the table
        sys.stdout.write(written)
    return 0


def _note(line: str | None) -> None:
    if line is not None:
        print(f"bayesscale recipe: {line}", file=sys.stderr)


def _emit(ds: Any, summary: dict[str, Any], args: argparse.Namespace) -> None:
    """Write ``--out`` atomically (a temporary file renamed into place), then print."""

    if args.out:
        write_atomically(args.out, lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf"), args.force)
    if args.json:
        json.dump(summary, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        for what, diagnostics in summary.get("fit_diagnostics", {}).items():
            if diagnostics.get("headline"):
                sys.stdout.write(f"{what.replace('_', ' ')}: {diagnostics['headline']}\n")
        from bayesscale.report.recipe_text import format_recipe

        sys.stdout.write(format_recipe(summary))


# --- --sweep BASE.toml --sweep-out DECISION.toml: the decision as a sweep file --------------------
# (bayesscale.design.decision_sweep; docs/recipe.md, "From decision to run")

# bayesscale.design.decision_sweep.DEFAULT_SEEDS (not imported here: --help stays fast)
DECISION_SEEDS = 3


def _decision_sweep_request(
    args: argparse.Namespace, budgets: list[float]
) -> dict[str, Any] | None:
    """The checked ``--sweep``/``--sweep-out`` request (base spec read, budget chosen), before
    any work; None without ``--sweep-out``. Misuse exits 2 naming the flag."""
    if args.out is not None and args.out.lower().endswith(".toml"):
        if args.sweep is None or args.sweep_out is not None:
            raise CommandError(
                f"--out {args.out}: --out writes the per-draw results as netCDF (RECIPE.nc); "
                "for the decision as a sweep file use --sweep BASE.toml --out DECISION.toml "
                "(or --sweep-out DECISION.toml)"
            )
        args.sweep_out, args.out = args.out, None  # --sweep BASE.toml --out DECISION.toml
    if args.sweep_out is None:
        if args.sweep is not None:
            raise CommandError(
                "--sweep BASE.toml needs --sweep-out DECISION.toml (the sweep file to write)"
            )
        given = [
            f
            for f, v in (
                ("--decision-budget", args.decision_budget),
                ("--seeds", args.seeds),
                ("--with-baselines", args.with_baselines or None),
            )
            if v is not None
        ]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise CommandError(f"{' and '.join(given)} {verb} to --sweep-out only")
        return None
    if args.sweep is None:
        raise CommandError(
            "--sweep-out needs --sweep BASE.toml: the pool, models and verl settings of the runs"
        )
    if args.cost in ("compute", "linearised"):
        raise CommandError(f"--sweep-out writes the decision; --cost {args.cost} has none")
    if args.no_decision:
        raise CommandError("--sweep-out writes the decision; drop --no-decision")
    seeds = DECISION_SEEDS if args.seeds is None else args.seeds
    if seeds < 1:
        raise CommandError(f"--seeds must be >= 1, got {seeds}")
    if Path(args.sweep_out).is_dir():
        raise CommandError(f"--sweep-out {args.sweep_out} is a directory; give the name of a file")
    try:
        inputs = [args.fit, args.pricing, args.prices, args.sweep]
        out = output_path(args.sweep_out, args.force, inputs)
    except CommandError as exc:
        raise CommandError(f"--sweep-out: {exc}") from None
    if out is not None and args.out is not None and out.resolve() == Path(args.out).resolve():
        raise CommandError(f"--sweep-out {out} is also --out; give each its own file")
    from bayesscale.design.decision_sweep import pick_budget
    from bayesscale.design.results import DesignError
    from bayesscale.design.sweep_file import pool_caps
    from bayesscale.verl.sweep import load_sweep_spec

    try:
        budget = pick_budget(budgets, args.decision_budget)
    except DesignError as exc:
        flag = "--decision-budget" if args.decision_budget is not None else "--sweep-out"
        hint = "" if args.decision_budget is not None else " with --decision-budget B"
        raise CommandError(f"{flag}: {exc}{hint}") from None
    spec = load_sweep_spec(args.sweep)
    return {
        "out": out,
        "force": args.force,
        "spec": spec,
        "caps": pool_caps(spec),  # the pool read now: a bad pool is said before any work
        "budget": budget,
        "seeds": seeds,
        "strict": bool(args.setting),
        "baselines": args.with_baselines,
        "note": _decision_sweep_note(args, budget),
    }


def _decision_sweep_note(args: argparse.Namespace, budget: float) -> str:
    """The file's first comment line: the command that wrote it, with the options that shape
    the decision."""
    words = ["bayesscale", "recipe", args.fit, "--budget", args.budget]
    for flag in ("prices", "pricing", "kappa", "bounds", "within_data", "max_draws"):
        if getattr(args, flag) is not None:
            words += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    for setting in args.setting or ():
        words += ["--setting", setting]
    if len(parse_budgets(args.budget)) > 1:
        words += ["--decision-budget", f"{budget:g}"]
    if args.seeds is not None:
        words += ["--seeds", str(args.seeds)]
    if args.with_baselines:
        words.append("--with-baselines")
    words += ["--sweep", args.sweep, "--sweep-out", args.sweep_out]
    return f"written by `{shlex.join(words)}`"


def _write_decision_sweep(
    request: dict[str, Any], ds: Any, fit: Any, summary: dict[str, Any]
) -> str:
    """Write the sweep file atomically, say what was capped or left out (standard error),
    add it to the JSON (``sweep_out``); return the text lines for after the table."""
    from bayesscale.design.decision_sweep import decision_sweep

    out = request["out"]
    sweep = decision_sweep(
        ds,
        fit,
        request["spec"],
        request["budget"],
        seeds=request["seeds"],
        caps=request["caps"],
        strict=request["strict"],
        note=request["note"],
        baselines=request["baselines"],
    )
    text = sweep.text
    write_atomically(out, lambda tmp: tmp.write_text(text, encoding="utf-8"), request["force"])
    for line in sweep.notes():
        _note(line)
    summary["sweep_out"] = sweep.to_json(out)
    return sweep.format_text(out)


def _chosen_form(law: LawFit, path: str, form: str | None) -> LawFit:
    """The fit, or with ``--form`` the named form's own fit of a stacked fit."""
    if form is None:
        return law
    forms = law.forms
    if forms is None:
        raise CommandError(f"--form {form}: {path} is not a stacked fit (`bayesscale fit --forms`)")
    if form not in forms:
        raise CommandError(f"--form {form}: {path} stacks the forms {list(forms)}")
    return forms[form]
