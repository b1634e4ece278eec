"""``bayesscale next FIT.nc --budget B --sweep BASE.toml --out NEXT.toml``: the next runs."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bayesscale import names
from bayesscale.atomic import write_atomically
from bayesscale.cli import CommandError, add_force, add_strict, output_path, refuse_failed

if TYPE_CHECKING:
    import xarray as xr

    from bayesscale.core.prices import Prices
    from bayesscale.design.results import NextRuns
    from bayesscale.fits.law import LawFit
    from bayesscale.verl.sweep import SweepSpec


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "next",
        help="choose the next runs: where more GPU-hours change the recipe most",
        description=(
            "Value every candidate run (each setting, sizes on and beyond the swept grid one "
            "axis at a time, and the recipe's decision point) by preposterior analysis on the "
            "fit's draws: the expected reduction of the target once its outcome is seen. "
            "Choose up to --runs of them greedily by value per cost, each valued given the runs "
            "already chosen, stopping where the draws can no longer value another; a batch "
            "whose value is within two Monte Carlo standard errors of 0 is reported as not "
            "worth running. Runs cost data beyond what is owned plus GPU time from FLOPs "
            "(--costs; a run's trajectories are its GPU time). With "
            "--sweep BASE.toml and --out, write a sweep file that `bayesscale plan` accepts. "
            "See docs/next.md."
        ),
    )
    parser.add_argument("fit", metavar="FIT.nc")
    parser.add_argument(
        "--budget", type=float, required=True, help="the recipe budget B the decision is for"
    )
    _add_batch_options(parser)
    _add_file_options(parser)
    _add_value_options(parser)
    _add_refit_options(parser)
    parser.set_defaults(func=run)


def _add_batch_options(parser: argparse.ArgumentParser) -> None:
    """The batch: its size, spend cap, target and target settings."""
    from bayesscale.design import defaults

    parser.add_argument(
        "--runs",
        type=int,
        default=defaults.DEFAULT_RUNS,
        help="most runs in the batch, K (default %(default)s)",
    )
    parser.add_argument(
        "--spend",
        type=float,
        default=None,
        help="cap on the batch's total cost (money, as the costs file prices it): at most K "
        "runs within it; the greedy by value per cost, the greedy by value and batches "
        "starting with each of the --first-picks best first runs are built, and the batch worth "
        "most is kept",
    )
    parser.add_argument(
        "--first-picks",
        type=int,
        default=defaults.DEFAULT_FIRST_PICKS,
        help="with --spend: also build batches starting with each of this many first runs worth "
        "most by value and by value per cost, going on by value per cost (default %(default)s; "
        "0: the two greedy batches only)",
    )
    parser.add_argument(
        "--target",
        choices=defaults.TARGETS,
        default=defaults.TARGET_DECISION,
        help="decision: expected value of perfect information of the recipe at B (default); "
        "exponents: posterior variance of the population exponents",
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=None,
        help="a setting whose decision counts (repeatable; default: every setting)",
    )


def _add_file_options(parser: argparse.ArgumentParser) -> None:
    """The input and output files, and how the result is printed."""
    parser.add_argument("--costs", metavar="COSTS.toml", help="cost file (docs/next.md)")
    parser.add_argument("--prices", metavar="PRICES.toml", help="unit prices for the recipe")
    parser.add_argument(
        "--sweep",
        metavar="BASE.toml",
        help="the sweep spec the runs extend: its pool, models and settings; needed for --out",
    )
    parser.add_argument("--out", metavar="NEXT.toml", help="write the batch as a sweep file")
    add_force(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_strict(parser)
    parser.add_argument("--figure", metavar="PNG", help="save value per cost over the grid")


def _add_value_options(parser: argparse.ArgumentParser) -> None:
    """The candidates and how their values are estimated."""
    from bayesscale.design import defaults

    parser.add_argument(
        "--trials",
        type=int,
        default=None,
        help="held-out tasks per run (default: the base sweep's held-out cells, else "
        f"{defaults.DEFAULT_TRIALS})",
    )
    parser.add_argument(
        "--beyond",
        type=float,
        default=defaults.DEFAULT_BEYOND,
        help="a candidate's varied axis reaches this many times the largest swept size "
        "(default %(default)s); the other axes sit at the anchors, which may lie further out",
    )
    parser.add_argument(
        "--anchors",
        choices=defaults.ANCHOR_RULES,
        default=defaults.ANCHORS_PAPER,
        help="where a one-axis candidate holds the other axes: paper (the paper's 256 / 10,240 "
        "/ 8 unless the sweep lies wholly above one; default) or swept (those only inside the "
        "swept range, else the largest swept size)",
    )
    parser.add_argument(
        "--anchor",
        action="append",
        default=[],
        metavar="AXIS=SIZE",
        help="hold AXIS at SIZE in every setting's one-axis candidates (repeatable; overrides "
        "--anchors on that axis)",
    )
    parser.add_argument(
        "--simulations", type=int, default=defaults.DEFAULT_SIMULATIONS, help="outer draws M"
    )
    parser.add_argument(
        "--max-draws",
        type=int,
        default=defaults.DEFAULT_MAX_DRAWS,
        help="posterior draws per chain used (default %(default)s)",
    )
    parser.add_argument(
        "--min-ess",
        type=float,
        default=defaults.DEFAULT_MIN_ESS,
        help="the batch stops before a run whose importance weights' median ESS (given the "
        "batch's simulated outcomes) is below this; a first run below it is flagged; 0 never "
        "stops (default %(default)s)",
    )


def _add_refit_options(parser: argparse.ArgumentParser) -> None:
    """The refit check of runs the draws value poorly, and the seed."""
    parser.add_argument(
        "--refit-below",
        type=float,
        default=None,
        metavar="ESS",
        help="when a chosen run's median ESS is below ESS, check the batch by refitting the "
        "law (needs --observations) on the observations plus the batch's simulated outcomes; "
        "the batch stops before runs below --min-ess, so set it above that (only a first run "
        "can lie below --min-ess)",
    )
    parser.add_argument(
        "--observations", metavar="OBS.csv", help="the observations the fit was made from"
    )
    parser.add_argument(
        "--refit-outcomes",
        type=int,
        default=4,
        help="simulated outcomes (refits) of the refit check (default %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=0)


def _anchor_sizes(given: list[str]) -> dict[str, float]:
    """``--anchor AXIS=SIZE`` options as axis -> size.

    >>> _anchor_sizes(["env=256", "task=10240"])
    {'env': 256.0, 'task': 10240.0}
    """
    out: dict[str, float] = {}
    for text in given:
        axis, sep, size = text.partition("=")
        axis = axis.strip()
        try:
            value = float(size)
        except ValueError:
            value = math.nan
        if not sep or not axis or not math.isfinite(value):
            raise CommandError(f"--anchor {text!r}: expected AXIS=SIZE, e.g. env=256")
        if axis in out:
            raise CommandError(f"--anchor: axis {axis!r} given twice")
        out[axis] = value
    return out


def run(args: argparse.Namespace) -> int:
    from bayesscale.core.prices import load_prices
    from bayesscale.design.costs import Costs, load_costs
    from bayesscale.design.defaults import DEFAULT_TRIALS
    from bayesscale.design.next_runs import next_runs
    from bayesscale.fits.law import LawFit
    from bayesscale.law.mixed_draws import mixture_weights
    from bayesscale.law.posterior import axis_columns, law_layout, setting_keys

    anchors = _anchor_sizes(args.anchor)
    out, figure = _output_paths(args)
    law = LawFit.load(args.fit)
    refuse_failed(args.fit, law.diagnostics, args.strict)
    fit = law.tree
    mixed = mixture_weights(fit)  # the forms whose draws the values read
    if args.refit_below is not None and len(mixed) > 1:
        raise CommandError(
            f"--refit-below refits one law, and {args.fit} is a stack whose forms carry weight "
            f"({', '.join(f'{f} {w:.2f}' for f, w in mixed.items())}): the check would refit "
            "and restack every form per simulated outcome; value the runs by reweighting "
            "(drop --refit-below), or refit the observations with --forms power"
        )
    prices = load_prices(args.prices)
    costs = load_costs(args.costs, Costs(data=dict(prices.unit), currency=prices.currency))
    axes, fit_settings = law_layout(fit)  # the settings and axes the recipe sees
    settings = list(fit_settings)
    keys = setting_keys(fit, settings)
    columns = axis_columns(fit, axes)
    spec, movers, max_sizes, cells, trials = _sweep_limits(args, settings, keys, columns)
    result = next_runs(
        fit,
        args.budget,
        runs=args.runs,
        target=args.target,
        target_settings=args.setting,
        candidate_settings=movers,
        costs=costs,
        prices=prices,
        trials=trials or DEFAULT_TRIALS,
        simulations=args.simulations,
        max_draws=args.max_draws,
        beyond=args.beyond,
        anchors=anchors,
        anchor_rule=args.anchors,
        max_sizes=max_sizes,
        cells=cells,
        min_ess=args.min_ess,
        spend=args.spend,
        first_picks=args.first_picks,
        seed=args.seed,
    )
    _refit_check(args, result, fit, prices)
    if out is not None and spec is not None:
        _write_sweep(args, out, result, columns, keys, spec)
    if figure is not None:
        _write_figure(args, figure, result)
    _print_result(args, result, law, out)
    return 0


def _output_paths(args: argparse.Namespace) -> tuple[Path | None, Path | None]:
    """``--out`` and ``--figure`` as paths (refused where they would overwrite without
    ``--force``), after the option combinations ``next`` refuses."""

    if args.refit_below is not None and args.observations is None:
        raise CommandError("--refit-below needs --observations OBS.csv (the fit's data)")
    inputs = [args.fit, args.observations, args.prices, args.costs, args.sweep]
    out = output_path(args.out, args.force, inputs)
    figure = output_path(args.figure, args.force, inputs)
    if out is not None and figure is not None and out.resolve() == figure.resolve():
        raise CommandError(f"--figure {figure} is also --out; give each its own file")
    if out is not None and args.sweep is None:
        raise CommandError(
            "--out needs --sweep BASE.toml: the pool, models and verl settings of the runs"
        )
    return out, figure


def _sweep_limits(
    args: argparse.Namespace,
    settings: list[str],
    keys: Mapping[str, Mapping[str, Any]],
    columns: Mapping[str, str],
) -> tuple[SweepSpec | None, list[str] | None, dict[str, float] | None, float | None, int | None]:
    """What ``--sweep BASE.toml`` sets (else ``None`` each): the spec, the settings it can run,
    the sizes its pool holds, its cells, and the trials per run (``--trials``, else its
    held-out cells)."""
    from bayesscale.design import sweep_file

    trials = args.trials
    if args.sweep is None:
        return None, None, None, None, trials
    from bayesscale.verl.plan import count_units, split_holdout
    from bayesscale.verl.pool import read_pool
    from bayesscale.verl.sweep import load_sweep_spec

    spec = load_sweep_spec(args.sweep)
    movers = sweep_file.runnable_settings(settings, keys, spec)
    if not movers:
        raise CommandError(
            f"{args.sweep}: none of the fit's settings {settings} matches its models, "
            "algorithms and domain"
        )
    pool = read_pool(spec.pool)  # one read of the pool, for trials too
    split = split_holdout(pool, spec)
    # distinct environments and tasks, as plan counts them: sizes within these are the
    # n_envs / n_tasks plan realises (more ids would only add copies)
    pool_size = sweep_file.train_caps(split, count_units(pool, spec.count))
    max_sizes = {a: float(pool_size[c]) for a, c in columns.items() if c in pool_size}
    cells = float(spec.cells)  # [alignment] cells: the run's total over its updates
    if trials is None:
        trials = len(split.val)
    return spec, movers, max_sizes, cells, trials


def _refit_check(
    args: argparse.Namespace, result: NextRuns, fit: xr.DataTree, prices: Prices
) -> None:
    """With ``--refit-below``, check the batch by refitting when a chosen run's median ESS
    is below it (stored in ``result.refit``)."""
    from bayesscale.design.refit import refit_check

    low = [r for r in result.chosen if r.valued.ess_median < (args.refit_below or 0.0)]
    if low:
        refit = _refitter(fit, args.observations, args.seed)
        reason = (
            f"{len(low)} chosen run(s) with median ESS below --refit-below {args.refit_below:g}"
        )
        refit_check(
            result,
            fit,
            refit,
            args.refit_outcomes,
            prices,
            max_draws=args.max_draws,
            reason=reason,
        )


def _write_sweep(
    args: argparse.Namespace,
    out: Path,
    result: NextRuns,
    columns: Mapping[str, str],
    keys: Mapping[str, Mapping[str, Any]],
    spec: SweepSpec,
) -> None:
    """The batch as a sweep file at ``out`` that ``plan`` accepts."""

    from bayesscale.design import sweep_file

    points = sweep_file.sweep_points(result.chosen, result.axes, columns, keys, spec)
    note = (
        f"written by `bayesscale next {args.fit} --budget {args.budget:g} --runs {args.runs} "
        f"--target {args.target} --anchors {args.anchors}"
        + "".join(f" --anchor {a}" for a in args.anchor)
        + f"` from {args.sweep}"
    )
    text = sweep_file.next_sweep_text(spec, points, note)
    write_atomically(out, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), args.force)


def _write_figure(args: argparse.Namespace, figure: Path, result: NextRuns) -> None:
    """Value per cost over the candidate grid, as a PNG at ``figure``."""
    from bayesscale.design.figure import value_per_cost_figure
    from bayesscale.report.figures.provenance import DEFAULT_DPI

    fig = value_per_cost_figure(result)
    write_atomically(
        figure, lambda tmp: fig.savefig(tmp, format="png", dpi=DEFAULT_DPI), args.force
    )


def _print_result(
    args: argparse.Namespace, result: NextRuns, law: LawFit, out: Path | None
) -> None:
    """The batch as text (``--json``: JSON) with the fit's diagnostics, and what was written."""

    from bayesscale.design.next_text import format_text, to_json

    if args.json:
        print(
            json.dumps({**to_json(result), "fit_diagnostics": law.diagnostics.to_dict()}, indent=2)
        )
    else:
        headline = law.diagnostics.headline()
        print(format_text(result) if headline is None else f"{headline}\n{format_text(result)}")
        if out is not None and result.worth_running:
            print(f"wrote {out}\nnext: bayesscale plan {out} --out SWEEP_DIR")
        elif out is not None:
            print(f"wrote {out}, but the batch is not worth running (see above)")


def _refitter(
    fit: xr.DataTree, observations: str, seed: int
) -> Callable[[list[dict[str, Any]]], xr.DataTree]:
    """``rows -> fit``: the law of ``fit``'s spec refitted to the observations plus ``rows``
    (columns the rows lack are taken from the same setting's first observed row)."""
    import pandas as pd

    from bayesscale.data.fitfile import fit_spec
    from bayesscale.data.observations import Table, frame_sha256, read_table, validate
    from bayesscale.law.inference import FitConfig
    from bayesscale.law.inference import fit as fit_law

    spec = fit_spec(fit)
    frame, _ = read_table(observations)
    keys = list(spec.setting_keys)
    config = FitConfig(seed=seed, progress=False, draws=500, ess_target=0)

    def refit(rows: list[dict[str, Any]]) -> xr.DataTree:
        extra = pd.DataFrame(rows)
        first = frame.groupby(keys, sort=False).head(1).set_index(keys)
        for column in frame.columns:
            if column not in extra.columns:
                index = pd.MultiIndex.from_frame(extra[keys].astype(str))
                extra[column] = first[column].reindex(index).to_numpy()
        extra[names.SEED] = extra[names.SEED] + int(frame[names.SEED].max()) + 1
        both = pd.concat([frame, extra[frame.columns]], ignore_index=True)
        table = Table(validate(both, spec, "refit check"), "refit check", frame_sha256(both))
        return fit_law(table, spec, config)

    return refit
