"""A Sphinx directive that writes the ``--help`` of the ``bayesscale`` command and of every
subcommand into the page, generated at build time from ``bayesscale.cli.build_parser()``.

Usage (MyST)::

    ```{bayesscale-cli}
    ```

Each subcommand gets a section (``bayesscale fit``, ...) holding its one-line summary and its
``--help`` text as a literal block, exactly as the terminal prints it at 88 columns. Nothing
of the help text is parsed as markup, so any help string builds without warnings, and the
page always lists the commands the code registers (they are discovered at runtime).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

HELP_COLUMNS = 88


@contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse wraps help at ``$COLUMNS - 2``: fix it so the page does not depend on the
    terminal the docs were built in."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width + 2)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, one-line help, parser)`` of every subcommand, in the order ``--help`` lists."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, str(summaries.get(name, "")), sub))
    return out


def _literal(text: str) -> nodes.literal_block:
    block = nodes.literal_block(text, text)
    block["language"] = "text"
    return block


class CliHelp(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        from bayesscale.cli import build_parser

        with _columns(HELP_COLUMNS):
            parser = build_parser()
            result: list[nodes.Node] = [_literal(parser.format_help().rstrip())]
            for name, summary, sub in subcommands(parser):
                section = nodes.section(ids=[f"cmd-{name}"], names=[f"bayesscale {name}"])
                section += nodes.title("", "", nodes.literal("", f"bayesscale {name}"))
                if summary:
                    section += nodes.paragraph("", summary[0].upper() + summary[1:] + ".")
                section += _literal(sub.format_help().rstrip())
                result.append(section)
        return result


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("bayesscale-cli", CliHelp)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
