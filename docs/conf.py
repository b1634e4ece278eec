"""Sphinx configuration of the bayesscale documentation site.

Build (warnings are errors, nitpicky cross-references)::

    .venv/bin/sphinx-build -W --keep-going -n -b html docs out/docs

The pages are Markdown (MyST) except the API reference, which autodoc fills from the
docstrings (reST, NumPy-style sections read by napoleon). The CLI reference is generated
from ``bayesscale.cli.build_parser()`` at build time, so it cannot drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

from bayesscale import __version__  # noqa: E402

project = "bayesscale"
author = "the bayesscale authors"
copyright = "2026, the bayesscale authors"
version = release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "clihelp",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "**/.*"]
# Pages written alongside the site: the index lists those that exist (see _optional_toctree).
OPTIONAL_CAPTION = "Checking a fit"
OPTIONAL_PAGES = ("checks", "calibration", "figures")
OPTIONAL_MARKER = "% optional-toctree"

# Keep "--strict" as typed: no conversion of dashes into en/em dashes.
smartquotes_action = "qe"

myst_enable_extensions = ["dollarmath", "amsmath"]
# "$4.10 per environment, $0.18 per task" is money, not math: a $ next to a space or a digit
# does not open or close inline math.
myst_dmath_allow_space = False
myst_dmath_allow_digits = False
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = True

html_theme = "alabaster"
html_title = f"bayesscale {version}"
html_static_path: list[str] = []

# Nitpicky mode (-n) checks every cross-reference. Types from other packages cannot resolve
# without intersphinx, which needs the network at build time; they are ignored by package.
nitpick_ignore_regex = [
    (
        "py:class",
        r"(numpy|np|pandas|pd|xarray|xr|pymc|pm|pytensor|pt|scipy|matplotlib|pathlib|collections\.abc)\..*",
    ),
]
nitpick_ignore = [
    # a type alias (a Callable) that autodoc shows by name; Sphinx has no target for aliases
    ("py:class", "Perturbation"),
    # a type alias (a factor, or one per axis: bayesscale.data.extrapolation) shown by name
    ("py:class", "Reach"),
    # a type alias (PowerLaw | FormLaw: bayesscale.core.form_law) shown by its full name
    ("py:class", "bayesscale.core.form_law.Law"),
    # annotations of the fit objects name types imported for type checking only (matplotlib's
    # Figure) or as ``Path``; autodoc cannot qualify them
    ("py:class", "Path"),
    ("py:class", "Figure"),
]


def _factory_defaults(app, what, name, obj, options, signature, return_annotation):
    """A dataclass field with ``default_factory`` shows as ``= <factory>``, which is not a
    Python expression; Sphinx then splits the signature at every comma (``dict[str``). Show
    ``...`` instead so the signature parses."""
    if signature and "<factory>" in signature:
        signature = signature.replace("<factory>", "...")
    return signature, return_annotation


def _optional_toctree(app, docname, source):
    """Replace the marker line of ``index.md`` by a toctree of the optional pages that exist,
    or by nothing: a toctree entry or glob that matches no page is a warning, hence an error."""
    if docname != root_doc:
        return
    pages = [p for p in OPTIONAL_PAGES if (Path(app.srcdir) / f"{p}.md").is_file()]
    block = ""
    if pages:
        entries = "\n".join(pages)
        block = f"```{{toctree}}\n:caption: {OPTIONAL_CAPTION}\n:maxdepth: 2\n\n{entries}\n```"
    source[0] = source[0].replace(OPTIONAL_MARKER, block)


def _reread_index(app, env, added, changed, removed):
    """Re-read the index on every build, so that an incremental build sees optional pages
    that appeared since the last one."""
    return [root_doc]


def setup(app):
    app.connect("autodoc-process-signature", _factory_defaults)
    app.connect("source-read", _optional_toctree)
    app.connect("env-get-outdated", _reread_index)
