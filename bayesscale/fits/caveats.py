"""What a result can and cannot support, said where a notebook shows it.

The command line prints these caveats as notes on standard error and as the first line of
its output. From Python, the fit objects raise each as a :class:`CaveatWarning` (shown once
per place in a notebook, like any warning) and keep them with the result, so that nothing
depends on having seen the warning:

- ``bs.fit`` and ``bs.fit_pricing``: a fit whose diagnostics failed (a preview is asked for,
  and says so in everything that reads it); a pricing fit whose exponent priors came from a
  law fit that failed or was a preview;
- ``LawFit.recipe``: the notes of :func:`bayesscale.recipe.notes.recipe_notes` (the fits'
  verdicts, how far the recipe lies beyond the swept range, exponents the data barely
  identify, settings where the optimiser failed; ``ds.attrs["caveats"]``, one per line);
- ``LawFit.check``: the notes of :func:`bayesscale.checks.heldout.check_notes` (the fit's
  verdict, held-out rows far outside the swept range, intervals too narrow for the held-out
  runs; ``frame.attrs["caveats"]``, one per line).

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
from typing import TYPE_CHECKING

from bayesscale.data.fitfile import verdict

if TYPE_CHECKING:
    from bayesscale.data.fitfile import Diagnostics


class CaveatWarning(UserWarning):
    """A result is weaker than it looks: a failed or preview fit, an extrapolation far beyond
    the data, exponents the data barely identify."""


def announce(caveats: Sequence[str], stacklevel: int = 3) -> None:
    """Warn each caveat as a :class:`CaveatWarning`, pointing at the user's call."""
    for line in caveats:
        warnings.warn(line, CaveatWarning, stacklevel=stacklevel)


def single_setting(settings: int) -> list[str]:
    """What a fit of one setting cannot do, else ``[]``: nothing is pooled, so the population
    exponents are that setting's, widened by the prior's spread, and no new setting can be
    predicted.

    >>> single_setting(1)[0].startswith("note: one setting: nothing is pooled"), single_setting(3)
    (True, [])
    """
    if settings != 1:
        return []
    return [
        "note: one setting: nothing is pooled across settings, so the per-setting exponents "
        "rest on this setting's sweep and the priors alone (pooling is what identifies them), "
        "the population exponents are that setting's widened by the prior's spread, and no "
        "new setting can be predicted; fit several (model, algorithm, domain) settings together"
    ]


def failed_fit(diagnostics: Diagnostics, what: str) -> list[str]:
    """The verdict of a fit just made, unless it is the preview that was asked for."""
    return [] if diagnostics.preview else verdict(diagnostics, what)
