"""The recipe's decision as a sweep file that ``bayesscale plan`` accepts.

``bayesscale recipe FIT.nc --budget B --sweep BASE.toml --sweep-out DECISION.toml`` writes the
decision at budget ``B`` (``decision``, :func:`bayesscale.recipe.solve.recipe`: purchased units
per axis) as runs, so that the recipe's prediction can be run and then checked against its
outcome (``bayesscale check FIT.nc OBS.csv`` on the ingested runs), as the paper checks its
held-out optimum.

* **Settings**: one ``[[grid.point]]`` per setting of the recipe that the base sweep runs (its
  model, algorithm and domain exactly a ``[[models]] name``, one of ``algorithms`` and the
  ``domain`` of the base spec, as ``bayesscale next`` matches them:
  :func:`bayesscale.design.sweep_file.check_runnable`). The others are left out and listed
  (``skipped``); with ``strict=True`` (settings the user named) one the base spec cannot run
  is an error, and so is having none to write.
* **Whole numbers**: each axis is rounded to the nearest whole number (halves up), at least 1;
  environments and tasks are then capped at the distinct ones the base spec's pool holds for
  training, counted as ``plan`` counts them
  (:func:`bayesscale.design.sweep_file.pool_caps`, the caps ``next`` puts on its candidates),
  so that the sizes written are the ``n_envs`` / ``n_tasks`` ``plan`` realises.
  A capped axis is listed per point (``capped``) and said (:meth:`DecisionSweep.notes`),
  never silently. A column ``plan`` needs that the fit has no axis for takes the base spec's
  anchor (``filled``).
* **Seeds**: ``seeds`` (default 3, the paper's protocol) after the base spec's largest seed
  (:func:`bayesscale.design.sweep_file.first_seed`).
* The rest of the file is the base spec, paths made absolute
  (:func:`bayesscale.design.sweep_file.next_sweep_text`), named ``<base name>-recipe``; its
  header comments say what the recipe asked for and what was written.

Example
-------
>>> from bayesscale.recipe.solve import recipe
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> from bayesscale.verl.sweep import parse_sweep_spec
>>> fit = synthetic_fit(draws=10, spread=0.0)
>>> base = parse_sweep_spec(
...     'name = "base"\\npool = "/data/pool.jsonl"\\ndomain = "math"\\n'
...     '[[models]]\\nname = "S0"\\npath = "org/s0"\\n'
... )
>>> ds = recipe(fit, [2e3], multipliers=False)
>>> out = decision_sweep(ds, fit, base, caps={"n_envs": 2, "n_tasks": 5})  # a tiny pool
>>> [(p.setting, p.capped) for p in out.points]
[('S0 | grpo | math', {'env': 2, 'task': 5})]
>>> out.seeds, out.skipped
((3, 4, 5), ('S1 | grpo | math',))
>>> print(out.text[out.text.index("[[grid.point]]") :])  # doctest: +ELLIPSIS
[[grid.point]]
n_envs = 2
n_tasks = 5
rollouts = ...
seeds = [3, 4, 5]
models = ["S0"]
algorithms = ["grpo"]
label = "recipe:2000"
<BLANKLINE>
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.core.geometric import Posynomial
from bayesscale.design import sweep_file
from bayesscale.design.results import DesignError
from bayesscale.law.posterior import axis_columns, setting_keys
from bayesscale.verl.sweep import AXIS_COLUMNS, SweepSpec, parse_sweep_spec

DEFAULT_SEEDS = 3  # the paper's protocol: three seeds per configuration
LABEL = "recipe"  # the manifest's sweep_axis is "recipe:<budget>"
SHOWN = 5  # settings left out named in the note (the JSON lists every one)


@dataclass(frozen=True)
class DecisionPoint:
    """One setting's decision: what the recipe asked for (purchased units, per axis) and the
    whole numbers written (per axis); ``capped``: axis -> the pool's limit, where the decision
    asked for more than it holds."""

    setting: str
    asked: dict[str, float]
    sizes: dict[str, int]
    capped: dict[str, int] = field(default_factory=dict)
    cost: float = math.nan  # what the written sizes cost under the recipe's money cost
    label: str = ""  # the manifest's sweep_axis: "recipe:<budget>", a baseline's, or several


@dataclass(frozen=True)
class DecisionSweep:
    """The decision at one budget as a sweep file (``text``, TOML) and what went into it."""

    budget: float
    currency: str
    axes: tuple[str, ...]
    columns: dict[str, str]
    points: tuple[DecisionPoint, ...]
    seeds: tuple[int, ...]
    skipped: tuple[str, ...]
    filled: dict[str, int]
    caps: dict[str, float]  # axis -> the distinct units the pool holds for training
    cells: int  # the base spec's [alignment] cells
    text: str
    priced_cells: float | None = None  # the cells per run the recipe's cost assumed, if fixed

    def bounds_hint(self) -> str:
        """``env=1:20,task=1:135``: the recipe bounds that keep a decision within the pool."""
        return ",".join(f"{a}=1:{self.caps[a]:g}" for a in self.axes if a in self.caps)

    def notes(self) -> list[str]:
        """One line per thing the user must know: capped axes (``warning:``), settings left
        out, columns taken from the base spec, sizes ``plan`` cannot align."""
        out = []
        if self.priced_cells is None:
            out.append(
                f"warning: the recipe priced trajectories per task (tasks x rollouts, or every "
                f"task in every environment), but each run of the base sweep trains on "
                f"[alignment] cells = {self.cells:,}: its trajectories are {self.cells:,} x "
                f"rollouts. For a decision priced as these runs are, put [cost] trajectories = "
                f'"fixed-cells" and cells = {self.cells} in the prices file (--prices)'
            )
        for p in self.points:
            if p.capped:
                what = ", ".join(
                    f"{a} {p.asked[a]:,.1f} -> {n:,}" for a, n in sorted(p.capped.items())
                )
                out.append(
                    f"warning: {p.setting}: the decision asks for more than the base sweep's "
                    f"pool holds for training; capped: {what} (for a decision within the "
                    f"pool: --bounds {self.bounds_hint()}, or bounds= in Python)"
                )
        if self.skipped:
            shown = "; ".join(self.skipped[:SHOWN])
            more = len(self.skipped) - SHOWN
            out.append(
                f"note: {len(self.skipped)} setting(s) left out, the base sweep does not run them "
                f"(model / algorithm / domain): {shown}"
                + (f"; and {more} more" if more > 0 else "")
            )
        if self.filled:
            what = ", ".join(f"{c} = {n}" for c, n in self.filled.items())
            out.append(
                f"note: the fit has no axis for {', '.join(self.filled)}: written at the base "
                f"sweep's anchor(s), {what}"
            )
        big = {
            f"{self.columns[a]}={p.sizes[a]}"
            for p in self.points
            for a in self.axes
            if self.columns[a] in (names.N_ENVS, names.N_TASKS) and p.sizes[a] > self.cells
        }
        if big:
            out.append(
                f"warning: {', '.join(sorted(big))} exceed the base sweep's [alignment] cells = "
                f"{self.cells}: plan cannot cover them with that many cells; raise cells"
            )
        return out

    def format_text(self, path: str | Path | None = None) -> str:
        """What was written, one line per point, and the next command."""
        where = f" -> {path}" if path is not None else ""
        head = (
            f"decision at budget {self.budget:,.6g} {self.currency} as a sweep file{where}: "
            f"{len(self.points)} point(s) x {len(self.seeds)} seed(s) "
            f"({', '.join(str(s) for s in self.seeds)})"
        )
        lines = [head]
        for p in self.points:
            sizes = ", ".join(
                f"{self.columns[a]} = {p.sizes[a]:,} (asked {p.asked[a]:,.1f}"
                + (", pool cap)" if a in p.capped else ")")
                for a in self.axes
            )
            lines.append(
                f"  {p.setting} [{p.label}]: {sizes}; costs {p.cost:,.2f} {self.currency} "
                "under the recipe's money cost"
            )
        lines.append(
            f"  (each run generates [alignment] cells = {self.cells:,} x rollouts trajectories)"
        )
        if path is not None:
            lines.append(f"next: bayesscale plan {path} --out SWEEP_DIR")
        return "\n".join(lines) + "\n"

    def to_json(self, path: str | Path | None = None) -> dict[str, Any]:
        return {
            "path": None if path is None else str(path),
            "budget": self.budget,
            "currency": self.currency,
            "seeds": list(self.seeds),
            "points": [
                {
                    "setting": p.setting,
                    "label": p.label,
                    "asked": p.asked,
                    "sizes": {self.columns[a]: n for a, n in p.sizes.items()},
                    "capped": {self.columns[a]: n for a, n in p.capped.items()},
                    "cost": p.cost,
                }
                for p in self.points
            ],
            "skipped": list(self.skipped),
            "filled": self.filled,
            "pool_caps": {self.columns[a]: int(n) for a, n in self.caps.items()},
            "notes": self.notes(),
        }


def whole_size(value: float, cap: float = math.inf) -> tuple[int, bool]:
    """``value`` as a whole number of units: the nearest (halves up), at least 1, at most
    ``cap``; and whether the cap bit.

    >>> whole_size(3959.28), whole_size(0.4), whole_size(2.5), whole_size(151.8, 20)
    ((3959, False), (1, False), (3, False), (20, True))
    """
    if not math.isfinite(value):
        raise DesignError(f"the decision is not a finite number of units: {value}")
    n = max(1, math.floor(value + 0.5))
    if n > cap:
        return int(cap), True
    return n, False


def money(ds: xr.Dataset, sizes: Mapping[str, float]) -> float:
    """What ``sizes`` (purchased units per axis) cost at the recipe's unit prices and under its
    money cost: one monomial per axis, ``c_i prod_j u_j^(a_ij)`` (the powers the recipe
    stores; e.g. trajectories ``c_traj u_task u_traj``), linear where it stores none; NaN
    where an axis has no price."""
    axes = [str(a) for a in ds[names.AXIS_DIM].to_numpy()]
    prices = json.loads(ds.attrs.get(names.ATTR_PRICES, "{}"))
    weights = np.array(
        json.loads(ds.attrs[names.ATTR_COST_WEIGHTS])
        if names.ATTR_COST_WEIGHTS in ds.attrs
        else [float(prices.get(a, math.nan)) for a in axes],
        dtype=float,
    )
    stored = json.loads(ds.attrs.get(names.ATTR_COST_POWERS, "null"))
    powers = np.eye(len(axes)) if stored is None else np.asarray(stored, dtype=float)
    if powers.shape != (len(axes), len(axes)) or np.isnan(weights).any():
        return math.nan
    return float(Posynomial(weights, powers)([float(sizes[a]) for a in axes]))


def pick_budget(budgets: Sequence[float], chosen: float | None = None) -> float:
    """The budget whose decision is written: ``chosen`` (one of ``budgets``, to 1e-9
    relative), or the only one.

    >>> pick_budget([1e3]), pick_budget([1e3, 1e4], 1e4)
    (1000.0, 10000.0)
    """
    if chosen is None:
        if len(budgets) != 1:
            raise DesignError(
                f"{len(budgets)} budgets ({', '.join(f'{b:g}' for b in budgets)}): the decision "
                "is written at one of them; name it"
            )
        return float(budgets[0])
    for b in budgets:
        if math.isclose(b, chosen, rel_tol=1e-9):
            return float(b)
    raise DesignError(
        f"budget {chosen:g} is not among the recipe's budgets ({', '.join(f'{b:g}' for b in budgets)})"
    )


def decision_sweep(
    ds: xr.Dataset,
    fit: xr.DataTree,
    spec: SweepSpec,
    budget: float | None = None,
    *,
    seeds: int = DEFAULT_SEEDS,
    caps: Mapping[str, float] | None = None,
    strict: bool = False,
    note: str = "",
    baselines: bool = False,
) -> DecisionSweep:
    """The decision of the recipe ``ds`` (of ``fit``) at ``budget`` (default: its only one)
    as a sweep file extending ``spec`` (see the module docstring). ``caps``: column
    (``n_envs``, ``n_tasks``) -> the largest size a run may have (default: the distinct units
    ``spec``'s pool holds for training, :func:`~bayesscale.design.sweep_file.pool_caps`, read
    from the pool);
    ``strict``: a setting of ``ds`` that ``spec`` cannot run is an error rather
    than left out; ``note``: comment lines at the top of the file; ``baselines``: also write
    the recipe's baselines at the same budget (``traj_heavy:<budget>``,
    ``chinchilla:<budget>``), so that the decision can be run against them at equal money
    (a point the decision and a baseline share is written once, its labels joined by ``+``).
    A money cost that fixes the cells per run (``[cost] trajectories = "fixed-cells"``) must
    fix ``spec``'s ``[alignment] cells``. Raises
    :class:`~bayesscale.design.results.DesignError` on what cannot be written."""
    if names.DECISION not in ds:
        raise DesignError("the recipe has no decision (computed with decision=False)")
    if not (isinstance(seeds, int) and seeds >= 1):
        raise DesignError(f"seeds must be a whole number >= 1, got {seeds!r}")
    budgets = [float(b) for b in ds[names.BUDGET_DIM].to_numpy()]
    budget = pick_budget(budgets, budget)
    decision = ds[names.DECISION].isel({names.BUDGET_DIM: budgets.index(budget)})
    axes = tuple(str(a) for a in ds[names.AXIS_DIM].to_numpy())
    if names.PARAMS_B in axes:
        raise DesignError(
            "the decision chooses the model size (axis params_b, priced by the prices file): a "
            "sweep runs the models its [[models]] name; recipe without a params_b price for a "
            "decision at each setting's own model"
        )
    columns = axis_columns(fit, axes)
    sweep_file.check_axes(axes, columns)
    keys, runnable, skipped = _runnable(ds, fit, spec, strict)
    pool = sweep_file.pool_caps(spec) if caps is None else caps
    limits = {a: float(pool[c]) for a, c in columns.items() if c in pool}
    present = {columns[a] for a in axes}
    filled = {c: int(spec.anchors[c]) for c in AXIS_COLUMNS.values() if c not in present}
    priced_cells = _priced_cells(ds)
    if priced_cells is not None and not math.isclose(priced_cells, spec.cells):
        raise DesignError(
            f"the recipe's money cost fixes {priced_cells:g} cells per run ([cost] cells), but "
            f"{spec.source} trains each run on [alignment] cells = {spec.cells}: the decision "
            "would be priced for other runs than the ones written; make them equal"
        )
    first = sweep_file.first_seed(spec)
    run_seeds = tuple(range(first, first + seeds))
    asked_by_label = {f"{LABEL}:{budget:g}": decision}
    if baselines:
        units = ds[names.BASELINE_UNITS].isel({names.BUDGET_DIM: budgets.index(budget)})
        for kind in (str(k) for k in units[names.BASELINE_DIM].to_numpy()):
            asked_by_label[f"{kind}:{budget:g}"] = units.sel({names.BASELINE_DIM: kind})
    points = _decision_points(ds, runnable, asked_by_label, axes, limits, budget)
    tables = [
        sweep_file.grid_point(
            p.setting,
            {**{columns[a]: n for a, n in p.sizes.items()}, **filled},
            keys[p.setting],
            spec,
            run_seeds,
            p.label,
        )
        for p in points
    ]
    text = sweep_file.next_sweep_text(spec, tables, _header(note, budget, ds, points), LABEL)
    parse_sweep_spec(text, "the decision's sweep file", Path.cwd())  # what plan reads: checked
    return DecisionSweep(
        budget=budget,
        currency=str(ds.attrs.get(names.ATTR_CURRENCY, "")),
        axes=axes,
        columns=columns,
        points=tuple(points),
        seeds=run_seeds,
        skipped=skipped,
        filled=filled,
        caps={a: float(v) for a, v in limits.items() if a in axes and np.isfinite(v)},
        cells=int(spec.cells),
        text=text,
        priced_cells=priced_cells,
    )


def _runnable(
    ds: xr.Dataset, fit: xr.DataTree, spec: SweepSpec, strict: bool
) -> tuple[dict[str, dict[str, Any]], list[str], tuple[str, ...]]:
    """The recipe's settings' keys, those ``spec`` can run (its models, algorithms and
    domain) and those it cannot (an error with ``strict``, or when none can run)."""
    settings = [str(s) for s in ds[names.SETTING_DIM].to_numpy()]
    keys = setting_keys(fit, settings)
    runnable = sweep_file.runnable_settings(settings, keys, spec)
    skipped = tuple(s for s in settings if s not in runnable)
    if strict:
        for s in skipped:
            sweep_file.check_runnable(s, keys[s], spec)  # raises, naming what does not match
    if not runnable:
        raise DesignError(
            f"{spec.source}: none of the recipe's settings {settings} matches its models "
            f"{[m.name for m in spec.models]}, algorithms {list(spec.algorithms)} and domain "
            f"{spec.domain!r}"
        )
    return keys, runnable, skipped


def _decision_points(
    ds: xr.Dataset,
    runnable: list[str],
    asked_by_label: dict[str, xr.DataArray],
    axes: tuple[str, ...],
    limits: dict[str, float],
    budget: float,
) -> list[DecisionPoint]:
    """One run per runnable setting and label (the decision, the baselines): the sizes asked,
    rounded to whole sizes within the caps and priced; labels that ask for the same sizes of
    a setting share one run."""
    points: list[DecisionPoint] = []
    for s in runnable:
        for label, where in asked_by_label.items():
            asked = {a: float(where.sel({names.AXIS_DIM: a, **_setting(where, s)})) for a in axes}
            if not all(math.isfinite(v) for v in asked.values()):
                raise DesignError(
                    f"{label}: the budget {budget:g} cannot fund this allocation within the "
                    "bounds (the recipe left it out)"
                )
            sizes: dict[str, int] = {}
            capped: dict[str, int] = {}
            for a in axes:
                n, hit = whole_size(asked[a], limits.get(a, math.inf))
                sizes[a] = n
                if hit:
                    capped[a] = n
            same = next((p for p in points if p.setting == s and p.sizes == sizes), None)
            if same is not None:  # one run, both labels
                points[points.index(same)] = DecisionPoint(
                    s, same.asked, sizes, same.capped, same.cost, f"{same.label}+{label}"
                )
                continue
            points.append(DecisionPoint(s, asked, sizes, capped, money(ds, sizes), label))
    return points


def _setting(where: xr.DataArray, setting: str) -> dict[str, str]:
    return {names.SETTING_DIM: setting} if names.SETTING_DIM in where.dims else {}


def _priced_cells(ds: xr.Dataset) -> float | None:
    """The cells per run the recipe's money cost fixed (``[cost] trajectories =
    "fixed-cells"``), or ``None`` when it prices trajectories per task."""
    cells = ds.attrs.get(names.ATTR_FIXED_CELLS, "none")
    return None if cells == "none" else float(cells)


def _header(note: str, budget: float, ds: xr.Dataset, points: Sequence[DecisionPoint]) -> str:
    """The file's comment lines: ``note``, then per setting what the recipe asked for and what
    was written."""
    currency = str(ds.attrs.get(names.ATTR_CURRENCY, ""))
    lines = [note] if note else []
    labels = {part.split(":")[0] for p in points for part in p.label.split("+")}
    what = "the recipe's decision" + (" and its baselines" if labels - {LABEL} else "")
    lines += textwrap.wrap(
        f"{what} at budget {budget:,.6g} {currency} (purchased units), written as "
        "whole numbers (nearest, at least 1), environments and tasks at most what the pool "
        "holds for training:",
        96,
    )
    for p in points:
        sizes = ", ".join(
            f"{a} {p.asked[a]:,.1f} -> {n:,}" + (" (pool cap)" if a in p.capped else "")
            for a, n in p.sizes.items()
        )
        lines.append(f"  {p.setting} [{p.label}]: {sizes}")
    return "\n".join(lines)
