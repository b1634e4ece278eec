"""``bayesscale report``: the whole analysis written to a directory, whole or not at all."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import xarray as xr
from testdata import PRICING, REFERENCE, small_reference_frame, stacked_synthetic_fit

import bayesscale as bs
from bayesscale import names
from bayesscale.cli import main
from bayesscale.data.fitfile import DiagnosticsRefusedError, fit_spec, load_fit, save_fit
from bayesscale.law.inference import FitConfig
from bayesscale.law.sensitivity import assess
from bayesscale.pipeline.report import build_report
from bayesscale.pipeline.report_options import ReportOptions
from bayesscale.report.figures import read_provenance
from bayesscale.report.folder import MANIFEST, ReportDirError

pytestmark = pytest.mark.slow
OBS = REFERENCE / "observations.csv"


@pytest.fixture(scope="module")
def saved_fits(
    law_fit: xr.DataTree, pricing_fit: xr.DataTree, tmp_path_factory
) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("fits")
    return save_fit(law_fit, folder / "law.nc"), save_fit(pricing_fit, folder / "pricing.nc")


def _args(out: Path, fits: tuple[Path, Path], *extra: str, full: bool = True) -> list[str]:
    """A report of the reference data from the saved fits; ``full`` adds pricing and held-out.
    Without the wider-prior refit (``--sensitivity-scale 0``: it samples; the sampling test
    below covers that section)."""
    args = ["report", str(OBS), "--fit", str(fits[0]), "--budget", "1e3:1e5:3", "--out", str(out)]
    args += ["--sensitivity-scale", "0", "--no-out-of-scale"]  # the check: its own test below
    if full:
        args += ["--pricing", str(PRICING / "pricing.csv"), "--pricing-fit", str(fits[1])]
        args += ["--heldout", str(REFERENCE / "heldout.csv")]
    return [*args, *extra]


@pytest.fixture(scope="module")
def full_report(saved_fits, tmp_path_factory) -> tuple[Path, str]:
    """The whole report of the reference data from the saved fits (built once: two tests
    read it), and what it printed on stderr."""
    out = tmp_path_factory.mktemp("full") / "report"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(_args(out, saved_fits)) == 0
    return out, err.getvalue()


def test_report_from_saved_fits_has_every_part(saved_fits, full_report) -> None:
    out, progress = full_report
    assert "[1/6" in progress and "[6/6" in progress and "wrote" in progress
    text = (out / "report.md").read_text()
    for section in (
        "## The law",
        "## Pricing synthetic data",
        "## The budget recipe",
        "## Held-out check",
    ):
        assert section in text
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert figures == sorted(
        [
            "exponents.png",
            "law_env.png",
            "law_task.png",
            "law_traj.png",
            "collapse_kappa.png",
            "collapse_success.png",
            "allocation.png",
            "allocation_extrapolation.png",
            "iso_budget.png",
            "heldout.png",
        ]
    )
    law_hash = load_fit(saved_fits[0]).attrs[names.ATTR_DATA_HASH]
    pricing_hash = load_fit(saved_fits[1], kind=names.KIND_PRICING_FIT).attrs[names.ATTR_DATA_HASH]
    for name in figures:  # every figure is in the report and carries its data's provenance
        assert f"(figures/{name})" in text
        hashes = {s.data_sha256 for s in read_provenance(out / "figures" / name).sources}
        if name.startswith("collapse"):
            assert hashes == {pricing_hash}, name
        elif name in ("allocation.png", "allocation_extrapolation.png", "iso_budget.png"):
            # the recipe used both fits
            assert hashes == {law_hash, pricing_hash}, name
        elif name == "heldout.png":  # the law fit and the held-out table
            assert law_hash in hashes and len(hashes) == 2, hashes
        else:
            assert hashes == {law_hash}, name
    # how far beyond the data: said in the text, the tables, the JSON; the headline is the
    # recipe bounded to 4x the data, the unbounded one follows as a labelled extrapolation
    # the fit stores no out-of-scale check: the bound is an assumed reach, not called vouched
    assert "**How far beyond the data.**" in text and "**Within an assumed reach.**" in text
    assert "**What the data vouch for.**" not in text
    vouched = text.index("**Within an assumed reach.**")
    assert vouched < text.index("### Extrapolation: the unbounded recipe")
    assert "Sweep further first, then refit:" in text
    for table in ("recipe", "recipe_extrapolation"):
        assert "beyond the data (>4x)" in (out / "tables" / f"{table}.md").read_text()
    assert "The held-out runs reach, per axis" in text
    for table in (
        "exponents",
        "pricing",
        "recipe",
        "recipe_all",
        "recipe_extrapolation",
        "heldout",
    ):
        assert (out / "tables" / f"{table}.md").read_text().startswith("|")
        assert "\\toprule" in (out / "tables" / f"{table}.tex").read_text()
    assert (out / "fits" / "law.nc").read_bytes()
    recipe = json.loads((out / "recipe.json").read_text())
    assert sorted({r["budget"] for r in recipe["results"]}) == pytest.approx([1e3, 1e4, 1e5])
    # which rows stay within the held-out runs' reach: said in the text, marked in the JSON
    assert "**What the held-out check covers.**" in text
    marks = [r["within_heldout_reach"] for r in recipe["results"]]
    assert all(isinstance(m, bool) for m in marks)
    assert f"{sum(marks)} of {len(marks)} rows stay within that reach" in text
    bounded = [r for r in recipe["results"] if r["within_data"] is False]
    assert bounded and recipe["headline"] == "bounded to the data"
    for r in bounded:  # the headline row stays within 4x; the unbounded one it replaced did not
        assert r["extrapolation"]["beyond"] == []
        assert r["extrapolation_recipe"]["extrapolation"]["beyond"]
        assert r["sweep_further"]
    assert all(r["extrapolation"]["axes"]["traj"]["swept_max"] == 64 for r in recipe["results"])
    assert recipe["fit_diagnostics"]["law_fit"]["ok"] in (True, False)
    # exponents the data barely identify: per row in the JSON, marked in every recipe table
    law = load_fit(saved_fits[0])
    ident = assess(law, fit_spec(law))["settings"]
    for row in recipe["results"]:
        want = {a: e["flag"] for a, e in ident[row["setting"]].items() if e["flag"]}
        assert row["exponent_flags"] == want
    flagged = any(r["exponent_flags"] for r in recipe["results"])
    every = (out / "tables" / "recipe_all.md").read_text()
    assert flagged == ("prior-dominated, † prior-sensitive" in every)
    assert flagged == any(m in every for m in "‡†")
    manifest = json.loads((out / MANIFEST).read_text())
    assert "report.md" in manifest["files"] and "heldout.csv" in manifest["files"]
    # the held-out check's coverage is in the text and is the share of covered rows
    import pandas as pd

    rows = pd.read_csv(out / "heldout.csv")
    assert f"coverage {rows[names.COVERED].mean():.3f}" in text


def test_same_report_is_not_redone_and_a_different_one_is_not_overwritten(
    saved_fits, full_report, tmp_path, capsys
) -> None:
    out = tmp_path / "report"
    shutil.copytree(full_report[0], out)  # a copy of a finished report, built as above
    stamp = (out / "report.md").stat().st_mtime_ns
    assert main(_args(out, saved_fits)) == 0
    assert "already holds this report" in capsys.readouterr().err
    assert (out / "report.md").stat().st_mtime_ns == stamp
    assert main(_args(out, saved_fits, "--prob", "0.8")) == 2
    err = capsys.readouterr().err
    assert "holds a different report" in err and "prob" in err and "--force" in err
    assert (out / "report.md").stat().st_mtime_ns == stamp
    # --force replaces it (here with a smaller report: no pricing, no held-out check)
    assert main(_args(out, saved_fits, "--prob", "0.8", "--force", full=False)) == 0
    assert "## Pricing synthetic data" not in (out / "report.md").read_text()
    assert "(posterior median [80% equal-tailed interval])" in (out / "report.md").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers


def test_a_directory_that_is_not_a_report_is_never_touched(saved_fits, tmp_path, capsys) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "mine.txt").write_text("a user's file")
    assert main(_args(out, saved_fits, "--force")) == 2
    assert "holds no bayesscale report" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_a_failure_leaves_nothing_half_written(saved_fits, tmp_path, capsys) -> None:
    bad = tmp_path / "heldout.csv"
    lines = (REFERENCE / "heldout.csv").read_text().splitlines()
    lines[3] = lines[3].replace(",2000", ",-5")  # a negative trials count on data row 2
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "report"
    args = _args(out, saved_fits)
    args[args.index("--heldout") + 1] = str(bad)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "trials" in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    # without a saved fit, the bad row is found before any sampling starts
    fresh = [a for a in args if a not in ("--fit", str(saved_fits[0]))]
    assert main(fresh) == 2
    err = capsys.readouterr().err
    assert "trials" in err and "fitting" not in err
    assert not out.exists()


def test_reused_fit_of_other_data_is_refused(saved_fits, tmp_path, capsys) -> None:
    args = _args(tmp_path / "r", saved_fits)
    args[1] = str(REFERENCE / "heldout.csv")  # other data than the fit was made from
    assert main(args) == 2
    assert "made from other data" in capsys.readouterr().err


def test_a_sensitivity_fit_without_the_wider_prior_is_refused(saved_fits, tmp_path, capsys):
    args = _args(tmp_path / "r", saved_fits, full=False)
    args[args.index("--sensitivity-scale") + 1] = "2"
    assert main([*args, "--sensitivity-fit", str(saved_fits[0])]) == 2
    err = capsys.readouterr().err
    assert "exponent priors are 1x" in err and "--prior-scale 2" in err
    assert not (tmp_path / "r").exists()


def test_report_fits_when_no_fit_is_given(tmp_path) -> None:
    """The sampling path, on two settings with few draws; with the wider-prior refit and the
    prior-sensitivity section (the default). ``--strict`` refuses the failed fit."""
    obs = tmp_path / "obs.csv"
    small_reference_frame().to_csv(obs, index=False)
    config = FitConfig(draws=60, tune=100, chains=2, seed=3, progress=False, ess_target=0)
    options = ReportOptions(
        observations=obs, budgets=(1e3, 1e4), config=config, out_of_scale=True, forms=("power",)
    )
    path = build_report(options, tmp_path / "out")
    text = path.read_text()
    assert "2 chains x 60 draws, seed 3" in text
    # 2 x 60 draws fail the diagnostics: flagged right under the title and in every table
    assert text.split("\n\n")[2].startswith("**law fit: DIAGNOSTICS FAILED")
    for table in ("exponents.md", "recipe.tex", "recipe_all.md"):
        assert "DIAGNOSTICS FAILED" in (tmp_path / "out" / "tables" / table).read_text()
    assert load_fit(tmp_path / "out" / "fits" / "law.nc").attrs[names.ATTR_SEED] == 3
    # the out-of-scale check ran and is stored: the recipe's reach is the one it measured
    saved = bs.load(tmp_path / "out" / "fits" / "law.nc")
    assert saved.reach is not None and set(saved.reach) == {"env", "task", "traj"}
    assert "**Within an assumed reach.**" not in text
    assert "What the data identify" in text and "## Prior sensitivity" in text
    wide = load_fit(tmp_path / "out" / "fits" / "law_wider_prior.nc")
    assert wide.attrs[names.ATTR_PRIOR_SCALE] == 2.0
    assert "exponent_scale = 2.0" in wide.attrs[names.ATTR_SPEC]
    table = (tmp_path / "out" / "tables" / "prior_sensitivity.md").read_text()
    assert "exponent priors 2x as wide" in table and "spend env / task / traj" in table
    with pytest.raises(ReportDirError, match="different report"):
        build_report(
            ReportOptions(observations=obs, budgets=(1e3,), config=config), tmp_path / "out"
        )
    # --strict refuses the failed fit and writes nothing (the verdict is the same whether the
    # report sampled the fit or reuses it; reused here, which saves sampling it again)
    strict = replace(options, strict=True, law_fit=tmp_path / "out" / "fits" / "law.nc")
    with pytest.raises(DiagnosticsRefusedError, match=r"law fit: DIAGNOSTICS FAILED.*--strict"):
        build_report(strict, tmp_path / "strict")
    assert not (tmp_path / "strict").exists() and not list(tmp_path.glob(".strict*"))


def test_one_budget_is_refused_before_any_sampling(tmp_path, capsys) -> None:
    args = ["report", str(OBS), "--budget", "1e4", "--out", str(tmp_path / "r")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "at least 2 budgets" in err and "fitting" not in err
    assert not (tmp_path / "r").exists()


def test_the_report_takes_new_groups_and_older_reports_keep_their_fingerprint() -> None:
    """``report --new-groups pooled`` reaches the held-out check (whose error names the
    flag); a report made without it has the fingerprint it had before the option existed."""
    from bayesscale.cli import build_parser
    from bayesscale.pipeline.report import fingerprint

    argv = ["report", "obs.csv", "--out", "d", "--heldout", "h.csv", "--new-groups", "pooled"]
    assert build_parser().parse_args(argv).new_groups == names.NEW_GROUPS_POOLED
    base = ReportOptions(observations=REFERENCE / "observations.csv")
    assert "new_groups" not in fingerprint(base)
    pooled = replace(base, new_groups=names.NEW_GROUPS_POOLED)
    assert fingerprint(pooled)["new_groups"] == names.NEW_GROUPS_POOLED


def test_the_fingerprint_names_the_samplers_transition() -> None:
    """The sampler's name (``bayesscale``) covers both transitions: the fingerprint names the
    kernel of each fit, so a report folder made with NUTS is not taken for a MAMS report."""
    from bayesscale.pipeline.report import fingerprint
    from bayesscale.sampling.config import FitConfig

    base = ReportOptions(observations=REFERENCE / "observations.csv")
    assert fingerprint(base)["kernels"] == ["mams", "mams"]
    nuts = replace(base, config=FitConfig(sampler="nuts"), pricing_config=FitConfig(sampler="nuts"))
    assert fingerprint(nuts)["kernels"] == ["nuts", "nuts"]


def test_the_pricing_step_names_the_acceptance_it_samples_at() -> None:
    """A config without a target acceptance samples the pricing model at its own 0.95 (with
    NUTS too, whose own is 0.8), and the report's progress line says so."""
    from bayesscale.pipeline.report import _sampling
    from bayesscale.pricing.fit import pricing_config
    from bayesscale.sampling.config import FitConfig

    assert "target_accept 0.95," in _sampling(pricing_config(FitConfig()))
    assert "target_accept 0.95," in _sampling(pricing_config(FitConfig(sampler="nuts")))
    assert "target_accept 0.9," in _sampling(pricing_config(FitConfig(target_accept=0.9)))


def _stack_with_its_own_check(law_fit: xr.DataTree) -> xr.DataTree:
    """The synthetic stack on the session's law fit, storing an out-of-scale check of the
    mixture that vouches for nothing (every axis 1x: rule ``mixture``)."""
    from bayesscale.law.reach import (
        AXIS,
        BUCKET,
        HOLDS,
        INSIDE,
        MAX_RATIO,
        P_VALUE,
        ROWS,
        RULE,
        VERDICT,
    )

    tree = stacked_synthetic_fit(0.3, root=law_fit)
    axes = ["env", "task", "traj"]
    evidence = xr.Dataset(
        {
            AXIS: ("c", axes),
            BUCKET: ("c", ["<=2x"] * 3),
            RULE: ("c", ["mixture"] * 3),
            ROWS: ("c", [20.0] * 3),
            INSIDE: ("c", [10.0] * 3),
            P_VALUE: ("c", [1e-6] * 3),
            HOLDS: ("c", [0.0] * 3),
            VERDICT: ("c", ["over-confident"] * 3),
            MAX_RATIO: ("c", [2.0] * 3),
        },
        attrs={names.ATTR_PROB: 0.9},
    ).rename({"c": names.OUT_OF_SCALE_DIM})
    tree[names.OUT_OF_SCALE_GROUP] = xr.DataTree(evidence)
    return tree


def test_a_stacked_law_gets_its_forms_section_and_the_stacks_recipe(
    law_fit: xr.DataTree, saved_fits, tmp_path: Path, capsys, monkeypatch
) -> None:
    """A stacked law fit (reused here; `report --forms` fits one): the law's section adds the
    forms' weights and figures, the held-out check reads the mixture, and the recipe is the
    stack's: every draw under its own form, mixed by weight, bounded at the stack's own reach
    (its stored check, the mixture's; nothing is refitted), saying so."""
    stack = save_fit(_stack_with_its_own_check(law_fit), tmp_path / "stack.nc")
    out = tmp_path / "r"
    checked = []
    monkeypatch.setattr(bs.LawFit, "checked_out_of_scale", lambda *a, **k: checked.append(a))
    options = ReportOptions(
        observations=OBS,
        heldout=REFERENCE / "heldout.csv",
        law_fit=stack,
        sensitivity_scale=None,
        budgets=(1e3, 1e5),
        max_recipe_draws=50,
    )
    with contextlib.redirect_stderr(io.StringIO()):
        build_report(options, out)
    assert checked == []  # the stack's stored check is its reach
    text = (out / "report.md").read_text()
    assert "### The law's form" in text and "weights power 0.70, offset_power 0.30" in text
    recipe_part = text.split("## The budget recipe")[1]
    assert "the law is a stack of forms (power 0.70, offset_power 0.30)" in recipe_part
    assert not (out / "fits" / "law_power.nc").exists()
    assert (out / "tables" / "forms.md").is_file() and (out / "tables" / "forms.tex").is_file()
    for axis in ("env", "task", "traj"):
        assert (out / "figures" / f"forms_{axis}.png").is_file()
    saved = bs.load(out / "fits" / "law.nc")
    assert saved.stack_weights == {"power": 0.7, "offset_power": 0.3}
    assert saved.reach == {"env": 1.0, "task": 1.0, "traj": 1.0}  # the mixture's, as stored
    recipe = json.loads((out / "recipe.json").read_text())
    assert recipe["law_forms"] == {"power": 0.7, "offset_power": 0.3}
    assert recipe["results"] and recipe["reach"]["measured"]  # at the stack's reach
    assert recipe["reach"]["factor"] == {"env": 1.0, "task": 1.0, "traj": 1.0}
    # --forms with a reused fit that is not that stack, and a stack without the power law,
    # are refused before anything is sampled
    single = ["report", str(OBS), "--fit", str(saved_fits[0]), "--forms", "power,offset_power"]
    assert main([*single, "--out", str(tmp_path / "m")]) == 2
    assert "is one fit with the axes' forms ['power']" in capsys.readouterr().err
    # one form asks for that form's own fit: the power law's is reused (no stack needed)
    assert main([*single[:-1], "offset_power", "--out", str(tmp_path / "m")]) == 2
    assert "reuse a fit of those forms" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
    argv = ["report", str(OBS), "--forms", "offset_power,saturating", "--out", str(tmp_path / "n")]
    assert main(argv) == 2  # the prior's sensitivity (on by default) refits the power law
    assert "needs it among its forms" in capsys.readouterr().err
    assert not (tmp_path / "n").exists()


def test_a_stacks_prior_sensitivity_is_its_power_laws(law_fit: xr.DataTree, tmp_path) -> None:
    """The wider-prior refit is of one form, the power law: with a stack it is compared with
    the stack's power law (its exponents and its recipe), and the section says so. The
    refit here is the power law itself (sampling one is the sampling test's)."""
    from bayesscale.core.prices import default_prices
    from bayesscale.pipeline.report import _power_member
    from bayesscale.pipeline.report_sections import sensitivity_section
    from bayesscale.report.markdown import Sections

    law = bs.LawFit(stacked_synthetic_fit(0.3, root=law_fit))
    power = _power_member(law)
    assert power.forms is None and power.spec.axes[1].form == "power"
    ds = law.recipe_result([1e3, 1e4], vouched=False, max_draws=20, multipliers=False).ds
    options = ReportOptions(observations=OBS, budgets=(1e3, 1e4), sensitivity_scale=2.0)
    md = Sections()
    (tmp_path / "tables").mkdir()
    summary = power.summary()
    sensitivity_section(options, tmp_path, summary, ds, power, None, default_prices(), md, power)
    text = md.text()
    assert "The law is a stack: the refit is of its power law alone" in text
    # the default and the refit are the same fit here, so the two columns agree
    table = (tmp_path / "tables" / "prior_sensitivity.md").read_text()
    cells = [
        re.split(r"(?<!\\)\|", r) for r in table.splitlines() if r.startswith("|") and "spend" in r
    ]
    rows = [c[2:4] for c in cells]
    assert rows and all(a.strip() == b.strip() for a, b in rows)
