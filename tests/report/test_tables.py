"""Paper tables: known values, escaping, LaTeX structure (and compilation where pdflatex is)."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayesscale import names
from bayesscale.law.summary import marker, summarise
from bayesscale.pricing.summary import kappa0_marker, summarise_pricing
from bayesscale.recipe.solve import recipe
from bayesscale.report.figures import provenance
from bayesscale.report.tables import (
    Interval,
    PaperTable,
    TableError,
    escape_latex,
    escape_markdown,
    exponent_table,
    format_number,
    heldout_table,
    pricing_table,
    recipe_table,
)

SAMPLE = (names.CHAIN_DIM, names.DRAW_DIM)
NASTY = "Q_7B & co | 50% #1 ~x^2 <y> {z} \\w"


@pytest.fixture(scope="module")
def exponents(law_fit: xr.DataTree) -> PaperTable:
    return exponent_table(summarise(law_fit), provenance=provenance(law_fit))


@pytest.fixture(scope="module")
def pricing(pricing_fit: xr.DataTree) -> tuple[dict, PaperTable]:
    result = summarise_pricing(pricing_fit)
    return result, pricing_table(result, provenance=provenance(pricing_fit))


@pytest.fixture(scope="module")
def recipe_result(law_fit: xr.DataTree) -> xr.Dataset:
    settings = ["Qwen3-4B | grpo | math+code", "Qwen3-8B | grpo | swe"]
    return recipe(law_fit, [1e4, 1e5, 1e6], settings=settings, max_draws=25, decision=False)


def _flat(da: xr.DataArray) -> np.ndarray:
    rest = [d for d in da.dims if d not in SAMPLE]
    arr = da.transpose(*SAMPLE, *rest).to_numpy().astype(float)
    return arr.reshape(-1, *arr.shape[2:])


def _iv(values: np.ndarray, digits: int = 2, prob: float = 0.9) -> str:
    lo, med, hi = np.quantile(values, [(1 - prob) / 2, 0.5, (1 + prob) / 2])
    return f"{med:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


# --- LaTeX structure -----------------------------------------------------------------------------

_UNESCAPED = re.compile(r"(?<!\\)[&%#_^~$]|(?<!\\)[{}]")


def _split_unescaped(line: str, sep: str) -> list[str]:
    return re.split(rf"(?<!\\){re.escape(sep)}", line)


def _without_math(text: str) -> str:
    parts = _split_unescaped(text, "$")
    assert len(parts) % 2 == 1, f"unbalanced $ in {text!r}"
    return "".join(parts[::2])


def check_latex(text: str, ncols: int) -> list[str]:
    """Structure of a booktabs table; returns the body rows below the header (cells split)."""
    body = "\n".join(line for line in text.splitlines() if not line.startswith("%"))
    depth = 0
    for ch in re.sub(r"\\[{}]", "", body):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0, "a closing brace without an opening one"
    assert depth == 0, "unbalanced braces"
    for env in ("tabular", "table"):
        assert body.count(f"\\begin{{{env}}}") == body.count(f"\\end{{{env}}}")
    lines = body.splitlines()
    top, bottom = lines.index("\\toprule"), lines.index("\\bottomrule")
    assert top < lines.index("\\midrule") < bottom
    spec = re.search(r"\\begin\{tabular\}\{([lcr]+)\}", body)
    assert spec is not None and len(spec.group(1)) == ncols
    rows = []
    for line in lines[top + 1 : bottom]:
        if line == "\\midrule":
            continue
        assert line.endswith(" \\\\"), line
        cells = _split_unescaped(line[: -len(" \\\\")], "&")
        assert len(cells) == ncols, f"{len(cells)} cells in {line!r}"
        for cell in cells:
            text_part = _without_math(cell)
            # outside math: only escaped specials and the braces of \textbar{} and friends
            stripped = re.sub(r"\\[a-z]+\{\}", "", text_part)
            assert not _UNESCAPED.search(stripped), f"unescaped special character in {cell!r}"
            assert "|" not in stripped and "<" not in stripped and ">" not in stripped
        rows.append(cells)
    return rows[1:]


def check_markdown(text: str, ncols: int) -> list[list[str]]:
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    out = []
    for line in rows:
        cells = _split_unescaped(line.strip()[1:-1], "|")
        assert len(cells) == ncols, line
        out.append([c.strip() for c in cells])
    return out[2:]  # header and alignment row dropped


# --- formatting ------------------------------------------------------------------------------


def test_escaping_and_number_formats() -> None:
    assert escape_latex(NASTY) == (
        "Q\\_7B \\& co \\textbar{} 50\\% \\#1 \\textasciitilde{}x\\textasciicircum{}2 "
        "\\textless{}y\\textgreater{} \\{z\\} \\textbackslash{}w"
    )
    assert escape_markdown("a | b_c*") == "a \\| b\\_c\\*"
    assert format_number(0.3512) == "0.35"
    assert format_number(1234567, None) == "1.23M"
    assert format_number(45.25, None) == "45.2"
    assert format_number(None) == format_number(float("inf")) == "∞"
    assert Interval(0.35, 0.27, None).latex() == "0.35 [0.27, $\\infty$]"
    assert Interval(-0.5, -1.0, 0.25).latex() == "$-$0.50 [$-$1.00, 0.25]"


def test_a_table_longer_than_a_page_is_a_longtable() -> None:
    """More rows than a page holds: a longtable with its header on every page, its caption,
    label and notes; up to the limit, a float."""
    from bayesscale.report.tables import LONG_TABLE_ROWS

    rows = [(f"r{i}", str(i)) for i in range(LONG_TABLE_ROWS + 1)]
    long = PaperTable(("name", "n"), rows, caption="Cap", label="tab:x", notes=("a --flag",))
    tex = long.to_latex()
    assert tex.count("\\begin{longtable}{lc}") == 1 and "\\begin{table}" not in tex
    assert tex.count("name & n \\\\") == 2  # the first page's header and every next page's
    assert tex.index("\\endfirsthead") < tex.index("\\endhead") < tex.index("r0 & 0")
    assert "\\caption{Cap}\\label{tab:x} \\\\" in tex
    assert tex.count(" \\\\\n") == 1 + 2 + len(rows)  # caption line, two headers, rows
    assert "a -{}-flag" in tex  # two hyphens, not an en dash
    short = PaperTable(("name", "n"), rows[:LONG_TABLE_ROWS], caption="Cap", label="tab:x")
    assert "\\begin{table}[t]" in short.to_latex() and "longtable" not in short.to_latex()


def test_paper_table_checks_its_shape_and_saves_atomically(tmp_path) -> None:
    with pytest.raises(TableError, match="row 2 has 1 cells, the header 2"):
        PaperTable(("a", "b"), (("x", "y"), ("z",)))
    with pytest.raises(TableError, match="breaks"):
        PaperTable(("a",), (("x",),), breaks=(1,))
    with pytest.raises(TableError, match="align"):
        PaperTable(("a", "b"), (("x", "y"),), align="lx")
    table = PaperTable((NASTY, "value"), ((NASTY, Interval(0.35, 0.27, 0.43)),), caption=NASTY)
    ((name, value),) = check_latex(table.to_latex(), 2)
    assert (name.strip(), value.strip()) == (escape_latex(NASTY), "0.35 [0.27, 0.43]")
    ((name, value),) = check_markdown(table.to_markdown(), 2)
    assert (name, value) == (escape_markdown(NASTY), "0.35 [0.27, 0.43]")
    path = table.save(tmp_path / "t.tex")
    assert path.read_text() == table.to_latex()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        table.save(path)
    table.save(tmp_path / "t.md")
    assert (tmp_path / "t.md").read_text() == table.to_markdown()
    with pytest.raises(TableError, match=r"unknown table format '\.csv'"):
        table.save(tmp_path / "t.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.md", "t.tex"]


# --- the four tables --------------------------------------------------------------------------


def test_exponent_table_matches_the_posterior(law_fit: xr.DataTree, exponents: PaperTable) -> None:
    table = exponents
    post = law_fit["posterior"]
    settings = [str(s) for s in post[names.SETTING_DIM].to_numpy()]
    axes = [str(a) for a in post[names.AXIS_DIM].to_numpy()]
    latex = table.to_latex()
    rows = check_latex(latex, 1 + len(axes) + 1)
    assert len(rows) == 1 + len(settings)
    assert latex.count("\\midrule") == 2  # under the header, and between population and settings
    assert law_fit.attrs[names.ATTR_DATA_HASH] in latex.splitlines()[1]  # provenance comment
    md = check_markdown(table.to_markdown(), 1 + len(axes) + 1)
    assert md[0][0] == "population"
    # a prior-sensitive (†) or prior-dominated (‡) exponent carries its marker
    result = summarise(law_fit)
    for j, axis in enumerate(axes):
        pop = _flat(post[names.ALPHA_POP].sel({names.AXIS_DIM: axis}))
        assert md[0][1 + j] == _iv(pop) + marker(result["exponents"]["population"][axis])
        for k in (0, 20):
            alpha = _flat(
                post[names.ALPHA].sel({names.SETTING_DIM: settings[k], names.AXIS_DIM: axis})
            )
            entry = result["exponents"]["settings"][settings[k]][axis]
            assert md[1 + k][0] == escape_markdown(settings[k])
            assert md[1 + k][1 + j] == _iv(alpha) + marker(entry)
    alpha = post[names.ALPHA]
    ordered = (alpha.diff(names.AXIS_DIM) < 0).all(names.AXIS_DIM).mean(SAMPLE)
    assert md[1][-1] == f"{float(ordered.sel({names.SETTING_DIM: settings[0]})):.2f}"


def test_pricing_table_matches_the_posterior(
    pricing_fit: xr.DataTree, pricing: tuple[dict, PaperTable]
) -> None:
    result, table = pricing
    methods = list(result["methods"])
    rows = check_latex(table.to_latex(), 6)
    assert len(rows) == len(methods) + len(result["axes"])
    md = check_markdown(table.to_markdown(), 6)
    post = pricing_fit["posterior"]
    for i, m in enumerate(methods):
        sel = {names.METHOD_DIM: m}
        assert md[i][:3] == [m, result["methods"][m]["axis"], "51"]
        marker = kappa0_marker(result["methods"][m])  # ‡ / † where the prior leads
        assert md[i][3] == _iv(_flat(post[names.KAPPA0].sel(sel))) + marker
        assert md[i][4] == _iv(_flat(post[names.R_STAR].sel(sel)))
    env = _flat(post[names.KAPPA0_AXIS].sel({names.PRICED_AXIS_DIM: "env"}))
    assert md[len(methods)][:2] == ["pooled (env)", "env"]
    assert md[len(methods)][3] == _iv(env) + kappa0_marker(result["axes"]["env"])
    # no collapse in some draws: an infinite upper bound, and a note
    hand = {
        "prob": 0.9,
        "threshold": 0.95,
        "frame": "fixed_real",
        "methods": {
            "X_1": {
                "axis": "task",
                "runs": 9,
                "kappa0": {"median": 0.5, "lower": 0.4, "upper": 0.6},
                "r_star": {"median": 3.0, "lower": 2.0, "upper": None},
                "peak_ratio": {"median": 1.0, "lower": 0.5, "upper": 1.5},
                "r_star_no_collapse_share": 0.1,
            }
        },
        "axes": {},
    }
    t = pricing_table(hand)
    ((*_, r_star, _peak),) = check_latex(t.to_latex(), 6)
    assert r_star.strip() == "3.00 [2.00, $\\infty$]"
    assert "X\\_1: no collapse (r\\* = ∞) in 10% of posterior draws." in t.to_markdown()
    with pytest.raises(TableError, match="summarise_pricing"):
        pricing_table({"methods": {}})


def test_recipe_table_matches_the_per_draw_optima(recipe_result: xr.Dataset) -> None:
    ds = recipe_result
    settings = [str(s) for s in ds[names.SETTING_DIM].to_numpy()]
    table = recipe_table(ds, budgets=[1e5, 1e4])
    # setting, budget, three axes, trajectories, success, beyond the data
    rows = check_latex(table.to_latex(), 2 + 3 + 1 + 1 + 1)
    assert len(rows) == 4
    md = check_markdown(table.to_markdown(), 8)
    assert [r[1] for r in md] == ["100k", "10.0k", "100k", "10.0k"]
    bought = ds[names.PURCHASED].sel({names.SETTING_DIM: settings[1], names.BUDGET_DIM: 1e5})
    for j, axis in enumerate(names.PAPER_AXES):
        draws = _flat(bought.sel({names.AXIS_DIM: axis}))
        lo, med, hi = np.quantile(draws, [0.05, 0.5, 0.95])
        assert (
            md[2][2 + j]
            == f"{format_number(med, None)} [{format_number(lo, None)}, {format_number(hi, None)}]"
        )
    success = _flat(
        ds[names.SUCCESS_OPTIMUM].sel({names.SETTING_DIM: settings[0], names.BUDGET_DIM: 1e4})
    )
    assert md[1][-2] == _iv(success, digits=3)
    traj = bought.sel({names.AXIS_DIM: "traj"}) * bought.sel({names.AXIS_DIM: "task"})
    lo, med, hi = np.quantile(_flat(traj), [0.05, 0.5, 0.95])
    assert md[2][5] == " ".join(
        [format_number(med, None), f"[{format_number(lo, None)}, {format_number(hi, None)}]"]
    )
    # the fit's grids end at 256 environments and 64 rollouts per task: 100k USD buys far more
    # environments; rollouts per task, each a rollout of every task, stay within 4x
    extent = ds[names.EXTRAPOLATION].sel({names.SETTING_DIM: settings[1], names.BUDGET_DIM: 1e5})
    factor = {a: float(np.median(_flat(extent.sel({names.AXIS_DIM: a})))) for a in names.PAPER_AXES}
    at = {names.SETTING_DIM: settings[1]}
    lo = dict(zip(names.PAPER_AXES, ds[names.SWEPT_MIN].sel(at).to_numpy(), strict=True))
    hi = dict(zip(names.PAPER_AXES, ds[names.SWEPT_MAX].sel(at).to_numpy(), strict=True))
    outside = {a: max(f, lo[a] / (f * hi[a]), 1.0) for a, f in factor.items()}
    assert outside["env"] > 4 and outside["task"] <= 4 and outside["traj"] <= 4
    assert md[2][-1] == f"env {factor['env']:,.0f}x"
    with pytest.raises(TableError, match="budget 3000 is not in the recipe result"):
        recipe_table(ds, budgets=[3e3])
    with pytest.raises(TableError, match="no 'purchased'"):
        recipe_table(ds.drop_vars(names.PURCHASED))


def test_recipe_table_marks_the_axes_whose_exponent_leans_on_the_prior(
    recipe_result: xr.Dataset,
) -> None:
    """Exactly the units bought along a flagged (setting, axis) carry its marker, in Markdown
    and LaTeX, with one note; no flags, no marks and no note."""
    ds = recipe_result
    settings = [str(s) for s in ds[names.SETTING_DIM].to_numpy()]
    flags = {settings[0]: {"traj": "prior-dominated"}, settings[1]: {"env": "prior-sensitive"}}
    table = recipe_table(ds, budgets=[1e5, 1e4], exponent_flags=flags)
    md = check_markdown(table.to_markdown(), 8)
    for row in md:
        marks = {a: cell[-1] for a, cell in zip(names.PAPER_AXES, row[2:5], strict=True)}
        wanted = {a: "" for a in names.PAPER_AXES}
        wanted.update(
            {
                a: {"prior-dominated": "‡", "prior-sensitive": "†"}[f]
                for a, f in flags[row[0].replace("\\|", "|")].items()
            }
        )
        assert {a: m if m in "‡†" else "" for a, m in marks.items()} == wanted, row
    assert "‡ prior-dominated, † prior-sensitive" in table.to_markdown()
    latex = table.to_latex()
    assert latex.count("\\ddagger") == 2 + 1 and latex.count("\\dagger") == 2 + 1  # rows + note
    plain = recipe_table(ds, budgets=[1e5, 1e4])
    assert "‡" not in plain.to_markdown() and "†" not in plain.to_markdown()
    assert "prior-dominated" not in plain.to_markdown()


def _heldout() -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            names.SETTING: ["A | x", "A | x", "A | x", "B_2 | y", "B_2 | y"],
            names.OBSERVED: [0.30, 0.42, 0.10, 0.55, 0.61],
            names.PREDICTED: [0.31, 0.40, 0.20, 0.56, 0.60],
            names.LOWER: [0.25, 0.35, 0.15, 0.50, 0.55],
            names.UPPER: [0.37, 0.45, 0.26, 0.62, 0.66],
        }
    )
    frame.attrs = {"prob": 0.9, "coverage": 0.8}
    return frame


def test_heldout_table_counts_coverage_per_setting() -> None:
    table = heldout_table(_heldout())
    rows = check_latex(table.to_latex(), 5)
    assert [c.strip() for c in rows[1]] == ["B\\_2 \\textbar{} y", "2", "2", "1.00", "0.010"]
    md = check_markdown(table.to_markdown(), 5)
    assert md == [
        ["A \\| x", "3", "2", "0.67", "0.043"],
        ["B\\_2 \\| y", "2", "2", "1.00", "0.010"],
        ["overall", "5", "4", "0.80", "0.030"],
    ]
    assert "90% posterior predictive interval" in table.to_markdown()


def test_heldout_table_names_bad_rows() -> None:
    frame = _heldout()
    frame.loc[4, names.LOWER] = 0.7
    with pytest.raises(TableError, match=r"columns 'lower', 'upper', row 5: lower exceeds upper"):
        heldout_table(frame)
    frame = _heldout()
    frame[names.ROW] = [11, 12, 13, 14, 15]  # 1-based, as the check writes them
    frame[names.LINE] = [12, 13, 14, 15, 16]
    frame.loc[1, names.PREDICTED] = np.nan
    with pytest.raises(TableError, match=r"row 12 of the checked table \(file line 13\)"):
        heldout_table(frame)
    frame = _heldout()
    frame.attrs = {"coverage": 0.8}
    with pytest.raises(TableError, match=r"attrs\['prob'\]"):
        heldout_table(frame)
    with pytest.raises(TableError, match=r"missing column\(s\) 'setting'"):
        heldout_table(_heldout().rename(columns={names.SETTING: "settings"}))


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_latex_tables_compile(
    exponents: PaperTable,
    pricing: tuple[dict, PaperTable],
    recipe_result: xr.Dataset,
    tmp_path,
) -> None:
    tables = [
        PaperTable((NASTY, "value"), ((NASTY, Interval(0.35, 0.27, None)),), caption=NASTY),
        exponents,
        pricing[1],
        recipe_table(recipe_result),
        heldout_table(_heldout()),
    ]
    body = "\n".join(t.to_latex() for t in tables)
    (tmp_path / "doc.tex").write_text(
        "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n"
        "\\begin{document}\n" + body + "\\end{document}\n"
    )
    run = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-2000:]
