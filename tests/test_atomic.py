"""Atomic writes: whole or nothing, never over an existing file unless asked, normal modes."""

from __future__ import annotations

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
    with pytest.raises(FileExistsError, match="pass --force"):
        write_atomically(path, lambda tmp: tmp.write_text("theirs"))
    assert path.read_text() == "mine"
    write_atomically(path, lambda tmp: tmp.write_text("theirs"), overwrite=True)
    assert path.read_text() == "theirs"


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
