"""What a report analyses and how: :class:`ReportOptions` (the user's files, the fits to
reuse, the budgets, the sampler settings), read by :mod:`bayesscale.pipeline.report` and its
sections.

>>> ReportOptions(observations=Path("obs.csv")).budgets[:3]
(1000.0, 3000.0, 10000.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bayesscale.data.extrapolation import WARN_FACTOR
from bayesscale.data.spec import SENSITIVITY_SCALE
from bayesscale.sampling.config import FitConfig

MAX_SETTINGS_SHOWN = 4  # settings drawn in the figures and the sensitivity table (tables list all)

DEFAULT_BUDGETS = (1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6)


@dataclass(frozen=True)
class ReportOptions:
    """What to analyse and how. Paths are the user's files; ``law_fit``/``pricing_fit``/
    ``sensitivity_fit`` reuse saved fits instead of sampling. ``sensitivity_scale``: the
    exponent priors of the sensitivity refit are this many times wider (``None``: no refit,
    no sensitivity section). ``out_of_scale`` (default): check the law out of scale (one refit
    per axis, :mod:`bayesscale.checks.out_of_scale`) where its fit does not store the check,
    so that the recipe's headline is bounded at the reach measured; ``False`` assumes
    ``warn_beyond`` on every axis. ``forms``: fit the law as a stack of these forms
    (:meth:`bayesscale.fits.law.LawFit.stacked`; the power law among them where the prior's
    sensitivity is asked): the report adds the forms' section, and its recipe mixes the
    forms' draws by weight. One form is that form's single fit; ``None`` (default) is what
    :func:`bayesscale.data.spec.forms_to_fit` decides, the default stack for a spec that names
    no axis's form."""

    observations: Path
    pricing: Path | None = None
    heldout: Path | None = None
    spec: str | None = None
    pricing_spec: str | None = None
    prices: Path | None = None
    law_fit: Path | None = None
    pricing_fit: Path | None = None
    sensitivity_fit: Path | None = None
    sensitivity_scale: float | None = SENSITIVITY_SCALE
    budgets: tuple[float, ...] = DEFAULT_BUDGETS
    prob: float = 0.9
    config: FitConfig = field(default_factory=FitConfig)
    pricing_config: FitConfig = field(default_factory=FitConfig)  # its accept: the pricing's
    max_recipe_draws: int = 500
    within_data: float | None = None
    warn_beyond: float = WARN_FACTOR
    strict: bool = False
    new_groups: str | None = None  # held-out settings the fit does not know (check's option)
    out_of_scale: bool = True
    forms: tuple[str, ...] | None = None

    @property
    def middle_budget(self) -> float:
        """The budget the report's single-budget figures and tables are drawn at."""
        return float(self.budgets[len(self.budgets) // 2])
