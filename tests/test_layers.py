"""The package's layers: every import of the package by the package points down.

The order, bottom to top, is the one the README and ``bayesscale/__init__.py`` state
(:data:`LAYERS`). A module may import its own folder and any folder of a lower layer; two
folders of one layer do not import each other. Imports under ``if TYPE_CHECKING:`` are for the
type checker and are not counted; imports inside functions are (they run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "bayesscale"

# bottom to top; "__init__" is the package root, which exports the fit objects lazily
LAYERS: tuple[tuple[str, ...], ...] = (
    ("names", "atomic", "tomlfile", "_version", "_bundled", "formatting", "jobs", "heavy"),
    ("sampling",),
    ("core",),
    ("data",),
    ("verl",),
    ("law",),
    ("pricing", "recipe", "checks"),
    ("report",),
    ("fits",),
    ("design",),
    ("pipeline",),
    ("api",),
    ("cli",),
    ("__init__",),
)
LEVEL = {room: level for level, rooms in enumerate(LAYERS) for room in rooms}


def _room(module: str) -> str:
    """The top-level folder or module of ``bayesscale.X.Y`` (``__init__`` for the package)."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def type_checking_nodes(tree: ast.AST) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:`` (imports for the type checker only)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside |= {id(n) for n in ast.walk(node)}
    return inside


def module_name(path: Path) -> str:
    """``bayesscale.x.y`` for the file ``bayesscale/x/y.py`` (``bayesscale.x`` for its
    ``__init__.py``)."""
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(
        ".__init__"
    )


def package_imports() -> list[tuple[str, str, int]]:
    """``(importer, imported, line)`` for every run-time import of the package by itself."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        skip = type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == "bayesscale":  # from bayesscale import names
                    found += [(module, f"bayesscale.{a.name}", node.lineno) for a in node.names]
                elif node.module.startswith("bayesscale."):
                    found.append((module, node.module, node.lineno))
            elif isinstance(node, ast.Import):
                found += [
                    (module, a.name, node.lineno)
                    for a in node.names
                    if a.name.startswith("bayesscale.")
                ]
    return found


def upward(imports: list[tuple[str, str, int]]) -> list[str]:
    """The imports that point up the layers, or across one layer, as ``a -> b (line)``."""
    bad = []
    for importer, imported, line in imports:
        a, b = _room(importer), _room(imported)
        if a == b:
            continue
        if a not in LEVEL or b not in LEVEL:
            bad.append(f"{importer} -> {imported} (line {line}): a folder with no layer")
        elif LEVEL[b] >= LEVEL[a]:
            bad.append(f"{importer} -> {imported} (line {line})")
    return bad


def test_every_import_points_down() -> None:
    imports = package_imports()
    assert len(imports) > 300  # the walk found the package's imports
    assert upward(imports) == []


def test_every_folder_has_a_layer() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert (modules | folders) - set(LEVEL) == set()


@pytest.mark.parametrize(
    ("imports", "verdict"),
    [
        ([("bayesscale.recipe.vouched", "bayesscale.report.tables", 3)], False),
        ([("bayesscale.report.tables", "bayesscale.recipe.vouched", 3)], True),
        ([("bayesscale.recipe.notes", "bayesscale.checks.heldout", 3)], False),  # one layer
        ([("bayesscale.data.fitfile", "bayesscale", 3)], False),  # the package root
        ([("bayesscale.fits.law", "bayesscale.fits.caveats", 3)], True),  # its own folder
    ],
)
def test_the_check_tells_down_from_up(imports: list[tuple[str, str, int]], verdict: bool) -> None:
    """Negative controls: an import up, across a layer or from the root is caught."""
    assert (upward(imports) == []) is verdict
