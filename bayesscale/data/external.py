"""Readers for public scaling data in its published formats.

``read_chinchilla`` reads Epoch AI's extraction of the Chinchilla runs (Hoffmann et
al. 2022, Fig. 4; Besiroglu et al. 2024) into an observation table for
``models/chinchilla.toml``: ``params`` (N), ``tokens`` (D = C / 6N), ``loss``.

Published fits of ``L = E + A N^-alpha + B D^-beta`` on these data, for comparison:

=======================  =====  =====  ======  =====  =====
source                   E      A      B       alpha  beta
=======================  =====  =====  ======  =====  =====
Chinchilla (Approach 3)  1.69   406.4  410.7   0.34   0.28
Epoch replication        1.82   482.0  2085.4  0.348  0.366
=======================  =====  =====  ======  =====  =====

Example
-------
>>> frame = read_chinchilla("../shared/external/chinchilla_points.csv")  # doctest: +SKIP
>>> len(frame)  # doctest: +SKIP
245
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bayesscale.data.observations import ObservationError, read_table

CHINCHILLA_COLUMNS = {"Model Size": "params", "Training FLOP": "compute", "loss": "loss"}
PUBLISHED_FITS = {
    "chinchilla_approach3": {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28},
    "epoch_replication": {"E": 1.82, "A": 482.0, "B": 2085.4, "alpha": 0.348, "beta": 0.366},
}


def read_chinchilla(path: str | Path) -> tuple[pd.DataFrame, str]:
    """Return ``(table, sha256)`` with columns ``params``, ``tokens``, ``compute``, ``loss``."""
    raw, digest = read_table(path)
    missing = [c for c in CHINCHILLA_COLUMNS if c not in raw.columns]
    if missing:
        raise ObservationError(
            f"{path}: missing column(s) {missing}; the file has {list(raw.columns)}"
        )
    frame = raw[list(CHINCHILLA_COLUMNS)].rename(columns=CHINCHILLA_COLUMNS)
    frame["tokens"] = frame["compute"] / (6.0 * frame["params"])
    return frame[["params", "tokens", "compute", "loss"]], digest
