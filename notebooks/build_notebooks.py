"""Write the notebooks in this folder from the cells below (``python notebooks/build_notebooks.py``).

The .ipynb files are committed without outputs; tests/test_notebooks.py executes each top to
bottom with ``BAYESSCALE_NOTEBOOK_SMALL=1`` (few draws, a few settings). Edit the cells here,
not the .ipynb files, so the notebooks stay in step with each other and reviewable as text.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

SETUP = """import os
from pathlib import Path

import bayesscale as bs

# CI runs every notebook with BAYESSCALE_NOTEBOOK_SMALL=1: few draws and a few settings, so
# the numbers below are then rough. Unset it for a real analysis.
SMALL = os.environ.get("BAYESSCALE_NOTEBOOK_SMALL") == "1"
ROOT = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()
DATA = ROOT / "data"
CONFIG = (
    bs.FitConfig(chains=2, draws=60, tune=100, seed=1, progress=False, ess_target=0)
    if SMALL
    else bs.FitConfig(seed=1)
)
# bs.fit stacks the power law and the offset power by default (docs/extrapolation.md); the
# small run fits the power law alone, which is faster
FORMS = ["power"] if SMALL else None"""

SUBSET = """spec = bs.load_spec()  # models/agentic_rl.toml
table = bs.load_observations(DATA / "reference" / "observations.csv", spec)
if SMALL:  # three settings of one (algorithm, domain): a fast, still pooled, fit
    table = table.subset(spec, table.settings(spec)[:3])
print(len(table.frame), "runs,", len(table.settings(spec)), "settings")"""

NOTEBOOKS = {
    "refit.ipynb": [
        new_markdown_cell(
            "# Refit the pooled scaling law\n\n"
            "Fit the hierarchical law of `models/agentic_rl.toml` to an observation table, check "
            "convergence, read the exponents with intervals, and draw the law against the data. "
            "The command-line equivalent is `bayesscale fit OBS --out FIT.nc` then "
            "`bayesscale summary FIT.nc`."
        ),
        new_code_cell(SETUP),
        new_code_cell(SUBSET),
        new_markdown_cell(
            "Fit the law. The spec names no axis's form, so `bs.fit` fits the stack of the "
            "power law and the offset power: each form's posterior sampled (bayesscale's MAMS, "
            "chains in parallel, until every quantity has an effective sample size of 400), "
            "each form weighted by how well it predicts the scales its refits leave out. "
            "`forms=['power']` fits the power law alone."
        ),
        new_code_cell(
            "fit = bs.fit(table, spec, CONFIG, out_of_scale=False)  # fit.reach: recipe.ipynb\n"
            "print(fit)\n"
            "print(fit.diagnostics.to_dict())\n"
            "if not fit.diagnostics.ok:\n"
            "    print('NOT CONVERGED:', fit.diagnostics.problems())\n"
            "fit.stack_weights  # each form's weight; fit.forms holds each form's own fit"
        ),
        new_markdown_cell(
            "Population and per-setting exponents: posterior means with 90% equal-tailed "
            "intervals, and the probability of the ordering env > task > traj."
        ),
        new_code_cell("print(fit.summary_text(prob=0.9))"),
        new_code_cell(
            "from bayesscale.report.tables import exponent_table\n\n"
            "print(exponent_table(fit.summary(prob=0.9)).to_markdown())"
        ),
        new_markdown_cell("The forest plot of exponents, and the law along each axis."),
        new_code_cell("fit.plot_exponents();"),
        new_code_cell("fit.plot_law('env');"),
        new_markdown_cell(
            "Save the fit (netCDF; refuses to overwrite unless `overwrite=True`) and load it back."
        ),
        new_code_cell(
            "import tempfile\n\n"
            "path = fit.save(Path(tempfile.mkdtemp()) / 'fit.nc')\n"
            "assert bs.load(path).tree.attrs['data_sha256'] == table.sha256\n"
            "path"
        ),
    ],
    "heldout.ipynb": [
        new_markdown_cell(
            "# Check the law on runs it never saw\n\n"
            "Predict held-out runs at larger scale from the posterior (intervals include "
            "seed-to-seed spread), read the coverage, and do out-of-scale cross-validation: "
            "refit without the largest scale and predict it. The commands are "
            "`bayesscale check FIT.nc HELDOUT.csv` and `bayesscale crossval OBS --leave-out ...`."
        ),
        new_code_cell(SETUP),
        new_code_cell(SUBSET),
        new_code_cell(
            "# the out-of-scale refits are this notebook's subject below (crossval)\n"
            "fit = bs.fit(table, spec, CONFIG, out_of_scale=False, forms=FORMS)\ntree = fit.tree"
        ),
        new_markdown_cell(
            "Held-out runs: `data/reference/heldout.csv` (up to 1,024 environments, 40,960 tasks, "
            "128 rollouts). Rows of settings the fit does not know are an error, unless only the "
            "model size is new and the law has a size term."
        ),
        new_code_cell(
            "from bayesscale.checks.heldout import format_text, load_heldout, summary\n\n"
            "heldout = load_heldout(DATA / 'reference' / 'heldout.csv', tree)\n"
            "heldout = heldout.subset(spec, [s for s in heldout.settings(spec) if s in fit.settings])\n"
            "rows = fit.check(heldout, prob=0.9, source=heldout.source)\n"
            "print(fit.diagnostics.headline() or 'diagnostics: converged')\n"
            "print(format_text(summary(rows)))\n"
            "rows.head()"
        ),
        new_code_cell(
            "from bayesscale.report.figures import plot_heldout, provenance\n\n"
            "plot_heldout(rows, provenance=provenance(tree, heldout));"
        ),
        new_markdown_cell(
            "Out-of-scale cross-validation: leave out the largest number of rollouts per task, refit, "
            "predict the left-out runs."
        ),
        new_code_cell(
            "from bayesscale.checks.crossval import crossval\n"
            "from bayesscale.checks.crossval import format_text as crossval_text\n\n"
            "cv = crossval(table, spec, ['rollouts=max'], CONFIG)\n"
            "print(crossval_text(cv.to_dict()))"
        ),
    ],
    "pricing.ipynb": [
        new_markdown_cell(
            "# Price synthetic data: the discount kappa(r) and the collapse ratio r*\n\n"
            "Fit the pricing model of `models/pricing.toml` to runs mixing synthetic and real "
            "data, and read each method's discount, collapse ratio and their intervals. The "
            "command is `bayesscale price PRICING.csv --out PRICE.nc`."
        ),
        new_code_cell(SETUP),
        new_code_cell(
            "import pandas as pd\n\n"
            "from bayesscale.pricing.spec import load_pricing_spec\nfrom bayesscale.pricing.table import load_pricing, validate_pricing\n\n"
            "pricing_spec = load_pricing_spec()\n"
            "path = DATA / 'pricing' / 'pricing.csv'\n"
            "pricing_table = load_pricing(path, pricing_spec)\n"
            "if SMALL:  # one method per synthesised axis: a fast fit\n"
            "    frame = pd.read_csv(path)\n"
            "    frame = frame[frame['method'].isin(['AWM', 'RLVE', 'SWiRL', 'DreamGym'])]\n"
            "    pricing_table = validate_pricing(frame, pricing_spec, source=str(path))\n"
            "print(len(pricing_table.frame), 'runs of', pricing_table.methods)\n"
            "for exclusion in pricing_table.exclusions:\n"
            "    print('left out:', exclusion)"
        ),
        new_code_cell(
            "price_fit = bs.fit_pricing(pricing_table, pricing_spec, CONFIG)  # accept 0.95\n"
            "print(price_fit)\n"
            "print(price_fit.diagnostics.to_dict())"
        ),
        new_code_cell(
            "from bayesscale.report.tables import pricing_table as paper_pricing_table\n\n"
            "priced = price_fit.summary(prob=0.9)\n"
            "print(price_fit.summary_text(prob=0.9))\n"
            "print(paper_pricing_table(priced).to_latex())"
        ),
        new_markdown_cell("Collapse curves with bands, r* marked with its interval."),
        new_code_cell("price_fit.plot_collapse(quantity='success', table=pricing_table);"),
    ],
    "recipe.ipynb": [
        new_markdown_cell(
            "# The budget recipe with credible intervals\n\n"
            "Propagate the posterior through the exact KKT allocator: how many environments, "
            "tasks and rollouts a budget should buy, per posterior draw, and the one decision "
            "that maximises expected success. The command is "
            "`bayesscale recipe FIT.nc --budget 1e3:1e6:7`."
        ),
        new_code_cell(SETUP),
        new_code_cell(SUBSET),
        new_code_cell("fit = bs.fit(table, spec, CONFIG, forms=FORMS)\ntree = fit.tree"),
        new_markdown_cell(
            "`bs.fit` also checked the law out of scale (one refit per axis without its "
            "largest scales): `fit.reach` is how far beyond the sweep its 90% coverage held, "
            "per axis, and the recipe's headline is bounded there "
            "(`out_of_scale=False` skips those refits; the recipe then assumes 4x)."
        ),
        new_code_cell("fit.reach"),
        new_markdown_cell(
            "Additive money cost at the paper's unit prices ($4.10 per environment, $0.18 per "
            "task, $0.02 per trajectory; `models/prices.toml`), an inventory ceiling of 384 "
            "environments."
        ),
        new_code_cell(
            "import numpy as np\n\n"
            "from bayesscale.recipe.output import summarize\n\n"
            "budgets = np.geomspace(1e3, 1e6, 7)\n"
            "ds = fit.recipe(budgets, bounds={'env': (1, 384)}, max_draws=100)\n"
            "summarize(ds)['purchased'].sel(quantile=0.5).isel(setting=0).to_pandas()"
        ),
        new_markdown_cell(
            "What the recipe can support: the fit's diagnostics verdict, and per axis how many "
            "times the largest swept value the median optimum is (`extrapolation`; a power law "
            "says little far beyond its range). `within_data=4` keeps every axis within 4x."
        ),
        new_code_cell(
            "print(fit.diagnostics.headline() or 'diagnostics: converged')\n"
            "summarize(ds)['extrapolation'].sel(quantile=0.5).isel(setting=0).to_pandas()"
        ),
        new_code_cell(
            "inside = fit.recipe(budgets, within_data=4, max_draws=100)\n"
            "summarize(inside)['purchased'].sel(quantile=0.5).isel(setting=0).to_pandas()"
        ),
        new_code_cell(
            "from bayesscale.report.tables import recipe_table\n\n"
            "print(recipe_table(ds, budgets=budgets[::3]).to_markdown())"
        ),
        new_code_cell(
            "from bayesscale.report.figures import plot_allocation, provenance\n\n"
            "plot_allocation(ds, provenance=provenance(tree), settings=list(ds.setting.values[:2]));"
        ),
        new_markdown_cell("Success along a fixed budget as the split varies, with bands."),
        new_code_cell(
            "from bayesscale.recipe.iso_budget import iso_budget\n"
            "from bayesscale.report.figures import plot_iso_budget\n\n"
            "iso = iso_budget(tree, 1e4, bounds={'env': (1, 384)}, max_draws=100)\n"
            "plot_iso_budget(iso, provenance=provenance(tree), settings=list(iso.setting.values[:2]));"
        ),
        new_markdown_cell(
            "A compute budget instead (FLOPs growing with tasks and rollouts, environments paid "
            "separately and capped at 384): the local exponents `d log D_i / d log C`."
        ),
        new_code_cell(
            "from bayesscale.recipe.compute import compute_recipe\n\n"
            "flops = compute_recipe(tree, [1e6, 1e8], powers={'env': 0}, bounds={'env': (1, 384)})\n"
            "summarize(flops)['recipe_exponent'].sel(quantile=0.5).isel(setting=0).to_pandas()"
        ),
    ],
}


def build(folder: Path = HERE) -> list[Path]:
    written = []
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells)
        for i, cell in enumerate(nb.cells):  # stable ids: the files change only with the cells
            cell["id"] = f"{Path(name).stem}-{i:02d}"
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        path = folder / name
        tmp = path.with_name(f".{name}.tmp")
        nbformat.write(nb, tmp)
        tmp.replace(path)
        written.append(path)
    return written


if __name__ == "__main__":
    for p in build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(p)
