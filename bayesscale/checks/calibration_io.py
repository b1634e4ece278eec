"""What the calibration studies write: the names of their columns, labels and JSON keys
(declared once, read by :mod:`~bayesscale.checks.sbc`, :mod:`~bayesscale.checks.coverage`,
the tests and ``benchmarks/calibration.py``), and their atomic JSON writer.

Example
-------
>>> import numpy as np
>>> _json_default(np.float64(0.5)), _json_default(np.array([1, 2]))
(0.5, [1, 2])
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import numpy as np

from bayesscale.atomic import write_atomically

DATASET: Final = "dataset"
QUANTITY: Final = "quantity"
TRUE_VALUE: Final = "true_value"
RANK: Final = "rank"
RANK_DRAWS: Final = "rank_draws"  # L: posterior draws the truth is ranked among
NORMALIZED_RANK: Final = "normalized_rank"  # u = (rank + v) / (L + 1)
ESS_BULK: Final = "ess_bulk"
DIVERGENCES: Final = "divergences"
MAX_RHAT: Final = "max_rhat"
MIN_ESS: Final = "min_ess_bulk"
SECONDS: Final = "seconds"
REDRAW: Final = "redraw"
ESTIMATOR: Final = "estimator"  # pooled | bootstrap
LEVEL: Final = "level"
LOWER: Final = "lower"
UPPER: Final = "upper"
COVERED: Final = "covered"
WIDTH: Final = "width"
COVERAGE: Final = "coverage"
COVERAGE_SE: Final = "coverage_se"
MEAN_WIDTH: Final = "mean_width"
N_INTERVALS: Final = "n_intervals"
POOLED: Final = "pooled"  # method label: the pooled Bayesian law
BOOTSTRAP: Final = "bootstrap"  # method label: the paper's per-panel bootstrap
SETTING_LEVEL: Final = "setting"  # level label: per-setting exponents alpha[s, a]
POPULATION_LEVEL: Final = "population"  # level label: alpha_pop[a]
# the joint quantity of Modrak et al. (2023): log p(y | theta), the data's log-likelihood
LOG_LIKELIHOOD: Final = "log_likelihood"


def write_json(payload: Mapping[str, Any], path: str | Path, overwrite: bool = False) -> Path:
    """Write JSON atomically (:func:`bayesscale.atomic.write_atomically`: a temporary file
    in the same folder, then a rename); refuse to replace an existing file unless
    ``overwrite``."""

    def write(tmp: Path) -> None:
        with tmp.open("w") as handle:
            json.dump(payload, handle, indent=1, default=_json_default)
            handle.write("\n")

    return write_atomically(path, write, overwrite=overwrite)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
