"""Reading the package's TOML files (specs, prices, costs, sweeps) with errors that name the
file: a syntax error, a top-level key the file kind does not know, a bad currency.

Each kind of file has its own error class (``SpecError``, ``PricesError``, ...); the
functions here raise the one they are given.

Example
-------
>>> read_toml('currency = "EUR"', "prices.toml", ValueError, known=("currency", "prices"))
{'currency': 'EUR'}
>>> read_toml("prices = ", "prices.toml", ValueError)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: prices.toml: not valid TOML: ...
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from typing import Any


def read_toml(
    text: str, source: str, error: type[Exception], known: Sequence[str] | None = None
) -> dict[str, Any]:
    """The table in ``text``; ``error`` naming ``source`` if it is not valid TOML or, with
    ``known``, if it has a top-level key outside ``known``."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{source}: not valid TOML: {exc}") from exc
    if known is not None:
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise error(f"{source}: unknown key(s) {unknown}; known: {list(known)}")
    return raw


def read_currency(raw: Mapping[str, Any], default: str, source: str, error: type[Exception]) -> str:
    """The file's ``currency`` (``default`` when it has none): a non-empty string."""
    value = raw.get("currency", default)
    if not isinstance(value, str) or not value:
        raise error(f"{source}: currency: must be a non-empty string, got {value!r}")
    return value
