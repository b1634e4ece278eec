"""Atomic writes: whole or nothing, never over an existing file unless asked, normal modes."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from bayesscale.atomic import default_mode, write_atomically


def test_written_file_has_the_mode_open_would_give(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = write_atomically(tmp_path / "a.txt", lambda tmp: tmp.write_text("x"))
        assert path.stat().st_mode & 0o777 == 0o644 == default_mode()
    finally:
        os.umask(old)


def test_existing_file_is_kept_unless_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("mine")
    with pytest.raises(
        FileExistsError, match=r"pass overwrite=True \(on the command line --force\)"
    ):
        write_atomically(path, lambda tmp: tmp.write_text("theirs"))
    assert path.read_text() == "mine"
    write_atomically(path, lambda tmp: tmp.write_text("theirs"), overwrite=True)
    assert path.read_text() == "theirs"


def test_a_directory_is_refused_before_any_work(tmp_path: Path) -> None:
    calls = []
    with pytest.raises(IsADirectoryError, match="is a directory; give the name of a file"):
        write_atomically(tmp_path, calls.append, overwrite=True)
    assert calls == [] and list(tmp_path.iterdir()) == []


def test_a_failing_writer_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("mine")

    def half(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_atomically(path, half, overwrite=True)
    assert path.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_an_os_error_on_the_temporary_file_names_the_target(tmp_path: Path) -> None:
    """What the user reads names the file they asked for, not the hidden temporary one."""
    path = tmp_path / "fit.nc"

    def full(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))

    with pytest.raises(OSError) as caught:
        write_atomically(path, full)
    assert caught.value.filename == str(path) and caught.value.errno == errno.ENOSPC
    assert sorted(p.name for p in tmp_path.iterdir()) == []

    def other(tmp: Path) -> None:  # an error on another file is passed on as it is
        raise FileNotFoundError(errno.ENOENT, "no such file", str(tmp_path / "input.csv"))

    with pytest.raises(FileNotFoundError) as missing:
        write_atomically(path, other)
    assert missing.value.filename == str(tmp_path / "input.csv")

    def descriptor(tmp: Path) -> None:  # os.stat(fd) names the descriptor, a number
        raise OSError(errno.EBADF, os.strerror(errno.EBADF), 999)

    with pytest.raises(OSError) as bad:
        write_atomically(path, descriptor)
    assert bad.value.filename == 999
