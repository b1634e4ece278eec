"""Paper tables in Markdown and LaTeX (booktabs): exponents, pricing, recipe, held-out check.

Every value with uncertainty is written ``median [lower, upper]`` with the equal-tailed
interval of the source summary (``summary.summarise``, ``pricing.summarise_pricing``,
``recipe.summarize``; default 90%), e.g. ``0.35 [0.27, 0.43]``; an infinite bound (no
collapse) is ``∞`` (``$\\infty$`` in LaTeX). A table is a :class:`PaperTable`: header, rows,
caption, label, optional ``\\midrule`` breaks and notes, and optional provenance written as
comments (``<!-- -->`` in Markdown, ``%`` in LaTeX). Text is escaped for each format:
``\\ | * _ ``` in Markdown; ``\\ & % $ # _ { } ~ ^ | < >`` in LaTeX.

The held-out check's frame (contract shared with the held-out module): columns ``setting``,
``observed``, ``predicted``, ``lower``, ``upper`` (success rates in [0, 1]) and
``attrs["prob"]``, ``attrs["coverage"]``; coverage is the share of rows with
``lower <= observed <= upper``.

Example
-------
>>> t = PaperTable(("axis", "exponent"), (("env", Interval(0.35, 0.27, 0.43)),), caption="x")
>>> print(t.to_markdown(), end="")
| axis | exponent |
| :--- | :---: |
| env | 0.35 [0.27, 0.43] |
<BLANKLINE>
x
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

import numpy as np
import pandas as pd
import xarray as xr

from bayesscale import names
from bayesscale.atomic import write_atomically
from bayesscale.data.extrapolation import WARN_FACTOR, beyond, outside, reach_from_attr, reach_text
from bayesscale.formatting import INFINITY_MD, format_number, times

if TYPE_CHECKING:
    from bayesscale.report.figures.provenance import Provenance

# held-out check frame (bayesscale.checks.heldout.check; the names are declared in bayesscale.names)
SETTING: Final = names.SETTING
OBSERVED: Final = names.OBSERVED
PREDICTED: Final = names.PREDICTED
LOWER: Final = names.LOWER
UPPER: Final = names.UPPER
HELDOUT_COLUMNS: Final = (SETTING, OBSERVED, PREDICTED, LOWER, UPPER)
ATTR_PROB: Final = names.ATTR_PROB
ATTR_COVERAGE: Final = names.ATTR_COVERAGE
ATTR_OUTCOME: Final = "outcome"  # "success" (rates in [0, 1], the default) or "loss"
OVERALL: Final = "overall"
COVERAGE_TOLERANCE: Final = 1e-9

MARKDOWN: Final = ".md"
LATEX: Final = ".tex"
INFINITY_TEX: Final = "$\\infty$"

_LATEX_ESCAPES: Final = {
    "\\": "\\textbackslash{}",
    "&": "\\&",
    "%": "\\%",
    "$": "\\$",
    "#": "\\#",
    "_": "\\_",
    "{": "\\{",
    "}": "\\}",
    "~": "\\textasciitilde{}",
    "^": "\\textasciicircum{}",
    "|": "\\textbar{}",
    "<": "\\textless{}",
    ">": "\\textgreater{}",
    "∞": "$\\infty$",
    "≥": "$\\geq$",
    "≤": "$\\leq$",
    "κ": "$\\kappa$",
    "α": "$\\alpha$",
    "†": "$^{\\dagger}$",
    "‡": "$^{\\ddagger}$",
}
_MARKDOWN_SPECIAL: Final = "\\|*_`"
LONG_TABLE_ROWS: Final = 40  # more rows than a page holds: a longtable


class TableError(ValueError):
    """Input a table cannot use: the message names what is missing or wrong."""


def escape_latex(text: str) -> str:
    """Escape LaTeX's special characters (text mode).

    >>> escape_latex("Qwen3-8B | grpo | math_code & 5% #1")
    'Qwen3-8B \\\\textbar{} grpo \\\\textbar{} math\\\\_code \\\\& 5\\\\% \\\\#1'
    >>> escape_latex("--prior-scale")  # two hyphens stay two (TeX would set an en dash)
    '-{}-prior-scale'
    """
    out = "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))
    while "--" in out:
        out = out.replace("--", "-{}-")
    return out


def escape_markdown(text: str) -> str:
    """Escape the characters that break or restyle a Markdown table cell.

    >>> escape_markdown("a | b_c")
    'a \\\\| b\\\\_c'
    """
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in str(text))


class Cell(Protocol):
    """A table cell that renders itself in each format."""

    def markdown(self) -> str: ...

    def latex(self) -> str: ...


@dataclass(frozen=True)
class Text:
    """Plain text, escaped for each format."""

    text: str

    def markdown(self) -> str:
        return escape_markdown(self.text)

    def latex(self) -> str:
        return escape_latex(self.text)


@dataclass(frozen=True)
class Raw:
    """Pre-formatted text for each format (a header with math: ``Raw("α env", "$\\alpha$")``)."""

    md: str
    tex: str

    def markdown(self) -> str:
        return self.md

    def latex(self) -> str:
        return self.tex


def _latex_number(text: str) -> str:
    if text.startswith("-"):
        text = "$-$" + text[1:]
    return text.replace(INFINITY_MD, INFINITY_TEX)


@dataclass(frozen=True)
class Interval:
    """``median [lower, upper]``; ``None`` or ``inf`` bounds print as ``∞``."""

    median: float | None
    lower: float | None
    upper: float | None
    digits: int | None = 2
    sig: int = 3

    @classmethod
    def of(cls, d: Mapping[str, Any], digits: int | None = 2, sig: int = 3) -> Interval:
        """From a summary's ``{"median": ..., "lower": ..., "upper": ...}``."""
        missing = [k for k in ("median", "lower", "upper") if k not in d]
        if missing:
            raise TableError(f"an interval needs median, lower, upper; {dict(d)} lacks {missing}")
        return cls(d["median"], d["lower"], d["upper"], digits, sig)

    def _parts(self) -> tuple[str, str, str]:
        f = [format_number(v, self.digits, self.sig) for v in (self.median, self.lower, self.upper)]
        return f[0], f[1], f[2]

    def markdown(self) -> str:
        m, lo, hi = self._parts()
        return f"{m} [{lo}, {hi}]"

    def latex(self) -> str:
        m, lo, hi = (_latex_number(p) for p in self._parts())
        return f"{m} [{lo}, {hi}]"


@dataclass(frozen=True)
class Number:
    """One number without interval."""

    value: float | None
    digits: int | None = 2
    sig: int = 3

    def markdown(self) -> str:
        return format_number(self.value, self.digits, self.sig)

    def latex(self) -> str:
        return _latex_number(format_number(self.value, self.digits, self.sig))


def _cell(value: Cell | str | int | float) -> Cell:
    if isinstance(value, str):
        return Text(value)
    if isinstance(value, bool):
        return Text(str(value))
    if isinstance(value, int):
        return Number(value, digits=0)
    if isinstance(value, float):
        return Number(value)
    return value


@dataclass(frozen=True)
class PaperTable:
    """A table for a paper: ``header`` and ``rows`` of cells (str/int/float or :class:`Cell`),
    ``caption``, LaTeX ``label``, ``align`` (one of ``l c r`` per column; default: first
    column ``l``, the rest ``c``), ``breaks`` (row indices before which a rule is drawn),
    ``notes`` (lines under the table) and ``provenance`` (written as comments)."""

    header: Sequence[Cell | str]
    rows: Sequence[Sequence[Cell | str | int | float]]
    caption: Cell | str = ""
    label: str = ""
    align: str | None = None
    breaks: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    provenance: Provenance | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        n = len(self.header)
        if n == 0:
            raise TableError("a table needs at least one column")
        for i, row in enumerate(self.rows):
            if len(row) != n:
                raise TableError(f"row {i + 1} has {len(row)} cells, the header {n}")
        if self.align is not None and (len(self.align) != n or set(self.align) - set("lcr")):
            raise TableError(f"align must be one of l, c, r per column ({n}), got {self.align!r}")
        if any(not 0 < b < len(self.rows) for b in self.breaks):
            raise TableError(f"breaks must be inside the table (1..{len(self.rows) - 1})")

    @property
    def alignment(self) -> str:
        return self.align or "l" + "c" * (len(self.header) - 1)

    def _comments(self) -> list[str]:
        if self.provenance is None:
            return []
        lines = [f"made by bayesscale {self.provenance.version}"]
        for s in self.provenance.sources:
            text = f"{s.kind}: data {s.data_file} sha256 {s.data_sha256}"
            if s.spec:
                text += f", spec {s.spec}"
            if s.seed is not None:
                text += f", {s.sampler} seed {s.seed}"
            lines.append(text)
        return lines

    def to_markdown(self) -> str:
        """A GitHub-flavoured Markdown table, the caption and notes after it."""
        marks = {"l": ":---", "c": ":---:", "r": "---:"}
        lines = [f"<!-- {c.replace('--', '- -')} -->" for c in self._comments()]
        lines.append("| " + " | ".join(_cell(h).markdown() for h in self.header) + " |")
        lines.append("| " + " | ".join(marks[a] for a in self.alignment) + " |")
        for row in self.rows:
            lines.append("| " + " | ".join(_cell(v).markdown() for v in row) + " |")
        tail = [_cell(self.caption).markdown()] if self.caption else []
        tail += [escape_markdown(n) for n in self.notes]
        return "\n".join(lines + (["", *tail] if tail else [])) + "\n"

    def to_latex(self, environment: str = "table", placement: str = "t") -> str:
        """A booktabs ``tabular`` inside ``environment`` (``table``, ``table*``; ``""`` for the
        bare tabular) with ``\\caption`` and ``\\label``. Needs ``\\usepackage{booktabs}``.
        A ``table`` of more than ``LONG_TABLE_ROWS`` (40) rows, which no page holds, is set as a
        ``longtable`` instead (header repeated on every page; ``\\usepackage{longtable}``)."""
        if environment == "table" and len(self.rows) > LONG_TABLE_ROWS:
            return self._to_longtable()
        out = [f"% {c}" for c in self._comments()]
        if environment:
            out += [f"\\begin{{{environment}}}[{placement}]", "\\centering"]
            if self.caption:
                out.append(f"\\caption{{{_cell(self.caption).latex()}}}")
            if self.label:
                out.append(f"\\label{{{_latex_label(self.label)}}}")
        out += [f"\\begin{{tabular}}{{{self.alignment}}}", "\\toprule"]
        out += [self._latex_header(), "\\midrule", *self._latex_body()]
        out += ["\\bottomrule", "\\end{tabular}"]
        if self.notes:
            out.append(f"\\par\\smallskip{self._latex_notes()}")
        if environment:
            out.append(f"\\end{{{environment}}}")
        return "\n".join(out) + "\n"

    def _to_longtable(self) -> str:
        out = [f"% {c}" for c in self._comments()]
        out.append("% needs \\usepackage{booktabs} and \\usepackage{longtable}")
        out.append(f"\\begin{{longtable}}{{{self.alignment}}}")
        if self.caption or self.label:
            caption = f"\\caption{{{_cell(self.caption).latex()}}}" if self.caption else ""
            label = f"\\label{{{_latex_label(self.label)}}}" if self.label else ""
            out.append(f"{caption}{label} \\\\")
        header = self._latex_header()
        out += ["\\toprule", header, "\\midrule", "\\endfirsthead"]
        out += ["\\toprule", header, "\\midrule", "\\endhead"]
        out += ["\\bottomrule", "\\endlastfoot", *self._latex_body(), "\\end{longtable}"]
        if self.notes:
            out.append(self._latex_notes())
        return "\n".join(out) + "\n"

    def _latex_header(self) -> str:
        return " & ".join(_cell(h).latex() for h in self.header) + " \\\\"

    def _latex_body(self) -> list[str]:
        """The rows, a ``\\midrule`` before each break."""
        out = []
        for i, row in enumerate(self.rows):
            if i in self.breaks:
                out.append("\\midrule")
            out.append(" & ".join(_cell(v).latex() for v in row) + " \\\\")
        return out

    def _latex_notes(self) -> str:
        return "{\\footnotesize " + " ".join(escape_latex(n) for n in self.notes) + "}"

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write Markdown (``.md``) or LaTeX (``.tex``) atomically; refuses to replace an
        existing file unless ``overwrite``."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (MARKDOWN, LATEX):
            raise TableError(f"{path}: unknown table format {path.suffix!r}; use .md or .tex")
        text = self.to_markdown() if suffix == MARKDOWN else self.to_latex()
        return write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), overwrite)


def _latex_label(label: str) -> str:
    bad = set(label) & set("\\{}%#&$ ")
    if bad:
        raise TableError(f"a LaTeX label cannot contain {sorted(bad)}: {label!r}")
    return label


def _pct(prob: float) -> str:
    return f"{round(100 * float(prob))}%"


# --- exponents (summary.summarise) ----------------------------------------------------------------


def exponent_table(
    summary: Mapping[str, Any],
    *,
    digits: int = 2,
    ordering: bool = True,
    label: str = "tab:exponents",
    provenance: Provenance | None = None,
) -> PaperTable:
    """Population and per-setting exponents from :func:`bayesscale.law.summary.summarise`, one
    column per axis, with ``P(alpha_1 > alpha_2 > ...)`` per row (``ordering``)."""
    try:
        axes = list(summary["ordering"]["axes"])
        population = summary["exponents"]["population"]
        per_setting = summary["exponents"]["settings"]
        prob = float(summary["prob"])
    except (KeyError, TypeError) as exc:
        raise TableError(f"not a summary.summarise result: missing {exc}") from exc
    header: list[Cell | str] = ["setting"]
    header += [Raw(f"α {a}", f"$\\alpha_{{\\mathrm{{{escape_latex(a)}}}}}$") for a in axes]
    if ordering:
        header.append(Raw("P(order)", "P(order)"))
    rows: list[list[Cell | str | int | float]] = []
    pop_row: list[Cell | str | int | float] = ["population"]
    pop_row += [
        _flagged(Interval.of(population[a], digits), population[a].get("flag")) for a in axes
    ]
    if ordering:
        pop_row.append(Number(summary["ordering"]["population"]))
    rows.append(pop_row)
    for setting, values in per_setting.items():
        row: list[Cell | str | int | float] = [str(setting)]
        row += [_flagged(Interval.of(values[a], digits), values[a].get("flag")) for a in axes]
        if ordering:
            row.append(Number(summary["ordering"]["settings"][setting]))
        rows.append(row)
    text = (
        f"Scaling exponents: posterior median [{_pct(prob)} equal-tailed interval]; "
        f"model {summary.get('model', '?')}."
    )
    caption: Cell = Text(text)
    if ordering:
        order_md = " > ".join(f"α_{a}" for a in axes)
        order_tex = " > ".join(f"\\alpha_{{\\mathrm{{{escape_latex(a)}}}}}" for a in axes)
        caption = Raw(
            escape_markdown(f"{text} P(order) is the posterior probability of {order_md}."),
            f"{escape_latex(text)} P(order) is the posterior probability of ${order_tex}$.",
        )
    return PaperTable(
        header,
        rows,
        caption,
        label,
        breaks=(1,) if len(rows) > 1 else (),
        notes=_prior_notes(summary),
        provenance=provenance,
    )


@dataclass(frozen=True)
class _Marked:
    """A cell followed by a marker (``†``/``‡``: a prior-sensitive or prior-dominated
    exponent, :mod:`bayesscale.law.sensitivity`)."""

    cell: Cell
    marker: str

    def markdown(self) -> str:
        return self.cell.markdown() + self.marker

    def latex(self) -> str:
        return self.cell.latex() + escape_latex(self.marker)


def _flagged(cell: Cell, flag: str | None) -> Cell:
    """``cell`` followed by the marker of an exponent's ``flag`` (``None``: unmarked)."""
    from bayesscale.law.sensitivity import MARKERS

    marker = MARKERS.get(flag or "", "")
    return _Marked(cell, marker) if marker else cell


def _prior_notes(summary: Mapping[str, Any]) -> tuple[str, ...]:
    """A note naming the markers and the rule when an exponent is flagged."""
    from bayesscale.law.sensitivity import (
        FLAG_BORDERLINE,
        FLAG_DOMINATED,
        FLAG_SENSITIVE,
        MARKERS,
    )

    ident = summary.get("identification")
    entries = list(summary["exponents"]["population"].values())
    entries += [v for values in summary["exponents"]["settings"].values() for v in values.values()]
    flags = {e.get("flag") for e in entries if isinstance(e, Mapping)} - {None}
    if not flags or not ident:
        return ()
    t = ident["thresholds"]
    return (
        f"{MARKERS[FLAG_DOMINATED]} prior-dominated, {MARKERS[FLAG_SENSITIVE]} prior-sensitive: "
        f"the posterior of log α kept more than {1 - t['contraction_dominated']:.0%} "
        f"(resp. {1 - t['contraction_sensitive']:.0%}) of the prior's variance, or power-scaling "
        f"the prior moved it (sensitivity ≥ {t['psense']:g}); the interval leans on the prior. "
        f"{MARKERS[FLAG_BORDERLINE]} borderline: the Monte Carlo error of that share cannot tell "
        "prior-sensitive from identified.",
    )


# --- pricing (pricing.summarise_pricing) -----------------------------------------------------------


def _kappa0_cell(entry: Mapping[str, Any], digits: int) -> Cell:
    """A kappa0 interval followed by its identification marker, if flagged."""
    from bayesscale.pricing.summary import kappa0_marker

    cell = Interval.of(entry["kappa0"], digits)
    marker = kappa0_marker(entry)
    return _Marked(cell, marker) if marker else cell


def pricing_table(
    result: Mapping[str, Any],
    *,
    digits: int = 2,
    pooled: bool = True,
    label: str = "tab:pricing",
    provenance: Provenance | None = None,
) -> PaperTable:
    """Per method kappa0, r* and the peak ratio from :func:`bayesscale.pricing.summary`
    (what ``bayesscale pricing-table`` prints); with ``pooled``, the pooled kappa0 per axis
    below a rule. Methods whose r* is infinite in some draws get a note."""
    try:
        methods = result["methods"]
        axes = result["axes"]
        prob = float(result["prob"])
        threshold = float(result["threshold"])
    except (KeyError, TypeError) as exc:
        raise TableError(f"not a pricing.summarise_pricing result: missing {exc}") from exc
    header: list[Cell | str] = [
        "method",
        "axis",
        "runs",
        Raw("κ0", "$\\kappa_0$"),
        Raw("r*", "$r^*$"),
        Raw("peak ratio", "peak ratio"),
    ]
    rows: list[list[Cell | str | int | float]] = []
    notes = []
    for m, d in methods.items():
        rows.append(
            [
                str(m),
                str(d["axis"]),
                int(d["runs"]),
                _kappa0_cell(d, digits),
                Interval.of(d["r_star"], digits),
                Interval.of(d["peak_ratio"], digits),
            ]
        )
        share = float(d.get("r_star_no_collapse_share", 0.0))
        if share > 0:
            notes.append(f"{m}: no collapse (r* = ∞) in {share:.0%} of posterior draws.")
    breaks: tuple[int, ...] = ()
    if pooled and axes:
        breaks = (len(rows),)
        for a, d in axes.items():
            rows.append([f"pooled ({a})", str(a), "", _kappa0_cell(d, digits), "", ""])
    parts = (
        f"Synthetic-data pricing: posterior median [{_pct(prob)} equal-tailed interval] of the "
        "small-ratio discount ",
        ", the collapse ratio ",
        f" (normalised success below {threshold:g} of the pure-real baseline, "
        f"{result.get('frame', '')} frame) and the ratio of peak benefit. Both ratios are read "
        "off the fitted collapse curve: between the swept ratios, and in their intervals, they "
        "carry the curve's assumed shape as much as the data.",
    )
    caption = Raw(
        escape_markdown(f"{parts[0]}κ0{parts[1]}r*{parts[2]}"),
        f"{escape_latex(parts[0])}$\\kappa_0${escape_latex(parts[1])}$r^*${escape_latex(parts[2])}",
    )
    from bayesscale.pricing.summary import kappa0_flag_note

    flagged = kappa0_flag_note(result)
    if flagged is not None:
        notes.insert(0, flagged.replace("kappa0", "κ0"))
    return PaperTable(
        header,
        rows,
        caption,
        label,
        align="llrccc",
        breaks=breaks,
        notes=tuple(notes),
        provenance=provenance,
    )


# --- recipe (recipe.recipe) --------------------------------------------------------------------------


def _pick_budgets(have: np.ndarray, budgets: Iterable[float] | None) -> list[int]:
    if budgets is None:
        return list(range(have.size))
    out = []
    for b in budgets:
        match = np.flatnonzero(np.isclose(have, float(b), rtol=1e-9, atol=0))
        if match.size == 0:
            raise TableError(f"budget {b:g} is not in the recipe result: {have.tolist()}")
        out.append(int(match[0]))
    return out


def recipe_table(
    ds: xr.Dataset,
    *,
    budgets: Iterable[float] | None = None,
    settings: Sequence[str] | None = None,
    prob: float = 0.9,
    label: str = "tab:recipe",
    provenance: Provenance | None = None,
    warn_factor: float = WARN_FACTOR,
    exponent_flags: Mapping[str, Mapping[str, str]] | None = None,
) -> PaperTable:
    """Per (setting, budget): the optimal units bought per axis (median [interval] over the
    per-draw optima) and the success they buy, from :func:`bayesscale.recipe.solve`'s result
    summarised by :func:`bayesscale.recipe.output` at ``prob``, with the trajectories they
    make and the axes more than ``warn_factor`` times outside the swept range. ``budgets`` must
    be among the recipe's. ``exponent_flags`` (setting -> ``{axis: flag}``,
    :func:`bayesscale.recipe.output.exponent_flags` of the law fit) marks the units bought
    along an axis whose exponent the data barely identify in that setting (``‡``
    prior-dominated, ``†`` prior-sensitive), with a note under the table."""
    from bayesscale.recipe.output import summarize

    exponent_flags = exponent_flags or {}

    for var in (names.PURCHASED, names.SUCCESS_OPTIMUM):
        if var not in ds:
            raise TableError(f"the recipe result has no {var!r} (is it recipe.recipe output?)")
    s = summarize(ds, prob)
    have = np.asarray(ds[names.BUDGET_DIM].to_numpy(), dtype=float)
    picks = _pick_budgets(have, budgets)
    all_settings = [str(x) for x in ds[names.SETTING_DIM].to_numpy()]
    chosen = list(settings) if settings is not None else all_settings
    missing = [x for x in chosen if x not in all_settings]
    if missing:
        raise TableError(f"setting(s) {missing} not in the recipe result: {all_settings}")
    axes = [str(a) for a in ds[names.AXIS_DIM].to_numpy()]
    currency = str(ds.attrs.get(names.ATTR_CURRENCY, ""))
    units = json.loads(str(ds.attrs.get("units_short_json", "{}")))
    header: list[Cell | str] = ["setting", f"budget ({currency})" if currency else "budget"]
    header += [f"{a} ({units.get(a, 'units')})" for a in axes]
    trajectories = names.TRAJECTORIES in s
    if trajectories:
        header.append("trajectories")
    header.append("success")
    extent = names.EXTRAPOLATION in s
    if extent:
        header.append(f"beyond the data (>{warn_factor:g}x)")
    rows: list[list[Cell | str | int | float]] = []
    breaks = []
    for k, setting in enumerate(chosen):
        if k:
            breaks.append(len(rows))
        for j in picks:
            rows.append(
                _recipe_row(s, have, j, setting, axes, exponent_flags.get(setting, {}), warn_factor)
            )
    caption = _recipe_caption(ds, prob, trajectories, extent, warn_factor)
    return PaperTable(
        header,
        rows,
        caption,
        label,
        breaks=tuple(breaks),
        notes=_recipe_notes(rows),
        provenance=provenance,
    )


def _recipe_row(
    s: xr.Dataset,
    have: np.ndarray,
    j: int,
    setting: str,
    axes: Sequence[str],
    flags: Mapping[str, str],
    warn_factor: float,
) -> list[Cell | str | int | float]:
    """One row of :func:`recipe_table`: the setting and budget ``have[j]``, the units bought per
    axis, the trajectories (if the summary ``s`` has them), the success and how far beyond the
    data (if it has that)."""
    trajectories = names.TRAJECTORIES in s
    extent = names.EXTRAPOLATION in s
    bought = s[names.PURCHASED].isel({names.BUDGET_DIM: j}).sel({names.SETTING_DIM: setting})
    row: list[Cell | str | int | float] = [setting, Number(float(have[j]), None)]
    at = {names.SETTING_DIM: setting}
    for a in axes:
        q = bought.sel({names.AXIS_DIM: a}).to_numpy().astype(float)
        row.append(_flagged(Interval(q[1], q[0], q[2], digits=None), flags.get(a)))
    if trajectories:
        qt = s[names.TRAJECTORIES].isel({names.BUDGET_DIM: j}).sel(at).to_numpy()
        row.append(Interval(float(qt[1]), float(qt[0]), float(qt[2]), digits=None))
    success = s[names.SUCCESS_OPTIMUM].isel({names.BUDGET_DIM: j}).sel(at)
    qs = success.to_numpy().astype(float)
    row.append(Interval(qs[1], qs[0], qs[2], digits=3))
    if extent:
        row.append(_beyond_text(s, j, setting, axes, warn_factor))
    return row


def _recipe_caption(
    ds: xr.Dataset, prob: float, trajectories: bool, extent: bool, warn_factor: float
) -> str:
    """:func:`recipe_table`'s caption."""
    caption = (
        f"Budget recipe: optimal units bought per axis and the success they buy, posterior "
        f"median [{_pct(prob)} equal-tailed interval] over per-draw optima; cost model "
        f"{ds.attrs.get(names.ATTR_COST_MODEL, '?')}; discounts: "
        f"{ds.attrs.get(names.ATTR_KAPPA_SOURCE, '?')}."
    )
    if trajectories:
        caption += " Trajectories: as the cost model counts them."
    if extent:
        caption += (
            f" Beyond the data: the axes whose median optimum lies more than {warn_factor:g}x "
            "outside the setting's swept range, with the factor over its largest swept value in "
            "units bought (a synthetic unit counts as one, before its discount); a power law "
            "says little that far beyond the range it was fitted on."
        )
    within = reach_from_attr(ds.attrs.get("within_data", "none"))
    if isinstance(within, float):
        caption += f" Every axis bounded at {within:g}x its largest swept value."
    elif within is not None:
        caption += (
            f" Each axis bounded at its reach times its largest swept value: {reach_text(within)}."
        )
    return caption


def _recipe_notes(rows: list[list[Cell | str | int | float]]) -> tuple[str, ...]:
    """The note on the exponent markers, if any row's cell carries one."""
    from bayesscale.law.sensitivity import (
        FLAG_BORDERLINE,
        FLAG_DOMINATED,
        FLAG_SENSITIVE,
        MARKERS,
    )

    notes: tuple[str, ...] = ()
    if any(isinstance(cell, _Marked) for row in rows for cell in row):
        notes = (
            f"{MARKERS[FLAG_DOMINATED]} prior-dominated, {MARKERS[FLAG_SENSITIVE]} "
            f"prior-sensitive, {MARKERS[FLAG_BORDERLINE]} borderline: the data barely (or "
            "perhaps barely) identify the setting's exponent along that axis "
            "(bayesscale summary), so the units bought along it lean on the prior; refit with "
            "wider exponent priors (bayesscale fit --prior-scale 2) and compare.",
        )
    return notes


def _beyond_text(s: xr.Dataset, j: int, setting: str, axes: Sequence[str], warn: float) -> str:
    """``traj 6,505x, env 59x`` (worst first) for the axes of a recipe row whose median optimum
    lies more than ``warn`` times outside the swept range; ``-`` when none does."""
    at = {names.SETTING_DIM: setting}
    median = s[names.EXTRAPOLATION].isel({names.BUDGET_DIM: j}).sel(at).sel(quantile=0.5)
    lo = s[names.SWEPT_MIN].sel(at)
    hi = s[names.SWEPT_MAX].sel(at)
    parts = []
    for a in axes:
        factor = float(median.sel({names.AXIS_DIM: a}))
        top = float(hi.sel({names.AXIS_DIM: a}))
        far = float(outside(factor * top, float(lo.sel({names.AXIS_DIM: a})), top))
        if beyond(far, warn):
            parts.append((far, f"{a} {times(factor)}"))
    return ", ".join(text for _, text in sorted(parts, reverse=True)) or "-"


def forms_table(
    stack: Mapping[str, Any], label: str = "tab:forms", provenance: Provenance | None = None
) -> PaperTable:
    """A stacked fit's forms (:func:`bayesscale.law.stack.stack_report`): per form its stacking
    weight with its interval, PSIS-LOO elpd (se), summed out-of-scale log score and whether
    its fit's diagnostics passed.

    >>> stack = {"prob": 0.9, "root_form": "power", "separated": False, "out_of_scale_points": 63,
    ...          "forms": {"power": {"weight": 0.6, "interval": [0.1, 0.9], "loo_elpd": -1.0,
    ...                              "loo_se": 2.0, "out_of_scale_elpd": -3.0,
    ...                              "diagnostics": {"ok": True}}}}
    >>> print(forms_table(stack).to_markdown().splitlines()[2])
    | power | 0.60 [0.10, 0.90] | -1.0 (2.0) | -3.0 | ok |
    """
    try:
        forms = stack["forms"]
        prob = float(stack["prob"])
        points = int(stack["out_of_scale_points"])
    except (KeyError, TypeError) as exc:
        raise TableError(f"not a stack_report result: missing {exc}") from exc
    header: list[Cell | str] = ["form", f"weight [{_pct(prob)}]", "LOO elpd (se)"]
    header += ["out-of-scale log score", "diagnostics"]
    rows: list[list[Cell | str | int | float]] = []
    for form, row in forms.items():
        lo, hi = row["interval"]
        rows.append(
            [
                str(form),
                Interval(row["weight"], lo, hi),
                Text(f"{row['loo_elpd']:.1f} ({row['loo_se']:.1f})"),
                Number(row["out_of_scale_elpd"], digits=1),
                "ok" if row["diagnostics"]["ok"] else "FAILED",
            ]
        )
    verdict = (
        "the data separate the forms"
        if stack["separated"]
        else "the data do not separate the forms: predictions are the mixture"
    )
    caption = (
        f"Law forms stacked on their out-of-scale log scores ({points} left-out points): "
        f"weight [{_pct(prob)} Bayesian-bootstrap interval]; {verdict}."
    )
    return PaperTable(header, rows, caption, label, provenance=provenance)


def with_verdict(table: PaperTable, headline: str | None) -> PaperTable:
    """The table with a fit's failed-diagnostics or preview headline as its first note (a
    table pasted into a paper carries the verdict with it); unchanged when the fit converged."""
    if headline is None:
        return table
    return replace(table, notes=(headline, *table.notes))


# --- held-out check ----------------------------------------------------------------------------


def _rows(frame: pd.DataFrame, index: Iterable[int]) -> str:
    """Name rows 1-based; by the checked table's own rows (``row``, ``line``) where given."""
    picked = list(index)
    shown = picked[:8]
    more = f" and {len(picked) - len(shown)} more" if len(picked) > len(shown) else ""
    if names.ROW in frame.columns:
        numbers = [int(frame.loc[i, names.ROW]) for i in shown]
        text = f"row{'s' if len(picked) > 1 else ''} {', '.join(map(str, numbers))}{more}"
        text += " of the checked table"
        if names.LINE in frame.columns and not frame.loc[shown, names.LINE].isna().any():
            lines = ", ".join(str(int(frame.loc[i, names.LINE])) for i in shown)
            text += f" (file line{'s' if len(picked) > 1 else ''} {lines})"
        return text
    numbers = [int(i) + 1 for i in shown]
    return f"row{'s' if len(picked) > 1 else ''} {', '.join(map(str, numbers))}{more}"


def check_heldout(frame: pd.DataFrame, where: str = "held-out frame") -> pd.DataFrame:
    """Validate the held-out check's frame (see the module docstring); errors name the column
    and the rows (1-based; the checked table's rows where the frame has ``row``). Success
    rates must lie in [0, 1]; with ``attrs["outcome"] == "loss"`` values must be > 0.
    ``attrs["coverage"]``, where given, must equal the rows' coverage. Returns a copy with
    float columns and the attrs kept."""
    if not isinstance(frame, pd.DataFrame):
        raise TableError(f"{where}: expected a pandas DataFrame, got {type(frame).__name__}")
    from bayesscale.data.observations import missing_columns

    hints = missing_columns(frame, HELDOUT_COLUMNS)
    if hints:
        raise TableError(
            f"{where}: missing column(s) {hints}; it has {[str(c) for c in frame.columns]}"
        )
    if frame.empty:
        raise TableError(f"{where}: no rows")
    prob = frame.attrs.get(ATTR_PROB)
    if prob is None or not 0 < float(prob) < 1:
        raise TableError(
            f"{where}: attrs[{ATTR_PROB!r}] must be the interval mass in (0, 1), got {prob!r}"
        )
    outcome = str(frame.attrs.get(ATTR_OUTCOME, "success"))
    if outcome not in ("success", "loss"):
        raise TableError(
            f"{where}: attrs[{ATTR_OUTCOME!r}] must be 'success' or 'loss', got {outcome!r}"
        )
    out = frame.reset_index(drop=True).copy()
    out.attrs = dict(frame.attrs)
    for col in (OBSERVED, PREDICTED, LOWER, UPPER):
        values = pd.to_numeric(out[col], errors="coerce")
        bad = out.index[~np.isfinite(values.to_numpy(float))]
        if len(bad):
            raise TableError(f"{where}: column {col!r}, {_rows(out, bad)}: not a finite number")
        if outcome == "success":
            bad = out.index[(values < 0) | (values > 1)]
            what = "a success rate must lie in [0, 1]"
        else:
            bad = out.index[values <= 0]
            what = "a loss must be > 0"
        if len(bad):
            raise TableError(f"{where}: column {col!r}, {_rows(out, bad)}: {what}")
        out[col] = values.astype(float)
    bad = out.index[out[LOWER] > out[UPPER]]
    if len(bad):
        raise TableError(
            f"{where}: columns {LOWER!r}, {UPPER!r}, {_rows(out, bad)}: lower exceeds upper"
        )
    empty = out.index[out[SETTING].isna() | (out[SETTING].astype(str).str.strip() == "")]
    if len(empty):
        raise TableError(f"{where}: column {SETTING!r}, {_rows(out, empty)}: value is missing")
    out[SETTING] = out[SETTING].astype(str)
    stated = out.attrs.get(ATTR_COVERAGE)
    if stated is not None:
        found = float(covered(out).mean())
        if abs(float(stated) - found) > COVERAGE_TOLERANCE:
            raise TableError(
                f"{where}: attrs[{ATTR_COVERAGE!r}] = {float(stated):.6g} but "
                f"{found:.6g} of the rows have lower <= observed <= upper"
            )
    return out


def covered(frame: pd.DataFrame) -> np.ndarray:
    """Per row: ``lower <= observed <= upper``."""
    obs = frame[OBSERVED].to_numpy(float)
    return np.asarray((frame[LOWER].to_numpy(float) <= obs) & (obs <= frame[UPPER].to_numpy(float)))


def heldout_table(
    frame: pd.DataFrame,
    *,
    label: str = "tab:heldout",
    provenance: Provenance | None = None,
) -> PaperTable:
    """Coverage of the predictive intervals per setting and overall (runs, runs inside, share
    inside) and the mean absolute error ``mean |observed - predicted|``, from the held-out
    check's frame (settings in order of appearance)."""
    frame = check_heldout(frame)
    prob = float(frame.attrs[ATTR_PROB])
    inside = pd.Series(covered(frame), index=frame.index)
    error = (frame[OBSERVED] - frame[PREDICTED]).abs()
    digits = 3 if str(frame.attrs.get(ATTR_OUTCOME, "success")) == "success" else None
    rows: list[list[Cell | str | int | float]] = []
    groups = [*frame.groupby(SETTING, sort=False).groups.items(), (OVERALL, frame.index)]
    for setting, idx in groups:
        hit = inside[idx]
        rows.append(
            [
                str(setting),
                len(hit),
                int(hit.sum()),
                Number(float(hit.mean())),
                Number(float(error[idx].mean()), digits),
            ]
        )
    header: list[Cell | str] = ["setting", "runs", "inside", "coverage", "MAE"]
    caption = (
        f"Held-out check: share of held-out runs whose observed success lies inside its "
        f"{_pct(prob)} posterior predictive interval (nominal {prob:.2f})."
    )
    return PaperTable(
        header,
        rows,
        caption,
        label,
        align="lrrcc",
        breaks=(len(rows) - 1,) if len(rows) > 1 else (),
        provenance=provenance,
    )
