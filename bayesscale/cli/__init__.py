"""The ``bayesscale`` command line: thin parsing in front of library calls.

Each module in this package that defines ``register(subparsers)`` adds one command;
``main`` discovers them, so adding a command is adding a module. Heavy imports
(PyMC, JAX) happen inside the command functions, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path

from bayesscale import __version__


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
        return int(args.func(args) or 0)
    except (CommandError, ValueError, FileExistsError, FileNotFoundError) as exc:
        print(f"bayesscale {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
