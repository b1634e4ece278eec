"""The recipe under the exact money cost beside the paper's linearised convention.

Run: ``.venv/bin/python benchmarks/recipe_costs.py [--fit law.nc] [--setting "Qwen3-8B | grpo |
math+code"] [--budgets 1e3,3.16e4,1e6]``. Without ``--fit`` it fits the bundled reference data
first (about 15 s). For each budget it prints, per cost model, the units bought per axis, the
trajectories (tasks x rollouts per task), the money per axis and the success at the per-draw
optimum, as median [5%, 95%] over the posterior draws, unbounded (what the law says) and
bounded at 4x the swept range (what the data vouch for); docs/findings.md quotes it.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.recipe.solve import recipe


def _trio(da: xr.DataArray) -> str:
    q = da.quantile([0.05, 0.5, 0.95], dim=(names.CHAIN_DIM, names.DRAW_DIM)).to_numpy()
    return f"{q[1]:,.3g} [{q[0]:,.3g}, {q[2]:,.3g}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", type=Path)
    ap.add_argument("--setting", default="Qwen3-8B | grpo | math+code")
    ap.add_argument("--budgets", default="1e3,3.16e4,1e6")
    args = ap.parse_args()
    budgets = [float(b) for b in args.budgets.split(",")]
    if args.fit is None:
        import bayesscale as bs

        fit = bs.fit(
            "data/reference/observations.csv", progress=False, out_of_scale=False, forms=["power"]
        )
        path = Path(tempfile.mkdtemp()) / "law.nc"
        fit.save(path)
        tree = fit.tree
    else:
        tree = xr.open_datatree(args.fit)
    for within in (None, 4.0):
        print(f"\n## {'unbounded' if within is None else 'within 4x the swept range'}")
        for model in ("exact", "linearised"):
            ds = recipe(
                tree,
                budgets,
                settings=[args.setting],
                cost_model=model,
                within_data=within,
                decision=False,
            )
            print(f"\n### {model}: {args.setting}")
            for j, b in enumerate(budgets):
                at = {names.SETTING_DIM: 0, names.BUDGET_DIM: j}
                units = ds[names.PURCHASED].isel(at)
                spend = ds[names.SPEND_SHARE].isel(at) * b
                parts = [
                    f"{a} {_trio(units.sel({names.AXIS_DIM: a}))} "
                    f"({_trio(spend.sel({names.AXIS_DIM: a}))} USD)"
                    for a in ds[names.AXIS_DIM].to_numpy()
                ]
                total = float(spend.sum(names.AXIS_DIM).median())
                print(
                    f"- {b:,.0f} USD: "
                    + "; ".join(parts)
                    + f"; trajectories {_trio(ds[names.TRAJECTORIES].isel(at))}; success "
                    f"{_trio(ds[names.SUCCESS_OPTIMUM].isel(at))}; spent {total:,.0f} USD"
                    f" (median); largest factor over the swept max "
                    f"{float(np.nanmax(ds[names.EXTRAPOLATION].isel(at).median(('chain', 'draw')))):.3g}x"
                )


if __name__ == "__main__":
    main()
