"""bayesscale.checks.compare and ``bayesscale compare``: PSIS-LOO between fits of the same data.

Known answers: the reference data were simulated with seed-to-seed spread (beta-binomial
concentration 800, 3.5x the binomial variance at 2,000 tasks), so a fit whose concentration is
pinned at 1e5 (binomial noise only) must lose to the default by more than 2 SE; a fit compared
with itself is indistinguishable; the numpy log-likelihood group equals PyMC's; ArviZ's p_loo
is lppd - elpd_loo with lppd computed here from the pointwise log-likelihood.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pymc as pm
import pytest
from heldout_fits import SPEC, binomial_fit, cv_result
from scipy.special import logsumexp

from bayesscale import names
from bayesscale.checks.compare import (
    CompareError,
    Pair,
    compare_fits,
    format_text,
    loo,
    with_log_likelihood,
)
from bayesscale.cli import main
from bayesscale.data.fitfile import diagnose, save_fit
from bayesscale.data.observations import prepare
from bayesscale.law.model import build_law_model


@pytest.fixture(scope="module")
def fold():
    return cv_result().folds[0]


@pytest.fixture(scope="module")
def comparison(fold):
    return compare_fits({"default": fold.fit, "binomial": binomial_fit()}, data=fold.train)


def test_the_wrong_likelihood_loses_clearly(comparison):
    (pair,) = comparison.pairs
    assert pair.best == "default" and pair.other == "binomial"
    assert pair.difference > 2 * pair.se > 0 and pair.clear
    text = format_text(comparison.to_dict())
    assert f"default is better than binomial by {pair.difference:.1f} ± {pair.se:.1f}" in text
    assert "(|d| > 2 SE: a clear difference)" in text
    loos = comparison.loos
    assert pair.difference == pytest.approx(loos["default"].elpd - loos["binomial"].elpd)


def test_a_fit_against_itself_is_the_same(fold):
    result = compare_fits({"a": fold.fit, "b": fold.fit}, data=fold.train)
    (pair,) = result.pairs
    assert pair.difference == 0.0 and pair.same and not pair.clear
    text = format_text(result.to_dict())
    assert "a and b are the same by LOO: identical pointwise elpd (difference 0)" in text
    assert "better than" not in text
    assert result.to_dict()["pairs"][0]["same"] is True
    # the folds are short fits (ess_target=0): their verdict is diagnose's, whichever it is
    ok = diagnose(fold.fit).ok
    assert result.failed == ([] if ok else ["a", "b"])
    assert result.to_dict()["diagnostics"]["a"]["ok"] is ok


def test_verdict_words_by_the_size_of_the_difference():
    assert Pair("a", "b", 4.1, 2.0).verdict() == (
        "a is better than b by 4.1 ± 2.0 (|d| > 2 SE: a clear difference)"
    )
    close = Pair("a", "b", 3.9, 2.0)
    assert not close.clear and not close.same
    assert close.verdict() == (
        "a and b cannot be told apart by LOO: the difference 3.9 ± 2.0 is within 2 SE"
    )
    assert not Pair("a", "b", 0.0, 0.0, same=True).clear


def test_a_failed_or_preview_fit_is_flagged_first(fold):
    preview = fold.fit.copy()
    preview.attrs = {**fold.fit.attrs, names.ATTR_PREVIEW: 1}
    result = compare_fits({"good": fold.fit, "quick": preview}, data=fold.train)
    info = result.to_dict()
    good = diagnose(fold.fit)
    failed = ([] if good.ok else ["good"]) + ["quick"]
    assert info["failed_diagnostics"] == failed
    assert info["diagnostics"]["quick"]["ok"] is False
    assert info["diagnostics"]["good"]["ok"] is good.ok
    lines = format_text(info).splitlines()
    assert lines[len(failed) - 1].startswith("quick: PREVIEW FIT (Laplace approximation")
    if not good.ok:
        assert lines[0] == f"good: {good.headline()}"
    assert lines[len(failed)].startswith("PSIS-LOO comparison on ")


def test_log_likelihood_group_equals_pymc(fold):
    tree = with_log_likelihood(fold.fit, fold.train)
    ours = tree[names.LOG_LIKELIHOOD_GROUP][names.OUTCOME]
    model = build_law_model(prepare(fold.train, SPEC))
    theirs = pm.compute_log_likelihood(
        fold.fit.isel(draw=slice(0, 300, 30)),
        model=model,
        extend_inferencedata=False,
        progressbar=False,
        backend="jax",
    )[names.OUTCOME]
    np.testing.assert_allclose(
        ours.isel(draw=slice(0, 300, 30)).values, theirs.transpose(*ours.dims).values, atol=1e-8
    )


def test_loo_numbers_and_pareto_k_rows(fold, comparison):
    result = comparison.loos["default"]
    ll = with_log_likelihood(fold.fit, fold.train)[names.LOG_LIKELIHOOD_GROUP][names.OUTCOME]
    values = ll.values.reshape(-1, ll.sizes[names.OBS_DIM])
    lppd = float(np.sum(logsumexp(values, axis=0) - np.log(values.shape[0])))
    assert result.p == pytest.approx(lppd - result.elpd, rel=1e-9)
    assert result.n_data_points == 45 and result.n_samples == 600
    high = int((result.pareto_k > result.good_k).sum())
    info = result.to_dict()
    assert info["n_high_pareto_k"] == high
    assert len(info["high_pareto_k"]) == min(high, 8) + (high > 8)
    for row in info["high_pareto_k"][:8]:
        assert "(Qwen3-8B | grpo | math+code): k = " in row
    again = loo(fold.fit, fold.train, name="default")
    assert again.elpd == result.elpd


def test_fits_of_different_data_are_refused(law_fit, fold):
    with pytest.raises(CompareError, match="fits can only be compared on the same data") as err:
        compare_fits({"reference": law_fit, "subset": fold.fit})
    assert "observations.csv" in str(err.value) and "subset without rollouts=64" in str(err.value)
    with pytest.raises(CompareError, match="at least two fits"):
        compare_fits({"one": fold.fit})
    # fits that store their pointwise log-likelihood compare without their data; without the
    # group the observation table is needed, and a data source that is no file is said
    both = {"a": fold.fit, "b": binomial_fit()}
    assert all(names.LOG_LIKELIHOOD_GROUP in t.children for t in both.values())
    assert compare_fits(both).pairs
    bare = {}
    for name, tree in both.items():
        tree = tree.copy()
        del tree[names.LOG_LIKELIHOOD_GROUP]
        bare[name] = tree
    with pytest.raises(CompareError, match=r"pass the observation table \(data= in Python; --data"):
        compare_fits(bare)  # its data source is no file


def test_cli_compare(fold, tmp_path, capsys):
    """Both fits re-labelled as made from a CSV of their training rows (the hash of that
    file), as `bayesscale fit` would have labelled them."""
    data = tmp_path / "train.csv"
    fold.train.frame.to_csv(data, index=False)
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    paths = []
    for name, tree in (("default.nc", fold.fit), ("binomial.nc", binomial_fit())):
        tree = tree.copy()
        tree.attrs = {**tree.attrs, names.ATTR_DATA_HASH: digest, names.ATTR_DATA_SOURCE: str(data)}
        paths.append(str(save_fit(tree, tmp_path / name)))
    assert main(["compare", *paths]) == 0
    text = capsys.readouterr().out
    assert "default.nc is better than binomial.nc by" in text and "a clear difference" in text
    assert main(["compare", *paths, "--json", "--name", "A", "--name", "B"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in result["ranking"]] == ["A", "B"]
    assert result["pairs"][0]["clear"] is True
    # the data must be the fits' own: another table is refused, naming both hashes
    other = tmp_path / "other.csv"
    fold.train.frame.iloc[::-1].to_csv(other, index=False)
    assert main(["compare", *paths, "--data", str(other)]) == 2
    assert "not the same data" in capsys.readouterr().err
    assert main(["compare", paths[0]]) == 2
    assert "at least two fits" in capsys.readouterr().err
    # --strict refuses a fit whose diagnostics failed (here: a preview), in one line
    preview = fold.fit.copy()
    preview.attrs = {
        **fold.fit.attrs,
        names.ATTR_PREVIEW: 1,
        names.ATTR_DATA_HASH: digest,
        names.ATTR_DATA_SOURCE: str(data),
    }
    quick = str(save_fit(preview, tmp_path / "quick.nc"))
    assert main(["compare", paths[0], quick, "--strict"]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("bayesscale compare: error: --strict: not comparing, ")
    assert "quick.nc: PREVIEW FIT" in err
    assert main(["compare", paths[0], quick, "--json"]) == 0
    assert "quick.nc" in json.loads(capsys.readouterr().out)["failed_diagnostics"]


def test_a_stored_log_likelihood_needs_no_data(fold):
    """A fit that carries its own log_likelihood group is compared without re-reading data;
    its high-k rows are then named by observation index."""
    tree = with_log_likelihood(fold.fit, fold.train)
    tree.attrs = {**tree.attrs, names.ATTR_DATA_SOURCE: "/nonexistent/data.csv"}
    result = loo(tree, name="stored")
    direct = loo(fold.fit, fold.train, name="computed")
    assert result.elpd == direct.elpd and result.se == direct.se
    assert all(row.startswith(("obs ", "and ")) for row in result.high_k)
    assert len(result.high_k) == len(direct.high_k)
