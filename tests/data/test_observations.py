"""Every bad input of the observation contract gets an error naming file, column and rows."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesscale import names
from bayesscale.data.observations import (
    DataWarning,
    ObservationError,
    load_observations,
    prepare,
    setting_labels,
    validate,
    write_table,
)
from bayesscale.data.spec import load_spec

SPEC = load_spec()


@pytest.fixture
def small(reference_frame: pd.DataFrame) -> pd.DataFrame:
    """Two settings of the reference data: enough to pass every check."""
    keep = reference_frame[names.MODEL].isin(["Qwen3-4B", "Qwen3-8B"]) & (
        reference_frame[names.DOMAIN] == "math+code"
    )
    return reference_frame[keep].reset_index(drop=True)


def write(frame: pd.DataFrame, tmp_path, name="obs.csv"):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def test_reference_data_loads_clean(reference_frame, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = load_observations(write(reference_frame, tmp_path), SPEC)
    assert len(table.frame) == len(reference_frame) == 1008
    design = prepare(table, SPEC)
    assert len(design.settings) == 21 and design.sizes.shape == (1008, 3)
    np.testing.assert_allclose(
        design.reference, [np.sqrt(8 * 256), np.sqrt(320 * 10240), 8.0 * 2**0.5 * 2 / 2]
    )


def test_setting_labels_join_the_keys_of_each_row(reference_frame):
    """Known answers: the keys of a row joined by ' | ' (string or integer keys), on the frame's
    own index; one key alone is itself, and no keys label every row 'all'."""
    from dataclasses import replace

    frame = pd.DataFrame(
        {"model": ["a", "b", "a"], "algorithm": ["grpo", "ppo", "grpo"], "domain": [7, 8, 7]},
        index=[10, 11, 12],
    )
    labels = setting_labels(frame, SPEC)
    assert list(labels) == ["a | grpo | 7", "b | ppo | 8", "a | grpo | 7"]
    assert list(labels.index) == [10, 11, 12] and labels.name is None
    one = setting_labels(frame, replace(SPEC, setting_keys=("model",)))
    assert list(one) == ["a", "b", "a"]
    assert list(setting_labels(frame, replace(SPEC, setting_keys=()))) == ["all"] * 3
    # the reference data: equal to the row-wise join the labels were made with until stop 32
    keys = list(SPEC.setting_keys)
    rowwise = reference_frame[keys].astype(str).agg(" | ".join, axis=1)
    pd.testing.assert_series_equal(setting_labels(reference_frame, SPEC), rowwise)


def test_missing_and_misspelled_columns(small, tmp_path):
    path = write(
        small.rename(columns={names.N_TASKS: "n_task"}).drop(columns=[names.SEED]), tmp_path
    )
    with pytest.raises(ObservationError) as err:
        load_observations(path, SPEC)
    text = str(err.value)
    assert str(path) in text and "'n_tasks' (did you mean 'n_task'?)" in text and "'seed'" in text


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        (names.N_ENVS, "many", r"not a number \('many'\)"),
        (names.SUCCESSES, np.nan, "missing, NaN or infinite"),
        (names.N_TASKS, -5, "axis sizes must be > 0"),
        (names.N_ENVS, 0, "axis sizes must be > 0"),
        (names.ROLLOUTS, 0, "axis sizes must be > 0"),
        (names.SUCCESSES, -1, "counts must be >= 0"),
        (names.N_ENVS, 12.5, "counts must be whole numbers"),
        (names.SUCCESSES, 5001, "successes exceed trials"),
        (names.REWARD, "shaped", "unknown reward level 'shaped'"),
        (names.REWARD, np.nan, r"reward'.*: value is missing; use one of \('sparse', 'dense'\)"),
        (names.MODEL, np.nan, "value is missing"),
        (names.TRIALS, 0, "trials must be >= 1"),
    ],
)
def test_bad_values_name_file_column_and_row(small, tmp_path, column, value, message):
    bad = small.copy()
    bad[column] = bad[column].astype(object)
    bad.loc[4, column] = value
    path = write(bad, tmp_path)
    with pytest.raises(ObservationError, match=message) as err:
        load_observations(path, SPEC)
    text = str(err.value)
    assert str(path) in text and repr(column) in text and "row 5 (file line 6)" in text


def test_file_lines_count_blank_lines_and_cells_that_span_lines(small, tmp_path):
    """The file line named is where the row is, past blank lines and quoted line breaks."""
    bad = small.copy()
    bad[names.N_ENVS] = bad[names.N_ENVS].astype(object)
    bad.loc[8, names.N_ENVS] = "many"
    lines = bad.to_csv(index=False).splitlines()
    lines.insert(4, "")  # a blank line before data row 4 (pandas skips it)
    path = tmp_path / "obs.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ObservationError, match=r"row 9 \(file line 11\)"):
        load_observations(path, SPEC)
    spanning = small.assign(**{names.MODEL: small[names.MODEL].astype(object)})
    spanning.loc[1, names.MODEL] = "Qwen3-4B\nsecond line"  # a quoted cell over two lines
    spanning[names.N_ENVS] = spanning[names.N_ENVS].astype(object)
    spanning.loc[8, names.N_ENVS] = "many"
    with pytest.raises(ObservationError, match=r"row 9 \(file line 11\)"):
        load_observations(write(spanning, tmp_path, "spanning.csv"), SPEC)


def test_file_lines_are_named_only_for_the_file_as_it_was_read(small, tmp_path):
    """A table kept from a file names file lines while the file is as it was read; once the
    file changes, or for a table never read from a file, only rows are named."""
    path = write(small, tmp_path)
    table = load_observations(path, SPEC)
    bad = table.frame.astype({names.N_ENVS: object})
    bad.loc[8, names.N_ENVS] = "many"
    with pytest.raises(ObservationError, match=r"row 9 \(file line 10\): "):
        validate(bad, SPEC, table.source)
    path.write_text("\n" + path.read_text())  # the file changed after it was read
    with pytest.raises(ObservationError, match=r"'n_envs', row 9: "):
        validate(bad, SPEC, table.source)
    with pytest.raises(ObservationError, match=r"'n_envs', row 9: "):
        validate(bad, SPEC, str(tmp_path / "never-read.csv"))


@pytest.mark.parametrize(
    ("shape", "line"),
    [
        ("leading blank line", 11),
        ("whitespace-only line", 11),
        ("CR line endings", 10),
        ("relative path", 11),
    ],
)
def test_file_lines_in_other_shapes_of_csv(small, tmp_path, monkeypatch, shape, line):
    bad = small.copy()
    bad[names.N_ENVS] = bad[names.N_ENVS].astype(object)
    bad.loc[8, names.N_ENVS] = "many"
    lines = bad.to_csv(index=False).splitlines()
    if shape == "leading blank line":
        lines.insert(0, "")
    elif shape == "whitespace-only line":
        lines.insert(3, "   ")
    elif shape == "relative path":  # read as ./obs.csv, named as obs.csv: the same file
        lines.insert(3, "")
    path = tmp_path / "obs.csv"
    path.write_text(("\r" if shape == "CR line endings" else "\n").join(lines) + "\n")
    if shape == "relative path":
        monkeypatch.chdir(tmp_path)
        path = Path("./obs.csv")
    with pytest.raises(ObservationError, match=rf"row 9 \(file line {line}\)"):
        load_observations(path, SPEC)


def test_empty_header_cells_are_not_names(small, tmp_path):
    """A spreadsheet's export may end every line with empty cells: they name nothing."""
    path = write(small, tmp_path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(line + ",," for line in lines) + "\n")
    assert len(load_observations(path, SPEC).frame) == len(small)


def test_a_column_named_twice_is_an_error(small, tmp_path):
    path = write(small, tmp_path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0] + ",seed", *(line + ",9" for line in lines[1:])]) + "\n")
    with pytest.raises(ObservationError, match=r"obs.csv: the header names column\(s\) 'seed'"):
        load_observations(path, SPEC)


def test_conflicting_duplicates(small, tmp_path):
    bad = pd.concat([small, small.iloc[[3]].assign(**{names.SUCCESSES: 1})], ignore_index=True)
    with pytest.raises(ObservationError, match="conflicting duplicate rows") as err:
        load_observations(write(bad, tmp_path), SPEC)
    assert f"rows 4, {len(small) + 1}" in str(err.value)


def test_identical_duplicates_warn_and_are_kept(small, tmp_path):
    doubled = pd.concat([small, small.iloc[[3]]], ignore_index=True)
    with pytest.warns(DataWarning, match="repeat another row exactly"):
        table = load_observations(write(doubled, tmp_path), SPEC)
    assert len(table.frame) == len(small) + 1


def test_axis_with_too_few_distinct_values(small, tmp_path):
    flat = small[small[names.ROLLOUTS].isin([8, 16])]
    with pytest.raises(ObservationError, match=r"column 'rollouts' \(axis 'traj'\) has 2 distinct"):
        load_observations(write(flat, tmp_path), SPEC)


def test_model_size_must_be_constant_within_setting(small, tmp_path):
    bad = small.copy()
    bad.loc[7, names.PARAMS_B] = 5.0
    with pytest.raises(ObservationError, match="must be constant within a setting"):
        load_observations(write(bad, tmp_path), SPEC)


def test_suspicious_rows_warn(small, tmp_path):
    odd = small.copy()
    odd.loc[2, names.SUCCESSES] = 0
    with pytest.warns(DataWarning, match=r"row 3 \(file line 4\): success rate is exactly 0 or 1"):
        load_observations(write(odd, tmp_path), SPEC)
    one_seed = small[~((small[names.MODEL] == "Qwen3-4B") & (small[names.SEED] > 0))]
    with pytest.warns(DataWarning, match="have a single seed"):
        load_observations(write(one_seed, tmp_path, "one.csv"), SPEC)


def test_parquet_and_unknown_format(small, tmp_path):
    path = tmp_path / "obs.parquet"
    small.to_parquet(path)
    assert len(load_observations(path, SPEC).frame) == len(small)
    other = tmp_path / "obs.xlsx"
    other.write_text("x")
    with pytest.raises(ObservationError, match=r"unknown table format '\.xlsx'"):
        load_observations(other, SPEC)


def test_write_table_is_atomic_and_refuses_to_overwrite(small, tmp_path):
    path = write_table(small, tmp_path / "out.csv")
    with pytest.raises(FileExistsError, match="exists"):
        write_table(small, path)
    write_table(small.head(3), path, overwrite=True)
    assert len(pd.read_csv(path)) == 3
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_optional_columns_may_be_blank_but_not_garbage(small, tmp_path):
    extra = small.assign(**{names.COMPUTE: 1e18, names.N_WORLDS: 4})
    extra[names.COMPUTE] = extra[names.COMPUTE].astype(object)
    extra.loc[[1, 2], names.COMPUTE] = np.nan
    table = load_observations(write(extra, tmp_path), SPEC)
    assert table.frame[names.COMPUTE].isna().sum() == 2 and len(table.frame) == len(small)
    extra.loc[5, names.COMPUTE] = "lots"
    with pytest.raises(ObservationError, match=r"column 'compute', row 6 .*not a number"):
        load_observations(write(extra, tmp_path, "bad.csv"), SPEC)
