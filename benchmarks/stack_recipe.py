"""The recipe of a stacked law beside its power law's own recipe, and how long each takes.

Run: ``.venv/bin/python benchmarks/stack_recipe.py [--fit STACK.nc] [--forms power,offset_power]
[--budgets 1e3,3.16e4]``. Without ``--fit`` it fits the bundled reference data as a stack of
``--forms`` first (with the out-of-scale refits the stacking weights need: a few minutes on 2
cores). For each budget and axis it prints how far the stack's median per-draw allocation and
its decision move from the power law's (the largest relative move over the settings, and the
median one), unbounded (what the laws say) and bounded at 4x the swept range, with the
stack's weights and both recipes' wall times. The reference data are a
power law by construction; docs/extrapolation.md quotes the output.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import xarray as xr

from bayesscale import names
from bayesscale.data.fitfile import load_fit
from bayesscale.law.mixed_draws import mixture_weights
from bayesscale.law.stack import members
from bayesscale.recipe.solve import recipe


def _moves(stacked: xr.DataArray, power: xr.DataArray) -> str:
    rel = abs(stacked / power - 1.0)
    worst = rel.max(names.SETTING_DIM).to_numpy()
    middle = rel.median(names.SETTING_DIM).to_numpy()
    return "  ".join(f"{w:7.1%} ({m:6.1%})" for w, m in zip(worst, middle, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", type=Path)
    ap.add_argument("--forms", default="power,offset_power")
    ap.add_argument("--budgets", default="1e3,3.16e4")
    args = ap.parse_args()
    budgets = [float(b) for b in args.budgets.split(",")]
    if args.fit is None:
        import bayesscale as bs

        fit = bs.fit("data/reference/observations.csv", progress=False, forms=args.forms.split(","))
        args.fit = Path(tempfile.mkdtemp()) / "stack.nc"
        fit.save(args.fit)
    tree = load_fit(args.fit)
    forms = {m.form: m.tree for m in members(tree) or []}
    if "power" not in forms:
        raise SystemExit(f"{args.fit}: not a stack with the power law among its forms")
    print(f"{args.fit}: weights {mixture_weights(tree)}")
    for within in (None, 4.0):
        _compare(tree, forms["power"], budgets, within)


def _compare(
    tree: xr.DataTree, power_fit: xr.DataTree, budgets: list[float], within: float | None
) -> None:
    print("unbounded" if within is None else f"bounded at {within:g}x the swept range")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fit's caveats; the numbers are the point here
        start = time.perf_counter()
        stacked = recipe(tree, budgets, multipliers=False, within_data=within)
        t_stack = time.perf_counter() - start
        start = time.perf_counter()
        power = recipe(power_fit, budgets, multipliers=False, within_data=within)
        t_power = time.perf_counter() - start
    print(
        f"recipe wall time: stack {t_stack:.1f} s, power law {t_power:.1f} s "
        f"({stacked.sizes[names.CHAIN_DIM]} x {stacked.sizes[names.DRAW_DIM]} draws, "
        f"{stacked.sizes[names.SETTING_DIM]} settings, {len(budgets)} budgets; solver "
        f"fallbacks {stacked.attrs['allocation_solver_fallbacks']})"
    )
    axes = [str(a) for a in stacked[names.AXIS_DIM].to_numpy()]
    print("largest move over the settings (median move), per axis: " + "  ".join(axes))
    sample = (names.CHAIN_DIM, names.DRAW_DIM)
    for b in budgets:
        at = {names.BUDGET_DIM: b}
        per_draw = _moves(
            stacked[names.ALLOCATION].sel(at).median(sample),
            power[names.ALLOCATION].sel(at).median(sample),
        )
        decision = _moves(stacked[names.DECISION].sel(at), power[names.DECISION].sel(at))
        print(f"  {b:>9,.0f}  median per-draw allocation  {per_draw}")
        print(f"  {b:>9,.0f}  decision                    {decision}")


if __name__ == "__main__":
    main()
