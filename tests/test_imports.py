"""Function-local imports only for heavy modules (``bayesscale.heavy``).

Every import inside a function of the package (``if TYPE_CHECKING:`` blocks aside) imports a
module of :data:`bayesscale.heavy.HEAVY_MODULES`, or a package module that imports one at module
level (itself or through the package's own module-level imports), or is a command of the
command line importing what it runs (:func:`_a_command_runs`). Any other import belongs at the
top of its module: no other exception was needed (moving the light ones up formed no cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_layers import PACKAGE, module_name, type_checking_nodes

from bayesscale.heavy import is_heavy


def _function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inside |= {id(n) for n in ast.walk(node) if n is not node}
    return inside


def _targets(node: ast.Import | ast.ImportFrom, module: str, modules: set[str]) -> list[str]:
    """The modules an import statement runs (``from a import b`` runs ``a.b`` if a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parent = module.split(".")
        is_package = (PACKAGE.parent / Path(*parent) / "__init__.py").exists()
        parent = parent if is_package else parent[:-1]
        parent = parent[: len(parent) - node.level + 1]
        base = ".".join(parent + ([base] if base else []))
    subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
    return [base, *subs]


def _parents(name: str) -> list[str]:
    """``a.b.c`` runs ``a``, ``a.b`` and ``a.b.c``."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def scan(sources: dict[str, str]) -> tuple[dict[str, set[str]], list[tuple[str, str, int]]]:
    """Per module its module-level imports; and every function-local ``(module, import, line)``."""
    modules = set(sources)
    top: dict[str, set[str]] = {}
    local: list[tuple[str, str, int]] = []
    for module, text in sources.items():
        tree = ast.parse(text, module)
        skip = type_checking_nodes(tree)
        in_function = _function_nodes(tree)
        top[module] = set()
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            targets = _targets(node, module, modules)
            if id(node) in in_function:
                local += [(module, target, node.lineno) for target in targets[1:] or targets]
            else:
                top[module] |= {p for t in targets for p in _parents(t)}
    return top, local


def heavy_modules(top: dict[str, set[str]]) -> set[str]:
    """The package modules that import a heavy module at module level, directly or through
    the package's own module-level imports."""
    heavy = {m for m, imported in top.items() if any(is_heavy(i) for i in imported)}
    grew = True
    while grew:
        more = {m for m, imported in top.items() if m not in heavy and imported & heavy}
        heavy |= more
        grew = bool(more)
    return heavy


# the leaves and the command line itself, which a command imports at module level
CLI_STARTUP = ("bayesscale.cli", "bayesscale.names", "bayesscale.atomic", "bayesscale.formatting")


def _a_command_runs(module: str, imported: str) -> bool:
    """The exception of the command line: ``bayesscale --help`` registers every command, so a
    command imports the package modules it runs (light ones too) inside ``run``, keeping
    start-up to the parser; the cli itself and the leaves it imports at module level."""
    return (
        module.startswith("bayesscale.cli.")
        and imported.startswith("bayesscale.")
        and not any(imported == name or imported.startswith(name + ".") for name in CLI_STARTUP)
    )


def light_local_imports(sources: dict[str, str]) -> list[str]:
    """The function-local imports that import neither a heavy module nor a heavy package module."""
    top, local = scan(sources)
    heavy = heavy_modules(top)
    bad = []
    for module, imported, line in local:
        if is_heavy(imported) or imported in heavy:
            continue
        if _a_command_runs(module, imported):
            continue
        bad.append(f"{module}:{line} imports {imported}")
    return bad


def package_sources() -> dict[str, str]:
    return {module_name(path): path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


def test_function_local_imports_are_heavy_or_excused() -> None:
    assert light_local_imports(package_sources()) == []


def test_a_light_import_inside_a_function_is_flagged() -> None:
    sources = {
        "bayesscale.names": "X = 1\n",
        "bayesscale.law.fit": "import pymc\n",
        "bayesscale.law.summary": "from bayesscale.law import fit\n",
        "bayesscale.recipe.draws": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from bayesscale.recipe import light\n"
            "def f():\n"
            "    from bayesscale import names\n"
            "    import json\n"
            "    from bayesscale.law.summary import g\n"
            "    import scipy.optimize\n"
        ),
    }
    assert light_local_imports(sources) == [
        "bayesscale.recipe.draws:5 imports bayesscale.names",
        "bayesscale.recipe.draws:6 imports json",
    ]


def test_the_cli_may_import_its_commands_inside_run() -> None:
    sources = {
        "bayesscale.names": "X = 1\n",
        "bayesscale.recipe.solve": "import numpy\n",
        "bayesscale.cli": "def main():\n    from bayesscale.recipe import solve\n",
        "bayesscale.cli.summary": "def run():\n    from bayesscale.recipe import solve\n",
        "bayesscale.cli.fit": "def run():\n    import json\n    from bayesscale import names\n",
    }
    assert light_local_imports(sources) == [
        "bayesscale.cli:2 imports bayesscale.recipe.solve",
        "bayesscale.cli.fit:2 imports json",
        "bayesscale.cli.fit:3 imports bayesscale.names",
    ]
