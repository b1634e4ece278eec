"""Which law form holds beyond the sweep: each form's PSIS-LOO and out-of-scale scores, and
their stacking weights.

For each candidate form ``f`` (:mod:`bayesscale.core.forms`: ``power``, ``offset_power``, ``saturating``),
the spec with ``f`` on every axis (:func:`bayesscale.data.spec.with_form`) is

* fitted to the whole table: its PSIS-LOO ``elpd`` (within the sweep);
* refitted once per leave-out rule (by default ``COLUMN=max`` for every axis: the largest
  scale of the axis left out, :mod:`bayesscale.checks.crossval`; where no axis's can be left
  out of the whole table, as in a one-axis-at-a-time design, each axis's own sweep with its
  top left out, as the out-of-scale check does it, :func:`bayesscale.checks.out_of_scale.rules`),
  and the left-out rows predicted from the refit: each row's log predictive density
  ``lpd_i = log mean_d p(y_i | theta_d)``, the coverage of the central ``prob`` interval and
  the MAE. This is the extrapolation analogue of leave-future-out (Bürkner, Gabry & Vehtari
  2020): the next scale of an axis predicted from the smaller ones.

The stacking weights (:mod:`bayesscale.checks.stacking`) maximise the mixture's log score on
the out-of-scale points (every rule's left-out rows), because extrapolation is the use; their
Bayesian-bootstrap interval says whether the data separate the forms. The offset power
contains the power law (a knee of 0), so on data a power law describes the weights need not
be decisive.

Every fit is one job of :func:`bayesscale.jobs.run_jobs` (serially, on local Ray workers or
on a Ray cluster), each seeded by the fit configuration's seed.

Example
-------
>>> scores = compare_forms(table, spec, config=FitConfig(seed=1))  # doctest: +SKIP
>>> scores.stack.weights  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.checks.compare import loo
from bayesscale.checks.crossval import CrossvalError, LeaveOut, split
from bayesscale.checks.heldout import check_prediction, summarise_rows
from bayesscale.checks.out_of_scale import Rule, refit_without
from bayesscale.checks.out_of_scale import rules as own_sweep_rules
from bayesscale.checks.stacking import Stack, weight_spread
from bayesscale.core.forms import DEFAULT_STACK
from bayesscale.core.intervals import DEFAULT_PROB
from bayesscale.data.observations import Table
from bayesscale.data.spec import ModelSpec, with_form
from bayesscale.jobs import run_jobs
from bayesscale.law.predict import predict
from bayesscale.law.stack import (
    ATTR_SEPARATED,
    LOO_ELPD,
    LOO_SE,
    OUT_OF_SCALE_ELPD,
    WEIGHT,
    WEIGHT_LOWER,
    WEIGHT_UPPER,
    stack_tree,
)
from bayesscale.sampling.config import FitConfig

FULL = "all rows"  # the job that fits the whole table (LOO)
HELDOUT = "held-out rows"  # the fold of a held-out table, predicted by the fit to every row


def default_rules(spec: ModelSpec) -> list[str]:
    """``COLUMN=max`` for every axis: the largest scale of each axis left out in turn.

    >>> from bayesscale.data.spec import load_spec
    >>> default_rules(load_spec())
    ['n_envs=max', 'n_tasks=max', 'rollouts=max']
    """
    return [f"{a.column}=max" for a in spec.axes]


def usable_rules(
    table: Table, spec: ModelSpec, rules: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """The rules whose refit the law can be fitted to, and why each other one cannot (e.g. a
    one-axis-at-a-time sweep whose largest environment count is also its only row of some
    task count)."""
    usable, skipped = [], {}
    for rule in rules:
        try:
            split(table, spec, LeaveOut.parse(rule))
        except CrossvalError as exc:
            skipped[rule] = str(exc)
        else:
            usable.append(rule)
    return usable, skipped


@dataclass(frozen=True)
class FormScores:
    """Per form: ``loo`` (elpd, se, p_loo), ``folds`` (per rule: rows, lpd, coverage, MAE)
    and ``lpd`` (the out-of-scale points' log predictive densities, every rule's left-out
    rows in rule order); the ``stack`` of the forms on those points."""

    source: str
    forms: tuple[str, ...]
    rules: tuple[str, ...]
    prob: float
    loo: dict[str, dict[str, float]]
    folds: dict[str, list[dict[str, Any]]]
    lpd: dict[str, np.ndarray]
    stack: Stack
    skipped: dict[str, str]  # default rules left out, and why
    fits: dict[str, xr.DataTree] = field(default_factory=dict, repr=False)  # per form, on every row

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "source": self.source,
            "forms": list(self.forms),
            "leave_out": list(self.rules),
            "prob": self.prob,
            "loo": self.loo,
            "out_of_scale": {
                f: {
                    "elpd": float(np.sum(self.lpd[f])),
                    "points": int(self.lpd[f].size),
                    "folds": self.folds[f],
                }
                for f in self.forms
            },
            "stacking": self.stack.to_json(),
            "skipped_leave_out": self.skipped,
        }

    def summary_text(self) -> str:
        """The comparison as ``bayesscale forms`` prints it."""
        return format_text(self.to_dict())

    def stacked_tree(self) -> xr.DataTree:
        """One fit file of the stack (:mod:`bayesscale.law.stack`): the leading form's fit at
        the root, and the group ``stack`` with each form's weight, interval and scores and
        every other form's fit under ``stack/<form>``."""
        missing = [f for f in self.forms if f not in self.fits]
        if missing:
            raise ValueError(f"the comparison kept no fit of {missing} to stack")
        stack = self.stack
        root_form = self.forms[stack.leader]
        scores: dict[str, list[float]] = {
            WEIGHT: [float(w) for w in stack.weights],
            WEIGHT_LOWER: [float(w) for w in stack.lower],
            WEIGHT_UPPER: [float(w) for w in stack.upper],
            LOO_ELPD: [self.loo[f]["elpd"] for f in self.forms],
            LOO_SE: [self.loo[f]["se"] for f in self.forms],
            OUT_OF_SCALE_ELPD: [float(np.sum(self.lpd[f])) for f in self.forms],
        }
        attrs = {
            ATTR_SEPARATED: int(stack.separated),
            names.ATTR_PROB: stack.prob,
            "out_of_scale_points": int(self.lpd[root_form].size),
            "leave_out": json.dumps(list(self.rules)),
        }
        return stack_tree({f: self.fits[f] for f in self.forms}, root_form, scores, attrs)


@dataclass(frozen=True)
class _Jobs:
    table: Table
    spec: ModelSpec
    config: FitConfig
    prob: float
    heldout: Table | None = None
    keep_fits: bool = False


def _scored(fit: Any, held: Table, prob: float, seed: int, rows: Any, label: str) -> dict[str, Any]:
    """``fit``'s log predictive density of each ``held`` row, the coverage of its central
    ``prob`` interval and the MAE."""
    pred = predict(fit, held, seed=seed, source=held.source, observed=True)
    lpd = pred.log_predictive_density()
    summary = summarise_rows(check_prediction(fit, pred, prob, seed=seed, rows=rows))
    return {
        "leave_out": label,
        "rows": int(lpd.size),
        "elpd": float(np.sum(lpd)),
        "coverage": float(summary[names.COVERAGE]),
        "mae": float(summary[names.MAE]),
        "lpd": np.asarray(lpd, dtype=float),
        "settings": list(pred.setting),
    }


def _form_job(jobs: _Jobs, item: tuple[str, str], _seed: int) -> dict[str, Any]:
    """Fit one form to the whole table (``rule == FULL``: its LOO) or to the table without
    ``rule``'s rows (the left-out rows' lpd, coverage and MAE). Every fit uses the
    configuration's own seed, so a job's result does not depend on the others."""
    from bayesscale.law.inference import fit

    form, rule = item
    if isinstance(rule, Rule):
        return _sweep_job(jobs, form, rule)
    spec = with_form(jobs.spec, form)
    table = jobs.table.under(spec)
    seed = jobs.config.seed
    if rule == FULL:
        tree = fit(table, spec, jobs.config)
        result = loo(tree, table, name=form)
        out: dict[str, Any] = {"elpd": result.elpd, "se": result.se, "p_loo": result.p}
        if jobs.keep_fits:
            out["fit"] = tree
        if jobs.heldout is not None:
            held = jobs.heldout.under(spec)
            out["heldout"] = _scored(tree, held, jobs.prob, seed, None, HELDOUT)
        return out
    part = split(table, spec, LeaveOut.parse(rule))
    refit = fit(part.train, spec, jobs.config)
    scored = _scored(refit, part.held, jobs.prob, seed, part.positions, rule)
    return {**scored, "matched": part.matched}


def _sweep_job(jobs: _Jobs, form: str, rule: Rule) -> dict[str, Any]:
    """Refit one form on an axis's own sweep without its top (the law of that axis alone) and
    score the left-out rows, as :func:`_form_job` scores a rule over the whole table."""
    refit, part = refit_without(rule, form, jobs.table, jobs.spec, jobs.config)
    scored = _scored(refit, part.held, jobs.prob, jobs.config.seed, part.positions, str(rule))
    return {**scored, "matched": part.matched}


def _own_sweeps(table: Table, spec: ModelSpec, skipped: dict[str, str]) -> list[Rule]:
    """Where no ``COLUMN=max`` rule can be refitted (``skipped`` says why), each axis's own
    sweep with its top left out (:func:`bayesscale.checks.out_of_scale.rules`); an error
    where none can be either."""
    usable, untested = own_sweep_rules(table, spec)
    sweeps = [rule for rule in usable.values() if rule.sweep]
    if not sweeps:
        raise CrossvalError(
            "no axis's largest scale can be left out and the law refitted: "
            + "; ".join(f"{r}: {why}" for r, why in {**skipped, **untested}.items())
        )
    return sweeps


def compare_forms(
    table: Table,
    spec: ModelSpec,
    forms: Sequence[str] = DEFAULT_STACK,
    rules: Sequence[str] | None = None,
    config: FitConfig | None = None,
    prob: float = DEFAULT_PROB,
    workers: int | None = None,
    ray_address: str | None = None,
    n_boot: int = 200,
    heldout: Table | None = None,
    keep_fits: bool = False,
) -> FormScores:
    """Each form's LOO and out-of-scale scores on ``table``, and their stacking weights
    (module docstring). ``rules``: leave-out rules (default :func:`default_rules`, those the
    law can be refitted without; a given rule that cannot is an error). ``heldout``: runs
    beyond the sweep that no fit sees, scored by each form's fit to every row (then no rule
    is applied unless given). ``keep_fits``: keep each form's fit to every row, for
    :meth:`FormScores.stacked_tree`."""
    forms = tuple(dict.fromkeys(forms))
    if len(forms) < 2:
        raise ValueError(f"comparing forms needs at least two, got {list(forms)}")
    skipped: dict[str, str] = {}
    chosen: list[str | Rule] = list(rules or ())
    for rule in chosen:
        split(table, spec, LeaveOut.parse(str(rule)))  # a clear error before any fit
    if not chosen and heldout is None:
        whole, skipped = usable_rules(table, spec, default_rules(spec))
        chosen = list(whole) or list(_own_sweeps(table, spec, skipped))
    config = config or FitConfig()
    items = [(f, r) for f in forms for r in (FULL, *chosen)]
    out = run_jobs(
        _form_job, items, config.seed,
        shared=_Jobs(table, spec, config, prob, heldout, keep_fits),
        ray_address=ray_address, workers=workers,
    )  # fmt: skip
    results = dict(zip(items, out, strict=True))
    scored = {
        f: [results[(f, r)] for r in chosen]
        + ([results[(f, FULL)].pop("heldout")] if heldout is not None else [])
        for f in forms
    }
    private = ("lpd", "settings")
    folds = {
        f: [{k: v for k, v in x.items() if k not in private} for x in scored[f]] for f in forms
    }
    lpd = {f: np.concatenate([x["lpd"] for x in scored[f]]) for f in forms}
    # the rows of one setting share its posterior: bootstrap and judge gaps by setting
    settings = [s for x in scored[forms[0]] for s in x["settings"]]
    stack = weight_spread(
        np.column_stack([lpd[f] for f in forms]), forms, n_boot=n_boot, seed=config.seed,
        groups=settings,
    )  # fmt: skip
    return FormScores(
        source=table.source,
        forms=forms,
        rules=tuple(str(r) for r in chosen),
        prob=prob,
        loo={f: {k: v for k, v in results[(f, FULL)].items() if k != "fit"} for f in forms},
        folds=folds,
        lpd=lpd,
        stack=stack,
        skipped=skipped,
        fits={f: results[(f, FULL)].pop("fit") for f in forms if "fit" in results[(f, FULL)]},
    )


def format_text(data: dict[str, Any]) -> str:
    """The comparison as a table per form, the weights and what they say."""
    lines = [f"law forms on {data['source']}", ""]
    pct = round(100 * data["prob"])
    first = data["out_of_scale"][data["forms"][0]]["folds"]
    head = f"  {'form':<14} {'LOO elpd':>10} {'se':>6}  out of scale: {'elpd':>9}"
    lines.append(head + "".join(f"  {fold['leave_out']} (cov{pct}, MAE)" for fold in first))
    stacking = data["stacking"]
    for f in data["forms"]:
        loo_ = data["loo"][f]
        oos = data["out_of_scale"][f]
        folds = "".join(
            f"  {fold['coverage']:.2f}, {fold['mae']:.3f} ({fold['rows']} rows)"
            for fold in oos["folds"]
        )
        lines.append(
            f"  {f:<14} {loo_['elpd']:>10.1f} {loo_['se']:>6.1f}  {'':>14}{oos['elpd']:>9.1f}"
            + folds
        )
    lines.append("")
    weights = ", ".join(
        f"{f} {stacking['weights'][f]:.2f} [{lo:.2f}, {hi:.2f}]"
        for f, (lo, hi) in stacking["interval"].items()
    )
    lines.append(
        f"stacking weights on the {next(iter(data['out_of_scale'].values()))['points']} "
        f"out-of-scale points ({pct}% Bayesian-bootstrap intervals): {weights}"
    )
    for rule, why in data.get("skipped_leave_out", {}).items():
        lines.append(f"not scored: {rule} ({why})")
    best = max(stacking["weights"], key=stacking["weights"].get)
    gaps = ", ".join(
        f"{f} {gap:.1f} ± {'-' if se is None else f'{se:.1f}'}"
        for f, (gap, se) in stacking["elpd_below_leader"].items()
        if f != best
    )
    lines.append(f"out-of-scale log score below {best}'s (± paired se over settings): {gaps}")
    if stacking["separated"]:
        lines.append(f"the data separate the forms: {best} predicts the next scale best")
    else:
        lines.append(
            "the data do not separate the forms (a weight interval overlaps, or a gap is "
            "below 4 or within two standard errors): carry the mixture, or the form that "
            "contains the others, rather than pick one"
        )
    return "\n".join(lines)
