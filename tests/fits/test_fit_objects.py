"""``import bayesscale as bs``: the fit objects, their answers, and the diagnostics kept with a fit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from testdata import REFERENCE

import bayesscale as bs
from bayesscale import names
from bayesscale.checks.heldout import check, load_heldout
from bayesscale.data.fitfile import ATTR_FORMAT, FORMAT_VERSION, FitFileError, diagnose, save_fit
from bayesscale.law.sensitivity import assess
from bayesscale.law.summary import summarise
from bayesscale.names import ATTR_CONVERGENCE, ATTR_IDENTIFICATION
from bayesscale.recipe.output import summarize
from bayesscale.recipe.solve import recipe

ROOT = Path(__file__).resolve().parents[2]
HELDOUT = ROOT / "data" / "reference" / "heldout.csv"


def _copy(tree: xr.DataTree) -> xr.DataTree:
    """A copy without the figures a fit keeps once computed (they are recomputed)."""
    out = tree.copy(deep=True)
    out.attrs.pop(ATTR_CONVERGENCE, None)
    out.attrs.pop(ATTR_IDENTIFICATION, None)
    return out


def test_the_public_api_is_small_and_lazy() -> None:
    # twelve names, each of them there and documented
    assert len(bs.__all__) == 12
    assert {"fit", "load", "LawFit", "load_example", "compare_forms"} <= set(bs.__all__)
    for name in bs.__all__:
        assert getattr(bs, name) is not None and name in dir(bs)
    code = "import sys, bayesscale as bs\nprint(sorted(m for m in ('pymc', 'jax', 'matplotlib') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = bs.nope


def test_a_loaded_law_fit_answers_as_the_functions_do(law_fit, tmp_path) -> None:
    path = save_fit(_copy(law_fit), tmp_path / "law.nc")
    fit = bs.load(path)
    assert isinstance(fit, bs.LawFit)
    assert fit.path == path
    assert fit.spec.name == json.loads(json.dumps(fit.spec.name))
    assert fit.settings == [str(s) for s in law_fit["posterior"]["setting"].values]
    assert "settings" in repr(fit)
    # the same numbers as the functions the commands call
    assert fit.summary(0.8) == summarise(law_fit, 0.8)
    with pytest.warns(bs.CaveatWarning) as warned:  # pytest.warns(match=) re-raises the rest
        ours = fit.recipe([1e5], summarize=True, max_draws=40)
    assert [str(w.message) for w in warned] == ours.attrs["caveats"].splitlines()
    assert "more than its reach (4x) times the largest swept value" in ours.attrs["caveats"]
    assert "an assumed reach" in ours.attrs["caveats"]  # the fit stores no out-of-scale check
    # By default the recipe the data vouch for: 1e5 USD buys more than 4x the swept
    # environments in every setting, so it is the recipe bounded to 4x the data, every row
    # marked, and the caveat leads with it.
    plain = recipe(law_fit, [1e5], max_draws=40)
    # a row is bounded where the decision asks for more than 4x the largest swept value
    beyond = (plain[names.DECISION_EXTRAPOLATION] > 4.0).any(names.AXIS_DIM)
    assert bool(beyond.all())
    xr.testing.assert_equal(ours[names.BEYOND_DATA], beyond.rename(names.BEYOND_DATA))
    n, first = beyond.size, str(warned[0].message)
    assert first.startswith(
        f"in {n} of {n} (setting, budget) rows the unbounded recipe asks for more than its "
        "reach (4x) times the largest swept value of an axis"
    )
    theirs = summarize(recipe(law_fit, [1e5], max_draws=40, within_data=4))
    xr.testing.assert_allclose(ours[names.ALLOCATION], theirs[names.ALLOCATION])
    with pytest.warns(bs.CaveatWarning):
        unbounded = fit.recipe([1e5], summarize=True, max_draws=40, vouched=False)
    xr.testing.assert_allclose(unbounded[names.ALLOCATION], summarize(plain)[names.ALLOCATION])
    table = fit.check(HELDOUT)
    expected = check(law_fit, load_heldout(HELDOUT, law_fit))
    np.testing.assert_allclose(table["predicted"], expected["predicted"])
    assert fit.diagnostics.to_dict() == diagnose(law_fit).to_dict()


def test_saving_refuses_to_overwrite_and_a_loaded_fit_plots_from_its_own_data(
    law_fit, tmp_path
) -> None:
    """A loaded fit draws the law with the observations of the file its ``data_source``
    names (checked by its SHA-256); where that file is gone it says so and what to pass."""
    import matplotlib.pyplot as plt

    from bayesscale.checks.compare import CompareError

    fit = bs.LawFit(_copy(law_fit))
    path = fit.save(tmp_path / "law.nc")
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        fit.save(path)
    fit.save(path, overwrite=True)
    loaded = bs.load(path)
    plt.close(loaded.plot_law("env"))
    assert loaded.table is not None and loaded.table.sha256 == law_fit.attrs["data_sha256"]
    moved = bs.load(path)
    moved.tree.attrs[names.ATTR_DATA_SOURCE] = str(tmp_path / "gone.csv")
    with pytest.raises(CompareError, match=r"is not found .* \(data= in Python"):
        moved.plot_law("env")


def test_the_kind_of_fit_is_checked(law_fit, pricing_fit, tmp_path) -> None:
    with pytest.raises(FitFileError, match="expected a pricing fit"):
        bs.PricingFit(law_fit)
    with pytest.raises(FitFileError, match="expected a law fit"):
        bs.LawFit(pricing_fit)
    path = save_fit(pricing_fit, tmp_path / "pricing.nc")
    priced = bs.load(path)
    assert isinstance(priced, bs.PricingFit)
    assert set(priced.methods) == set(priced.summary()["methods"])
    assert priced.summary_text().strip()
    odd = xr.DataTree()
    odd.attrs[names.ATTR_KIND] = "recipe"
    odd.to_netcdf(tmp_path / "odd.nc", engine="h5netcdf")
    with pytest.raises(FitFileError, match="expected a bayesscale law or pricing fit"):
        bs.load(tmp_path / "odd.nc")


def test_diagnostics_are_kept_with_the_fit_and_recomputed_when_its_draws_change(
    law_fit, tmp_path
) -> None:
    tree = _copy(law_fit)
    fresh = diagnose(tree)
    assert ATTR_CONVERGENCE in tree.attrs  # kept, and saved with the file
    reloaded = bs.load(save_fit(tree, tmp_path / "law.nc")).tree
    assert json.loads(reloaded.attrs[ATTR_CONVERGENCE]) == json.loads(tree.attrs[ATTR_CONVERGENCE])
    assert diagnose(reloaded).to_dict() == fresh.to_dict()
    # thinned draws are another posterior: the stored figures are not reused
    thin = reloaded.isel(draw=slice(0, 20))
    thin.attrs = dict(reloaded.attrs)
    expected = diagnose(_copy(thin))
    assert diagnose(thin).to_dict() == expected.to_dict()
    assert expected.min_ess_bulk < fresh.min_ess_bulk


def test_a_saved_fit_carries_its_identification(law_fit, tmp_path) -> None:
    fit = bs.LawFit(_copy(law_fit))
    path = fit.save(tmp_path / "law.nc")
    tree = bs.load(path).tree
    assert ATTR_IDENTIFICATION in tree.attrs
    assert assess(tree) == assess(_copy(law_fit)) == fit.identification
    # other log densities (a prior twice as wide) are another question: computed anew
    wider = _copy(law_fit)
    wider["log_prior"] = wider["log_prior"].to_dataset() * 0.5
    wider.attrs[ATTR_IDENTIFICATION] = tree.attrs[ATTR_IDENTIFICATION]
    assert assess(wider) == assess(_copy(wider))


def test_reading_a_fit_end_to_end_imports_neither_pymc_nor_jax(law_fit, tmp_path) -> None:
    path = bs.LawFit(_copy(law_fit)).save(tmp_path / "law.nc")
    code = (
        "import sys, warnings\n"
        "import bayesscale as bs\n"
        "warnings.simplefilter('ignore', bs.CaveatWarning)  # the recipe extrapolates\n"
        f"fit = bs.load({str(path)!r})\n"
        "fit.summary_text(); fit.diagnostics; fit.recipe([1e5], max_draws=20)\n"
        f"fit.check({str(HELDOUT)!r})\n"
        "print(sorted(m for m in ('pymc', 'pytensor', 'jax') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_one_call_fits_from_a_path(tmp_path) -> None:
    """``bs.fit(path, **sampler options)``: the table is read and kept (for the figures), the
    options reach the sampler (a preview: seconds), and the fit says what it is."""
    path = ROOT / "data" / "reference" / "observations.csv"
    fit = bs.fit(path, preview=True, seed=3, out_of_scale=False, forms=["power"])
    assert isinstance(fit, bs.LawFit)
    assert fit.table is not None and fit.tree.attrs[names.ATTR_DATA_HASH] == fit.table.sha256
    assert fit.tree.attrs[names.ATTR_SEED] == 3
    assert fit.diagnostics.preview and "PREVIEW" in repr(fit)
    assert fit.tree.attrs[names.ATTR_SAMPLER] == names.SAMPLER_PREVIEW  # not the NUTS default
    assert len(fit.settings) == 21


def test_one_call_checks_the_fit_out_of_scale_unless_told_not_to(law_fit, monkeypatch) -> None:
    """``bs.fit`` makes the out-of-scale check by default, with the fit's own table, spec and
    sampler settings (the check itself: tests/checks/test_out_of_scale.py)."""
    import bayesscale.law.inference as inference

    monkeypatch.setattr(inference, "fit", lambda table, spec, config: _copy(law_fit))
    asked = []

    def checked(self, table, spec, config, prob=0.9, workers=None, ray_address=None):
        asked.append((len(table.frame), spec.name, config.seed, workers))
        return self

    monkeypatch.setattr(bs.LawFit, "checked_out_of_scale", checked)
    path = ROOT / "data" / "reference" / "observations.csv"
    bs.fit(path, seed=7, workers=2, forms=["power"])
    assert asked == [(len(pd.read_csv(path)), "agentic-rl", 7, 2)]
    bs.fit(path, seed=7, out_of_scale=False, forms=["power"])
    assert len(asked) == 1


def test_one_call_fits_a_data_frame_with_wider_priors(law_fit, monkeypatch) -> None:

    import bayesscale.law.inference as inference
    from bayesscale.data.observations import ObservationError

    seen = {}

    def fake(table, spec, config):
        seen.update(table=table, spec=spec)
        return _copy(law_fit)

    monkeypatch.setattr(inference, "fit", fake)
    frame = pd.read_csv(ROOT / "data" / "reference" / "observations.csv")
    bs.fit(frame, prior_scale=2, out_of_scale=False, forms=["power"])
    assert seen["table"].source == "<DataFrame>" and len(seen["table"].frame) == len(frame)
    assert seen["spec"].exponent_prior_scale == 2.0
    bad = frame.assign(n_envs=frame["n_envs"].where(frame.index != 4, -3))
    with pytest.raises(ObservationError, match=r"<DataFrame>: column 'n_envs', row 5"):
        bs.fit(bad, out_of_scale=False)


def test_the_command_line_parser_loads_no_numerics() -> None:
    """``bayesscale --help`` (every command registered) imports neither xarray, SciPy, PyMC
    nor JAX: a command's defaults live in light modules."""
    code = (
        "import sys\n"
        "from bayesscale.cli import build_parser\n"
        "build_parser()\n"
        "print(sorted(m for m in ('xarray', 'scipy', 'pymc', 'jax', 'matplotlib') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_results_say_what_they_cannot_support(tmp_path, capsys) -> None:
    """From Python, a recipe of a failed fit and far beyond the data warns what ``bayesscale
    recipe`` notes (one CaveatWarning per line, the same text, kept in ``attrs``); inside the
    data, only the verdict remains."""
    from bayesscale.cli import main
    from bayesscale.recipe.synthetic import synthetic_fit

    failed = bs.LawFit(synthetic_fit(draws=5, chains=2, spread=0.05))
    with pytest.warns(bs.CaveatWarning) as warned:
        ds = failed.recipe([1e8], max_draws=10)
    messages = [str(w.message) for w in warned]
    assert messages == ds.attrs["caveats"].splitlines()
    # far beyond the data, the result is the recipe bounded to 4x the data, and says so first
    assert messages[0].startswith(
        "in 2 of 2 (setting, budget) rows the unbounded recipe asks for more than its reach "
        "(4x) times the largest swept value of an axis"
    )
    assert "sweep further first" in messages[0] and bool(ds[names.BEYOND_DATA].all())
    verdict = messages[1]
    assert verdict.startswith("law fit: DIAGNOSTICS FAILED")
    failed.tree.attrs[ATTR_FORMAT] = FORMAT_VERSION  # a synthetic tree, saved as a fit is
    path = failed.save(tmp_path / "failed.nc")
    assert main(["recipe", str(path), "--budget", "1e8", "--max-draws", "10"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == verdict
    # the command names the failed fit first (a warning with its path), states the bound in
    # its table (each row's headline) and in a note saying where the unbounded recipe is; the
    # other notes are the Python caveats', word for word
    assert (
        captured.out.count("budget 100,000,000 USD  |  bounded to the reach (4x) of the data") == 2
    )
    warning, bound, *rest = captured.err.splitlines()
    assert warning == f"bayesscale recipe: warning: {path}: {verdict.removeprefix('law fit: ')}"
    assert bound == "bayesscale recipe: " + messages[0].replace(
        "`beyond_data` marks those rows. The unbounded recipe is an extrapolation "
        "(`vouched=False`)",
        "the unbounded recipe follows each bounded row as an EXTRAPOLATION",
    )
    assert rest == [f"bayesscale recipe: {m}" for m in messages[2:]]
    # the unbounded recipe (vouched=False) is an extrapolation, and warns how far it goes
    with pytest.warns(bs.CaveatWarning) as warned:
        failed.recipe([1e8], max_draws=10, vouched=False)
    unbounded = [str(w.message) for w in warned]
    assert unbounded[0] == verdict
    assert any("outside the swept range" in m for m in unbounded[1:])
    assert any("within_data=4 in Python" in m for m in unbounded[1:])
    with pytest.warns(bs.CaveatWarning) as warned:
        inside = failed.recipe([1e8], max_draws=10, within_data=4)
    assert [str(w.message) for w in warned] == [verdict]
    assert inside.attrs["caveats"] == verdict


def test_a_recipe_takes_the_pricing_fit_as_an_object_a_tree_or_a_file(
    law_fit, pricing_fit, tmp_path
) -> None:
    fit = bs.LawFit(_copy(law_fit))
    priced = bs.PricingFit(_copy(pricing_fit))
    path = priced.save(tmp_path / "price.nc")
    prices = tmp_path / "prices.toml"
    prices.write_text("[prices]\nenv = 60.0\n")
    results = []
    for given in (priced, priced.tree, path, str(path)):
        with pytest.warns(bs.CaveatWarning):
            results.append(fit.recipe([1e5], pricing=given, prices=prices, max_draws=20))
    for other in results[1:]:
        xr.testing.assert_identical(results[0], other)
    with pytest.warns(bs.CaveatWarning):
        unpriced = fit.recipe([1e5], prices=prices, max_draws=20)
    assert not results[0][names.ALLOCATION].equals(unpriced[names.ALLOCATION])


def test_a_failed_fit_warns_when_made(law_fit, pricing_fit, monkeypatch) -> None:
    """``bs.fit`` and ``bs.fit_pricing`` warn a failed fit (not the preview asked for), and a
    pricing fit made from a failed law fit's exponents."""
    import bayesscale.law.inference as inference
    import bayesscale.pricing.fit as pricing
    from bayesscale.recipe.synthetic import synthetic_fit

    failed = synthetic_fit(draws=5, chains=2, spread=0.05)
    monkeypatch.setattr(inference, "fit", lambda table, spec, config: failed)
    with pytest.warns(bs.CaveatWarning, match="^law fit: DIAGNOSTICS FAILED"):
        bs.fit(ROOT / "data" / "reference" / "observations.csv", out_of_scale=False,
               forms=["power"])  # fmt: skip
    monkeypatch.setattr(inference, "fit", lambda table, spec, config: _copy(law_fit))
    good = bs.fit(ROOT / "data" / "reference" / "observations.csv", out_of_scale=False,
                  forms=["power"])  # fmt: skip
    assert good.diagnostics.ok
    monkeypatch.setattr(pricing, "fit_pricing", lambda *args, **kwargs: _copy(pricing_fit))
    with pytest.warns(bs.CaveatWarning) as warned:
        bs.fit_pricing(ROOT / "data" / "pricing" / "pricing.csv", law=bs.LawFit(failed))
    assert [str(w.message)[:61] for w in warned] == [
        "the law fit whose exponents set its priors: DIAGNOSTICS FAILE"
    ]


def test_compare_forms_takes_paths_frames_and_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    # the notebook's call hands the comparison the same validated tables, whatever it is given
    # (the comparison itself, with its fits, is tests/checks/test_form_scores.py)

    import bayesscale.checks.form_scores as form_scores

    seen: list[tuple] = []
    monkeypatch.setattr(
        form_scores, "compare_forms", lambda table, spec, *a, **kw: seen.append((table, kw))
    )
    lab = ROOT / "data" / "lab"
    bs.compare_forms(lab / "observations.csv", heldout=lab / "heldout.csv")
    bs.compare_forms(
        pd.read_csv(lab / "observations.csv"), heldout=pd.read_csv(lab / "heldout.csv")
    )
    (by_path, kw_path), (by_frame, kw_frame) = seen
    assert by_path.source.endswith("observations.csv") and len(by_path.frame) == len(by_frame.frame)
    assert kw_path["heldout"].source.endswith("heldout.csv") and len(kw_path["heldout"].frame) == 48
    assert kw_frame["heldout"].source == "<DataFrame>"
    assert len(kw_frame["heldout"].sha256) == 64  # the rows digested (frame_sha256)
    bad = pd.read_csv(lab / "heldout.csv").drop(columns=[names.SUCCESSES])
    with pytest.raises(ValueError, match=r"<DataFrame>: missing column\(s\) 'successes'"):
        bs.compare_forms(lab / "observations.csv", heldout=bad)


def test_arviz_loo_reads_the_reference_fit_itself(law_fit) -> None:
    """Every sampled fit stores its pointwise log-likelihood (float32 above 2 million values, as
    the reference fit's 3 million), so ArviZ's own ``loo`` reads the fit's tree; float32 moves
    the elpd by far less than its standard error."""
    from arviz_stats import loo

    from bayesscale.law.inference import LOG_LIKELIHOOD_FLOAT64_MAX_VALUES

    log_lik = law_fit[names.LOG_LIKELIHOOD_GROUP][names.OUTCOME]
    assert log_lik.dtype == np.float32 and log_lik.size > LOG_LIKELIHOOD_FLOAT64_MAX_VALUES
    stored = loo(law_fit)
    without = law_fit.copy()
    del without[names.LOG_LIKELIHOOD_GROUP]
    fit = bs.LawFit(without)
    computed = fit.loo(
        bs.load_observations(REFERENCE / "observations.csv", fit.spec)
    )  # float64, computed from the table
    assert abs(stored.elpd - computed.elpd) < 1e-3 * stored.se
