"""Regenerate the golden verl logs in this folder (run in .venv-verl, which has verl 0.9.1).

    .venv-verl/bin/python tests/verl/golden/make_golden_logs.py

0.9 logs are written by verl's own ``verl.utils.tracking.FileLogger`` (orjson: NaN -> null,
numpy scalars serialised); 0.6/0.7 logs by a copy of that version's FileLogger
(``json.dumps``: NaN written as ``NaN``), with its lost-buffer crash simulated by cutting
the last line. Metric names follow ``RayPPOTrainer._val_metrics_update`` and
``compute_throughout_metrics``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


def val_metrics(sources: dict[str, float], n: int = 1, var: str = "acc") -> dict:
    out = {}
    for ds, acc in sources.items():
        ns = [1] + [k for k in (2, 4, 8) if k <= n]
        for k in ns:
            core = "val-core" if k == n else "val-aux"  # mean/maj/best at the largest n
            out[f"{core}/{ds}/{var}/mean@{k}"] = np.float64(acc - 0.01 * (n - k))
            if k > 1:
                out[f"val-aux/{ds}/{var}/std@{k}"] = np.float64(0.2)
                out[f"{core}/{ds}/{var}/best@{k}/mean"] = np.float64(min(1.0, acc + 0.2))
                out[f"val-aux/{ds}/{var}/worst@{k}/mean"] = np.float64(max(0.0, acc - 0.2))
        if var == "acc":
            out[f"val-aux/{ds}/reward/mean@{n}"] = np.float64(acc)
    out["val-aux/num_turns/min"] = np.int64(2)
    out["val-aux/num_turns/max"] = np.int64(2)
    out["val-aux/num_turns/mean"] = np.float64(2.0)
    return out


def train_metrics(step: int, tokens: int | None) -> dict:
    out = {
        "training/global_step": step,
        "training/epoch": 0,
        "actor/entropy": np.float32(0.9 - 0.01 * step),
        "actor/pg_loss": np.float32(0.01),
        "actor/grad_norm": float("nan") if step == 3 else np.float32(0.5),
        "critic/score/mean": np.float32(0.3 + 0.02 * step),
        "response_length/mean": np.float64(310.5),
        "timing_s/gen": np.float64(12.5),
        "timing_s/step": np.float64(40.0),
        "perf/time_per_step": np.float64(40.0),
        "perf/throughput": np.float64(1000.0),
    }
    if tokens is not None:
        out["perf/total_num_tokens"] = tokens
    return out


class FileLogger06:
    """verl 0.6.0 / 0.7.0 ``FileLogger`` (json.dumps; NaN written as NaN)."""

    def __init__(self, path: Path):
        self.fp = open(path, "w")  # noqa: SIM115

    def log(self, data, step):
        data = {k: (v.item() if hasattr(v, "item") else v) for k, v in data.items()}
        self.fp.write(json.dumps({"step": step, "data": data}) + "\n")

    def finish(self):
        self.fp.close()


def logger09(path: Path):
    from verl.utils.tracking import FileLogger

    os.environ["VERL_FILE_LOGGER_PATH"] = str(path)
    return FileLogger("golden", path.stem)


def run(
    logger,
    steps,
    test_freq,
    acc_at,
    sources_of=lambda s: None,
    tokens_at=lambda s: 100_000 + s,
    val_before=True,
    start=1,
    n=1,
    var="acc",
):
    if val_before:
        logger.log(val_metrics(sources_of(start - 1), n=n, var=var), step=start - 1)
    for step in range(start, steps + 1):
        metrics = train_metrics(step, tokens_at(step))
        if step % test_freq == 0 or step == steps:
            metrics.update(val_metrics(sources_of(step), n=n, var=var))
        logger.log(metrics, step=step)
    logger.finish()


def main() -> None:
    acc = lambda s: 0.2 + 0.05 * s  # noqa: E731
    one = lambda ds: lambda s: {ds: acc(s)}  # noqa: E731

    # verl 0.9: a clean run, 8 steps, validation every 4 (0, 4, 8); acc 0.6 at step 8
    run(logger09(HERE / "v09_clean.jsonl"), 8, 4, acc, one("synthetic/arith"))

    # verl 0.9: tokens null at step 2 (orjson writes NaN as null), val_n = 4 (mean@4 is core)
    run(
        logger09(HERE / "v09_nulls_mean4.jsonl"),
        8,
        4,
        acc,
        one("synthetic/arith"),
        tokens_at=lambda s: float("nan") if s == 2 else 100_000 + s,
        n=4,
    )

    # verl 0.9: two data sources, one with '/' in its name; reward only (no acc)
    run(
        logger09(HERE / "v09_two_sources_reward.jsonl"),
        8,
        4,
        acc,
        lambda s: {"org/bench/v2": acc(s), "gsm8k": 0.5},
        var="reward",
    )

    # verl 0.6/0.7: NaN literals, crash: the last line is cut mid-record
    path = HERE / "v06_nan_truncated.jsonl"
    run(FileLogger06(path), 8, 4, acc, one("synthetic/arith"))
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])

    # a resumed run: attempt 1 crashes after step 6; attempt 2 resumes from the step-4
    # checkpoint, validates at step 4 again, re-runs steps 5-6 (new values) and ends at 8
    run(logger09(HERE / "resume_attempt-1.jsonl"), 6, 4, acc, one("synthetic/arith"))
    lines = (HERE / "resume_attempt-1.jsonl").read_text().splitlines(keepends=True)
    (HERE / "resume_attempt-1.jsonl").write_text("".join(lines[:-1]))  # step 6 never flushed
    run(
        logger09(HERE / "resume_attempt-2.jsonl"),
        8,
        4,
        acc,
        one("synthetic/arith"),
        tokens_at=lambda s: 200_000 + s,
        start=5,
    )

    # a run that never validated (test_freq too large, val_before_train off)
    run(
        logger09(HERE / "no_validation.jsonl"),
        8,
        100,
        acc,
        one("synthetic/arith"),
        val_before=False,
    )
    lines = (HERE / "no_validation.jsonl").read_text().splitlines(keepends=True)
    (HERE / "no_validation.jsonl").write_text("".join(lines[:-1]))  # crashed before the end


if __name__ == "__main__":
    main()
