"""The files the package reads at run time, found through :mod:`importlib.resources`.

The bundled model specifications (``models/*.toml``), the recipe's default prices and the
example datasets live beside this module, in the folders of the repository they come from
(``models/``, ``data/``, ``lab/``): in a checkout each file here is a link to the repository's
own file (the source), and building the sdist or the wheel copies the files themselves
(``[tool.setuptools.package-data]`` in ``pyproject.toml``). So the same path answers in a
checkout, an editable install and an installed wheel.

>>> path("models", "agentic_rl.toml").name
'agentic_rl.toml'
>>> path("models", "no_such.toml")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
bayesscale._bundled.BundledFileError: models/no_such.toml: not in this installation of bayesscale ...
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


class BundledFileError(FileNotFoundError):
    """A file the package ships is missing: the installation is incomplete."""


def root() -> Path:
    """The folder that holds the bundled files (a real folder: wheels install unzipped)."""
    where = resources.files(__name__)
    if not isinstance(where, Path):
        raise BundledFileError(
            f"bayesscale's bundled files are inside an archive ({where}); install the package "
            "with pip (unzipped) to use the bundled specs and examples"
        )
    return where


def path(*parts: str) -> Path:
    """The bundled file at ``parts`` (``path("models", "prices.toml")``); an error naming the
    file and the folder it should be in when it is not there."""
    target = root().joinpath(*parts)
    if not target.is_file():
        raise BundledFileError(
            f"{'/'.join(parts)}: not in this installation of bayesscale (looked in {root()}); "
            "reinstall the package (pip install --force-reinstall bayesscale)"
        )
    return target
