"""The documentation site: it builds with warnings as errors, its CLI and API pages cover the
code, and the findings page's snippets print exactly what the page says they print."""

from __future__ import annotations

import doctest
import importlib.util
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bayesscale.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FINDINGS = DOCS / "findings.md"
PYCON = re.compile(r"^```pycon\n(.*?)^```$", re.DOTALL | re.MULTILINE)
AUTOMODULE = re.compile(r"^\.\. automodule:: (\S+)$", re.MULTILINE)
# Modules being written while the site was built; the lead adds their API pages.
NOT_YET_DOCUMENTED: frozenset[str] = frozenset()
NOT_YET_DOCUMENTED_PACKAGES: tuple[str, ...] = ()


def _subcommands() -> list[str]:
    parser = build_parser()
    for action in parser._actions:
        if action.dest == "command":
            return sorted(action.choices or {})
    raise AssertionError("bayesscale's parser has no subcommands")


def _public_modules() -> set[str]:
    """Every public module of the package (files, not imports: a module being written must
    not break this test), the command line excepted (documented on the CLI page)."""
    out = set()
    for path in (ROOT / "bayesscale").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts) or parts[:2] == ("bayesscale", "cli"):
            continue
        out.add(".".join(parts))
    return out - {"bayesscale"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("sphinx", "myst_parser"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install -e '.[docs]' to build the docs)")
    out = tmp_path_factory.mktemp("docs")
    html = out / "html"
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-n",
        "-q",
        "-b",
        "html",
        "-d",
        str(out / "doctrees"),
        str(DOCS),
        str(html),
    ]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    # -W: any warning (a broken reference, a malformed docstring, a page outside every
    # toctree) fails the build.
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stdout}\n{proc.stderr}"
    return html


def test_site_builds_with_warnings_as_errors(site: Path) -> None:
    for page in ("index", "quickstart", "data-formats", "model", "findings", "cli", "api/index"):
        assert (site / f"{page}.html").is_file(), page
    findings = (site / "findings.html").read_text()
    assert "eta^2 = 0.934, F(2, 5) = 35.3" in findings


def test_cli_page_lists_every_command_with_its_help(site: Path) -> None:
    page = (site / "cli.html").read_text()
    commands = _subcommands()
    assert {"fit", "summary", "recipe", "price"} <= set(commands)
    for name in commands:
        assert f'id="cmd-{name}"' in page, name
        assert f"usage: bayesscale {name} [-h]" in page, name


def test_api_reference_covers_every_public_module(site: Path) -> None:
    documented = set()
    for page in (DOCS / "api").glob("*.rst"):
        documented |= set(AUTOMODULE.findall(page.read_text()))
    missing = {
        m
        for m in _public_modules() - documented - NOT_YET_DOCUMENTED
        if not m.startswith(NOT_YET_DOCUMENTED_PACKAGES)
    }
    assert not missing, f"modules without an API page (add them to docs/api/): {sorted(missing)}"
    assert "bayesscale.core.allocate.solve_additive" in (site / "api" / "core.html").read_text()


def test_findings_snippets_print_what_the_page_says() -> None:
    """Every ```pycon block of docs/findings.md, in order, in one namespace, compared exactly
    (no whitespace normalisation, no ellipsis): the page cannot drift from the code."""
    text = FINDINGS.read_text()
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(verbose=False, optionflags=doctest.REPORT_NDIFF)
    globs: dict[str, object] = {}
    report = io.StringIO()
    blocks = list(PYCON.finditer(text))
    assert len(blocks) >= 10
    examples = attempted = failed = 0
    for block in blocks:
        lineno = text.count("\n", 0, block.start(1))
        test = parser.get_doctest(block.group(1), globs, "findings.md", str(FINDINGS), lineno)
        assert test.examples, f"docs/findings.md line {lineno + 1}: a pycon block without >>>"
        examples += len(test.examples)
        result = runner.run(test, out=report.write, clear_globs=False)
        attempted += result.attempted
        failed += result.failed
        globs = test.globs  # the next block sees this one's names, as a reader's session would
    assert attempted == examples
    assert failed == 0, report.getvalue()


# Modules whose examples build and compile a PyMC model (about 30 s together): the fits they
# show are tested in test_likelihood.py and test_fit.py.
SLOW_EXAMPLES = ("bayesscale.law.likelihood", "bayesscale.law.inference")


def test_every_docstring_example_runs() -> None:
    """The examples in every module's docstrings (``>>>``) give what they show."""
    import pkgutil

    import bayesscale

    failures, attempted = [], 0
    for info in pkgutil.walk_packages(bayesscale.__path__, "bayesscale."):
        if info.name in SLOW_EXAMPLES:
            continue
        module = importlib.import_module(info.name)
        flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        result = doctest.testmod(module, optionflags=flags, report=False)
        attempted += result.attempted
        if result.failed:
            failures.append(f"{info.name}: {result.failed} of {result.attempted}")
    assert attempted >= 150 and not failures, failures
