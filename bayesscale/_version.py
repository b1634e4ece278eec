"""The package's version, its one source: ``pyproject.toml`` reads it at build time
(``[tool.setuptools.dynamic]``) and every module that records a version imports it from here."""

__version__ = "0.1.0"
