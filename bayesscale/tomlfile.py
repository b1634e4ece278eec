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

import math
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

_TYPE_NAMES = {
    float: "a number",
    int: "an integer",
    bool: "true or false",
    str: "a string",
    list: "a list",
    dict: "a table",
}


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


def type_name(kinds: type | tuple[type, ...]) -> str:
    """What a key must be, in words (``(int, float)`` is a number).

    >>> type_name(str), type_name((int, float)), type_name((str, list))
    ('a string', 'a number', 'a string or a list')
    """
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if set(kinds) == {int, float}:
        return "a number"
    return " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)


def non_finite(value: Any) -> bool:
    """TOML's ``nan`` and ``inf`` are numbers no setting can take.

    >>> non_finite(float("nan")), non_finite(float("-inf")), non_finite(1e300), non_finite("x")
    (True, True, False, False)
    """
    return isinstance(value, float) and not math.isfinite(value)
