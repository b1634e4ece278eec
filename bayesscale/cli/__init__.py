"""The ``bayesscale`` command line: thin parsing in front of library calls.

Each module in this package that defines ``register(subparsers)`` adds one command;
``main`` discovers them, so adding a command is adding a module. Heavy imports
(PyMC, JAX) happen inside the command functions, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import pkgutil
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from bayesscale import atomic, names
from bayesscale._version import __version__
from bayesscale.core.intervals import DEFAULT_PROB
from bayesscale.data.examples import example_for
from bayesscale.data.extrapolation import WARN_FACTOR, check_threshold

EXIT_USAGE = 2  # a usage or input error: nothing was computed
EXIT_DIAGNOSTICS = 3  # a fit failed its diagnostics (or is a preview) under --strict
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C
_COMMAND = ["bayesscale"]  # the command running, for the messages of shared helpers


class CommandError(Exception):
    """A user-facing failure: printed without a traceback, exit status 2."""


def output_path(
    value: str | None, force: bool, inputs: Sequence[str | Path | None] = ()
) -> Path | None:
    """An ``--out`` path, checked before any work: an existing file needs ``--force``; a
    directory, or one of the command's ``inputs``, is refused even with it."""
    if value is None:
        return None
    path = Path(value)
    if path.is_dir():
        raise CommandError(f"{path} is a directory; --out takes the name of a file")
    for given in inputs:
        if given is not None and Path(given).exists() and path.resolve() == Path(given).resolve():
            raise CommandError(f"{path} is also an input of this command; write elsewhere")
    if path.exists() and not force:
        raise CommandError(f"{path} exists; pass --force to replace it")
    # the nearest folder that exists: the output (and any folder it needs) is made there
    # (a loop, not next(): this package's module ``next`` shadows the builtin here)
    for folder in path.absolute().parents:
        if folder.exists():
            if not (folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)):
                raise CommandError(f"{path}: cannot write in {folder}")
            break
    return path


def check_prob(prob: float, flag: str = "--prob") -> None:
    """Interval masses are in (0, 1)."""
    if not 0 < prob < 1:
        raise CommandError(f"{flag} must be in (0, 1), got {prob}")


# --- options shared by the commands that read fits: one name, one meaning, one help text ------

PROB_HELP = (
    f"mass of the equal-tailed credible interval shown around each median (default {DEFAULT_PROB})"
)
STRICT_HELP = (
    "refuse (exit 3, nothing written) when a fit's diagnostics failed or it is a --preview fit; "
    "without it the verdict goes to standard error (with --json too) and the command goes on"
)
FORCE_HELP = "replace an existing output file (without it an existing file is never overwritten)"


def add_prob(parser: argparse.ArgumentParser) -> None:
    """``--prob P``: the interval mass, the same flag and text in every command."""
    parser.add_argument("--prob", type=float, default=DEFAULT_PROB, help=PROB_HELP)


def add_strict(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--strict", action="store_true", help=STRICT_HELP)


def add_new_groups(parser: argparse.ArgumentParser) -> None:
    """``--new-groups pooled``: held-out settings the fit does not know, from the population."""

    parser.add_argument(
        "--new-groups",
        choices=(names.NEW_GROUPS_POOLED,),
        default=None,
        help="predict held-out settings (and groups) the fit does not know from the "
        "population's spreads; without it only a new model of a known group is (with a size "
        "term)",
    )


def add_force(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)


def add_warn_beyond(parser: argparse.ArgumentParser) -> None:

    parser.add_argument(
        "--warn-beyond",
        type=float,
        default=WARN_FACTOR,
        metavar="F",
        help="warn when a number lies more than F times outside the swept range of an axis "
        f"(beyond its largest or below its smallest value in the setting's data; default "
        f"{WARN_FACTOR:g})",
    )


class Verdict(Protocol):
    """A fit's diagnostics (``bayesscale.data.fitfile.Diagnostics`` and the pricing fit's)."""

    def headline(self) -> str | None: ...


def refuse_failed(what: str, diagnostics: Verdict, strict: bool) -> None:
    """A fit whose diagnostics failed (or a preview): with ``--strict`` refused, one line
    naming the fit and its verdict, nothing written, exit status 3 (:data:`EXIT_DIAGNOSTICS`);
    without it the verdict goes to standard error (whatever goes to standard output, JSON
    included) and the command goes on."""
    from bayesscale.data.fitfile import DiagnosticsRefusedError

    headline = diagnostics.headline()
    if headline is None:
        return
    if strict:
        raise DiagnosticsRefusedError(f"{what}: {headline} (--strict: nothing written)")
    print(f"bayesscale {_COMMAND[0]}: warning: {what}: {headline}", file=sys.stderr)


def check_warn_beyond(value: float) -> float:

    try:
        return check_threshold(value)
    except ValueError as exc:
        raise CommandError(f"--warn-beyond: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesscale",
        description="Bayesian scaling laws for agentic RL data.",
    )
    parser.add_argument("--version", action="version", version=f"bayesscale {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _COMMAND[0] = args.command
    with _one_line_warnings(args.command), _closed_stdout_tolerated():
        try:
            if getattr(args, "interruptible", False):
                return int(_run_interruptibly(args) or 0)  # type: ignore[call-overload]
            return int(args.func(args) or 0)
        except (CommandError, ValueError) as exc:
            print(f"bayesscale {args.command}: error: {exc}{_example_hint(exc)}", file=sys.stderr)
            return int(getattr(exc, "exit_status", EXIT_USAGE))
        except OSError as exc:
            # The package's own refusals (``FileExistsError("... pass --force")``) and the OS's
            # errors on a named path (missing, a directory, not readable): one line. Any other
            # OS error (a full disk, a lost connection) is a fault: its traceback is kept.
            if exc.strerror is not None and exc.filename is None:
                raise
            print(f"bayesscale {args.command}: error: {os_error_text(exc)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            _interrupted(args.command)
            return EXIT_INTERRUPTED
        except ImportError as exc:
            missing = missing_optional(exc)
            if missing is None:
                raise
            print(f"bayesscale {args.command}: error: {missing}", file=sys.stderr)
            return 2


def _example_hint(exc: Exception) -> str:
    """Where a missing input is a file of a bundled example, say how to get it."""

    name = example_for(str(exc))
    return f" (bayesscale example {name} writes it into the current folder)" if name else ""


# Optional packages a command may need, and the extra of pyproject.toml that installs each.
OPTIONAL_EXTRAS = {"ray": "ray", "nutpie": "nutpie"}


def missing_optional(exc: ImportError) -> str | None:
    """One line for an optional package that is not installed (None for any other import
    error): which package, and the ``pip install`` that adds it.

    >>> missing_optional(ModuleNotFoundError("No module named 'ray'", name="ray"))
    "needs ray, which is not installed: pip install 'bayesscale[ray]'"
    >>> missing_optional(ImportError("nutpie not found. Install it with conda"))
    "needs nutpie, which is not installed: pip install 'bayesscale[nutpie]'"
    """
    name = (exc.name or "").partition(".")[0]
    if name not in OPTIONAL_EXTRAS:  # PyMC's own words for a missing nutpie
        # (a loop, not next(): this package's module ``next`` shadows the builtin here)
        found = [n for n in OPTIONAL_EXTRAS if str(exc).startswith(f"{n} not found")]
        if not found:
            return None
        name = found[0]
    return (
        f"needs {name}, which is not installed: pip install 'bayesscale[{OPTIONAL_EXTRAS[name]}]'"
    )


def os_error_text(exc: OSError) -> str:
    """One line for an OS error: ``PATH: reason`` where the OS names a path (``PATH -> OTHER:
    reason`` for a rename), else the error as raised (the package's own messages).

    >>> os_error_text(IsADirectoryError(21, "Is a directory", "obs.csv"))
    'obs.csv: is a directory'
    >>> os_error_text(FileExistsError("fit.nc exists; pass --force to replace it"))
    'fit.nc exists; pass --force to replace it'
    """
    if exc.filename is None or not exc.strerror:
        return str(exc)
    where = str(exc.filename)
    if exc.filename2 is not None:
        where += f" -> {exc.filename2}"
    return f"{where}: {exc.strerror[0].lower()}{exc.strerror[1:]}"


@contextlib.contextmanager
def _one_line_warnings(command: str) -> Iterator[None]:
    """Warnings as one line each (``bayesscale fit: warning: ...``), once, without the
    package's file, line and source that Python prints by default."""
    shown = warnings.showwarning
    said: set[str] = set()

    def show(
        message: Warning | str, category: type[Warning], *args: object, **kwargs: object
    ) -> None:
        text = f"bayesscale {command}: warning: {message}"
        if text not in said:  # the same input may be checked twice on its way
            said.add(text)
            print(text, file=sys.stderr)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


class _PipeGuard(io.TextIOBase):
    """Standard output that survives its reader going away (``bayesscale ... | head``): once
    the pipe is closed, further output is discarded and the command still finishes its work,
    so a closed stdout never costs the user an output file."""

    def __init__(self, stream: io.TextIOBase) -> None:
        self.stream = stream
        self.pipe_closed = False

    def write(self, text: str) -> int:
        if not self.pipe_closed:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._discard()
        return len(text)

    def flush(self) -> None:
        if not self.pipe_closed:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._discard()

    def _discard(self) -> None:
        self.pipe_closed = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())  # Python's own flush at exit goes there too
        os.close(devnull)

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()


@contextlib.contextmanager
def _closed_stdout_tolerated() -> Iterator[None]:
    if sys.stdout is not sys.__stdout__ or sys.stdout is None:  # captured (tests, notebooks)
        yield
        return
    original = sys.stdout
    sys.stdout = _PipeGuard(original)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = original


def _interrupted(command: str) -> None:
    """Remove unfinished outputs and say so in one line: what was written, and the unfinished
    files and folders removed (a report's hidden ``.NAME.partial-*`` folder among them), or
    any that could not be."""

    removed = atomic.discard_pending()
    done = ", ".join(str(p) for p in atomic.WRITTEN)
    what = f"wrote only {done}" if done else "nothing written"
    gone = [p for p in removed if not p.exists()]
    left = [p for p in removed if p.exists()]
    if gone:
        what += f"; removed the unfinished {', '.join(str(p) for p in gone)}"
    if left:
        what += f"; could not remove the unfinished {', '.join(str(p) for p in left)}: delete it"
    sys.stdout.flush()
    print(f"\nbayesscale {command}: interrupted: {what}", file=sys.stderr)
    sys.stderr.flush()


def _run_interruptibly(args: argparse.Namespace) -> object:
    """Run a long command (one that samples) in a worker thread, so that Ctrl-C answers
    within a tenth of a second even while XLA compiles (which Python cannot interrupt):
    unfinished outputs are removed and the process exits with status 130 at once."""
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["value"] = args.func(args)
        except BaseException as exc:  # handed to the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=work, name=f"bayesscale-{args.command}", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except KeyboardInterrupt:
        _interrupted(args.command)
        os._exit(EXIT_INTERRUPTED)  # the worker may be inside XLA; nothing of it is kept
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome.get("value")


if __name__ == "__main__":
    sys.exit(main())
