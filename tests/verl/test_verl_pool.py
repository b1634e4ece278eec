"""Task pools: accepted shapes and errors that name the file, row and column."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from verl_testlib import crossed_pool, write_jsonl

from bayesscale import names
from bayesscale.verl.pool import PoolError, check_pool, read_pool


def test_reads_jsonl_and_parquet_alike(tmp_path: Path) -> None:
    frame = crossed_pool(2, 3, worlds=1)
    a = read_pool(write_jsonl(frame, tmp_path / "p.jsonl"))
    frame.to_parquet(tmp_path / "p.parquet")
    b = read_pool(tmp_path / "p.parquet")
    assert a.frame[names.PROMPT].tolist() == b.frame[names.PROMPT].tolist()
    assert a.frame[names.PROMPT][0] == [{"role": "user", "content": "Task 0 in environment 0"}]
    assert a.frame[names.REWARD_MODEL][0] == {"style": "rule", "ground_truth": "0"}
    assert a.has_worlds


def test_a_byte_order_mark_is_read_as_in_csv(tmp_path: Path) -> None:
    frame = crossed_pool(2, 3, worlds=1)
    plain = write_jsonl(frame, tmp_path / "p.jsonl")
    marked = tmp_path / "bom.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert read_pool(marked).frame[names.TASK_ID].tolist() == (
        read_pool(plain).frame[names.TASK_ID].tolist()
    )


def test_ground_truth_column_instead_of_reward_model() -> None:
    frame = crossed_pool(1, 2).drop(columns=[names.REWARD_MODEL]).assign(ground_truth=["1", "2"])
    pool = check_pool(frame)
    assert pool.frame[names.REWARD_MODEL][1] == {"style": "rule", "ground_truth": "2"}


def test_missing_column_is_named() -> None:
    with pytest.raises(PoolError, match=r"missing column\(s\) \['data_source'\]"):
        check_pool(crossed_pool(1, 2).drop(columns=["data_source"]), "pool.jsonl")


def test_bad_prompt_names_line(tmp_path: Path) -> None:
    frame = crossed_pool(1, 4)
    frame.loc[2, "prompt"] = None
    path = write_jsonl(frame, tmp_path / "p.jsonl")
    with pytest.raises(PoolError, match=r"p.jsonl: column 'prompt', line 3: expected"):
        read_pool(path)


def test_errors_name_file_lines_past_blank_lines(tmp_path: Path) -> None:
    """Blank lines are skipped when reading, so the third record sits on line 6 here."""
    frame = crossed_pool(1, 4)
    frame.loc[2, "prompt"] = None
    lines = [json.dumps(record) for record in frame.to_dict(orient="records")]
    path = tmp_path / "p.jsonl"
    path.write_text("\n" + lines[0] + "\n\n" + lines[1] + "\n  \n" + "\n".join(lines[2:]) + "\n")
    with pytest.raises(PoolError, match=r"p.jsonl: column 'prompt', line 6: expected"):
        read_pool(path)
    frame.loc[2, "prompt"] = "fine"
    frame.loc[3, "task_id"] = frame.loc[1, "task_id"]  # the cell of record 2 again
    lines = [json.dumps(record) for record in frame.to_dict(orient="records")]
    path.write_text("\n".join([lines[0], "", lines[1], lines[2], "", lines[3]]) + "\n")
    with pytest.raises(PoolError, match=r"lines 3, 6: the same task-environment cell"):
        read_pool(path)


def test_missing_ground_truth_names_row(tmp_path: Path) -> None:
    frame = crossed_pool(1, 3)
    frame.at[1, "reward_model"] = {"style": "rule"}
    frame.to_parquet(tmp_path / "p.parquet")
    with pytest.raises(PoolError, match=r"column 'reward_model', row 2: expected"):
        read_pool(tmp_path / "p.parquet")


def test_duplicate_cell_and_split_world_rejected() -> None:
    frame = crossed_pool(2, 2, worlds=1)
    with pytest.raises(PoolError, match="same task-environment cell appears twice"):
        check_pool(pd.concat([frame, frame.iloc[:1]]))
    frame.loc[0, "world_id"] = "other"
    with pytest.raises(PoolError, match="belongs to more than one world"):
        check_pool(frame)


def test_garbled_jsonl_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"task_id": "a"}) + "\n{not json\n")
    with pytest.raises(PoolError, match=r"p.jsonl: line 2: not valid JSON"):
        read_pool(path)
