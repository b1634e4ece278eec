"""Does the law describe the lab's learning curves better than a saturating alternative?

    .venv/bin/python benchmarks/lab_alternatives.py FIT.nc OBS.csv [HELDOUT.csv] [--seed 1]

FIT.nc is the law fitted to OBS.csv (``bayesscale fit``). The alternative is a logistic curve
in log size per setting ``s``, saturating at 0 and 1 (success cannot exceed 1 however large the
sweep, and falls to 0 rather than to the law's floor as sizes shrink):

    logit p_i = b_s + sum_a c_{s,a} log(D_{i,a} / D_ref,a),   D_ref,a = sqrt(min D_a max D_a)

with the law's likelihood (beta-binomial, one concentration ``phi``) and weak priors
(``b ~ N(0, 1.5)``, ``c ~ N(0, 1)``; ``phi`` the law's concentration prior, read from the fit). It is
sampled by PyMC's NUTS (NumPyro) and both models are scored on the same rows:

* **PSIS-LOO** (``arviz_stats.loo``): elpd of each, the difference law - alternative with its
  standard error ``sqrt(n) sd(d_i)``, and Pareto-k above ArviZ's threshold;
* **held-out runs** (HELDOUT.csv, never fitted): for each model, the 90% central posterior
  predictive interval of each run's successes (beta-binomial noise included), its coverage,
  and the mean absolute error of the predictive median success rate.

It prints one block per model and the difference; nothing is written.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd

from bayesscale import names
from bayesscale.checks.compare import loo
from bayesscale.checks.heldout import DEFAULT_REPLICATES, check
from bayesscale.data.fitfile import fit_spec, load_fit
from bayesscale.data.observations import load_observations

AXES = (names.N_ENVS, names.N_TASKS, names.ROLLOUTS)
SETTING = [names.MODEL, names.ALGORITHM, names.DOMAIN]
PROB = 0.9


def design(frame: pd.DataFrame, reference: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Setting index and log(D / D_ref) per axis; settings and D_ref from ``reference``."""
    settings = reference[SETTING].drop_duplicates().reset_index(drop=True)
    key = frame[SETTING].merge(settings.reset_index(), on=SETTING, how="left")["index"]
    if key.isna().any():
        raise SystemExit("a held-out row's setting is not in the observations")
    ref = np.sqrt(reference[list(AXES)].min() * reference[list(AXES)].max()).to_numpy(float)
    x = np.log(frame[list(AXES)].to_numpy(float) / ref)
    return key.to_numpy(int), x


def fit_alternative(
    frame: pd.DataFrame, seed: int, phi_median: float, phi_log_sd: float
) -> tuple[Any, Any]:
    import pymc as pm

    setting, x = design(frame, frame)
    n_settings = int(setting.max()) + 1
    with pm.Model() as model:
        b = pm.Normal("b", 0.0, 1.5, shape=n_settings)
        c = pm.Normal("c", 0.0, 1.0, shape=(n_settings, len(AXES)))
        phi = pm.LogNormal("phi", np.log(phi_median), phi_log_sd)
        p = pm.math.sigmoid(b[setting] + (c[setting] * x).sum(-1))
        pm.BetaBinomial(
            names.OUTCOME,
            n=frame[names.TRIALS].to_numpy(int),
            alpha=p * phi,
            beta=(1 - p) * phi,
            observed=frame[names.SUCCESSES].to_numpy(int),
        )
        idata = pm.sample(
            draws=1000,
            tune=1000,
            chains=2,
            nuts_sampler="numpyro",
            random_seed=seed,
            progressbar=False,
            idata_kwargs={"log_likelihood": True},
        )
    return model, idata


def alternative_rates(idata: Any, frame: pd.DataFrame, reference: pd.DataFrame) -> np.ndarray:
    """Success rate per (draw, row) of ``frame`` under the alternative's posterior."""
    setting, x = design(frame, reference)
    post = idata["posterior"]
    b = post["b"].values.reshape(-1, post["b"].shape[-1])
    c = post["c"].values.reshape(-1, *post["c"].shape[-2:])
    eta = b[:, setting] + np.einsum("dra,ra->dr", c[:, setting, :], x)
    return 1.0 / (1.0 + np.exp(-eta))


def predictive_check(
    rates: np.ndarray, phi: np.ndarray, frame: pd.DataFrame, seed: int
) -> dict[str, float]:
    """Coverage of the central PROB interval of successes and the MAE of the median rate."""
    rng = np.random.default_rng(seed)
    n = frame[names.TRIALS].to_numpy(int)
    rates = np.repeat(rates, DEFAULT_REPLICATES, axis=0)  # as many draws per row as the law's check
    phi = np.repeat(phi, DEFAULT_REPLICATES)
    p = rng.beta(rates * phi[:, None], (1 - rates) * phi[:, None])
    k = rng.binomial(n[None, :], p)
    lo, hi = np.quantile(k, [(1 - PROB) / 2, (1 + PROB) / 2], axis=0)
    obs = frame[names.SUCCESSES].to_numpy(int)
    median = np.median(k / n, axis=0)
    return {
        names.COVERAGE: float(np.mean((obs >= lo) & (obs <= hi))),
        names.MAE: float(np.mean(np.abs(median - obs / n))),
        "rows": float(len(obs)),
    }


def main(argv: list[str] | None = None) -> int:
    import arviz_stats

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fit")
    parser.add_argument("observations")
    parser.add_argument("heldout", nargs="?")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    law = load_fit(args.fit)
    spec = fit_spec(law)
    table = load_observations(args.observations, spec)
    frame = table.frame
    law_loo = loo(law, table, name="law")

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, idata = fit_alternative(
            frame, args.seed, spec.concentration.median, spec.concentration.log_sd
        )
        alt_loo = arviz_stats.loo(idata, pointwise=True, var_name=names.OUTCOME)
    seconds = time.perf_counter() - t0
    rhat_ds = arviz_stats.rhat(idata["posterior"].to_dataset())
    rhat = max(float(rhat_ds[v].max()) for v in rhat_ds.data_vars)

    law_i = np.asarray(law_loo.elpd_data.elpd_i).ravel()
    alt_i = np.asarray(alt_loo.elpd_i).ravel()
    d = law_i - alt_i
    se = float(np.sqrt(len(d)) * np.std(d, ddof=1))
    alt_k = np.asarray(alt_loo.pareto_k).ravel()
    print(
        f"{args.observations}: {len(frame)} rows, {frame[SETTING].drop_duplicates().shape[0]} settings"
    )
    print(
        f"law         elpd_loo {law_loo.elpd:9.1f} ± {law_loo.se:.1f}   p_loo {law_loo.p:5.1f}"
        f"   Pareto k > {law_loo.good_k:.2f}: {int((law_loo.pareto_k > law_loo.good_k).sum())}"
    )
    print(
        f"logistic    elpd_loo {float(alt_loo.elpd):9.1f} ± {float(alt_loo.se):.1f}   "
        f"p_loo {float(alt_loo.p):5.1f}   Pareto k > {float(alt_loo.good_k):.2f}: "
        f"{int((alt_k > float(alt_loo.good_k)).sum())}   (sampled in {seconds:.1f} s, "
        f"max R-hat {rhat:.3f})"
    )
    print(
        f"law - logistic: {d.sum():.1f} ± {se:.1f} "
        f"({'clear' if abs(d.sum()) > 2 * se else 'within 2 SE'})"
    )
    worst = np.argsort(d)[:3]
    for i in worst:
        row = frame.iloc[i]
        print(
            f"  obs {i} ({row[names.MODEL]}, E={row[names.N_ENVS]}, T={row[names.N_TASKS]}, "
            f"R={row[names.ROLLOUTS]}, seed {row[names.SEED]}): law - logistic {d[i]:.2f}"
        )

    if args.heldout:
        held = load_observations(args.heldout, spec).frame
        checked = check(law, held, prob=PROB, seed=args.seed, source=args.heldout)
        law_check = {k: float(checked.attrs[k]) for k in (names.COVERAGE, names.MAE)}
        law_check["rows"] = float(len(held))
        phi_alt = idata["posterior"]["phi"].values.ravel()
        alt_check = predictive_check(
            alternative_rates(idata, held, frame), phi_alt, held, args.seed
        )
        for name, result in (("law", law_check), ("logistic", alt_check)):
            print(
                f"held-out ({int(result['rows'])} runs) {name:9s} {PROB:.0%} coverage "
                f"{result[names.COVERAGE]:.2f}   MAE of the median rate {result[names.MAE]:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
