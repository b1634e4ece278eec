"""The report as a Markdown document: its sections, and the figures, tables and files it
writes beside it (rendering only: nothing here fits, solves or reads a fit file).

>>> md = Sections()
>>> md.add("# title")
>>> md.warn("law fit: DIAGNOSTICS FAILED")
>>> md.add("text")
>>> print(md.text())
# title
<BLANKLINE>
**law fit: DIAGNOSTICS FAILED**
<BLANKLINE>
text
<BLANKLINE>
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import xarray as xr

from bayesscale import names


@dataclass
class Sections:
    """The report's Markdown, section by section; ``warnings`` go right under the title."""

    parts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, *lines: str) -> None:
        self.parts.append("\n".join(lines).rstrip() + "\n")

    def warn(self, line: str) -> None:
        self.warnings.append(line)

    def text(self) -> str:
        head, rest = self.parts[:1], self.parts[1:]
        flagged = [f"**{w}**\n" for w in self.warnings]
        return "\n".join(head + flagged + rest)


def diagnostics_line(what: str, d: Any, tree: xr.DataTree) -> str:
    verdict = "converged" if d.ok else f"**{d.headline()}**"
    return (
        f"{what}: {tree.attrs.get(names.ATTR_SAMPLER)}, {tree.attrs.get('chains')} chains x "
        f"{tree.attrs.get('draws')} draws, seed {tree.attrs.get(names.ATTR_SEED)}; max R-hat "
        f"{d.max_rhat:.4f}, min bulk ESS {d.min_ess_bulk:.0f}, divergences {d.divergences}: "
        f"{verdict}."
    )


def write_figure(tmp: Path, name: str, fig: Any, save: Callable[..., Path]) -> str:
    import matplotlib.pyplot as plt

    path = save(fig, tmp / "figures" / f"{name}.png")
    plt.close(fig)
    return f"![{name}](figures/{path.name})\n"


def write_tables(tmp: Path, name: str, tables: list[tuple[str, Any]]) -> list[str]:
    """Write each table as ``tables/<name>[_<part>].md`` and ``.tex``; return the Markdown."""
    lines: list[str] = []
    for part, tbl in tables:
        stem = name if not part else f"{name}_{part}"
        markdown = tbl.to_markdown()
        (tmp / "tables" / f"{stem}.md").write_text(markdown)
        (tmp / "tables" / f"{stem}.tex").write_text(tbl.to_latex())
        lines += [markdown, ""]
    return lines


def sentence(text: str) -> str:
    """``text`` as a sentence: a capital first letter and a full stop."""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    frame.to_csv(path, index=False)
