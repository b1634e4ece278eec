"""The ``bayesscale`` command line: thin parsing in front of library calls.

Each module in this package that defines ``register(subparsers)`` adds one command;
``main`` discovers them, so adding a command is adding a module. Heavy imports
(PyMC, JAX) happen inside the command functions, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from bayesscale import __version__

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C


class CommandError(Exception):
    """A user-facing failure: printed without a traceback, exit status 2."""


def output_path(value: str | None, force: bool) -> Path | None:
    """An ``--out`` path, checked before any work: an existing file needs ``--force``."""
    if value is None:
        return None
    path = Path(value)
    if path.exists() and not force:
        raise CommandError(f"{path} exists; pass --force to replace it")
    return path


def check_prob(prob: float, flag: str = "--prob") -> None:
    """Interval masses are in (0, 1)."""
    if not 0 < prob < 1:
        raise CommandError(f"{flag} must be in (0, 1), got {prob}")


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
    try:
        if getattr(args, "interruptible", False):
            return int(_run_interruptibly(args) or 0)  # type: ignore[call-overload]
        return int(args.func(args) or 0)
    except (CommandError, ValueError, FileExistsError, FileNotFoundError) as exc:
        print(f"bayesscale {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _interrupted(args.command)
        return EXIT_INTERRUPTED


def _interrupted(command: str) -> None:
    """Remove unfinished outputs and say so in one line."""
    from bayesscale import atomic

    atomic.discard_pending()
    done = ", ".join(str(p) for p in atomic.WRITTEN)
    what = f"wrote only {done}" if done else "nothing written"
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
