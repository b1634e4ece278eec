"""Writing a file whole or not at all, and never over a user's file unless asked.

Every writer in the package goes through :func:`write_atomically`: the content is written to a
temporary file in the target's folder (same file system), given the permissions a plain
``open()`` would have given it (``0o666`` less the umask; ``mkstemp`` alone gives ``0o600``),
then renamed over the target, so a reader never sees a half-written file and an interrupted
write leaves nothing behind. Temporary files and folders being written are listed in
``PENDING``, so that a command stopped by Ctrl-C can remove them before it exits
(:func:`discard_pending`); finished targets are listed in ``WRITTEN``.

Example
-------
>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "note.txt"
>>> _ = write_atomically(path, lambda tmp: tmp.write_text("hello"))
>>> path.read_text()
'hello'
>>> write_atomically(path, lambda tmp: tmp.write_text("again"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
FileExistsError: ... exists; pass overwrite=True (on the command line --force) to replace it
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

PENDING: set[Path] = set()  # temporary files and folders not yet renamed into place
WRITTEN: list[Path] = []  # targets renamed into place by this process
_LOCK = threading.Lock()


def track(path: Path) -> None:
    """Note a temporary file or folder under construction."""
    with _LOCK:
        PENDING.add(Path(path))


def untrack(path: Path, written: Path | None = None) -> None:
    """The temporary ``path`` is gone (renamed to ``written``, or removed)."""
    with _LOCK:
        PENDING.discard(Path(path))
        if written is not None:
            WRITTEN.append(Path(written))


DISCARD_TRIES = 50  # removals of a folder that a writer still running fills again
DISCARD_PAUSE = 0.02  # seconds between them


def discard_pending() -> list[Path]:
    """Remove every temporary file and folder still being written; return what was removed.

    A command stopped by Ctrl-C may still have a worker writing into a folder: a removal
    racing it can fail (a file created while the tree is walked) or the writer can make the
    folder again (``mkdir(parents=True)``), so a folder is removed until it stays gone (up to
    ``DISCARD_TRIES`` times, ``DISCARD_PAUSE`` seconds apart). Targets written inside a
    discarded folder leave ``WRITTEN``: they are gone with it."""
    with _LOCK:
        pending = sorted(PENDING)
        PENDING.clear()
    for tmp in pending:
        if tmp.is_dir():
            for _ in range(DISCARD_TRIES):
                shutil.rmtree(tmp, ignore_errors=True)
                time.sleep(DISCARD_PAUSE)
                if not tmp.exists():
                    break
        else:
            tmp.unlink(missing_ok=True)
    with _LOCK:
        WRITTEN[:] = [w for w in WRITTEN if not any(w.is_relative_to(t) for t in pending)]
    return pending


def current_umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def default_mode(directory: bool = False) -> int:
    """The mode ``open()`` (``0o666``) or ``mkdir()`` (``0o777``) would give under the umask."""
    return (0o777 if directory else 0o666) & ~current_umask()


@contextlib.contextmanager
def naming_target(path: Path) -> Iterator[None]:
    """An OS error making the temporary file or folder beside ``path`` (a read-only folder, a
    read-only file system) is raised naming ``path``, the output the user asked for, and the
    folder it cannot write in, never the hidden temporary name.

    >>> import errno
    >>> with naming_target(Path("/out/fit.nc")):  # doctest: +ELLIPSIS
    ...     raise PermissionError(errno.EACCES, "Permission denied", "/out/.fit.nc.x1.tmp")
    Traceback (most recent call last):
    ...
    PermissionError: [Errno 13] Permission denied (cannot create files in /out): '/out/fit.nc'
    """
    try:
        yield
    except OSError as exc:
        if exc.errno is None or exc.strerror is None:
            raise
        where = f" (cannot create files in {path.parent})"
        raise OSError(exc.errno, exc.strerror + where, str(path)) from exc


def write_atomically(
    path: str | Path,
    write: Callable[[Path], object],
    overwrite: bool = False,
    suffix: str = ".tmp",
) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it to ``path``.

    Refuses to replace an existing ``path`` unless ``overwrite``. ``suffix`` is the temporary
    file's (some writers, such as matplotlib's, choose the format by it). An OS error that
    names the temporary file (a full disk, say) is raised naming ``path``, the file the user
    asked for; the temporary file is never left behind."""
    path = Path(path)
    if path.is_dir():  # os.replace would fail after the work, with an error naming no file
        raise IsADirectoryError(f"{path} is a directory; give the name of a file to write")
    if path.exists() and not overwrite:
        raise FileExistsError(
            f"{path} exists; pass overwrite=True (on the command line --force) to replace it"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with naming_target(path):
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    tmp = Path(name)
    track(tmp)
    renamed = False
    try:
        write(tmp)
        tmp.chmod(default_mode())
        os.replace(tmp, path)
        renamed = True
    except OSError as exc:
        named = exc.filename
        if not isinstance(named, str | bytes | os.PathLike) or Path(os.fsdecode(named)) != tmp:
            raise
        # OSError(errno, ...) is the errno's own subclass (FileNotFoundError, ...)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    finally:
        tmp.unlink(missing_ok=True)
        untrack(tmp, path if renamed else None)
    return path
