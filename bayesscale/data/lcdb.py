"""Learning curves of LCDB 1.0 (Mohr, Viering, Loog, van Rijn 2022) as an observation table.

LCDB's accuracy table has one row per (OpenML dataset, scikit-learn learner, training size,
inner seed): ``openmlid``, ``learner``, ``size_train``, ``size_test``, ``inner_seed`` and the
test ``accuracy``. As bayesscale observations, one curve is one setting (``openmlid``,
``learner``), the one axis is ``size_train``, the seed is ``inner_seed`` and the outcome is a
success count:

.. math::

    k = \\mathrm{round}(\\mathrm{accuracy} \\times n_\\mathrm{test}), \\qquad
    n = n_\\mathrm{test}.

``LCDB_SPEC`` is the package's law with its default priors on that axis
(``L = -log accuracy``). :func:`eligible_curves` and :func:`sample_curves` pick the curves
of the extrapolation benchmark (``benchmarks/extrapolation.py``); :func:`split_at` keeps the
sizes up to a fraction of each curve's largest for fitting and the larger ones for checking.

The development half of the data lives outside the repository, at
``../shared/external/lcdb`` beside the repository root (or ``$BAYESSCALE_EXTERNAL/lcdb``):
:func:`lcdb_dir`.

Example
-------
>>> raw = pd.DataFrame({"openmlid": [6] * 3, "learner": ["SVC"] * 3, "size_train": [16, 23, 32],
...                     "size_test": [200] * 3, "inner_seed": [0] * 3,
...                     "accuracy": [0.5, 0.6, 0.7]})
>>> to_observations(raw)["successes"].tolist()
[100, 120, 140]
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from bayesscale import names
from bayesscale.data.observations import ObservationError, column_error, rows_text
from bayesscale.data.spec import ModelSpec, parse_spec

OPENMLID, LEARNER = "openmlid", "learner"
SIZE_TRAIN, SIZE_TEST, INNER_SEED, ACCURACY = "size_train", "size_test", "inner_seed", "accuracy"
COLUMNS = (OPENMLID, LEARNER, SIZE_TRAIN, SIZE_TEST, INNER_SEED, ACCURACY)
CURVE = (OPENMLID, LEARNER)  # the setting keys: one curve per (dataset, learner)
DEV_FILE = "lcdb_accuracy_dev.csv.gz"
MIN_LARGEST = 2048  # the benchmark's curves reach at least this training size
MIN_SIZES = 12  # ... with at least this many distinct training sizes

LCDB_SPEC = """
[model]
name = "lcdb"
description = "LCDB learning curves: test accuracy against training-set size, one setting per (dataset, learner); the package's default priors."

[outcome]
kind = "success"

[settings]
keys = ["openmlid", "learner"]

[[axes]]
name = "size"
column = "size_train"
label = "training examples"
"""


def lcdb_spec(form: str = "power", concentration_spread: float = 0.0) -> ModelSpec:
    """The law of ``LCDB_SPEC`` (one axis on ``size_train``; default priors), its axis of
    the given form (:mod:`bayesscale.core.forms`), with a concentration per curve where
    ``concentration_spread`` > 0 (``[outcome] concentration_spread``)."""
    text = LCDB_SPEC.replace(
        'kind = "success"\n', f'kind = "success"\nconcentration_spread = {concentration_spread!r}\n'
    )
    spec = parse_spec(f'{text}form = "{form}"\n', source="bayesscale.data.lcdb.LCDB_SPEC")
    assert spec.concentration_spread == concentration_spread  # the [outcome] line was found
    return spec


def lcdb_dir(root: str | Path | None = None) -> Path:
    """The folder of LCDB's development half: ``$BAYESSCALE_EXTERNAL/lcdb`` when that variable
    is set, else ``<root>/../shared/external/lcdb`` (``root``: the repository, by default the
    one this package lives in). A clear error when it is absent."""
    if root is None:
        root = Path(__file__).resolve().parents[2]
    env = os.environ.get("BAYESSCALE_EXTERNAL")
    base = Path(env) if env else Path(root).resolve().parent / "shared" / "external"
    folder = base / "lcdb"
    if not (folder / DEV_FILE).is_file():
        raise FileNotFoundError(
            f"{folder / DEV_FILE}: LCDB's development half is not there. It is expected at "
            "../shared/external/lcdb beside the repository root (or $BAYESSCALE_EXTERNAL/lcdb); "
            "see ../shared/external/README.md. Do not install the lcdb package to get it."
        )
    return folder


def read_lcdb(path: str | Path | None = None) -> pd.DataFrame:
    """LCDB's accuracy rows (``path``: a CSV, gzipped or not; default the development half),
    checked: every column of ``COLUMNS``, numbers where numbers belong, ``0 <= accuracy
    <= 1``, sizes >= 1. Errors name the file, the column and the rows."""
    path = Path(path) if path is not None else lcdb_dir() / DEV_FILE
    frame = pd.read_csv(path)
    source = str(path)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ObservationError(f"{source}: missing column(s) {missing}; has {list(frame.columns)}")
    frame = frame[list(COLUMNS)].copy()
    frame[LEARNER] = frame[LEARNER].astype(str)
    for column in (OPENMLID, SIZE_TRAIN, SIZE_TEST, INNER_SEED, ACCURACY):
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = frame.index[~np.isfinite(values.to_numpy(float))]
        if len(bad):
            raise column_error(source, column, bad, "not a finite number")
        frame[column] = values
    for column in (SIZE_TRAIN, SIZE_TEST):
        bad = frame.index[frame[column] < 1]
        if len(bad):
            raise column_error(source, column, bad, "sizes must be >= 1")
    bad = frame.index[(frame[ACCURACY] < 0) | (frame[ACCURACY] > 1)]
    if len(bad):
        raise column_error(source, ACCURACY, bad, "an accuracy lies in [0, 1]")
    for column in (OPENMLID, SIZE_TRAIN, SIZE_TEST, INNER_SEED):
        frame[column] = frame[column].astype(np.int64)
    dup = frame.duplicated([*CURVE, SIZE_TRAIN, INNER_SEED], keep="first")
    if dup.any():
        raise ObservationError(
            f"{source}: {rows_text(np.flatnonzero(dup.to_numpy()), source)}: a (openmlid, "
            "learner, size_train, inner_seed) appears twice"
        )
    return frame


def eligible_curves(
    frame: pd.DataFrame, min_largest: int = MIN_LARGEST, min_sizes: int = MIN_SIZES
) -> pd.DataFrame:
    """One row per curve whose largest training size is at least ``min_largest`` with at least
    ``min_sizes`` distinct sizes: ``openmlid``, ``learner``, ``largest``, ``n_sizes``, sorted
    by dataset and learner."""
    stats = frame.groupby(list(CURVE))[SIZE_TRAIN].agg(largest="max", n_sizes="nunique")
    keep = stats[(stats["largest"] >= min_largest) & (stats["n_sizes"] >= min_sizes)]
    return keep.reset_index().sort_values(list(CURVE), ignore_index=True)


def sample_curves(curves: pd.DataFrame, n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` curves of ``curves`` drawn without replacement by ``seed`` (all, in a seeded
    order, when ``n`` is larger); the first ``m`` of a sample are the sample of ``m``.

    >>> c = pd.DataFrame({"openmlid": [1, 2, 3], "learner": ["a"] * 3})
    >>> sample_curves(c, 2, seed=0).equals(sample_curves(c, 3, seed=0).head(2))
    True
    """
    order = np.random.default_rng(seed).permutation(len(curves))
    return curves.iloc[order[: min(n, len(curves))]].reset_index(drop=True)


def select(frame: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` that belong to ``curves`` (their order kept)."""
    keys = curves[list(CURVE)].drop_duplicates()
    return frame.merge(keys, on=list(CURVE), how="inner").reset_index(drop=True)


def to_observations(frame: pd.DataFrame) -> pd.DataFrame:
    """LCDB rows as observation rows: ``openmlid``, ``learner``, ``size_train``, ``seed``
    (``inner_seed``), ``successes`` (``round(accuracy x size_test)``), ``trials``
    (``size_test``) and the ``accuracy`` as given."""
    out = frame[[OPENMLID, LEARNER, SIZE_TRAIN]].copy()
    out[OPENMLID] = out[OPENMLID].astype(str)
    out[names.SEED] = frame[INNER_SEED].to_numpy(np.int64)
    trials = frame[SIZE_TEST].to_numpy(np.int64)
    out[names.SUCCESSES] = np.rint(frame[ACCURACY].to_numpy(float) * trials).astype(np.int64)
    out[names.TRIALS] = trials
    out[ACCURACY] = frame[ACCURACY].to_numpy(float)
    return out


def split_at(frame: pd.DataFrame, fraction: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(fitted, held_out)``: the rows whose ``size_train`` is at most ``fraction`` times
    their curve's largest size, and the others.

    >>> f = pd.DataFrame({"openmlid": ["1"] * 4, "learner": ["a"] * 4,
    ...                   "size_train": [16, 32, 64, 128]})
    >>> [len(part) for part in split_at(f, 0.25)]
    [2, 2]
    """
    if not 0 < fraction < 1:
        raise ValueError(f"the fraction of the largest size must be in (0, 1), got {fraction}")
    largest = frame.groupby(list(CURVE))[SIZE_TRAIN].transform("max")
    inside = (frame[SIZE_TRAIN] <= fraction * largest).to_numpy()
    return (
        frame[inside].reset_index(drop=True),
        frame[~inside].reset_index(drop=True),
    )
