"""Model comparison by PSIS-LOO (ArviZ 1.x, ``arviz_stats.loo`` and ``arviz_stats.compare``).

For fits ``A`` and ``B`` of the same data, the expected log pointwise predictive density

.. math::

    \\widehat{\\mathrm{elpd}}_\\mathrm{loo} = \\sum_i \\log p(y_i \\mid y_{-i}), \\qquad
    \\Delta = \\widehat{\\mathrm{elpd}}_A - \\widehat{\\mathrm{elpd}}_B, \\qquad
    \\mathrm{SE}(\\Delta) = \\sqrt{n \\, \\mathrm{Var}_i(\\mathrm{elpd}_{A,i} - \\mathrm{elpd}_{B,i})}

is estimated by Pareto-smoothed importance sampling over the posterior draws. The pointwise
log-likelihood is the model's own (:func:`bayesscale.law.predict.pointwise_log_likelihood`: the
beta-binomial pmf of each row's successes, or the Student-t density of its log loss) and is
computed in NumPy when the fit has no ``log_likelihood`` group, from the data the fit was made
of (re-read from its ``data_source`` or given, and checked against its ``data_sha256``).

Verdict: ``|Delta| > 2 SE(Delta)`` is a clear difference ("A is better than B by ..."); otherwise
the fits cannot be told apart by LOO, and the text says so instead of naming a better one; two
fits with the same pointwise LOO terms (the same fit twice) are reported as the same. Each fit's
convergence verdict (:func:`bayesscale.data.fitfile.diagnose`) is part of the result: a fit whose
diagnostics failed, or a preview, is named on the first line of the text. Each row with Pareto ``k`` above ArviZ's threshold
(``min(1 - 1/log10 S, 0.7)``) is named: its LOO term is unreliable.

Example
-------
>>> result = compare_fits({"default": load_fit("a.nc"), "tight": load_fit("b.nc")})  # doctest: +SKIP
>>> print(format_text(result.to_dict()))  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesscale import names
from bayesscale.data.observations import Table, read_table, rows_text, setting_labels, validate
from bayesscale.data.spec import ModelSpec
from bayesscale.law.posterior import fit_layout
from bayesscale.law.predict import pointwise_log_likelihood

CLEAR_SE = 2.0  # |elpd difference| above this many standard errors is a clear difference
MAX_NAMED = 8
_PARETO_WARNING = "Estimated shape parameter of Pareto distribution"


MIN_LOO_SAMPLES = 100  # fewer draws leave too few in the tail for PSIS (ArviZ refuses < 5)


class CompareError(ValueError):
    """Fits that cannot be compared (different data, missing data, one fit)."""


def observation_table(fit: xr.DataTree, data: str | Path | Table | None = None) -> Table:
    """The observation table ``fit`` was made from: ``data`` (a path or a table), else the
    path in its ``data_source`` attribute. Its SHA-256 must equal the fit's ``data_sha256``."""
    expected = fit.attrs.get(names.ATTR_DATA_HASH)
    if isinstance(data, Table):
        table = data
    else:
        path = Path(data) if data is not None else Path(str(fit.attrs.get(names.ATTR_DATA_SOURCE)))
        if not path.exists():
            raise CompareError(
                f"the fit's data {str(path)!r} is not found (it was fitted elsewhere or moved); "
                "pass the observation table (data= in Python; --data on the command line)"
            )
        frame, digest = read_table(path)
        table = Table(validate(frame, fit_layout(fit).spec, str(path)), str(path), digest)
    if expected is not None and table.sha256 != expected:
        raise CompareError(
            f"{table.source} has SHA-256 {table.sha256[:12]}..., but the fit was made from data "
            f"with SHA-256 {str(expected)[:12]}... ({fit.attrs.get(names.ATTR_DATA_SOURCE)}): "
            "not the same data"
        )
    return table


def _table_if_needed(fit: xr.DataTree, data: str | Path | Table | None) -> Table | None:
    """The fit's table; ``None`` when it cannot be read but the fit carries its own
    ``log_likelihood`` group (rows are then named by index only)."""
    try:
        return observation_table(fit, data)
    except CompareError:
        if data is None and names.LOG_LIKELIHOOD_GROUP in fit.children:
            return None
        raise


def with_log_likelihood(fit: xr.DataTree, table: Table | None = None) -> xr.DataTree:
    """``fit`` with a ``log_likelihood`` group (``outcome``: chain, draw, obs), computed in
    NumPy from ``table`` when the fit lacks one. The table's outcome must equal the fit's
    observed data row by row."""
    if names.LOG_LIKELIHOOD_GROUP in fit.children:
        return fit
    table = observation_table(fit, table)
    log_lik = pointwise_log_likelihood(fit, table)
    if "observed_data" in fit.children and names.OUTCOME in fit["observed_data"]:
        stored = np.asarray(fit["observed_data"][names.OUTCOME].values, dtype=float)
        success = fit_layout(fit).spec.outcome == "success"
        column = names.SUCCESSES if success else names.LOSS
        given = table.frame[column].to_numpy(float)
        if not success:
            given = np.log(given)  # the model observes log loss
        if stored.shape != given.shape or not np.allclose(stored, given, rtol=1e-12, atol=0):
            raise CompareError(
                f"{table.source}: column {column!r} does not match the fit's observed data row "
                "by row; it is not the table the fit was made from"
            )
    bad = int(np.sum(~np.isfinite(log_lik.values)))
    if bad:
        raise CompareError(
            f"{bad} pointwise log-likelihood values of the fit on {table.source} are not finite "
            "(draws whose law loss is <= 0 on some row): LOO is undefined for this fit"
        )
    tree = fit.copy()
    tree[names.LOG_LIKELIHOOD_GROUP] = xr.DataTree(xr.Dataset({names.OUTCOME: log_lik}))
    return tree


@dataclass(frozen=True)
class LooResult:
    """PSIS-LOO of one fit: ``elpd`` with its ``se``, effective parameters ``p``, pointwise
    ``pareto_k`` and the rows above ``good_k``."""

    name: str
    elpd: float
    se: float
    p: float
    n_samples: int
    n_data_points: int
    good_k: float
    pareto_k: np.ndarray
    high_k: tuple[str, ...]  # named rows with k > good_k
    elpd_data: Any  # the arviz_stats ELPDData

    def to_dict(self) -> dict[str, Any]:
        """Plain data; the high-k rows are named."""
        return {
            "elpd": self.elpd,
            "se": self.se,
            "p": self.p,
            "n_samples": self.n_samples,
            "n_data_points": self.n_data_points,
            "good_k": self.good_k,
            "n_high_pareto_k": int((self.pareto_k > self.good_k).sum()),
            "max_pareto_k": float(np.max(self.pareto_k)),
            "high_pareto_k": list(self.high_k),
        }


def _name_rows(
    table: Table | None, spec: ModelSpec, rows: np.ndarray, k: np.ndarray
) -> tuple[str, ...]:
    shown = rows[np.argsort(-k[rows])][:MAX_NAMED]
    if table is None:  # a stored log_likelihood group and no data: observation indices only
        out = [f"obs {r}: k = {k[r]:.2f}" for r in shown]
    else:
        labels = setting_labels(table.frame, spec)
        out = [f"{rows_text([r], table.source)} ({labels.iloc[r]}): k = {k[r]:.2f}" for r in shown]
    if len(rows) > MAX_NAMED:
        out.append(f"and {len(rows) - MAX_NAMED} more")
    return tuple(out)


def loo(fit: xr.DataTree, table: Table | None = None, name: str = "fit") -> LooResult:
    """PSIS-LOO of a law fit (``arviz_stats.loo``, pointwise). ArviZ's Pareto-k warning is
    not raised: the high-k rows are counted and named in the result instead."""
    import arviz_stats

    samples = int(fit["posterior"].sizes[names.CHAIN_DIM] * fit["posterior"].sizes[names.DRAW_DIM])
    if samples < MIN_LOO_SAMPLES:
        raise CompareError(
            f"{name}: PSIS-LOO needs at least {MIN_LOO_SAMPLES} posterior draws to fit its Pareto "
            f"tails; this fit has {samples}. Refit with more draws"
        )
    table = _table_if_needed(fit, table)
    tree = with_log_likelihood(fit, table)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PARETO_WARNING, category=UserWarning)
        result = arviz_stats.loo(tree, pointwise=True, var_name=names.OUTCOME)
    k = np.asarray(result.pareto_k.values, dtype=float).ravel()
    high = np.flatnonzero(k > result.good_k)
    return LooResult(
        name=name,
        elpd=float(result.elpd),
        se=float(result.se),
        p=float(result.p),
        n_samples=int(result.n_samples),
        n_data_points=int(result.n_data_points),
        good_k=float(result.good_k),
        pareto_k=k,
        high_k=_name_rows(table, fit_layout(fit).spec, high, k),
        elpd_data=result,
    )


@dataclass(frozen=True)
class Pair:
    """The best fit against another: ``difference = elpd_best - elpd_other >= 0``."""

    best: str
    other: str
    difference: float
    se: float
    same: bool = False  # the same pointwise LOO terms: the same fit, as far as LOO can tell

    @property
    def clear(self) -> bool:
        return not self.same and abs(self.difference) > CLEAR_SE * self.se

    def verdict(self) -> str:
        """``A is better than B by d ± SE`` only for a clear difference; otherwise that they
        cannot be told apart (or, for identical pointwise LOO terms, that they are the same).

        >>> Pair("a", "b", 5.0, 1.0).verdict()
        'a is better than b by 5.0 ± 1.0 (|d| > 2 SE: a clear difference)'
        >>> Pair("a", "b", 1.0, 2.0).verdict()
        'a and b cannot be told apart by LOO: the difference 1.0 ± 2.0 is within 2 SE'
        >>> Pair("a", "b", 0.0, 0.0, same=True).verdict()
        'a and b are the same by LOO: identical pointwise elpd (difference 0)'
        """
        if self.same:
            return (
                f"{self.best} and {self.other} are the same by LOO: identical pointwise elpd "
                "(difference 0)"
            )
        if self.clear:
            return (
                f"{self.best} is better than {self.other} by {self.difference:.1f} ± "
                f"{self.se:.1f} (|d| > {CLEAR_SE:g} SE: a clear difference)"
            )
        return (
            f"{self.best} and {self.other} cannot be told apart by LOO: the difference "
            f"{self.difference:.1f} ± {self.se:.1f} is within {CLEAR_SE:g} SE"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the two fits, the difference, its SE and the verdict."""
        return {
            "best": self.best,
            "other": self.other,
            "elpd_difference": self.difference,
            "se": self.se,
            "clear": self.clear,
            "same": self.same,
            "verdict": self.verdict(),
        }


@dataclass(frozen=True)
class Comparison:
    """LOO per fit, ArviZ's comparison table and the best fit against each other one."""

    data_sha256: str
    data_source: str
    loos: dict[str, LooResult]
    table: pd.DataFrame
    pairs: tuple[Pair, ...]
    diagnostics: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def failed(self) -> list[str]:
        """The fits whose diagnostics failed (or that are previews)."""
        return [name for name, d in self.diagnostics.items() if not d["ok"]]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): the data, the fits whose diagnostics failed, the ranking,
        the pairs' verdicts, LOO and the diagnostics per fit."""
        columns = [
            c for c in ("rank", "elpd", "se", "elpd_diff", "dse", "p", "weight") if c in self.table
        ]
        ranking = [
            {"name": str(name), **{c: _plain(row[c]) for c in columns}}
            for name, row in self.table.iterrows()
        ]
        return {
            "data": {"source": self.data_source, "sha256": self.data_sha256},
            "failed_diagnostics": self.failed,
            "ranking": ranking,
            "pairs": [p.to_dict() for p in self.pairs],
            "loo": {name: result.to_dict() for name, result in self.loos.items()},
            "diagnostics": self.diagnostics,
        }


def _plain(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def compare_fits(
    fits: Mapping[str, xr.DataTree], data: str | Path | Table | None = None
) -> Comparison:
    """Compare law fits of the same data by PSIS-LOO. ``data``: the observation table (path or
    table) when the fits' ``data_source`` cannot be read."""
    if len(fits) < 2:
        raise CompareError(f"compare needs at least two fits, got {len(fits)}")
    hashes = {name: fit.attrs.get(names.ATTR_DATA_HASH) for name, fit in fits.items()}
    if len(set(hashes.values())) != 1 or None in hashes.values():
        listing = "; ".join(
            f"{name}: sha256 {str(h)[:12]}... ({fits[name].attrs.get(names.ATTR_DATA_SOURCE)})"
            for name, h in hashes.items()
        )
        raise CompareError(
            f"fits can only be compared on the same data, and these were made from different data "
            f"(attribute {names.ATTR_DATA_HASH!r}): {listing}"
        )
    first = next(iter(fits.values()))
    table = _table_if_needed(first, data)
    if table is None and not all(names.LOG_LIKELIHOOD_GROUP in f.children for f in fits.values()):
        table = observation_table(first, data)  # raises: say which data are missing
    import arviz_stats  # (it loads JAX: only once the inputs are checked)

    loos = {name: loo(fit, table, name=name) for name, fit in fits.items()}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PARETO_WARNING, category=UserWarning)
        ranking = arviz_stats.compare(
            {name: r.elpd_data for name, r in loos.items()}, round_to="none"
        )
    best = str(ranking.index[0])
    pairs = tuple(
        Pair(
            best,
            str(name),
            0.0 - float(row["elpd_diff"]) + 0.0,
            float(row["dse"]),
            same=_same_pointwise(loos[best], loos[str(name)]),
        )
        for name, row in ranking.iterrows()
        if str(name) != best
    )
    return Comparison(
        data_sha256=str(hashes[best]),
        data_source=table.source
        if table is not None
        else str(first.attrs.get(names.ATTR_DATA_SOURCE)),
        loos=loos,
        table=ranking,
        pairs=pairs,
        diagnostics=diagnostics_of(fits),
    )


def diagnostics_of(fits: Mapping[str, xr.DataTree]) -> dict[str, dict[str, Any]]:
    """Each fit's :meth:`~bayesscale.data.fitfile.Diagnostics.to_dict` (``ok``, ``headline``, ...)."""
    from bayesscale.data.fitfile import diagnose

    return {name: diagnose(fit).to_dict() for name, fit in fits.items()}


def _same_pointwise(a: LooResult, b: LooResult) -> bool:
    """The two fits' pointwise LOO terms are equal (the same fit twice)."""
    x = np.asarray(a.elpd_data.elpd_i, dtype=float).ravel()
    y = np.asarray(b.elpd_data.elpd_i, dtype=float).ravel()
    return x.shape == y.shape and bool(np.array_equal(x, y))


def format_text(result: dict[str, Any]) -> str:
    """A terminal rendering of :meth:`bayesscale.checks.compare.Comparison.to_dict`."""
    data = result["data"]
    lines = []
    diagnostics = result.get("diagnostics", {})
    for name in result.get("failed_diagnostics", []):
        lines.append(f"{name}: {diagnostics[name]['headline']}")
    lines += [f"PSIS-LOO comparison on {data['source']} (sha256 {data['sha256'][:12]})", ""]
    width = max(len("fit"), *(len(r["name"]) for r in result["ranking"]))
    lines.append(
        f"  {'fit'.ljust(width)}  {'elpd_loo':>10}  {'se':>7}  {'p_loo':>7}  {'high k':>6}"
    )
    for r in result["ranking"]:
        info = result["loo"][r["name"]]
        lines.append(
            f"  {r['name'].ljust(width)}  {info['elpd']:>10.1f}  {info['se']:>7.1f}  "
            f"{info['p']:>7.1f}  {info['n_high_pareto_k']:>6d}"
        )
    lines.append("")
    lines += [pair["verdict"] for pair in result["pairs"]]
    for name, info in result["loo"].items():
        if info["n_high_pareto_k"]:
            lines += [
                "",
                f"{name}: {info['n_high_pareto_k']} row(s) with Pareto k > {info['good_k']:.2f} "
                f"(their LOO terms are unreliable; confirm a close call with crossval):",
            ]
            lines += [f"  {row}" for row in info["high_pareto_k"]]
    return "\n".join(lines)
