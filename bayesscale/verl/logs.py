"""Parse verl's file-logger JSONL (``trainer.logger=["console","file"]``).

Format (verl 0.6–0.9, ``verl/utils/tracking.py: FileLogger``): one JSON object per line,

    {"step": 12, "data": {"perf/total_num_tokens": 1843200, "val-core/gsm8k/acc/mean@1": 0.71, ...}}

Quirks handled, each noted in ``Log.notes``:

* a step logged twice (validation before training after a resume, or an attempt that
  re-runs steps): records are merged per key, the **last** value wins;
* ``NaN`` (0.6–0.7, Python ``json``) or ``null`` (0.9, ``orjson``): treated as missing
  and never overwrite a logged number;
* a truncated or garbled line (a crash mid-write, lost buffers in 0.6–0.7): skipped;
* several attempts of one run (``read_logs``): read in attempt order, later wins.

Held-out metric names: ``val-core/<data_source>/<acc|reward>/mean@<N>``; ``data_source``
may itself contain '/', so names are matched from the right. Legacy ``val/test_score/<ds>``
(verl ≤ 0.3) is read as a last resort.

>>> log = read_log("runs/x/attempt-1/verl.jsonl")  # doctest: +SKIP
>>> held_out(log.steps[100])  # doctest: +SKIP
{'gsm8k': HeldOut(data_source='gsm8k', value=0.71, metric='val-core/gsm8k/acc/mean@1')}
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

TOKENS_KEY = "perf/total_num_tokens"
_CORE = re.compile(r"^val-core/(?P<ds>.+)/(?P<var>acc|reward)/mean@(?P<n>\d+)$")
_LEGACY = re.compile(r"^val/test_score/(?P<ds>.+)$")
_VAR_RANK = {"acc": 0, "reward": 1}


@dataclass
class Log:
    """Steps of one run: ``steps[step][key] = value`` (numbers only), plus what was odd."""

    steps: dict[int, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lines: int = 0

    @property
    def last_step(self) -> int | None:
        return max(self.steps) if self.steps else None


@dataclass(frozen=True)
class HeldOut:
    data_source: str
    value: float
    metric: str


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _merge(log: Log, step: int, data: Mapping[str, object], where: str) -> None:
    record = log.steps.get(step)
    if record is None:
        record = log.steps[step] = {}
    elif data:
        log.notes.append(f"{where}: step {step} logged again (kept the last value of each key)")
    for key, value in data.items():
        number = _number(value)
        if number is not None:
            record[str(key)] = number


def read_log(path: str | Path, log: Log | None = None) -> Log:
    """Read one JSONL log (into ``log`` when given, merging later over earlier)."""
    path = Path(path)
    log = log if log is not None else Log()
    if not path.exists():
        log.notes.append(f"{path}: no log file")
        return log
    raw = path.read_bytes().decode("utf-8", errors="replace")
    lines = raw.split("\n")
    notes_before, readable = len(log.notes), 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            last = number == len(lines) or all(not rest.strip() for rest in lines[number:])
            log.notes.append(
                f"{where}: {'truncated last line' if last else 'unreadable line'} skipped"
            )
            continue
        readable += 1
        if not isinstance(record, dict) or not isinstance(record.get("data"), dict):
            log.notes.append(f"{where}: not a {{'step', 'data'}} record, skipped")
            continue
        step = record.get("step")
        if isinstance(step, bool) or not isinstance(step, int | float) or not math.isfinite(step):
            log.notes.append(f"{where}: no integer 'step', skipped")
            continue
        log.lines += 1
        _merge(log, int(step), record["data"], where)
    # no JSON on any of several lines: not a log cut short (a run that has just started has
    # one partial line, said as a truncated last line) but no verl log at all
    if not readable and len(log.notes) - notes_before > 1:
        log.notes[notes_before:] = [
            f"{path}: no line is JSON ({len(log.notes) - notes_before} unreadable); not a verl "
            "JSONL log"
        ]
    return log


def read_logs(paths: Iterable[str | Path]) -> Log:
    """Read several attempts' logs of one run, in order; later attempts win per key."""
    log = Log()
    for path in paths:
        read_log(path, log)
    return log


def held_out(record: Mapping[str, float]) -> dict[str, HeldOut]:
    """The held-out success metric of each data_source in one step's record.

    Preference: ``val-core/<ds>/acc/mean@N`` over ``.../reward/mean@N``, the largest N,
    then legacy ``val/test_score/<ds>``.
    """
    best: dict[str, tuple[tuple[int, int], HeldOut]] = {}
    for key, value in record.items():
        match = _CORE.match(key)
        if match:
            rank = (_VAR_RANK[match["var"]], -int(match["n"]))
            ds = match["ds"]
        else:
            match = _LEGACY.match(key)
            if not match:
                continue
            rank = (2, 0)
            ds = match["ds"]
        if ds not in best or rank < best[ds][0]:
            best[ds] = (rank, HeldOut(ds, value, key))
    return {ds: item for ds, (_, item) in best.items()}


def tokens_through(log: Log, step: int) -> tuple[float, int, int]:
    """(Σ ``perf/total_num_tokens`` over training steps ≤ ``step``, steps with tokens,
    training steps) — step 0 is validation before training."""
    total, with_tokens, steps = 0.0, 0, 0
    for s, record in log.steps.items():
        if s < 1 or s > step:
            continue
        steps += 1
        if TOKENS_KEY in record:
            total += record[TOKENS_KEY]
            with_tokens += 1
    return total, with_tokens, steps
