"""Bad input and unkind terminals get one line naming the file (row, column), exit status 2,
no traceback and nothing written; a closed stdout never costs an output file."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from testdata import REFERENCE

from bayesscale.data.fitfile import save_fit

BAYESSCALE = str(Path(sys.executable).parent / "bayesscale")


def _run(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BAYESSCALE, *args], capture_output=True, text=True, timeout=300, **kwargs
    )


def _one_error_line(done: subprocess.CompletedProcess[str], *needles: str, status: int = 2) -> None:
    assert done.returncode == status, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if line]
    assert len(lines) == 1, done.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture(scope="module")
def fit_file(law_fit, tmp_path_factory) -> Path:
    return save_fit(law_fit, tmp_path_factory.mktemp("fit") / "law.nc")


def test_a_directory_where_a_table_or_a_fit_belongs(tmp_path: Path, fit_file: Path) -> None:
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    _one_error_line(
        _run("fit", str(folder), "--out", str(tmp_path / "f.nc")), str(folder), "directory"
    )
    _one_error_line(_run("check", str(fit_file), str(folder)), str(folder), "directory")
    _one_error_line(_run("summary", str(folder)), str(folder), "directory")
    # commands that read the file themselves: the OS's error, as one line naming the path
    report = tmp_path / "report"
    _one_error_line(_run("report", str(folder), "--out", str(report)), f"{folder}: is a directory")
    plan = tmp_path / "plan"
    _one_error_line(_run("plan", str(folder), "--out", str(plan)), f"{folder}: is a directory")
    assert not (tmp_path / "f.nc").exists() and not report.exists() and not plan.exists()


def test_bad_values_are_shown_as_written(tmp_path: Path) -> None:
    frame = pd.read_csv(REFERENCE / "observations.csv")
    cases = {
        "trials": (-2000, "trials must be >= 1, got -2000"),
        "successes": (5000, "successes exceed trials (5000 > 2000)"),
        "seed": (1.5, "counts must be whole numbers, got 1.5"),
    }
    for column, (value, message) in cases.items():
        bad = frame.copy()
        bad[column] = bad[column].astype(float)
        bad.loc[3, column] = value
        path = tmp_path / f"bad_{column}.csv"
        bad.to_csv(path, index=False)
        done = _run("fit", str(path), "--out", str(tmp_path / "f.nc"))
        _one_error_line(done, str(path), f"column {column!r}", "row 4 (file line 5)", message)
        assert "np.float64" not in done.stderr


def test_a_tab_separated_file_is_recognised(tmp_path: Path) -> None:
    path = tmp_path / "obs.csv"
    pd.read_csv(REFERENCE / "observations.csv").to_csv(path, sep="\t", index=False)
    _one_error_line(_run("fit", str(path), "--out", str(tmp_path / "f.nc")), "tab-separated")


def test_warnings_are_one_line(tmp_path: Path, fit_file: Path) -> None:
    rows = pd.read_csv(REFERENCE / "heldout.csv").head(4)
    path = tmp_path / "heldout.csv"
    pd.concat([rows, rows.head(1)]).to_csv(path, index=False)  # a repeated row: a warning
    done = _run("check", str(fit_file), str(path))
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and warning[0].startswith("bayesscale check: warning: ")
    assert ".py:" not in done.stderr


def test_a_closed_stdout_is_no_traceback(fit_file: Path) -> None:
    for args in (
        ["summary", str(fit_file)],
        ["recipe", str(fit_file), "--budget", "1e4", "--json", "--max-draws", "50"],
    ):
        done = subprocess.run(
            f"{BAYESSCALE} {' '.join(args)} | head -1", shell=True, capture_output=True, text=True
        )
        assert done.stdout.count("\n") == 1
        assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_one_overwrite_flag_with_its_meaning_in_help() -> None:
    from bayesscale.cli import build_parser

    parser = build_parser()
    for old in ("--force", "--replace"):  # ingest's old --replace still parses, as --force
        args = parser.parse_args(["ingest", "sweep", "--out", "obs.csv", old])
        assert args.force is True
    for command in ("fit", "price", "plan", "ingest", "recipe", "check", "crossval", "report"):
        helped = _run(command, "--help")
        assert helped.returncode == 0 and "--force" in helped.stdout, command
        assert "--replace" not in helped.stdout
    for command in ("recipe", "check", "report", "summary", "pricing-table"):
        assert "equal-tailed" in _run(command, "--help").stdout, command


def test_strict_readers_refuse_a_failed_fit_in_one_line(law_fit, tmp_path: Path) -> None:
    thin = save_fit(law_fit.isel(draw=slice(0, 20)), tmp_path / "thin.nc")  # ESS far below 400
    done = _run("summary", str(thin))
    assert done.returncode == 0 and done.stdout.startswith("DIAGNOSTICS FAILED")
    assert f"bayesscale summary: warning: {thin}: DIAGNOSTICS FAILED" in done.stderr
    # without --strict the verdict goes to standard error, with --json too: exit 0
    done = _run("recipe", str(thin), "--budget", "1e4", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["fit_diagnostics"]
    assert f"bayesscale recipe: warning: {thin}: DIAGNOSTICS FAILED" in done.stderr
    # with --strict every reader refuses in one line, nothing written, exit 3 (as fit and price
    # exit 3 when their own fit fails; 2 is a usage or input error)
    for argv in (
        ("summary", str(thin), "--strict"),
        ("recipe", str(thin), "--budget", "1e4", "--strict"),
        ("check", str(thin), str(REFERENCE / "heldout.csv"), "--strict"),
        ("next", str(thin), "--budget", "1e4", "--strict"),
    ):
        _one_error_line(_run(*argv), str(thin), "DIAGNOSTICS FAILED", "--strict", status=3)
    other = save_fit(law_fit, tmp_path / "other.nc")
    _one_error_line(
        _run("compare", str(thin), str(other), "--strict"), "DIAGNOSTICS FAILED", status=3
    )


def test_os_errors_are_one_line_naming_the_path() -> None:
    from bayesscale.cli import os_error_text

    denied = PermissionError(errno.EACCES, "Permission denied", "obs.csv")
    assert os_error_text(denied) == "obs.csv: permission denied"
    moved = OSError(errno.EXDEV, "Invalid cross-device link", "a.tmp", None, "a.nc")
    assert os_error_text(moved) == "a.tmp -> a.nc: invalid cross-device link"
    own = FileExistsError("fit.nc exists; pass --force to replace it")
    assert os_error_text(own) == "fit.nc exists; pass --force to replace it"


def test_an_os_fault_on_no_path_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk is not bad input: ``main`` lets it through (a traceback for the report)."""
    import bayesscale.cli.summary
    from bayesscale.cli import main

    def full_disk(args: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bayesscale.cli.summary, "run", full_disk)
    with pytest.raises(OSError, match="No space left"):
        main(["summary", "fit.nc"])


def test_an_out_path_that_cannot_be_written_is_refused_before_any_work(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = _run("fit", str(REFERENCE / "observations.csv"), "--out", str(blocker / "fit.nc"))
    _one_error_line(done, f"cannot write in {blocker}")
    assert "fitting" not in done.stderr


def test_an_out_path_that_is_a_folder_or_an_input_is_refused_even_with_force(
    tmp_path: Path, fit_file: Path
) -> None:
    table = tmp_path / "observations.csv"
    table.write_bytes((REFERENCE / "observations.csv").read_bytes())
    done = _run("fit", str(table), "--out", str(tmp_path), "--force")
    _one_error_line(done, f"{tmp_path} is a directory; --out takes the name of a file")
    done = _run("fit", str(table), "--out", str(table), "--force")
    _one_error_line(done, f"{table} is also an input of this command")
    assert table.read_bytes() == (REFERENCE / "observations.csv").read_bytes()
    heldout = REFERENCE / "heldout.csv"
    done = _run("check", str(fit_file), str(heldout), "--out", str(fit_file), "--force")
    _one_error_line(done, "is also an input of this command")


def test_commands_sample_at_the_samplers_own_target_acceptance() -> None:
    """Without --target-accept the law's commands take the sampler's own (MAMS
    ``MAMS_TARGET_ACCEPT``, NUTS 0.8) and the pricing command its model's 0.95; until stop 30
    the law's commands passed NUTS's 0.8 to MAMS."""
    from bayesscale.cli import build_parser
    from bayesscale.cli._sampling import config_from_args
    from bayesscale.sampling.config import MAMS_TARGET_ACCEPT

    parser = build_parser()
    for command in (
        ["fit", "o.csv", "--out", "f.nc"],
        ["crossval", "o.csv", "--leave-out", "max"],
        ["report", "o.csv", "--out", "r"],
    ):
        assert config_from_args(parser.parse_args(command)).accept == MAMS_TARGET_ACCEPT, command
        nuts = parser.parse_args([*command, "--sampler", "nuts"])
        assert config_from_args(nuts).accept == 0.8, command
        given = parser.parse_args([*command, "--target-accept", "0.85"])
        assert config_from_args(given).accept == 0.85, command
    price = parser.parse_args(["price", "p.csv", "--out", "p.nc"])
    assert config_from_args(price).accept == 0.95
