"""A report folder is written whole or not at all: an interrupt or a failure leaves no hidden
``.NAME.partial-*`` folder beside ``--out``, and Ctrl-C says what it removed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from bayesscale import atomic
from bayesscale.cli import _interrupted
from bayesscale.report.folder import building


def _leftovers(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*"))


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_or_failed_writer_leaves_no_partial_folder(
    tmp_path: Path, error: type[BaseException]
) -> None:
    out = tmp_path / "rep"
    with pytest.raises(error), building(out, {"inputs": 1}, force=False) as tmp:
        (tmp / "figures").mkdir()
        (tmp / "figures" / "law.png").write_bytes(b"x" * 1000)
        assert _leftovers(tmp_path) == [tmp]
        raise error
    assert not out.exists() and _leftovers(tmp_path) == []
    assert not atomic.PENDING


def test_ctrl_c_removes_a_folder_a_worker_still_fills_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interrupt handler runs while the command's worker thread may still be writing into
    the partial folder (a figure being saved): it is removed until it stays gone, and the
    message names it instead of listing the files inside it as written. (This process's
    record of what it wrote starts empty: other tests in the same worker write files too.)
    The handler's first pause waits until the worker has made the folder again and then lets
    it finish, so the handler must remove the folder twice, on any machine and under any
    load: no timer races the removal."""
    monkeypatch.setattr(atomic, "WRITTEN", [])
    monkeypatch.setattr(atomic, "DISCARD_TRIES", 50)
    tmp = tmp_path / ".rep.partial-x"
    (tmp / "fits").mkdir(parents=True)
    atomic.track(tmp)
    atomic.untrack(tmp / "fits" / "law.nc", tmp / "fits" / "law.nc")  # written inside it
    stop = threading.Event()

    def writer() -> None:  # a worker that keeps making files (and the folder) again
        k = 0
        while not stop.is_set():
            try:
                (tmp / "figures").mkdir(parents=True, exist_ok=True)
                (tmp / "figures" / f"{k}.png").write_bytes(b"x" * 100)
            except OSError:
                pass
            k += 1

    thread = threading.Thread(target=writer, daemon=True)
    pauses: list[bool] = []  # per pause of the handler: whether the folder was back

    class Clock:  # the handler's pauses: the first waits for the worker to refill, then ends it
        @staticmethod
        def sleep(_seconds: float) -> None:
            if not pauses:
                deadline = time.monotonic() + 60
                while not tmp.exists() and time.monotonic() < deadline:
                    time.sleep(0.001)
                stop.set()
                thread.join()
            pauses.append(tmp.exists())

    monkeypatch.setattr(atomic, "time", Clock)
    thread.start()
    try:
        _interrupted("report")
    finally:
        stop.set()
        thread.join()
    assert pauses[0] and len(pauses) == 2  # the worker refilled it once: removed twice
    err = capsys.readouterr().err
    assert not tmp.exists() and _leftovers(tmp_path) == []
    assert f"interrupted: nothing written; removed the unfinished {tmp}" in err
    assert "law.nc" not in err and not atomic.WRITTEN
