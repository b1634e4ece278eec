"""Numbers as text: one format for every number the package prints (a leaf module).

* :func:`format_number`: a table cell, three significant digits with k/M/G/T from a thousand
  up and scientific notation from 1e15 (``1.23M``, ``1.66e+16``);
* :func:`money`: a budget or a cost, whole units with thousands separators up to 1e15, then
  scientific notation (``10,000``; ``1.00e+30``), never a 31-digit number;
* :func:`times`: a factor (``0.5x``, ``45x``, ``7,600x``; ``3.47e+20x`` from a million up).

Example
-------
>>> format_number(1234567, None), money(9694.4), money(1e30), times(3.5e20)
('1.23M', '9,694', '1.00e+30', '3.50e+20x')
"""

from __future__ import annotations

import math
from typing import Final

INFINITY_MD: Final = "∞"
SCIENTIFIC_FROM: Final = 1e15
"""Every format is scientific from here up (past the largest suffix, T, 1000T or a run of
digits would read as a typo)."""
TIMES_SCIENTIFIC_FROM: Final = 1e6
"""A factor is scientific from here up (``5.56e+24x``, not 25 digits)."""


def format_number(x: float | None, digits: int | None = 2, sig: int = 3) -> str:
    """A number for a table: ``digits`` decimals, or (``digits=None``) ``sig`` significant
    digits with a k/M/G/T suffix from a thousand up (in scientific notation from 1e15);
    ``None`` and ``inf`` give ``∞``, NaN ``n/a``.

    >>> format_number(0.3512), format_number(1234567, None), format_number(950.4, None)
    ('0.35', '1.23M', '950')
    >>> format_number(12345, None), format_number(0.000123, None), format_number(None)
    ('12.3k', '0.000123', '∞')
    >>> format_number(999_999_999.6, None), format_number(999.6, None)
    ('1.00G', '1.00k')
    >>> format_number(999.6e12, None), format_number(1.66e16, None), format_number(5.55e-17, None)
    ('1.00e+15', '1.66e+16', '5.55e-17')
    """
    if x is None or (isinstance(x, float) and math.isinf(x)):
        return INFINITY_MD if x is None or x > 0 else "-" + INFINITY_MD
    x = float(x)
    if math.isnan(x):
        return "n/a"
    if digits is not None:
        return f"{x:.{digits}f}"
    if x == 0:
        return "0"
    x = float(f"{x:.{sig - 1}e}")  # round first: 999,999,999.6 is 1.00G, not 1000M
    if abs(x) < 1e-4:  # 5.55e-17, not seventeen zeros
        return f"{x:.{sig - 1}e}"
    if abs(x) >= SCIENTIFIC_FROM:
        return f"{x:.{sig - 1}e}"
    suffix = ""
    for scale, name in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            x, suffix = x / scale, name
            break
    magnitude = math.floor(math.log10(abs(x)))
    if magnitude >= sig - 1:
        return f"{round(x):.0f}{suffix}"
    return f"{x:.{sig - 1 - magnitude}f}{suffix}"


def money(x: float, decimals: int = 0) -> str:
    """A budget or a cost: ``decimals`` decimals with thousands separators below 1e15, then
    three significant digits in scientific notation; ``inf`` is ``∞``, NaN ``n/a``.

    >>> money(10000), money(9694.42, 2), money(2.5e14), money(1e30), money(float("inf"))
    ('10,000', '9,694.42', '250,000,000,000,000', '1.00e+30', '∞')
    """
    x = float(x)
    if math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return INFINITY_MD if x > 0 else "-" + INFINITY_MD
    if abs(x) >= SCIENTIFIC_FROM:
        return f"{x:.2e}"
    return f"{x:,.{decimals}f}"


def times(factor: float) -> str:
    """A factor for text and tables: ``0.5x``, ``4x``, ``45x``, ``7,600x``; from a million up
    in scientific notation (``5.56e+24x``); ``inf`` is ``∞x``.

    >>> times(0.5), times(4.0), times(45.2), times(7600.0), times(5.563e24), times(float("inf"))
    ('0.5x', '4x', '45x', '7,600x', '5.56e+24x', '∞x')
    """
    factor = float(factor)
    if math.isnan(factor):
        return "n/a"
    if math.isinf(factor):
        return (INFINITY_MD if factor > 0 else "-" + INFINITY_MD) + "x"
    if factor < 10:
        return f"{factor:.2g}x"
    if factor < TIMES_SCIENTIFIC_FROM:
        return f"{factor:,.0f}x"
    return f"{factor:.2e}x"
