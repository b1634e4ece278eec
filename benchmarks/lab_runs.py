"""How long the lab's runs take: per run, per width and axis, and the sweep's wall time.

    .venv/bin/python benchmarks/lab_runs.py SWEEP_DIR [SWEEP_DIR ...]

For each sweep directory (``bayesscale plan`` + ``launch`` of ``lab/sweep.toml`` or
``lab/heldout.toml``) it reads every succeeded run's verl log and prints:

* the training seconds of a run (the sum of its ``timing_s/step``: rollouts, rewards,
  advantages and updates, one core), median and range per model and rollouts;
* the run's seconds from its log's creation (verl's file logger opens it once the trainer's
  imports are done) to its last write: reading the data, training and validation;
* the sweep's wall time: the first log's creation to the last log's last write (Ray's job
  start and the trainer's imports of the first run are not in it).

Nothing is written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bayesscale import names
from bayesscale.verl import manifest as mf


def run_times(sweep: Path) -> pd.DataFrame:
    manifest = mf.read_manifest(sweep)
    rows = []
    for run in manifest[manifest[names.STATUS] == mf.SUCCEEDED].itertuples(index=False):
        log = sweep / str(run.log_path)
        train = 0.0
        with log.open() as fh:
            for line in fh:
                train += float(json.loads(line)["data"].get("timing_s/step", 0.0))
        created = log.parent.stat().st_mtime_ns  # the folder gained the log: its creation
        rows.append(
            {
                "model": run.model,
                "rollouts": int(run.rollouts),
                "train_s": train,
                "wall_s": (log.stat().st_mtime_ns - created) / 1e9,
                "created": created / 1e9,
                "ended": log.stat().st_mtime_ns / 1e9,
            }
        )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for sweep in args.sweeps:
        times = run_times(sweep)
        if times.empty:
            print(f"{sweep}: no succeeded run")
            continue
        span = times["ended"].max() - times["created"].min()
        print(
            f"{sweep}: {len(times)} runs in {span / 60:.1f} min of wall time "
            f"({span / len(times):.1f} s a run); training {times['train_s'].sum() / 60:.1f} "
            "core-minutes"
        )
        for (model, rollouts), g in times.groupby(["model", "rollouts"]):
            print(
                f"  {model:8s} rollouts {rollouts:3d}: {len(g):3d} runs, training "
                f"{np.median(g['train_s']):5.1f} s ({g['train_s'].min():.1f}-"
                f"{g['train_s'].max():.1f}), wall {np.median(g['wall_s']):5.1f} s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
