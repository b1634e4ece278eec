"""The package's MAMS sampler against an independent one: nutpie's NUTS on PyMC's own log
density (PyTensor's Numba backend, nutpie's Rust sampler and mass-matrix adaptation; nothing
of the package's JAX translation or driver), on the law model and the bundled reference data.

    .venv/bin/python benchmarks/sampler_agreement.py [--seed 1] [--nutpie-draws 4000]
        [--ess-target 1000] [--defect no-metropolis|kinetic-half]

``--seed 11 --ess-target 400 --nutpie-seed 1 --nutpie-draws 1000`` repeats the test's two
fits exactly (the session's law fit is the package's defaults with seed 11, on 2 cores).

For every scalar of the posterior (every element of every stored variable, 325 on the
reference data) it compares the mean and the 5% and 95% quantiles of the two fits:
``z = (a - b) / sqrt(MCSE_a^2 + MCSE_b^2)``, with ArviZ's MCSE (``method="mean"`` and
``method="quantile"``). It prints the worst ``|z|`` of each statistic and where it falls, the
count beyond 3 against what N(0, 1) expects, the mean and spread of the z-scores, the
Bonferroni bound for the number of comparisons (a family-wise 0.1%), and each fit's wall time,
draws, minimum bulk and tail ESS, divergences and (MAMS) acceptance. ``--defect`` runs the
MAMS fit with a deliberately broken transition (the private hooks of
:func:`bayesscale.sampling.mams.make_chunk`), to see what the comparison can catch.
``tests/sampling/test_nutpie_agreement.py`` runs the same comparison with the default fit and a
shorter nutpie run. It asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
QUANTILES = (0.05, 0.95)
STATISTICS = ("mean", *(f"q{round(100 * p):02d}" for p in QUANTILES))
FAMILY_ALPHA = 0.001  # an exact pair of samplers exceeds the bound with about this chance


@dataclass(frozen=True)
class Agreement:
    """z-scores of the difference of two fits, one row per scalar (``labels``), one column
    per statistic (``STATISTICS``: the mean, the 5% and the 95% quantile)."""

    labels: list[str]
    z: np.ndarray  # (scalar, statistic)

    @property
    def comparisons(self) -> int:
        return int(self.z.size)

    @property
    def bound(self) -> float:
        """Bonferroni: the ``|z|`` that one of ``comparisons`` standard normals exceeds with
        probability ``FAMILY_ALPHA``."""
        return float(stats.norm.isf(FAMILY_ALPHA / 2 / self.comparisons))

    @property
    def worst(self) -> float:
        return float(np.abs(self.z).max())

    @property
    def beyond_3(self) -> int:
        return int((np.abs(self.z) > 3).sum())

    @property
    def expected_beyond_3(self) -> float:
        return float(self.comparisons * 2 * stats.norm.sf(3.0))

    def worst_of(self, column: int) -> tuple[str, float]:
        i = int(np.argmax(np.abs(self.z[:, column])))
        return self.labels[i], float(self.z[i, column])


def _scalars(posterior: xr.Dataset) -> tuple[list[str], np.ndarray]:
    """Every scalar of every variable as rows of a ``(scalar, chain, draw)`` array."""
    labels, blocks = [], []
    for name, var in posterior.data_vars.items():
        values = var.transpose("chain", "draw", ...).to_numpy().astype(float)
        chains, draws = values.shape[:2]
        flat = values.reshape(chains, draws, -1)
        shape = values.shape[2:]
        for i in range(flat.shape[2]):
            index = np.unravel_index(i, shape) if shape else ()
            labels.append(f"{name}[{','.join(str(int(j)) for j in index)}]")
        blocks.append(np.moveaxis(flat, 2, 0))
    return labels, np.concatenate(blocks)


def _estimates(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Means and quantiles (scalar, statistic) of ``x`` (scalar, chain, draw), and their
    MCSEs by ArviZ."""
    from arviz_stats.base import array_stats

    flat = x.reshape(x.shape[0], -1)
    values = [flat.mean(axis=1), *(np.quantile(flat, p, axis=1) for p in QUANTILES)]
    errors = [
        array_stats.mcse(x, method="mean"),
        *(array_stats.mcse(x, method="quantile", prob=p) for p in QUANTILES),
    ]
    return np.stack(values, axis=1), np.stack(errors, axis=1)


def compare(a: xr.Dataset, b: xr.Dataset) -> Agreement:
    """The z-scores of every scalar's mean and 5%/95% quantiles between two posteriors with
    the same variables (``chain`` and ``draw`` dims; any number of draws each)."""
    labels, xa = _scalars(a)
    labels_b, xb = _scalars(b[list(a.data_vars)])
    if labels != labels_b:
        raise ValueError("the two posteriors do not hold the same scalars")
    va, ea = _estimates(xa)
    vb, eb = _estimates(xb)
    return Agreement(labels, (va - vb) / np.hypot(ea, eb))


def describe(agreement: Agreement) -> str:
    z = agreement.z
    lines = [
        f"{len(agreement.labels)} scalars x {len(STATISTICS)} statistics = "
        f"{agreement.comparisons} comparisons; Bonferroni bound (family-wise "
        f"{FAMILY_ALPHA:g}) |z| < {agreement.bound:.2f}",
        f"worst |z| {agreement.worst:.2f}; |z| > 3: {agreement.beyond_3} "
        f"(N(0, 1) expects {agreement.expected_beyond_3:.1f}); z mean {z.mean():+.3f}, "
        f"sd {z.std():.3f}",
    ]
    for j, name in enumerate(STATISTICS):
        label, value = agreement.worst_of(j)
        lines.append(
            f"  {name}: worst {value:+.2f} ({label}), |z| > 3: {int((np.abs(z[:, j]) > 3).sum())}, "
            f"mean {z[:, j].mean():+.3f}, sd {z[:, j].std():.3f}"
        )
    return "\n".join(lines)


def _fit_line(name: str, tree: xr.DataTree, seconds: float) -> str:
    from bayesscale.sampling.diagnostics import convergence_of

    check = convergence_of(tree["posterior"].to_dataset())
    sample_stats = tree["sample_stats"].to_dataset()
    chains, draws = sample_stats.sizes["chain"], sample_stats.sizes["draw"]
    accept = (
        f", acceptance {float(sample_stats['acceptance_rate'].mean()):.3f}"
        if "acceptance_rate" in sample_stats and "tree_depth" not in sample_stats
        else ""
    )
    return (
        f"{name}: {seconds:.1f} s, {chains} x {draws} draws, ESS bulk / tail "
        f"{check.min_ess_bulk:.0f} / {check.min_ess_tail:.0f}, max R-hat {check.max_rhat:.4f}, "
        f"{int(sample_stats['diverging'].sum())} divergences{accept}"
    )


DEFECTS: dict[str, dict[str, Any]] = {
    "no-metropolis": {"_metropolis": False},
    "kinetic-half": {"_kinetic_scale": 0.5},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--nutpie-seed", type=int, default=None, help="default: --seed")
    parser.add_argument("--nutpie-draws", type=int, default=4000)
    parser.add_argument("--nutpie-tune", type=int, default=1000)
    parser.add_argument("--ess-target", type=float, default=1000.0, help="MAMS's ESS target")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--defect", choices=sorted(DEFECTS), default=None)
    args = parser.parse_args()

    from bayesscale.data.observations import load_observations, prepare
    from bayesscale.data.spec import load_spec
    from bayesscale.law.inference import FitConfig, sample
    from bayesscale.law.model import build_law_model
    from bayesscale.sampling import engine, mams

    spec = load_spec()
    table = load_observations(ROOT / "data" / "reference" / "observations.csv", spec)
    design = prepare(table, spec)
    if args.defect:
        engine.make_mams_chunk = functools.partial(mams.make_chunk, **DEFECTS[args.defect])
    ours = FitConfig(
        chains=args.chains,
        seed=args.seed,
        ess_target=args.ess_target,
        max_draws=max(4000, int(4 * args.ess_target)),
        progress=False,
    )
    theirs = FitConfig(
        sampler="nutpie",
        chains=args.chains,
        seed=args.seed if args.nutpie_seed is None else args.nutpie_seed,
        draws=args.nutpie_draws,
        tune=args.nutpie_tune,
        progress=False,
    )
    fits = {}
    for name, config in (("MAMS", ours), ("nutpie", theirs)):
        tic = time.perf_counter()
        tree, _ = sample(build_law_model(design), config)
        fits[name] = tree
        print(_fit_line(name, tree, time.perf_counter() - tic), flush=True)
    if args.defect:
        print(f"(MAMS with the defect {args.defect}: {DEFECTS[args.defect]})")
    agreement = compare(
        fits["MAMS"]["posterior"].to_dataset(), fits["nutpie"]["posterior"].to_dataset()
    )
    print(describe(agreement))


if __name__ == "__main__":
    main()
