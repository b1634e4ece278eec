"""Does the recipe's decision, actually run, beat its baselines at equal money? (docs/lab.md)

    .venv/bin/python benchmarks/lab_recipe.py FIT.nc RUNS.csv [--also MORE.csv=ARM ...]
        [--prices lab/prices.toml]

FIT.nc is the law fitted to the lab's sweep (``bayesscale fit data/lab/observations.csv``);
RUNS.csv the ingested runs of the decision and its baselines, as ``bayesscale recipe FIT.nc
--budget B --prices lab/prices.toml --sweep lab/sweep.toml --sweep-out D.toml
--with-baselines`` wrote them (then ``plan``, ``launch``, ``ingest``): each row's
``sweep_axis`` (``recipe:<B>``, ``traj_heavy:<B>``, ``chinchilla:<B>``, or several joined by
``+``) names its arm. ``--also MORE.csv=ARM`` adds the runs of another table as one more arm
named ``ARM`` (e.g. the decision of a fit on fewer runs that ``next`` chose, ingested with
its own ``recipe:<B>`` label); ``--decision LABEL`` names the arm the others are compared
with (default: the first ``recipe:`` arm).

Per model and arm it prints the sizes, their money under the prices (``lab/prices.toml``:
``4.10 E + 0.18 T + 0.02 x 2,048 x R``), the runs, the measured held-out success (mean over
seeds, and its standard error) and the law's prediction (the posterior of the expected
success at those sizes, median and 90% interval). Then, per model and pooled over the models,
the decision minus every other arm, **paired by seed** (a seed fixes the policy's
initialisation and the data order, so the arms of one seed share them): mean and standard
error of the paired differences, against the law's predicted difference. Nothing is written.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bayesscale import names
from bayesscale.core.prices import load_prices, money_cost
from bayesscale.data.fitfile import fit_spec, load_fit
from bayesscale.law.predict import predict, validate_rows

ROOT = Path(__file__).resolve().parents[1]
SIZES = (names.N_ENVS, names.N_TASKS, names.ROLLOUTS)
AXES = (names.ENV, names.TASK, names.TRAJ)
PROB = 0.9


def arm_labels(runs: pd.DataFrame, source: str) -> pd.Series:
    """Each row's arm, from its ``sweep_axis``; a row without one is an error naming it."""
    if names.SWEEP_AXIS not in runs.columns:
        raise SystemExit(f"{source}: no {names.SWEEP_AXIS!r} column (ingest writes it)")
    label = runs[names.SWEEP_AXIS]
    blank = label.isna().to_numpy()
    if blank.any():
        first = int(np.flatnonzero(blank)[0])
        raise SystemExit(f"{source}: row {first + 2}, column {names.SWEEP_AXIS!r}: empty")
    return label.astype(str)


def run_money(runs: pd.DataFrame, prices_path: str) -> np.ndarray:
    """What each run's sizes cost under the prices (their [cost] rule)."""
    cost = money_cost(AXES, list(SIZES), load_prices(prices_path))
    return np.array([float(cost(r)) for r in runs[list(SIZES)].to_numpy(float)])


def predicted(fit_path: str, runs: pd.DataFrame) -> np.ndarray:
    """The law's expected success per posterior draw (draws x rows) at each run's sizes."""
    fit = load_fit(fit_path)
    return np.asarray(predict(fit, runs, observed=False).expected(), dtype=float)


def paired(frame: pd.DataFrame, arm: str, base: str) -> tuple[float, float, int]:
    """Mean and standard error of the decision's success minus a baseline's, paired by
    (model, seed)."""
    wide = frame.pivot_table(
        index=[names.MODEL, names.SEED], columns="arm", values="rate", aggfunc="mean"
    )
    d = (wide[arm] - wide[base]).dropna().to_numpy()
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.nan
    return float(d.mean()), se, len(d)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fit")
    parser.add_argument("runs")
    parser.add_argument("--prices", default=str(ROOT / "lab" / "prices.toml"))
    parser.add_argument("--also", action="append", default=[], metavar="MORE.csv=ARM")
    parser.add_argument(
        "--decision", help="the arm the others are compared with (default: the first recipe:)"
    )
    args = parser.parse_args(argv)

    fit = load_fit(args.fit)
    tables = []
    for source, arm in [(args.runs, None), *(a.rpartition("=")[::2] for a in args.also)]:
        if arm == "":
            raise SystemExit(f"--also {source}: give it as MORE.csv=ARM")
        # rows the law predicts, not fits: a few arms have too few sizes to fit, as meant
        frame = validate_rows(pd.read_csv(source), fit_spec(fit), source, observed=True)
        frame["arm"] = arm_labels(frame, source) if arm is None else arm
        tables.append(frame)
    runs = pd.concat(tables, ignore_index=True)
    runs["money"] = run_money(runs, args.prices)
    runs["rate"] = runs[names.SUCCESSES] / runs[names.TRIALS]
    expected = predicted(args.fit, runs)
    tail = (1 - PROB) / 2
    arms = list(dict.fromkeys(runs["arm"]))
    decision = args.decision or next((a for a in arms if a.startswith("recipe:")), arms[0])

    print(
        f"{args.runs}: {len(runs)} runs; money under {args.prices}; success = held-out "
        "success rate (greedy, held tasks in held environments)"
    )
    print(
        f"{'model':9s} {'arm':30s} {'envs':>5s} {'tasks':>6s} {'rollouts':>8s} {'money':>8s} "
        f"{'runs':>4s}  {'measured':>15s}  law's expected success"
    )
    for (model, arm), group in runs.groupby([names.MODEL, "arm"], sort=False):
        sizes = group[list(SIZES)].drop_duplicates()
        if len(sizes) != 1:
            raise SystemExit(f"{args.runs}: arm {arm} of {model} has {len(sizes)} sizes")
        e, t, r = (int(v) for v in sizes.iloc[0])
        rate = group["rate"].to_numpy()
        law = expected[:, group.index.to_numpy()].mean(axis=1)
        lo, med, hi = np.quantile(law, [tail, 0.5, 1 - tail])
        print(
            f"{model:9s} {arm:30s} {e:5d} {t:6d} {r:8d} {group['money'].iloc[0]:8.2f} "
            f"{len(group):4d}  {rate.mean():.3f} ± {rate.std(ddof=1) / math.sqrt(len(rate)):.3f}"
            f"  {med:.3f} [{lo:.3f}, {hi:.3f}]"
        )
    for other in (a for a in arms if a != decision):
        both = [
            m
            for m, g in runs.groupby(names.MODEL, sort=False)
            if {decision, other} <= set(g["arm"])
        ]
        for model in [*both, None] if len(both) > 1 else both:
            sub = runs[runs[names.MODEL].isin(both if model is None else [model])]
            mean, se, n = paired(sub, decision, other)
            at = sub.index.to_numpy()
            arm_of = sub["arm"].to_numpy()
            law_gain = expected[:, at[arm_of == decision]].mean(axis=1) - expected[
                :, at[arm_of == other]
            ].mean(axis=1)
            lo, med, hi = np.quantile(law_gain, [tail, 0.5, 1 - tail])
            print(
                f"{decision} - {other:28s} {model or 'pooled':9s}: measured {mean:+.3f} ± "
                f"{se:.3f} ({n} seed pairs, {mean / se:+.1f} SE); law's {med:+.3f} "
                f"[{lo:+.3f}, {hi:+.3f}]"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
