"""How far a ``--preview`` fit (the Laplace approximation) is from the full fit.

    .venv/bin/python benchmarks/preview.py [--seed 1]

Fits the reference data twice, with the default sampler and as a preview, and prints for
the population exponents, the per-setting exponents, the concentration and the spreads: the
medians of both, the full fit's 90% interval, where the preview's median falls in the full
posterior (its percentile), and the ratio of the 90% interval widths (preview / full).
It asserts nothing; docs/speed.md quotes what it printed.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    from bayesscale import names
    from bayesscale.data.observations import load_observations
    from bayesscale.data.spec import load_spec
    from bayesscale.law.inference import FitConfig, fit

    spec = load_spec()
    table = load_observations(ROOT / "data" / "reference" / "observations.csv", spec)
    tic = time.perf_counter()
    full = fit(table, spec, FitConfig(seed=args.seed, progress=False))
    full_s = time.perf_counter() - tic
    tic = time.perf_counter()
    preview = fit(table, spec, FitConfig(seed=args.seed, progress=False).as_preview())
    preview_s = time.perf_counter() - tic
    print(f"full fit {full_s:.1f} s, preview {preview_s:.1f} s (fit calls, this process)\n")

    print("quantity | full median [90%] | preview median | percentile in full | width ratio")
    worst_pct, ratios = [], []
    for var in (
        names.ALPHA_POP,
        names.ALPHA,
        names.AMPLITUDE,
        names.LOSS_FLOOR,
        names.CONCENTRATION,
        names.ALPHA_SPREAD,
    ):
        a = full["posterior"][var].stack(s=("chain", "draw")).transpose("s", ...).values
        b = preview["posterior"][var].stack(s=("chain", "draw")).transpose("s", ...).values
        a = a.reshape(a.shape[0], -1)
        b = b.reshape(b.shape[0], -1)
        lo, med, hi = np.quantile(a, [0.05, 0.5, 0.95], axis=0)
        plo, pmed, phi = np.quantile(b, [0.05, 0.5, 0.95], axis=0)
        pct = (a <= pmed).mean(axis=0)
        ratio = (phi - plo) / (hi - lo)
        worst_pct.append(np.abs(pct - 0.5).max())
        ratios.append(ratio)
        if a.shape[1] <= 3:
            for j in range(a.shape[1]):
                print(
                    f"{var}[{j}] | {med[j]:.4g} [{lo[j]:.4g}, {hi[j]:.4g}] | {pmed[j]:.4g} | "
                    f"{pct[j]:.2f} | {ratio[j]:.2f}"
                )
        else:
            print(
                f"{var} ({a.shape[1]} values) | | | percentiles {pct.min():.2f}-{pct.max():.2f} | "
                f"width ratios {ratio.min():.2f}-{ratio.max():.2f} (median {np.median(ratio):.2f})"
            )
    print(
        f"\nlargest |percentile - 0.5| of a preview median in the full posterior: "
        f"{max(worst_pct):.2f}; interval width ratios "
        f"{min(r.min() for r in ratios):.2f}-{max(r.max() for r in ratios):.2f}"
    )


if __name__ == "__main__":
    main()
