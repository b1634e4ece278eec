"""The bad-input sweep (benchmarks/bad_inputs.py): every bad input a new user is likely to give
gets one clear line on standard error, naming what is wrong and where (the file, row, column or
flag), and a failure exit status; none gets a traceback."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bad_inputs.py"


def test_every_bad_input_gets_a_clear_message(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bad_inputs", BENCHMARK)
    assert spec is not None and spec.loader is not None
    sweep = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sweep  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(sweep)
    finally:
        del sys.modules[spec.name]
    outcomes = sweep.sweep(tmp_path)
    assert len(outcomes) >= 50
    poor = [f"{o.case.name}: {o.why}: {o.message}" for o in outcomes if not o.clear]
    assert poor == []
