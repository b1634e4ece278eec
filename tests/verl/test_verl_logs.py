"""verl file-logger JSONL: golden logs in verl's real format, every known quirk."""

from __future__ import annotations

import pytest
from verl_testlib import GOLDEN

from bayesscale.verl import logs


def test_clean_09_log() -> None:
    log = logs.read_log(GOLDEN / "v09_clean.jsonl")
    assert sorted(log.steps) == list(range(9)) and log.notes == []
    found = logs.held_out(log.steps[8])
    assert found["synthetic/arith"].metric == "val-core/synthetic/arith/acc/mean@1"
    assert found["synthetic/arith"].value == pytest.approx(0.6)
    assert logs.tokens_through(log, 8) == (sum(100_000 + s for s in range(1, 9)), 8, 8)
    assert "actor/grad_norm" not in log.steps[3]  # orjson wrote NaN as null: missing


def test_nulls_and_mean_at_n() -> None:
    log = logs.read_log(GOLDEN / "v09_nulls_mean4.jsonl")
    found = logs.held_out(log.steps[8])["synthetic/arith"]
    assert found.metric == "val-core/synthetic/arith/acc/mean@4"  # not best@4, not mean@1
    assert found.value == pytest.approx(0.6)
    _, with_tokens, steps = logs.tokens_through(log, 8)
    assert (with_tokens, steps) == (7, 8)  # step 2's tokens are null


def test_slash_in_data_source_and_reward_fallback() -> None:
    log = logs.read_log(GOLDEN / "v09_two_sources_reward.jsonl")
    found = logs.held_out(log.steps[8])
    assert set(found) == {"org/bench/v2", "gsm8k"}
    assert found["org/bench/v2"].metric == "val-core/org/bench/v2/reward/mean@1"
    assert found["org/bench/v2"].value == pytest.approx(0.6)


def test_06_nan_and_truncated_last_line() -> None:
    log = logs.read_log(GOLDEN / "v06_nan_truncated.jsonl")
    assert max(log.steps) == 7
    assert any("truncated last line" in n for n in log.notes)
    assert "actor/grad_norm" not in log.steps[3]  # NaN literal: missing


def test_a_file_with_no_json_is_not_called_truncated(tmp_path) -> None:
    garbage = tmp_path / "verl.jsonl"
    garbage.write_bytes(b"\x00\x01 not json at all\n<html>oops</html>\n")
    log = logs.read_log(garbage)
    assert log.lines == 0 and log.notes == [
        f"{garbage}: no line is JSON (2 unreadable); not a verl JSONL log"
    ]
    started = tmp_path / "started.jsonl"
    started.write_text('{"step": 1, "data": {"a"')  # a run that has just begun writing
    assert logs.read_log(started).notes == ["started.jsonl:1: truncated last line skipped"]


def test_resumed_run_keeps_last_value_per_step() -> None:
    log = logs.read_logs([GOLDEN / "resume_attempt-1.jsonl", GOLDEN / "resume_attempt-2.jsonl"])
    assert sorted(log.steps) == list(range(9))
    assert log.steps[5]["perf/total_num_tokens"] == 200_005  # attempt 2 re-ran step 5
    assert log.steps[4]["perf/total_num_tokens"] == 100_004  # attempt 2 only re-validated 4
    assert any("step 4 logged again" in n for n in log.notes)
    total, _, _ = logs.tokens_through(log, 8)
    assert total == sum(100_000 + s for s in range(1, 5)) + sum(200_000 + s for s in range(5, 9))


def test_held_out_prefers_acc_and_largest_n() -> None:
    record = {
        "val-core/a/b/reward/mean@4": 0.3,
        "val-core/a/b/acc/mean@4": 0.4,
        "val-aux/a/b/acc/mean@2": 0.9,
        "val-core/a/b/acc/best@4/mean": 0.8,
        "val/test_score/legacy": 0.5,
    }
    found = logs.held_out(record)
    assert found["a/b"].value == 0.4 and found["legacy"].value == 0.5


def test_garbage_lines_do_not_stop_reading(tmp_path) -> None:
    path = tmp_path / "x.jsonl"
    lines = ['{"step": 1, "data": {"x": 1}}', "not json", "[1]", '{"step": "a", "data": {}}']
    path.write_text("\n".join([*lines, '{"step": 2, "data": {"x": 2}}']) + "\n")
    log = logs.read_log(path)
    assert sorted(log.steps) == [1, 2] and len(log.notes) == 3
