"""Which runs next, by simulation: regret of the recipe's decision against what the runs cost.

    PYTHONPATH=. python benchmarks/next_study.py [--rounds 7] [--spend 3000] [--replicates 1]
        [--first-replicate 0] [--merge STUDY.json ...] [--out out/next_study]
        [--strategies next,paper,random] [--reuse STUDY.json ...] [--next-target decision]
        [--next-anchors paper] [--workers N | --ray-address ADDR]

A declared truth (three settings of ``simulate.paper_truth``: Qwen3-8B GRPO on math+code, SWE
and web), a small initial sweep (3 points per axis over 4x, one seed: 21 runs), then rounds in
which each of three strategies buys runs up to ``--spend`` (money, the
:mod:`bayesscale.design.costs` defaults: data beyond what is owned plus GPU-hours), each round
followed by a refit on everything seen so far (the package's default fit: ESS 400, R-hat 1.01).
No strategy spends more than ``--limit`` over all rounds (default: half the paper's full grid's
cost, 14,922 USD, where the target is judged; seven rounds of up to 3,000 USD let every
strategy reach it, though ``next`` stops a batch early where its draws cannot value more runs):

* ``next``: :func:`bayesscale.design.next_runs.next_runs` (``--next-target``, by default the
  decision at the budget; ``--next-anchors``, by default the paper's; ``spend`` cap, up to
  ``--max-runs`` runs);
* ``paper``: the paper's one-axis-at-a-time grid (6 points over 32x, anchors 256 / 10,240 / 8,
  3 seeds) in ``plan``'s order (per setting, grid points sorted, seeds innermost), skipping
  runs the initial sweep made;
* ``random``: runs drawn uniformly from ``next``'s candidate grid (with ``swept`` anchors, as
  in every recorded run of it).

After every round: the regret of the recipe's decision under the truth (success at the
truth's optimum minus the truth's success at the decision, at budget ``--budget``, within fixed
bounds, averaged over the settings), and the posterior's own EVPI, against the cumulative
cost. The reference is the paper's full grid fitted with the initial sweep. Target: the full
grid's regret at half of its cost or less. ``--replicates`` repeats everything with other
simulated data (same truth) and averages (about 6 minutes per replicate with two runs side by
side on a 2-core machine; give each ``OPENBLAS_NUM_THREADS=1`` then, or NumPy's BLAS threads
of the two runs contend and `next`'s choice takes many times longer); ``--merge`` adds the
replicates of earlier runs' ``study.json`` to the report, ``--strategies`` with ``--reuse``
reruns some strategies only. Prints the curves, saves ``regret.png`` and ``study.json`` in
``--out``; for every round ``study.json`` keeps the runs bought (setting, sizes, seed) and the
decision of the refit after them (round 0: the initial sweep's fit). Seeded throughout.

Replicates are independent jobs (:func:`bayesscale.checks.jobs.run_jobs`): serially by
default, on a throwaway local Ray instance with ``--workers N``, or on a cluster with
``--ray-address ADDR``. Each replicate is seeded by its number alone (as it always was), so
the results do not depend on where it ran; the per-round lines a replicate prints stay in the
Ray worker's log, the report at the end is printed here. Ray workers use one BLAS thread;
a serial run matches them exactly with ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesscale import jobs, names
from bayesscale.core import laws
from bayesscale.data.extrapolation import SweptRange
from bayesscale.data.observations import DataWarning, Table, frame_sha256, validate
from bayesscale.data.simulate import (
    AXIS_COLUMNS,
    PAPER_ANCHORS,
    PAPER_GRIDS,
    Truth,
    paper_truth,
    per_axis_design,
    simulate,
)
from bayesscale.data.spec import ModelSpec, parse_spec, with_exponent_prior_scale
from bayesscale.design.candidates import candidate_grid, default_anchors
from bayesscale.design.costs import Costs
from bayesscale.design.defaults import (
    ANCHOR_RULES,
    ANCHORS_PAPER,
    ANCHORS_SWEPT,
    TARGET_DECISION,
    TARGETS,
)
from bayesscale.design.next_runs import next_runs
from bayesscale.design.results import DesignError
from bayesscale.law.inference import FitConfig, fit
from bayesscale.law.posterior import axis_columns
from bayesscale.recipe.solve import recipe
from bayesscale.recipe.synthetic import synthetic_fit

SPEC_TEXT = """
[model]
name = "next-study"
[outcome]
kind = "success"
concentration = { median = 200.0, log_sd = 1.0 }
[settings]
keys = ["model", "algorithm", "domain"]
[[axes]]
name = "env"
column = "n_envs"
exponent = { median = 0.25, log_sd = 0.75 }
[[axes]]
name = "task"
column = "n_tasks"
exponent = { median = 0.25, log_sd = 0.75 }
[[axes]]
name = "traj"
column = "rollouts"
exponent = { median = 0.25, log_sd = 0.75 }
[level]
prior = { median = 1.0, log_sd = 1.0 }
[slope]
prior = { median = 0.03, log_sd = 1.5 }
"""
SPEC = parse_spec(SPEC_TEXT, "next-study")
AXES = (names.ENV, names.TASK, names.TRAJ)
PICK = (1, 7, 13)  # Qwen3-8B grpo: math+code, swe, web
INITIAL_GRIDS = {names.ENV: (8, 16, 32), names.TASK: (320, 640, 1280), names.TRAJ: (2, 4, 8)}
INITIAL_ANCHORS = {names.ENV: 32, names.TASK: 1280, names.TRAJ: 8}
BOUNDS = {names.ENV: (1.0, 1024.0), names.TASK: (1.0, 40960.0), names.TRAJ: (1.0, 256.0)}
MAX_SIZES = {a: BOUNDS[a][1] for a in AXES}
# The package's default fit (ESS target 400, R-hat 1.01), as a user would refit.
CONFIG = FitConfig(seed=1, progress=False)
COSTS = Costs()
STRATEGIES = ("next", "paper", "random")


def small_truth() -> Truth:
    t = paper_truth(seed=20261129)
    return dataclasses.replace(
        t,
        settings=[t.settings[i] for i in PICK],
        alpha=[t.alpha[i] for i in PICK],
        amplitude=[t.amplitude[i] for i in PICK],
        loss_floor=[t.loss_floor[i] for i in PICK],
    )


def label(row: dict[str, Any]) -> str:
    return " | ".join(str(row[k]) for k in names.SETTING_KEYS)


def truth_optimum(truth: Truth, budget: float) -> np.ndarray:
    """Success at the truth's own optimum per setting (a point-mass fit through the recipe)."""
    floor = np.asarray(truth.loss_floor) + laws.size_term(
        np.array([s[names.PARAMS_B] for s in truth.settings]),
        truth.size_amplitude,
        truth.alpha_size,
        truth.size_reference,
    )
    point = synthetic_fit(
        draws=2,
        chains=1,
        spread=0.0,
        alpha=truth.alpha,
        amplitude=truth.amplitude,
        floor=floor.tolist(),
        reference=truth.reference_scale,
    )
    ds = recipe(point, [budget], bounds=BOUNDS, decision=False, multipliers=False)
    return np.asarray(ds[names.SUCCESS_OPTIMUM].isel(chain=0, draw=0, budget=0).to_numpy())


def truth_success(truth: Truth, sizes: np.ndarray) -> np.ndarray:
    """The truth's success per setting at sizes (G, 3) (axes in AXES order)."""
    frame = pd.DataFrame(
        [
            {**s, **{AXIS_COLUMNS[a]: sizes[g, i] for i, a in enumerate(AXES)}}
            for g, s in enumerate(truth.settings)
        ]
    )
    return np.asarray(laws.success_from_loss(truth.expected_loss(frame)))


def fit_frame(frame: pd.DataFrame, spec: ModelSpec = SPEC, config: FitConfig = CONFIG) -> Any:
    table = Table(validate(frame, spec, "study"), "study", frame_sha256(frame))
    return fit(table, spec, config)


def initial_sweep(truth: Truth, rep: int) -> pd.DataFrame:
    """Replicate ``rep``'s initial sweep: 3 points per axis over 4x, one seed."""
    design = per_axis_design(truth, grids=INITIAL_GRIDS, anchors=INITIAL_ANCHORS, seeds=(0,))
    return simulate(truth, design, seed=1 + 100 * rep)


def full_grid(
    truth: Truth, initial: pd.DataFrame, rep: int
) -> tuple[list[tuple[str, tuple[int, ...], int]], pd.DataFrame]:
    """The paper's full grid beyond replicate ``rep``'s initial sweep: its runs in plan's
    order, and every row the full grid's fit sees (the initial sweep's included)."""
    queue = paper_queue(truth, initial)
    frame = pd.concat([initial, simulate(truth, rows_for(truth, queue), seed=2 + 100 * rep)])
    return queue, frame


def judge(truth: Truth, tree: Any, budget: float, optimum: np.ndarray) -> dict[str, Any]:
    """The decision's regret under the truth and the posterior's EVPI (its own estimate of
    the expected regret), both averaged over the settings, and the decision itself (sizes
    per setting, axes in AXES order)."""
    ds = recipe(tree, [budget], bounds=BOUNDS, multipliers=False)
    order = [label(s) for s in truth.settings]
    dec = ds[names.DECISION].isel(budget=0).sel(setting=order).transpose("setting", "axis")
    sizes = dec.sel(axis=list(AXES)).to_numpy()
    return {
        "regret": float(np.mean(optimum - truth_success(truth, sizes))),
        "evpi": float((ds[names.SUCCESS_OPTIMUM] - ds[names.SUCCESS_DECISION]).mean()),
        "decision": np.round(sizes, 1).tolist(),
    }


def regret(truth: Truth, tree: Any, budget: float, optimum: np.ndarray) -> tuple[float, float]:
    """:func:`judge`'s regret and EVPI."""
    got = judge(truth, tree, budget, optimum)
    return got["regret"], got["evpi"]


def run_cost(
    row: dict[str, Any], owned: dict[str, dict[str, float]]
) -> tuple[float, dict[str, float]]:
    """Cost of one run given what its domain owns; the domain's inventory after it."""
    have = dict(owned[row[names.DOMAIN]])
    data = 0.0
    for a in AXES:
        size = float(row[AXIS_COLUMNS[a]])
        data += COSTS.data_price(a) * max(0.0, size - have[a])
        have[a] = max(have[a], size)
    gpu = COSTS.gpu_hours(row[names.PARAMS_B], row[names.ROLLOUTS]) * COSTS.price_per_hour
    return data + gpu, have


def rows_for(truth: Truth, picks: list[tuple[str, tuple[int, ...], int]]) -> pd.DataFrame:
    by_label = {label(s): s for s in truth.settings}
    rows = []
    for setting, sizes, seed in picks:
        point = {AXIS_COLUMNS[a]: int(v) for a, v in zip(AXES, sizes, strict=True)}
        rows.append({**by_label[setting], **point, names.REWARD: "sparse", names.SEED: seed})
    frame = pd.DataFrame(rows)
    frame[names.TRIALS] = truth.trials
    return frame


def paper_queue(truth: Truth, initial: pd.DataFrame) -> list[tuple[str, tuple[int, ...], int]]:
    """The paper's full grid in plan's order, without the runs the initial sweep made."""
    done = {
        (label(r), tuple(int(r[AXIS_COLUMNS[a]]) for a in AXES), int(r[names.SEED]))
        for r in initial.to_dict("records")
    }
    points: set[tuple[int, ...]] = set()
    for axis in AXES:
        for v in PAPER_GRIDS[axis]:
            p = dict(PAPER_ANCHORS)
            p[axis] = v
            points.add(tuple(p[a] for a in AXES))
    queue = []
    for s in truth.settings:
        for point in sorted(points):
            for seed in (0, 1, 2):
                if (label(s), point, seed) not in done:
                    queue.append((label(s), point, seed))
    return queue


def random_picks(
    tree: Any,
    cap: float,
    rng: np.random.Generator,
    used: dict[tuple[str, tuple[int, ...]], int],
    truth: Truth,
    owned: dict[str, dict[str, float]],
    ceiling: float,
) -> list[tuple[str, tuple[int, ...], int]]:
    """Random candidates from next's grid, one at a time, while they fit in ``cap`` (at least
    one), never past ``ceiling``. The grid's anchors are the ``swept`` rule's, as in every
    recorded run of this strategy (``next``'s default until stop 26)."""
    swept = SweptRange.from_fit(tree)
    assert swept is not None
    settings = list(swept.settings)
    columns = axis_columns(tree, AXES)
    anchors = default_anchors(swept.select(settings, list(AXES)), AXES, columns, ANCHORS_SWEPT)
    cands = candidate_grid(settings, AXES, swept, anchors, max_sizes=MAX_SIZES)
    out: list[tuple[str, tuple[int, ...], int]] = []
    have = {d: dict(v) for d, v in owned.items()}
    spent, misses = 0.0, 0
    while misses < 50:
        c = cands[int(rng.integers(len(cands)))]
        pick = (c.setting, c.sizes, 100 + used.get((c.setting, c.sizes), 0))
        cost, after = run_cost(rows_for(truth, [pick]).iloc[0].to_dict(), have)
        if spent + cost > ceiling or (spent + cost > cap and out):
            misses += 1
            continue
        out.append(pick)
        used[(c.setting, c.sizes)] = used.get((c.setting, c.sizes), 0) + 1
        have[c.setting.split(" | ")[2]] = after
        spent += cost
    return out


def paper_picks(
    queue: list[tuple[str, tuple[int, ...], int]],
    pos: int,
    cap: float,
    truth: Truth,
    owned: dict[str, dict[str, float]],
    ceiling: float,
) -> tuple[list[tuple[str, tuple[int, ...], int]], int]:
    """The paper grid's next runs in plan's order while they fit in ``cap`` (at least one),
    never past ``ceiling``."""
    have = {d: dict(v) for d, v in owned.items()}
    out: list[tuple[str, tuple[int, ...], int]] = []
    spent = 0.0
    while pos < len(queue):
        cost, after = run_cost(rows_for(truth, [queue[pos]]).iloc[0].to_dict(), have)
        if spent + cost > ceiling or (spent + cost > cap and out):
            break
        out.append(queue[pos])
        have[queue[pos][0].split(" | ")[2]] = after
        spent += cost
        pos += 1
    return out, pos


# The settings that shape the curves: replicates made under others are not merged or reused
# (those of NEXT_SETTINGS shape only `next`'s curve).
NEXT_SETTINGS = ("next_target", "next_prior_scale", "next_anchors")
CURVE_SETTINGS = ("rounds", "spend", "max_runs", "limit", "budget", *NEXT_SETTINGS)
# What a study.json made before a setting existed ran with, where that is not today's default.
BEFORE_SETTING = {"next_anchors": ANCHORS_SWEPT}


def _read_study(
    path: str,
    args: argparse.Namespace,
    parser: argparse.ArgumentParser,
    settings: tuple[str, ...] = CURVE_SETTINGS,
) -> Any:
    """An earlier run's ``study.json``, refused unless it was made with this run's
    ``settings`` (a setting it does not record, from before the setting existed, counts as
    what runs then did: ``BEFORE_SETTING``, else the setting's default)."""
    study = json.loads(Path(path).read_text())
    made = {k: study["args"].get(k, BEFORE_SETTING.get(k, parser.get_default(k))) for k in settings}
    differ = [
        f"--{k.replace('_', '-')} {made[k]} there, {getattr(args, k)} here"
        for k in settings
        if made[k] != getattr(args, k)
    ]
    if differ:
        parser.error(f"{path} was made with other settings: {'; '.join(differ)}")
    return study


def _earlier_replicates(studies: list[Any]) -> dict[int, dict[str, Any]]:
    """Replicate number -> replicate, from earlier runs' ``study.json``."""
    out: dict[int, dict[str, Any]] = {}
    for study in studies:
        reps = study["replicates"]
        # files before the "replicate" key: the replicates run there come last (after those
        # of its --merge files), numbered from its --first-replicate
        ran = int(study["args"].get("replicates", len(reps)))
        first = int(study["args"].get("first_replicate", 0))
        for k, r in enumerate(reps):
            if "replicate" in r:
                out[int(r["replicate"])] = r
            elif k >= len(reps) - ran:
                out[first + k - (len(reps) - ran)] = r
    return out


def _fill_from(
    got: dict[str, Any], old: dict[str, Any], rep: int, run_now: tuple[str, ...]
) -> None:
    """Take the curves of the strategies not run now from ``old``, the same replicate of an
    earlier run; refuse it unless its initial and full-grid fits gave the same figures, to
    within 1e-8 (the recipe's optimiser differs in the last bits with the number of NumPy's
    BLAS threads: 9e-10 on one replicate's regret)."""

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= 1e-8

    same = close(got["initial_regret"], old["initial_regret"]) and all(
        close(got["full_grid"][k], old["full_grid"][k]) for k in ("regret", "evpi", "cost")
    )
    if not same:
        raise SystemExit(
            f"replicate {rep}: the --reuse file's initial or full-grid fit differs from this "
            "run's by more than 1e-8 (other code or data): run every strategy"
        )
    for strategy in STRATEGIES:
        if strategy not in run_now:
            got["curves"][strategy] = old["curves"][strategy]


def replicate(
    args: argparse.Namespace,
    rep: int,
    truth: Truth,
    optimum: np.ndarray,
    strategies: tuple[str, ...] = STRATEGIES,
) -> dict:
    initial = initial_sweep(truth, rep)
    owned0 = {
        s[names.DOMAIN]: {a: float(max(INITIAL_GRIDS[a])) for a in AXES} for s in truth.settings
    }
    t0 = time.perf_counter()
    tree0 = fit_frame(initial)
    at_start = judge(truth, tree0, args.budget, optimum)
    r0, e0 = at_start["regret"], at_start["evpi"]
    print(
        f"[rep {rep}] initial sweep: {len(initial)} runs, regret {r0:.4f}, posterior EVPI "
        f"{e0:.4f} (fit {time.perf_counter() - t0:.0f} s)"
    )
    queue, full_frame = full_grid(truth, initial, rep)
    full_cost, owned = 0.0, {d: dict(v) for d, v in owned0.items()}
    for pick in queue:
        c, owned[pick[0].split(" | ")[2]] = run_cost(
            rows_for(truth, [pick]).iloc[0].to_dict(), owned
        )
        full_cost += c
    t0 = time.perf_counter()
    full_regret, full_evpi = regret(truth, fit_frame(full_frame), args.budget, optimum)
    print(
        f"[rep {rep}] paper full grid: {len(queue)} runs beyond the initial sweep, cost "
        f"{full_cost:,.0f} {COSTS.currency}, regret {full_regret:.4f}, posterior EVPI "
        f"{full_evpi:.4f} (fit {time.perf_counter() - t0:.0f} s)"
    )
    # the target is judged at half the full grid's cost: no strategy spends more than that
    limit = full_cost / 2 if args.limit is None else args.limit
    # per round: figures (float), and the runs bought and the refit's decision (lists)
    curves: dict[str, list[dict[str, Any]]] = {}
    for si, strategy in enumerate(STRATEGIES):
        if strategy not in strategies:
            continue
        frame, tree = initial.copy(), tree0
        owned = {d: dict(v) for d, v in owned0.items()}
        spent = 0.0
        used: dict[tuple[str, tuple[int, ...]], int] = {}
        rng = np.random.default_rng([7, si, rep])
        pos = 0
        curve: list[dict[str, Any]] = [
            {
                "runs": 0,
                "cost": 0.0,
                "regret": r0,
                "evpi": e0,
                "seconds": 0.0,
                "decision": at_start["decision"],
            }
        ]
        for rnd in range(args.rounds):
            t0 = time.perf_counter()
            # a round spends up to --spend (the paper grid and random runs at least one run),
            # and all rounds together never more than the limit
            left = limit - spent
            cap = min(args.spend, left)
            picks = []
            if cap <= 0:
                pass
            elif strategy == "next":
                basis = tree
                if args.next_prior_scale != 1.0:  # value runs on the wider-prior posterior
                    basis = fit_frame(frame, with_exponent_prior_scale(SPEC, args.next_prior_scale))
                try:
                    chosen = next_runs(
                        basis,
                        args.budget,
                        runs=args.max_runs,
                        spend=cap,
                        bounds=BOUNDS,
                        max_sizes=MAX_SIZES,
                        trials=truth.trials,
                        target=args.next_target,
                        anchor_rule=args.next_anchors,
                        seed=rnd,
                    ).chosen
                except DesignError as exc:  # no candidate fits in what is left
                    if "fits in the spend cap" not in str(exc):
                        raise
                    chosen = []
                for r in chosen:
                    key = (r.candidate.setting, r.candidate.sizes)
                    picks.append((*key, 100 + used.get(key, 0)))
                    used[key] = used.get(key, 0) + 1
            elif strategy == "paper":
                picks, pos = paper_picks(queue, pos, cap, truth, owned, left)
            else:
                picks = random_picks(tree, cap, rng, used, truth, owned, left)
            chose = time.perf_counter() - t0
            if not picks:  # nothing fits under the limit: the fit of the round before stands
                curve.append({**curve[-1], "seconds": 0.0, "choose_seconds": chose, "picks": []})
                continue
            new = rows_for(truth, picks)
            for row in new.to_dict("records"):
                c, owned[row[names.DOMAIN]] = run_cost(row, owned)
                spent += c
            frame = pd.concat([frame, simulate(truth, new, seed=1000 + 10 * rnd + si + 100 * rep)])
            tree = fit_frame(frame)
            got = judge(truth, tree, args.budget, optimum)
            reg, evpi = got["regret"], got["evpi"]
            curve.append(
                {
                    "runs": len(frame) - len(initial),
                    "cost": spent,
                    "regret": reg,
                    "evpi": evpi,
                    "seconds": time.perf_counter() - t0,
                    "choose_seconds": chose,
                    # what the round bought (setting, sizes in AXES order, seed), and the
                    # decision its refit led to
                    "picks": [[p[0], list(p[1]), p[2]] for p in picks],
                    "decision": got["decision"],
                }
            )
            print(
                f"[rep {rep}] {strategy:<6} round {rnd + 1}: {len(frame) - len(initial):>3} runs, "
                f"cost {spent:>9,.0f}, regret {reg:.4f}, posterior EVPI {evpi:.4f} (choose "
                f"{chose:.1f} s, round {time.perf_counter() - t0:.0f} s)"
            )
        curves[strategy] = curve
    return {
        "replicate": rep,
        "initial_regret": r0,
        "full_grid": {
            "cost": full_cost,
            "regret": full_regret,
            "evpi": full_evpi,
            "runs": len(queue),
        },
        "curves": curves,
    }


def replicate_job(
    shared: tuple[argparse.Namespace, Truth, np.ndarray, tuple[str, ...]], rep: int, _seed: int
) -> dict:
    """One replicate as a job of :func:`bayesscale.checks.jobs.run_jobs` (in a Ray worker
    too): seeded by ``rep`` alone, the job seed is not used."""
    args, truth, optimum, run_now = shared
    # the initial sweep has one seed per point, on purpose (a worker has its own filters)
    warnings.filterwarnings("ignore", message=".*have a single seed", category=DataWarning)
    return replicate(args, rep, truth, optimum, run_now)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--spend", type=float, default=3000.0, help="spend cap per round")
    parser.add_argument(
        "--max-runs",
        type=int,
        default=48,
        help="most runs `next` picks a round (enough that the spend cap or its ESS stop binds)",
    )
    parser.add_argument("--replicates", type=int, default=1)
    parser.add_argument(
        "--first-replicate", type=int, default=0, help="seed offset: replicates k, k+1, ..."
    )
    parser.add_argument(
        "--merge",
        nargs="*",
        default=[],
        metavar="STUDY.json",
        help="report these earlier runs' replicates together with this run's (refused unless "
        "made with the same rounds, spend, max runs, limit, budget and next's target and prior "
        "scale)",
    )
    parser.add_argument(
        "--limit",
        type=float,
        default=None,
        help="most each strategy spends over all rounds (default: half the full grid's cost)",
    )
    parser.add_argument(
        "--strategies",
        default=",".join(STRATEGIES),
        help="the strategies run now, comma-separated; the others' curves come from --reuse",
    )
    parser.add_argument(
        "--reuse",
        nargs="*",
        default=[],
        metavar="STUDY.json",
        help="earlier runs' study.json holding the same replicates: the curves of the strategies "
        "not run now are taken from there (after checking that their initial and full-grid fits "
        "agree with this run's to within 1e-8)",
    )
    parser.add_argument(
        "--next-target",
        default=TARGET_DECISION,
        choices=TARGETS,
        help="the target `next` values runs by (default: the decision's EVPI at --budget)",
    )
    parser.add_argument(
        "--next-prior-scale",
        type=float,
        default=1.0,
        help="`next` values runs on a fit with exponent priors this many times wider (a second "
        "fit per round); the decision and its regret stay the default fit's (default 1: the "
        "default fit)",
    )
    parser.add_argument(
        "--next-anchors",
        default=ANCHORS_PAPER,
        choices=ANCHOR_RULES,
        help="where `next`'s one-axis candidates hold the other axes (`next --anchors`; "
        "default %(default)s; swept: the default until stop 26)",
    )
    parser.add_argument("--budget", type=float, default=5000.0)
    parser.add_argument("--out", default="out/next_study")
    parser.add_argument(
        "--ray-address", default=None, help="run replicates as Ray tasks on this cluster"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="replicates in flight (1, no address: serial)"
    )
    args = parser.parse_args()
    # The initial sweep has one seed per point, on purpose (a small first sweep): say so once.
    warnings.filterwarnings("ignore", message=".*have a single seed", category=DataWarning)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    truth = small_truth()
    optimum = truth_optimum(truth, args.budget)
    reps = [r for f in args.merge for r in _read_study(f, args, parser)["replicates"]]
    first = args.first_replicate
    asked = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = sorted(set(asked) - set(STRATEGIES))
    if unknown or not asked:
        parser.error(f"--strategies: {unknown or 'none'}; choose from {', '.join(STRATEGIES)}")
    run_now = tuple(s for s in STRATEGIES if s in asked)
    partial = run_now != STRATEGIES
    earlier: dict[int, dict[str, Any]] = {}
    if partial:
        # `next`'s own settings matter only when its curve is the one reused
        checked = tuple(
            k for k in CURVE_SETTINGS if "next" not in run_now or k not in NEXT_SETTINGS
        )
        earlier = _earlier_replicates([_read_study(f, args, parser, checked) for f in args.reuse])
        missing = [k for k in range(first, first + args.replicates) if k not in earlier]
        if missing:  # before minutes of fitting
            parser.error(f"replicate(s) {missing} are not in the --reuse files")
    elif args.reuse:
        parser.error("--reuse takes the curves of strategies not run: use it with --strategies")
    numbers = list(range(first, first + args.replicates))
    with jobs.ray_session(args.ray_address, args.workers):
        done = jobs.run_jobs(
            replicate_job,
            numbers,
            seed=first,
            shared=(args, truth, optimum, run_now),
            ray_address=args.ray_address,
            workers=args.workers,
        )
    for rep, got in zip(numbers, done, strict=True):
        if partial:
            _fill_from(got, earlier[rep], rep, run_now)
        reps.append(got)
    rounds = {s: min(len(r["curves"][s]) for r in reps) - 1 for s in STRATEGIES}
    full_cost = float(np.mean([r["full_grid"]["cost"] for r in reps]))
    full_regret = float(np.mean([r["full_grid"]["regret"] for r in reps]))
    curves = {
        s: [
            {
                k: float(np.mean([r["curves"][s][i][k] for r in reps]))
                for k in ("runs", "cost", "regret", "evpi")
            }
            for i in range(rounds[s] + 1)
        ]
        for s in STRATEGIES
    }
    report(reps, curves, full_cost, full_regret)
    print(f"total {time.perf_counter() - start:.0f} s")
    (out / "study.json").write_text(
        json.dumps({"args": vars(args), "replicates": reps, "mean_curves": curves}, indent=1) + "\n"
    )
    plot(curves, full_cost, full_regret, out / "regret.png")


def report(
    reps: list[dict[str, Any]],
    curves: dict[str, list[dict[str, float]]],
    full_cost: float,
    full_regret: float,
) -> None:
    """Print the mean curves and, per replicate, whether each strategy reached the full
    grid's regret at half its cost or less."""
    half = full_cost / 2
    print(
        f"\nmean of {len(reps)} replicate(s): paper full grid regret {full_regret:.4f} at "
        f"cost {full_cost:,.0f}; target: that regret by {half:,.0f}"
    )
    for strategy, curve in curves.items():
        hit = [p for p in curve if p["regret"] <= full_regret and p["cost"] <= half]
        first = f"reached at cost {hit[0]['cost']:,.0f}" if hit else "not reached"
        pts = ", ".join(f"{p['cost']:,.0f}:{p['regret']:.4f}" for p in curve)
        evpi = ", ".join(f"{p['evpi']:.4f}" for p in curve)
        print(f"  {strategy:<6} mean (cost:regret) {pts}; {first}")
        print(f"  {'':<6} mean posterior EVPI {evpi}")
        hits = []
        for k, r in enumerate(reps):
            ref = r["full_grid"]["regret"]
            got = [
                p
                for p in r["curves"][strategy]
                if p["regret"] <= ref and p["cost"] <= r["full_grid"]["cost"] / 2
            ]
            number = r.get("replicate", k)
            hits.append(f"rep {number}: " + (f"yes at {got[0]['cost']:,.0f}" if got else "no"))
        print(f"  {'':<6} full grid's regret at half its cost, per replicate: {'; '.join(hits)}")


def plot(
    curves: dict[str, list[dict[str, float]]], full_cost: float, full_regret: float, path: Path
) -> None:
    from bayesscale.report.figures.style import PALETTE, new_figure, paper_style

    with paper_style():
        fig, axes = new_figure(1, 2, panel=(3.4, 2.6))
        for j, (key, what) in enumerate(
            (("regret", "regret under the truth"), ("evpi", "posterior EVPI"))
        ):
            ax = axes[0, j]
            for k, (strategy, curve) in enumerate(curves.items()):
                ax.plot(
                    [p["cost"] for p in curve],
                    [p[key] for p in curve],
                    "o-",
                    color=PALETTE[k],
                    label=strategy,
                )
            if key == "regret":
                ax.axhline(full_regret, color="grey", ls="--", lw=0.8, label="paper full grid")
            ax.axvline(full_cost / 2, color="grey", ls=":", lw=0.8, label="half its cost")
            ax.set_xlabel("cumulative cost of the chosen runs")
            ax.set_ylabel(what + " (mean)")
            if j == 0:
                ax.legend()
        fig.savefig(path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
