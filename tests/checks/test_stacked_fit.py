"""A stacked fit (``bayesscale fit --forms``): one file holding each form's fit, the weights and
their scores; its predictions are the forms' mixture by weight, its summary says the weights,
and the recipe refuses a stack whose other forms carry weight."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import xarray as xr
from scipy import special
from testdata import KNEE_SIZES, KNEE_SPEC, knee_curves, stacked_synthetic_fit

import bayesscale as bs
from bayesscale import names
from bayesscale.cli import main
from bayesscale.data.fitfile import ATTR_FORMAT, FORMAT_VERSION, save_fit
from bayesscale.law.posterior import PosteriorError, law_draws
from bayesscale.law.predict import draw_shares, predict
from bayesscale.law.stack import members
from bayesscale.recipe.synthetic import synthetic_fit


def test_a_stacked_fit_file_predicts_the_mixture_of_its_forms(tmp_path, capsys) -> None:
    frame = knee_curves(settings=3, seeds=2)
    obs, spec = tmp_path / "curves.csv", tmp_path / "one_axis.toml"
    frame.to_csv(obs, index=False)
    spec.write_text(KNEE_SPEC.format(form=""))
    path = tmp_path / "stack.nc"
    args = ["fit", str(obs), "--spec", str(spec), "--out", str(path), "--quiet"]
    args += ["--draws", "300", "--tune", "300", "--seed", "3"]  # a spec naming no form: stacked
    args += ["--out-of-scale"]  # the stack's own out-of-scale check: its mixture, refitted
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "stacking forms ['power', 'offset_power'] (the default for a spec that names" in err
    assert "stacking weights on the" in err
    fit = bs.load(path)
    forms = fit.forms
    weights = fit.stack_weights
    assert forms is not None and weights is not None
    assert list(forms) == [
        max(weights, key=weights.get),
        *sorted(set(weights) - {max(weights, key=weights.get)}),
    ]
    assert set(forms) == {"power", "offset_power"} and sum(weights.values()) == pytest.approx(1)
    assert forms["offset_power"].spec.axes[0].form == "offset_power"
    assert forms["power"].spec.axes[0].form == "power"
    # the stack and each form are fits of the file it read: its digest, so `compare`, `check`
    # and `report --fit` take them as fits of that table
    digest = hashlib.sha256(obs.read_bytes()).hexdigest()
    assert fit.tree.attrs[names.ATTR_DATA_HASH] == digest
    assert {f.tree.attrs[names.ATTR_DATA_HASH] for f in forms.values()} == {digest}
    # predictions beyond the sweep are the mixture: each form's draws in proportion to weight
    rows = frame[frame["size"] == KNEE_SIZES[-1]].copy()
    rows["size"] = KNEE_SIZES[-1] * 4
    mixed = fit.predict(rows, drift=False).loss  # the law's own: no drift beyond the sweep
    parts = [predict(f.tree, rows).loss for f in forms.values()]
    shares = draw_shares([weights[f] for f in forms], min(p.shape[0] for p in parts))
    assert mixed.shape[0] == sum(shares)
    start = 0
    for part, n in zip(parts, shares, strict=True):
        block = mixed[start : start + n]
        assert all(any(np.array_equal(r, q) for q in part) for r in block)  # its own draws
        start += n
    # the out-of-scale check refitted the stack: each form with weight, mixed at its weight
    evidence = fit.out_of_scale
    assert evidence is not None
    # its drift beyond the sweep moves the mixture once, past the sweep only: with a drift of
    # 0.5 stored, rows 4x beyond spread by 0.5 ln 4 on the logit scale, the sweep's own rows
    # stay as the law has them
    tree = fit.tree.copy()
    tree[names.OUT_OF_SCALE_GROUP].attrs[names.ATTR_DRIFT] = json.dumps(
        {"tau": {"size": 0.5}, "pooled": 0.5}
    )
    inside = frame[frame["size"] == KNEE_SIZES[-1]]
    assert np.array_equal(predict(tree, inside).loss, predict(tree, inside, drift=False).loss)
    moved = predict(tree, rows).expected()
    shift = special.logit(moved) - special.logit(np.exp(-mixed))
    assert abs(shift.std(axis=0).mean() / (0.5 * np.log(4)) - 1) < 0.2
    assert json.loads(evidence.attrs["forms"]) == {f: w for f, w in weights.items() if w > 0}
    left_out = frame["size"] > 4096  # 16,384 / 4: the refit keeps 16 .. 4,096
    assert int(evidence["rows"].sum()) == int(left_out.sum()) and set(fit.reach or {}) == {"size"}
    assert "each refit a stack: the mixture of" in fit.summary_text()
    # the summary says the weights; the held-out check reads the stack
    text = fit.summary_text()
    assert "Forms, stacked on" in text and "offset_power" in text and "power" in text
    stack = fit.summary()["stack"]
    assert stack["root_form"] == max(weights, key=weights.get)
    assert stack["forms"]["power"]["weight"] == pytest.approx(weights["power"])
    table = fit.check(_write(tmp_path, rows))
    assert len(table) == len(rows) and 0 <= table[names.COVERED].mean() <= 1


def _write(tmp_path, frame):
    out = tmp_path / "held.csv"
    frame.to_csv(out, index=False)
    return out


def test_the_power_law_readers_refuse_a_stack_whose_other_forms_carry_weight() -> None:
    """``law_draws`` reads power laws, for the compute-cost recipe (the money recipe, the
    next runs and the law figure read the mixture: tests/recipe/test_recipe_forms.py,
    tests/design/test_next_forms.py, tests/report/test_figures.py)."""
    with pytest.raises(PosteriorError, match=r"stack whose forms .* \(offset_power 0\.30\)"):
        law_draws(stacked_synthetic_fit(0.3))
    # with no weight on them, the stack is its power law: they read the root
    plain = law_draws(synthetic_fit(draws=10, spread=0.02))
    np.testing.assert_array_equal(law_draws(stacked_synthetic_fit(0.0)).alpha, plain.alpha)
    assert [m.form for m in members(stacked_synthetic_fit(0.3)) or []] == ["power", "offset_power"]


def test_the_root_forms_own_fit_leaves_the_stacks_check_behind() -> None:
    """A stack's out-of-scale check is the mixture's: the root form's own fit (a member) does
    not carry it, so its reach is not taken for the form's."""
    tree = stacked_synthetic_fit(0.3)
    tree[names.OUT_OF_SCALE_GROUP] = xr.DataTree(xr.Dataset(attrs={"prob": 0.9}))
    root, other = members(tree) or []
    assert names.OUT_OF_SCALE_GROUP not in root.tree.children
    assert names.STACK_GROUP not in root.tree.children
    assert names.OUT_OF_SCALE_GROUP in tree.children  # the stack keeps its own
    assert other.form == "offset_power"


def test_the_recipe_command_takes_one_form_of_a_stack(tmp_path, capsys) -> None:
    """`recipe FIT --form power`: the recipe of the power law's own fit alone (without it, the
    stack's mixture); a form the stack lacks, or --form on a fit of one form, is named."""
    tree = stacked_synthetic_fit(0.3)
    tree.attrs[ATTR_FORMAT] = FORMAT_VERSION  # a synthetic tree, saved as a fit is
    path = save_fit(tree, tmp_path / "stack.nc")
    args = ["recipe", str(path), "--budget", "1e3", "--max-draws", "5", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["law_forms"] == {"power": 0.7, "offset_power": 0.3}
    assert main([*args, "--form", "power"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert alone["results"] and alone["law_forms"] == {}
    assert main([*args, "--form", "saturating"]) != 0
    assert "stacks the forms ['power', 'offset_power']" in capsys.readouterr().err
    one = synthetic_fit(draws=10, spread=0.02)
    one.attrs[ATTR_FORMAT] = FORMAT_VERSION
    plain = save_fit(one, tmp_path / "plain.nc")
    assert main(["recipe", str(plain), "--budget", "1e3", "--form", "power"]) != 0
    assert "is not a stacked fit" in capsys.readouterr().err
