"""Stand-in for ``python -m verl.trainer.main_ppo`` in the launch tests: no training.

Takes the same Hydra overrides, reads ``$VERL_FILE_LOGGER_PATH`` and writes a log in verl's
file-logger format (``{"step": n, "data": {...}}`` per line) with per-step
``perf/total_num_tokens`` and ``val-core/<data_source>/acc/mean@N`` at every ``test_freq``
and at the last step. A JSON control file (``--control PATH``) sets how long a run takes
(``sleep``), which runs fail on their first attempt (``fail_first``), and where to append
start/end events (``events``) so tests can check how many ran at once.

    python fake_verl.py --control ctl.json trainer.total_training_steps=8 ...
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq


def main(argv: list[str]) -> int:
    control: dict = {}
    if argv[:1] == ["--control"]:
        control = json.loads(Path(argv[1]).read_text())
        argv = argv[2:]
    if "--cfg" in argv:
        print("fake verl: --cfg job")
        return 0
    over = dict(a.split("=", 1) for a in argv)
    log_path = Path(os.environ["VERL_FILE_LOGGER_PATH"])
    if not log_path.is_absolute():
        print("VERL_FILE_LOGGER_PATH must be absolute", file=sys.stderr)
        return 3
    run = over["trainer.experiment_name"]
    steps = int(over["trainer.total_training_steps"])
    test_freq = int(over["trainer.test_freq"])
    rollouts = int(over["actor_rollout_ref.rollout.n"])
    n_val = int(over.get("actor_rollout_ref.rollout.val_kwargs.n", "1"))
    m = re.search(r"train-e(\d+)-t(\d+)", over["data.train_files"])
    envs, tasks = (int(m[1]), int(m[2])) if m else (1, 1)
    # ParquetFile, not pandas or pq.read_table (which imports pandas): importing pandas took
    # 0.3 of the 0.5 s a run took, and a test launches the example's 78 runs
    val = pq.ParquetFile(over["data.val_files"]).read(columns=["data_source"])
    sources = sorted(set(val.column("data_source").to_pylist()))
    events = control.get("events")

    def event(kind: str) -> None:
        if events:
            with open(events, "a") as fh:
                fh.write(
                    json.dumps({"run": run, "kind": kind, "t": time.time(), "log": str(log_path)})
                    + "\n"
                )

    event("start")
    time.sleep(float(control.get("sleep", 0)))
    fail = run in control.get("fail_first", []) and "attempt-1" in str(log_path)
    acc = min(0.95, 0.1 + 0.03 * math.log2(envs * tasks * rollouts))
    # as verl's FileLogger: the launcher must have made the folder
    with open(log_path, "wb", buffering=0) as fh:
        for step in range(0, steps + 1):
            data: dict = {}
            if step > 0:
                data["training/global_step"] = step
                data["perf/total_num_tokens"] = 1000 * rollouts
            if step % test_freq == 0 or step == steps:
                for ds in sources:
                    data[f"val-core/{ds}/acc/mean@{n_val}"] = acc * (0.5 + 0.5 * step / steps)
            fh.write(json.dumps({"step": step, "data": data}).encode() + b"\n")
            if fail and step == steps // 2:
                event("end")
                print("fake verl: simulated crash", file=sys.stderr)
                return 1
    event("end")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
