"""How fast the default fits are, beside PyMC's default NUTS on the same model and data.

    .venv/bin/python benchmarks/fit_reference.py [--fits law,pricing,chinchilla]
        [--baseline pymc] [--samplers bayesscale,nuts] [--scaling 1,4,16] [--seed 1]
        [--json out.json]

For each fit (the law on ``data/reference/observations.csv``, the pricing model on
``data/pricing/pricing.csv``, the Chinchilla law on ``../shared/external``) it runs, each in
a fresh process so that nothing is shared but what is meant to be:

* **cold**: the default sampler (``FitConfig()``), with an empty compilation cache;
* **warm**: the same again, the cache now holding the compiled sampler (a refit of the same
  model and data, as after a spec-neutral change or in a second session);
* **PyMC's default NUTS** (``pm.sample`` with ``nuts_sampler="pymc"`` and PyMC's default
  chains, warm-up, draws and target acceptance) on the same PyMC model, twice: a first run
  that compiles the model's C code into PyTensor's cache, and a second that finds it there.
  Ours cold is compared with PyMC's first run, ours warm with its second.

``--samplers bayesscale,nuts`` times the package's NUTS (``--sampler nuts``, the default until
stop 29) the same way, cold and warm, beside the default (MAMS).

Every process uses one PyTensor cache of this run's own, primed first by sampling a small
model of another kind (eight schools): PyTensor's general-purpose ops are compiled, as on
any machine where PyMC ran before, but nothing of these models. Until stop 23 the
benchmark used the user's PyTensor cache, warm or cold as the machine's history had left it:
on a machine where PyTensor had never run, PyMC's single run of the law spent 18 s compiling
(56.5 s in all), against 5.7-6.9 s where it had.

It prints wall seconds of the fit call (model building, compilation, warm-up, sampling,
diagnostics; Python's imports are shown apart), compile seconds, draws per chain, the
smallest bulk and tail ESS and largest R-hat over every stored quantity, divergences, and
the speed-up (PyMC's wall over ours, and the same per effective draw). ``--scaling`` fits
data simulated by the package (``simulate.paper_truth(copies=k)``: 21 k settings, 1,008 k
rows) with the default sampler, warm, and prints wall seconds against rows.

Targets (issue 10, 2 cores): law <= 30 s, pricing <= 30 s, Chinchilla <= 15 s, >= 8x PyMC's
default, ESS >= 400, R-hat <= 1.01, 0 divergences, scaling no worse than linear in rows. This
prints what it measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXTERNAL = ROOT.parent / "shared" / "external" / "chinchilla_points.csv"
COLUMNS = [
    "fit",
    "engine",
    "rows",
    "wall_s",
    "import_s",
    "compile_s",
    "chains",
    "draws",
    "min_ess_bulk",
    "min_ess_tail",
    "max_rhat",
    "divergences",
    "ess_per_s",
]


def prime() -> dict[str, Any]:
    """Sample a small model unlike ours with PyMC (eight schools, non-centred), so that
    PyTensor's cache holds its general-purpose ops' C code but nothing of our models."""
    import numpy as np
    import pymc as pm

    tic = time.perf_counter()
    effects = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    errors = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        z = pm.Normal("z", 0.0, 1.0, shape=8)
        pm.Normal("y", mu + tau * z, errors, observed=effects)
        pm.sample(draws=20, tune=20, chains=2, progressbar=False, random_seed=0)
    return {"fit": "primer", "wall_s": round(time.perf_counter() - tic, 1)}


def worker(kind: str, engine: str, seed: int, copies: int) -> dict[str, Any]:
    """One fit in this process; returns its measurements."""
    if kind == "primer":
        return prime()
    start = time.perf_counter()
    from bayesscale.data.fitfile import diagnose
    from bayesscale.data.observations import Table, load_observations, validate
    from bayesscale.data.spec import load_spec
    from bayesscale.law.inference import FitConfig, fit

    imports = time.perf_counter() - start
    if engine == "pymc":
        # PyMC's own defaults: pm.sample(draws=1000, tune=1000, chains=max(2, cores),
        # target_accept=0.8), only the NUTS implementation named explicitly.
        config = FitConfig(
            sampler="pymc",
            chains=max(2, os.cpu_count() or 1),
            draws=1000,
            tune=1000,
            target_accept=0.8,
            seed=seed,
            progress=False,
            ess_target=0,
        )
    else:  # one of the package's own samplers: bayesscale (MAMS) or nuts
        config = FitConfig(sampler=engine, seed=seed, progress=False)
    tic = time.perf_counter()
    if kind == "pricing":
        from bayesscale.pricing.fit import fit_pricing
        from bayesscale.pricing.spec import load_pricing_spec
        from bayesscale.pricing.summary import pricing_diagnostics
        from bayesscale.pricing.table import load_pricing
        from bayesscale.sampling.config import PRICING_TARGET_ACCEPT

        if engine != "pymc":
            config = FitConfig(
                sampler=engine, seed=seed, progress=False, target_accept=PRICING_TARGET_ACCEPT
            )
        pricing_spec = load_pricing_spec()
        pricing_table = load_pricing(ROOT / "data" / "pricing" / "pricing.csv", pricing_spec)
        tree = fit_pricing(pricing_table, pricing_spec, config)
        check = pricing_diagnostics(tree)
        rows = len(pricing_table.frame)
    else:
        if kind == "chinchilla":
            from bayesscale.data.external import read_chinchilla

            spec = load_spec("chinchilla")
            frame, digest = read_chinchilla(EXTERNAL)
            table = Table(validate(frame, spec, str(EXTERNAL)), str(EXTERNAL), digest)
        elif kind == "law":
            spec = load_spec()
            table = load_observations(ROOT / "data" / "reference" / "observations.csv", spec)
        else:  # simulated, ``copies`` x 21 settings
            from bayesscale.data.observations import frame_sha256
            from bayesscale.data.simulate import paper_truth, per_axis_design, simulate

            truth = paper_truth(seed=seed, copies=copies)
            frame = simulate(truth, per_axis_design(truth), seed=seed)
            spec = load_spec()
            table = Table(validate(frame, spec, "simulated"), "simulated", frame_sha256(frame))
        tree = fit(table, spec, config)
        check = diagnose(tree)
        rows = len(table.frame)
    wall = time.perf_counter() - tic
    ess = min(check.min_ess_bulk, check.min_ess_tail)
    return {
        "fit": kind if kind != "simulated" else f"simulated x{copies}",
        "engine": engine,
        "rows": rows,
        "wall_s": round(wall, 1),
        "import_s": round(imports, 1),
        "compile_s": tree.attrs.get("compile_seconds"),
        "chains": int(tree["posterior"].sizes["chain"]),
        "draws": int(tree["posterior"].sizes["draw"]),
        "min_ess_bulk": round(check.min_ess_bulk),
        "min_ess_tail": round(check.min_ess_tail),
        "max_rhat": round(check.max_rhat, 4),
        "divergences": check.divergences,
        "ess_per_s": round(ess / wall, 1),
    }


def run_worker(
    kind: str, engine: str, seed: int, cache: str, pytensor: str, copies: int = 1
) -> dict[str, Any]:
    """One fit in a fresh process: JAX's compilation cache in ``cache``, PyTensor's in
    ``pytensor``."""
    env = dict(os.environ, BAYESSCALE_CACHE_DIR=cache)
    folder = f"base_compiledir={pytensor}"
    env["PYTENSOR_FLAGS"] = ",".join(f for f in (env.get("PYTENSOR_FLAGS"), folder) if f)
    command = [
        sys.executable,
        __file__,
        "--worker",
        kind,
        "--engine",
        engine,
        "--seed",
        str(seed),
        "--copies",
        str(copies),
    ]
    tic = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"worker {kind}/{engine} failed with status {done.returncode}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["process_s"] = round(time.perf_counter() - tic, 1)
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fits", default="law,pricing,chinchilla")
    parser.add_argument("--baseline", default="pymc", help="'pymc' or 'none'")
    parser.add_argument(
        "--samplers",
        default="bayesscale",
        help="the package's own samplers to time, e.g. bayesscale,nuts (MAMS and NUTS)",
    )
    parser.add_argument("--scaling", default="", help="copies of the 21 settings, e.g. 1,4,16")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--engine", default="bayesscale", help=argparse.SUPPRESS)
    parser.add_argument("--copies", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.engine, args.seed, args.copies)))
        return

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as cold_root:
        pytensor = str(Path(cold_root) / "pytensor")
        run_worker("primer", "pymc", args.seed, str(Path(cold_root) / "primer"), pytensor)
        for kind in [k for k in args.fits.split(",") if k]:
            cache = str(Path(cold_root) / kind)
            for own in [o for o in args.samplers.split(",") if o]:
                own_cache = str(Path(cold_root) / f"{kind}-{own}")
                cold = run_worker(kind, own, args.seed, own_cache, pytensor)
                cold["engine"] = f"{own} (cold cache)"
                warm = run_worker(kind, own, args.seed, own_cache, pytensor)
                warm["engine"] = f"{own} (warm cache)"
                rows += [cold, warm]
            if args.baseline == "pymc":
                for run in ("first", "second"):
                    row = run_worker(kind, "pymc", args.seed, cache, pytensor)
                    row["engine"] = f"pymc ({run} run)"
                    rows.append(row)
        for copies in [int(c) for c in args.scaling.split(",") if c]:
            cache = str(Path(cold_root) / f"sim{copies}")
            row = run_worker("simulated", "bayesscale", args.seed, cache, pytensor, copies)
            row["engine"] = "bayesscale (cold cache)"
            rows.append(row)

    print(
        f"\n{os.cpu_count()} cores; wall_s is the fit call, import_s Python's imports before it\n"
    )
    print(" | ".join(COLUMNS))
    for row in rows:
        print(" | ".join(str(row.get(c, "")) for c in COLUMNS))
    by_engine = {(str(r["fit"]), str(r["engine"])): r for r in rows}
    pairs = (("cold cache", "first run"), ("warm cache", "second run"))
    for kind in dict.fromkeys(str(r["fit"]) for r in rows):
        for own, (mine, their) in itertools.product(args.samplers.split(","), pairs):
            ours = by_engine.get((kind, f"{own} ({mine})"))
            theirs = by_engine.get((kind, f"pymc ({their})"))
            if ours and theirs:
                ratio = float(theirs["wall_s"]) / float(ours["wall_s"])
                per_ess = float(ours["ess_per_s"]) / max(float(theirs["ess_per_s"]), 1e-9)
                print(
                    f"{kind}: {own} ({mine}) is {ratio:.1f}x faster than PyMC's default "
                    f"NUTS ({their}) in wall time, {per_ess:.1f}x in effective draws per second"
                )
    scaled = [r for r in rows if str(r["fit"]).startswith("simulated")]
    if len(scaled) > 1:
        print(
            "\nscaling: rows, wall_s without compilation, draws per chain, seconds per 1,000 "
            "rows and per 1,000 draws"
        )
        for r in scaled:
            wall = float(r["wall_s"]) - float(r["compile_s"] or 0.0)
            per = wall / (int(r["rows"]) / 1000) / (int(r["draws"]) / 1000)
            print(f"  {r['rows']:>6} rows  {wall:>7.1f} s  {r['draws']:>5} draws  {per:.2f} s")
        first, last = scaled[0], scaled[-1]

        def cost(r: dict[str, Any]) -> float:
            return (float(r["wall_s"]) - float(r["compile_s"] or 0.0)) / int(r["draws"])

        growth = (cost(last) / cost(first)) / (int(last["rows"]) / int(first["rows"]))
        print(f"  seconds per draw grew {growth:.2f}x as fast as rows (1.0 = linear)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
