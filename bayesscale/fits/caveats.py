"""What a result can and cannot support, said where a notebook shows it.

The command line prints these caveats as notes on standard error and as the first line of
its output. From Python, the fit objects raise each as a :class:`CaveatWarning` (shown once
per place in a notebook, like any warning) and keep them with the result, so that nothing
depends on having seen the warning:

- ``bs.fit`` and ``bs.fit_pricing``: a fit whose diagnostics failed (a preview is asked for,
  and says so in everything that reads it); a pricing fit whose exponent priors came from a
  law fit that failed or was a preview;
- ``LawFit.recipe``: the fits' verdicts, how far the recipe lies beyond the swept range,
  exponents the data barely identify, settings where the optimiser failed
  (``ds.attrs["caveats"]``, one per line);
- ``LawFit.check``: the fit's verdict, held-out rows far outside the swept range, intervals
  too narrow for the held-out runs (``frame.attrs["caveats"]``, one per line).

>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     announce(["note: an example"])
>>> caught[0].category.__name__, str(caught[0].message)
('CaveatWarning', 'note: an example')

``warnings.simplefilter("ignore", bs.CaveatWarning)`` silences them; ``"error"`` makes a
script stop at the first.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bayesscale import names

if TYPE_CHECKING:
    import xarray as xr

    from bayesscale.data.fitfile import Diagnostics
    from bayesscale.fits.law import LawFit


class CaveatWarning(UserWarning):
    """A result is weaker than it looks: a failed or preview fit, an extrapolation far beyond
    the data, exponents the data barely identify."""


def announce(caveats: Sequence[str], stacklevel: int = 3) -> None:
    """Warn each caveat as a :class:`CaveatWarning`, pointing at the user's call."""
    for line in caveats:
        warnings.warn(line, CaveatWarning, stacklevel=stacklevel)


def verdict(diagnostics: Diagnostics, what: str) -> list[str]:
    """``["law fit: DIAGNOSTICS FAILED (...)..."]`` for a failed or preview fit, else ``[]``."""
    headline = diagnostics.headline()
    return [] if headline is None else [f"{what}: {headline}"]


def failed_fit(diagnostics: Diagnostics, what: str) -> list[str]:
    """The verdict of a fit just made, unless it is the preview that was asked for."""
    return [] if diagnostics.preview else verdict(diagnostics, what)


def recipe_caveats(
    law: LawFit,
    ds: xr.Dataset,
    pricing: Diagnostics | None = None,
    within_data: float | None = None,
) -> list[str]:
    """Everything ``bayesscale recipe`` notes about a recipe ``ds`` of ``law``: the fits'
    verdicts, extrapolation, exponents the data barely identify, optimiser failures."""
    from bayesscale.recipe.output import exponent_flags, flag_rows, to_json
    from bayesscale.report.recipe_text import (
        exponent_flags_note,
        extrapolation_warning,
        solver_failures_note,
    )

    summary: dict[str, Any] = to_json(ds)
    flag_rows(summary, exponent_flags(law.identification))
    notes = verdict(law.diagnostics, "law fit")
    if pricing is not None:
        notes += verdict(pricing, "pricing fit")
    notes += [
        line
        for line in (
            extrapolation_warning(summary, within_data),
            exponent_flags_note(summary),
            solver_failures_note(int(ds.attrs.get("decision_solver_failures", 0))),
        )
        if line is not None
    ]
    return notes


def check_caveats(law: LawFit, frame: Any) -> list[str]:
    """Everything ``bayesscale check`` notes about a held-out check ``frame`` of ``law``."""
    from bayesscale.checks.heldout import (
        calibration,
        calibration_note,
        extent_summary,
        extrapolation_note,
    )

    notes = verdict(law.diagnostics, "law fit")
    found = [
        extrapolation_note(extent_summary(frame)),
        calibration_note(calibration(frame, frame.attrs[names.ATTR_PROB])),
    ]
    return [*notes, *(n for n in found if n is not None)]
