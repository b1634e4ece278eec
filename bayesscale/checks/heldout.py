"""Held-out checks: does the law fit predict runs it has not seen?

For each held-out row ``i`` with ``k_i`` successes out of ``n_i`` (or a loss ``y_i``), the
posterior predictive distribution is the mixture over draws ``d`` of
``BetaBinomial(n_i, p_{d,i} phi_d, (1 - p_{d,i}) phi_d)`` (:mod:`bayesscale.law.predict`). Reported:

* ``observed`` = ``k_i / n_i`` and ``predicted``, the median of the predictive rate ``k / n``;
* ``[lower, upper]``: the central ``prob`` interval of the predictive rate (law uncertainty,
  seed-to-seed spread and binomial noise of the ``n_i`` held-out tasks);
* ``[mean_lower, mean_upper]``: the central interval of the expected rate ``p = exp(-L)`` (law
  uncertainty only: where the seed mean of many runs would land);
* ``percentile``: the randomised PIT ``u_i = P(K < k_i) + V P(K = k_i)``, ``V ~ U(0, 1)`` (a
  continuous loss: ``P(Y < y_i)``), uniform on (0, 1) when the model is calibrated;
* ``covered``: ``lower <= observed <= upper``; ``coverage`` is its mean, near ``prob`` when
  the model is calibrated; ``mae`` is the mean of ``|observed - predicted|``;
* ``<axis>_over_max``: the row's size on each axis over the largest value of that axis in its
  setting's fitted rows, and ``outside_swept``, how many times outside the swept range the row
  lies on its farthest axis (1 inside; :mod:`bayesscale.data.extrapolation`). A held-out check at
  4x beyond the data tests the law 4x out, not further. Rows of a setting the fit does not
  know are measured against the widest range of any setting.

The predictive probabilities are Monte Carlo estimates over ``replicates x chains x draws``
predictive samples, seeded.

Example
-------
>>> table = check(load_fit("fit.nc"), load_heldout("heldout.csv", fit))  # doctest: +SKIP
>>> table.attrs["coverage"]  # doctest: +SKIP
0.93
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import NDArray

from bayesscale import names
from bayesscale.core.intervals import DEFAULT_PROB, quantiles, tail_quantiles
from bayesscale.data.extrapolation import WARN_FACTOR, SweptRange, check_threshold
from bayesscale.data.fitfile import Diagnostics, verdict
from bayesscale.data.observations import Table, axis_sizes, file_lines, read_table
from bayesscale.formatting import times
from bayesscale.law.posterior import fit_layout
from bayesscale.law.predict import Prediction, predict, validate_rows

Array = NDArray[np.float64]
DEFAULT_REPLICATES = 2
SUMMARY_COLUMNS = (names.N_ROWS, names.MAE, names.COVERAGE, names.MEAN_PERCENTILE)
# further attributes of a check table (prob, coverage and mae are in bayesscale.names)
ATTR_SOURCE = "source"  # where the held-out rows came from
ATTR_OUTCOME = "outcome"  # "success" (rates k/n) or "loss"
ATTR_SAMPLES = "samples"  # predictive samples per row (replicates x chains x draws)
ATTR_NONPOSITIVE = "nonpositive_loss"  # (draw, row) pairs whose law gave L <= 0 (p >= 1)


def load_heldout(path: str | Path, fit: xr.DataTree) -> Table:
    """Read a held-out table and validate it for the fit's spec (errors name the file, column
    and rows). Rules that only matter for fitting (three distinct sizes per axis) are not
    applied: one held-out run is a valid check."""
    spec = fit_layout(fit).spec
    frame, digest = read_table(path)
    return Table(validate_rows(frame, spec, str(path), observed=True), str(path), digest)


def _check_prob(prob: float) -> None:
    if not 0 < prob < 1:
        raise ValueError(f"prob must be in (0, 1), got {prob}")


def check(
    fit: xr.DataTree,
    heldout: Table | pd.DataFrame,
    prob: float = DEFAULT_PROB,
    new_groups: str | None = None,
    seed: int = 0,
    replicates: int = DEFAULT_REPLICATES,
    rows: np.ndarray | None = None,
    source: str | None = None,
    drift: bool = True,
) -> pd.DataFrame:
    """One row per held-out row: the columns in the module docstring (names in
    :mod:`bayesscale.names`), the row's setting keys, axis columns, model size, reward and
    seed as given; ``frame.attrs`` holds ``prob``, ``coverage``, ``mae`` and the source.

    ``rows`` renumbers the rows (crossval passes their positions in the original table);
    ``seed`` drives new-setting draws, predictive draws and the PIT's randomisation;
    ``drift=False`` checks the law's own posterior predictive, without the fit's drift beyond
    the sweep (:mod:`bayesscale.law.drift`)."""
    _check_prob(prob)
    pred = predict(
        fit, heldout, new_groups=new_groups, seed=seed, source=source, observed=True, drift=drift
    )
    return check_prediction(fit, pred, prob, seed, replicates, rows)


def check_prediction(
    fit: xr.DataTree,
    pred: Prediction,
    prob: float = DEFAULT_PROB,
    seed: int = 0,
    replicates: int = DEFAULT_REPLICATES,
    rows: np.ndarray | None = None,
) -> pd.DataFrame:
    """:func:`check`'s table from ``fit``'s prediction ``pred`` of held-out rows already made
    (a caller that also scores the prediction predicts once)."""
    _check_prob(prob)
    table = _table(pred, prob, seed, replicates, rows)
    return _add_extent(table, fit, pred)


def _add_extent(table: pd.DataFrame, fit: xr.DataTree, pred: Prediction) -> pd.DataFrame:
    """``<axis>_over_max`` per axis and ``outside_swept`` (NaN for a fit without a swept range)."""
    swept = SweptRange.from_fit(fit)
    spec = fit_layout(fit).spec
    axes = list(spec.axis_names)
    if swept is None:
        for axis in axes:
            table[axis + names.OVER_MAX_SUFFIX] = np.nan
        table[names.OUTSIDE_SWEPT] = np.nan
        return table
    sizes = axis_sizes(pred.frame, spec)
    rows = swept.for_rows(pred.setting, axes)
    factor = rows.factor(sizes)
    for i, axis in enumerate(axes):
        table[axis + names.OVER_MAX_SUFFIX] = factor[:, i]
    table[names.OUTSIDE_SWEPT] = rows.outside(sizes).max(axis=1)
    return table


def predictive_rates(
    pred: Prediction, rng: np.random.Generator, replicates: int = DEFAULT_REPLICATES
) -> tuple[Array, Array, Array]:
    """The predictive draws ``(replicates x S, R)`` (counts ``k``, or a loss), the same draws
    as rates (``k / n``; a loss as it is) and the observed rates ``(R,)``: what a held-out
    row's interval is a quantile of, and what it is checked against."""
    if pred.observed is None:
        raise ValueError("a held-out check needs observed outcomes")
    draws = pred.sample(rng, replicates=replicates)
    if pred.outcome != "success":
        return draws, draws, pred.observed
    if pred.trials is None:
        raise ValueError("a held-out check of success counts needs trials")
    n = pred.trials.astype(float)
    return draws, draws / n[None, :], pred.observed / n


def check_seed(seed: int) -> list[int]:
    """The seed of a held-out check's predictive draws (:func:`predictive_rates`) for the
    check's ``seed``: whoever redraws the check's intervals draws the same ones."""
    return [seed, 1]


def _table(
    pred: Prediction, prob: float, seed: int, replicates: int, rows: np.ndarray | None
) -> pd.DataFrame:
    rng = np.random.default_rng(check_seed(seed))
    draws, rate, observed = predictive_rates(pred, rng, replicates)
    expected = pred.expected()
    if pred.outcome == "success":
        assert pred.observed is not None
        below = (draws < pred.observed[None, :]).mean(axis=0)
        tied = (draws == pred.observed[None, :]).mean(axis=0)
        percentile = below + rng.uniform(size=pred.rows) * tied
    else:
        percentile = (draws < observed[None, :]).mean(axis=0)
    tail, head = tail_quantiles(prob)
    lower, predicted, upper = quantiles(rate, [tail, 0.5, head], axis=0)
    mean_lower, mean_upper = quantiles(expected, [tail, head], axis=0)

    frame = pred.frame
    position = np.arange(pred.rows) if rows is None else np.asarray(rows, dtype=np.int64)
    if len(position) != pred.rows:
        raise ValueError(f"rows has {len(position)} entries for {pred.rows} rows")
    out = pd.DataFrame({names.ROW: position + 1})
    line = file_lines(position, pred.source) if pred.source.lower().endswith(".csv") else None
    out[names.LINE] = pd.array(line if line is not None else [pd.NA] * pred.rows, dtype="Int64")
    out[names.SETTING] = list(pred.setting)
    spec_columns = _echo_columns(frame)
    for column in spec_columns:
        out[column] = frame[column].to_numpy()
    out[names.OBSERVED] = observed
    out[names.PREDICTED] = predicted
    out[names.LOWER] = lower
    out[names.UPPER] = upper
    out[names.MEAN_LOWER] = mean_lower
    out[names.MEAN_UPPER] = mean_upper
    out[names.PERCENTILE] = percentile
    out[names.COVERED] = (lower <= observed) & (observed <= upper)
    out[names.NEW_SETTING] = pred.new_setting
    out.attrs = {
        names.ATTR_PROB: prob,
        names.ATTR_COVERAGE: float(out[names.COVERED].mean()),
        names.ATTR_MAE: float(np.mean(np.abs(observed - predicted))),
        ATTR_SOURCE: pred.source,
        ATTR_OUTCOME: pred.outcome,
        ATTR_SAMPLES: int(draws.shape[0]),
        ATTR_NONPOSITIVE: pred.nonpositive,
    }
    return out


def _echo_columns(frame: pd.DataFrame) -> list[str]:
    """Input columns repeated in the check table, in a fixed order, where present."""
    order = (*names.RUN_COLUMNS, names.SUCCESSES, names.TRIALS, names.LOSS)
    return [c for c in order if c in frame.columns]


def summarise_rows(table: pd.DataFrame) -> dict[str, float]:
    """``n_rows``, ``mae``, ``coverage`` and ``mean_percentile`` of a (part of a) check table."""
    return {
        names.N_ROWS: len(table),
        names.MAE: float(np.mean(np.abs(table[names.OBSERVED] - table[names.PREDICTED]))),
        names.COVERAGE: float(table[names.COVERED].mean()),
        names.MEAN_PERCENTILE: float(table[names.PERCENTILE].mean()),
    }


def by_setting(table: pd.DataFrame) -> pd.DataFrame:
    """Per-setting ``n_rows``, ``mae``, ``coverage``, ``mean_percentile`` (settings in order of
    appearance)."""
    records = []
    for setting, part in table.groupby(names.SETTING, sort=False):
        records.append({names.SETTING: setting, **summarise_rows(part)})
    return pd.DataFrame.from_records(records, columns=[names.SETTING, *SUMMARY_COLUMNS])


CALIBRATION_ALPHA = 0.05  # a coverage this unlikely under the nominal level is called off
# calibration()'s verdicts: coverage within chance of the nominal level, above it, below it
WITHIN_CHANCE, CONSERVATIVE, OVER_CONFIDENT = "within chance", "conservative", "over-confident"


def binomial_p_value(k: int, n: int, p: float) -> float:
    """Two-sided exact binomial test of ``k`` successes in ``n`` at rate ``p``: the mass of
    every count no more likely than ``k`` (within a relative 1e-7, as
    ``scipy.stats.binomtest``, whose import costs a read-only command a second).

    >>> round(binomial_p_value(95, 100, 0.9), 3)
    0.13
    """
    from scipy import special  # loaded by law.predict already

    i = np.arange(n + 1)
    with np.errstate(divide="ignore"):
        log_pmf = (
            special.gammaln(n + 1)
            - special.gammaln(i + 1)
            - special.gammaln(n - i + 1)
            + special.xlogy(i, p)
            + special.xlog1py(n - i, -p)
        )
    pmf = np.exp(log_pmf)
    if k == n * p:
        return 1.0
    return float(min(1.0, pmf[pmf <= pmf[k] * (1 + 1e-7)].sum()))


def calibration(table: pd.DataFrame, prob: float) -> dict[str, Any]:
    """Is the coverage of ``table`` (a check table) what its ``prob`` intervals promise?

    Counts the rows inside, above and below their intervals, and tests ``inside ~
    Binomial(n, prob)`` two-sided (``p_value``). Rows of one setting share its posterior, so
    they are not independent and the test overstates the evidence; ``note`` says so.

    >>> frame = pd.DataFrame({"covered": [True] * 95 + [False] * 5, "observed": 0.5,
    ...                       "lower": 0.4, "upper": [0.6] * 95 + [0.45] * 5})
    >>> calibration(frame, 0.9)["above"], round(calibration(frame, 0.9)["p_value"], 3)
    (5, 0.13)
    """
    n = len(table)
    inside = int(table[names.COVERED].sum())
    above = int((table[names.OBSERVED] > table[names.UPPER]).sum())
    below = int((table[names.OBSERVED] < table[names.LOWER]).sum())
    p_value = binomial_p_value(inside, n, prob) if n else float("nan")
    coverage = inside / n if n else float("nan")
    verdict: str | None = None
    if not n:
        text = "no rows to check"
    elif p_value >= CALIBRATION_ALPHA:
        verdict = WITHIN_CHANCE
        text = (
            f"coverage {coverage:.3f} is within chance of the nominal {prob:.2f} "
            f"(binomial p = {p_value:.2g} over {n} rows)"
        )
    elif coverage > prob:
        verdict = CONSERVATIVE
        text = (
            f"coverage {coverage:.3f} is above the nominal {prob:.2f} beyond chance (binomial "
            f"p = {p_value:.2g} over {n} rows): the intervals are wider than these runs' "
            "spread, conservative here"
        )
    else:
        verdict = OVER_CONFIDENT
        text = (
            f"coverage {coverage:.3f} is below the nominal {prob:.2f} beyond chance (binomial "
            f"p = {p_value:.2g} over {n} rows): the intervals are too narrow, the law is "
            "over-confident on these runs"
        )
    note = (
        f"{text}; rows of one setting share its posterior, so the test overstates the "
        f"evidence. Outside their interval: {above} above it, {below} below"
    )
    return {
        "nominal": prob,
        "inside": inside,
        "above": above,
        "below": below,
        "p_value": p_value,
        "verdict": verdict,
        "note": note,
    }


def calibration_note(result: dict[str, Any]) -> str | None:
    """A warning when :func:`calibration` finds the intervals too narrow (coverage below the
    nominal level beyond chance: the law claims more certainty than the runs bear out), else
    ``None``. Intervals wider than needed are said in the check's text, not warned: they
    claim less than the data support, not more."""
    if result["verdict"] != OVER_CONFIDENT:
        return None
    return f"warning: held-out {result['note']}"


def summary(table: pd.DataFrame, warn_factor: float = WARN_FACTOR) -> dict[str, Any]:
    """Everything ``bayesscale check`` prints, as plain data (JSON-ready)."""
    prob = table.attrs[names.ATTR_PROB]
    return {
        "source": table.attrs.get(ATTR_SOURCE),
        "outcome": table.attrs.get(ATTR_OUTCOME),
        "prob": prob,
        "overall": summarise_rows(table),
        "calibration": calibration(table, prob),
        "settings": by_setting(table).to_dict(orient="records"),
        "new_settings": sorted(set(table.loc[table[names.NEW_SETTING], names.SETTING])),
        ATTR_NONPOSITIVE: int(table.attrs.get(ATTR_NONPOSITIVE, 0)),
        "extrapolation": extent_summary(table, warn_factor),
    }


def extent_summary(table: pd.DataFrame, warn_factor: float = WARN_FACTOR) -> dict[str, Any] | None:
    """How far beyond the data the checked rows lie: the largest factor over the swept max per
    axis, and coverage and MAE separately for the rows within ``warn_factor`` of the swept range
    and those beyond it (``None`` when the fit stores no swept range)."""
    warn_factor = check_threshold(warn_factor)
    if names.OUTSIDE_SWEPT not in table or table[names.OUTSIDE_SWEPT].isna().all():
        return None
    columns = [c for c in table.columns if str(c).endswith(names.OVER_MAX_SUFFIX)]
    beyond = table[names.OUTSIDE_SWEPT] > warn_factor
    return {
        "warn_factor": warn_factor,
        "largest_over_max": {
            c.removesuffix(names.OVER_MAX_SUFFIX): float(table[c].max()) for c in columns
        },
        "largest_outside": float(table[names.OUTSIDE_SWEPT].max()),
        "within": summarise_rows(table[~beyond]) if (~beyond).any() else None,
        "beyond": summarise_rows(table[beyond]) if beyond.any() else None,
    }


def extrapolation_note(extent: dict[str, Any] | None) -> str | None:
    """One note when checked rows lie beyond :func:`extent_summary`'s threshold (how many, how
    far, what their coverage tests), else ``None``."""
    if not extent or extent["beyond"] is None:
        return None
    return (
        f"note: {extent['beyond'][names.N_ROWS]} held-out rows lie more than "
        f"{extent['warn_factor']:g}x outside the swept range (up to "
        f"{extent['largest_outside']:.3g}x); their coverage tests the law that far out"
    )


def check_notes(
    diagnostics: Diagnostics, table: pd.DataFrame, warn_factor: float = WARN_FACTOR
) -> list[str]:
    """Everything a held-out check ``table`` notes, in the order it is shown: the law fit's
    verdict (with these ``diagnostics``), rows more than ``warn_factor`` times outside the swept
    range, intervals too narrow for the runs (coverage below the nominal level beyond chance)."""
    found = [
        extrapolation_note(extent_summary(table, warn_factor)),
        calibration_note(calibration(table, table.attrs[names.ATTR_PROB])),
    ]
    return [*verdict(diagnostics, "law fit"), *(n for n in found if n is not None)]


def format_text(result: dict[str, Any]) -> str:
    """A terminal rendering of :func:`summary`."""
    prob = result["prob"]
    overall = result["overall"]
    what = "success rate" if result["outcome"] == "success" else "loss"
    lines = [
        f"held-out check of {overall[names.N_ROWS]} rows of {result['source']} ({what})",
        f"  {prob:.0%} predictive coverage {overall[names.COVERAGE]:.3f} "
        f"(calibrated: about {prob:.2f}), mean percentile {overall[names.MEAN_PERCENTILE]:.3f} "
        f"(calibrated: about 0.5), MAE {overall[names.MAE]:.4f}",
    ]
    if result.get("calibration"):
        lines.append(f"  {result['calibration']['note']}")
    if result["new_settings"]:
        lines.append(f"  predicted from the population: {', '.join(result['new_settings'])}")
    if result.get(ATTR_NONPOSITIVE):
        lines.append(
            f"  note: {result[ATTR_NONPOSITIVE]} (draw, row) pairs have a law loss <= 0 (success "
            "probability >= 1: a draw's floor below zero, far beyond the data); they are "
            "predicted at p just below 1"
        )
    extent = result.get("extrapolation")
    if extent:
        axes = ", ".join(f"{a} {times(f)}" for a, f in extent["largest_over_max"].items())
        lines.append(f"  largest size over the largest swept value: {axes}")
        for part, label in (("within", "within"), ("beyond", "beyond")):
            rows = extent[part]
            if rows is not None:
                lines.append(
                    f"    {rows[names.N_ROWS]} rows {label} {extent['warn_factor']:g}x of the swept "
                    f"range: coverage {rows[names.COVERAGE]:.3f}, MAE {rows[names.MAE]:.4f}"
                )
    settings = result["settings"]
    width = max([len("setting"), *(len(s[names.SETTING]) for s in settings)])
    lines += [
        "",
        f"  {'setting'.ljust(width)}  {'rows':>5}  {'coverage':>8}  {'mean pct':>8}  {'MAE':>7}",
    ]
    for s in settings:
        lines.append(
            f"  {s[names.SETTING].ljust(width)}  {s[names.N_ROWS]:>5d}  {s[names.COVERAGE]:>8.3f}  "
            f"{s[names.MEAN_PERCENTILE]:>8.3f}  {s[names.MAE]:>7.4f}"
        )
    return "\n".join(lines)
