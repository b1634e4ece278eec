"""bayesscale.checks.crossval and ``bayesscale crossval``: refit without a slice, predict the slice.

The rules are checked on the reference data without sampling (what each rule leaves out, and
the failures that must come before any refit). One small refit (tests/heldout_fits.py: one
setting, the 3 rows at the largest rollout count left out) runs end to end.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from heldout_fits import CONFIG, LEAVE_OUT, SPEC, SPEC_TEXT, cv_result, subset_frame
from testdata import REFERENCE

import bayesscale.law.inference
from bayesscale import names
from bayesscale.checks.crossval import CrossvalError, LeaveOut, split
from bayesscale.checks.heldout import check
from bayesscale.cli import main
from bayesscale.data.observations import ObservationError, load_observations
from bayesscale.data.spec import load_spec
from bayesscale.law.predict import classify_settings, table_layout

DEFAULT = load_spec()


@pytest.fixture(scope="module")
def reference():
    return load_observations(REFERENCE / "observations.csv", DEFAULT)


# --- rules, without sampling -----------------------------------------------------------------


def test_parse_and_match(reference):
    frame = reference.frame
    rule = LeaveOut.parse(" params_b = max ")
    assert rule == LeaveOut("params_b", "max") and str(rule) == "params_b=max"
    mask, matched = rule.mask(reference, DEFAULT)
    assert matched == "params_b=14"
    assert mask.tolist() == (frame[names.PARAMS_B] == 14.0).tolist() and mask.sum() == 6 * 48
    mask, matched = LeaveOut.parse("traj=max").mask(reference, DEFAULT)  # an axis name
    assert matched == "rollouts=64" and mask.sum() == 21 * 3
    mask, matched = LeaveOut.parse("domain=search").mask(reference, DEFAULT)
    assert matched == "domain=search" and mask.sum() == 48
    mask, _ = LeaveOut.parse("n_tasks=5120").mask(reference, DEFAULT)
    assert mask.sum() == 21 * 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("params_b", "expected COLUMN=VALUE"),
        ("=max", "expected COLUMN=VALUE"),
        ("size=max", "no column 'size'"),
        ("domain=max", "column 'domain' is not numeric; name a value"),
        ("domain=robotics", r"no row has domain=robotics; column 'domain' takes \['math\+code'"),
        ("n_envs=300", "no row has n_envs=300"),
        ("n_envs=many", "column 'n_envs' is numeric, got 'many'"),
        ("trials=max", "every row has trials=2000; nothing is left to fit"),
    ],
)
def test_bad_rules(reference, text, message):
    with pytest.raises(CrossvalError, match=message):
        LeaveOut.parse(text).mask(reference, DEFAULT)


def test_removing_the_shared_anchor_cannot_be_fitted(reference):
    """n_envs=max is the anchor every task and rollout sweep runs at: nothing would vary
    n_tasks any more. The error comes before sampling and says why."""
    with pytest.raises(
        CrossvalError, match=r"leaving out n_envs=256 .* column 'n_tasks'.*1 distinct"
    ):
        split(reference, DEFAULT, LeaveOut.parse("n_envs=max"))


def test_left_out_model_sizes_are_new_models_of_known_groups(reference):
    part = split(reference, DEFAULT, LeaveOut.parse("params_b=max"))
    assert len(part.train.frame) == 15 * 48 and len(part.held.frame) == 6 * 48
    assert part.positions.tolist() == np.flatnonzero(reference.frame[names.PARAMS_B] == 14).tolist()
    held = part.held.frame
    from bayesscale.data.observations import setting_labels

    new = classify_settings(
        held, table_layout(part.train, DEFAULT), setting_labels(held, DEFAULT), None, "x"
    )
    assert sorted(n.label for n in new) == sorted(
        f"Qwen3-14B | {a} | {d}" for a in ("grpo", "ppo") for d in ("math+code", "swe", "web")
    )
    assert all(n.size_group is not None for n in new)


def test_a_left_out_domain_needs_pooled_groups_and_names_original_rows(reference):
    with pytest.raises(ObservationError) as err:
        split(reference, DEFAULT, LeaveOut.parse("domain=search"))
    first = int(np.flatnonzero(reference.frame[names.DOMAIN] == "search")[0])
    assert f"column 'domain', rows {first + 1}, {first + 2}," in str(err.value)
    assert "new_groups='pooled'" in str(err.value)
    part = split(reference, DEFAULT, LeaveOut.parse("domain=search"), names.NEW_GROUPS_POOLED)
    assert len(part.held.frame) == 48


# --- one refit, end to end ---------------------------------------------------------------------


def test_crossval_predicts_the_left_out_rows_from_a_fit_without_them():
    result = cv_result()
    (fold,) = result.folds
    frame = subset_frame()
    held = np.flatnonzero(frame[names.ROLLOUTS] == frame[names.ROLLOUTS].max())
    assert fold.matched == "rollouts=64" and len(held) == 3
    assert fold.check[names.ROW].tolist() == (held + 1).tolist()  # 1-based data rows
    assert fold.check[names.LINE].isna().all()  # the subset is an in-memory table
    # the refit saw the other 45 rows and not these
    observed = fold.fit["observed_data"][names.OUTCOME].values
    np.testing.assert_array_equal(observed, np.delete(frame[names.SUCCESSES].to_numpy(), held))
    assert fold.fit["constant_data"][names.REFERENCE_SCALE].sel(axis="traj") == pytest.approx(
        np.sqrt(2 * 32)  # the refit's reference scale: its own rollout range, 2..32
    )
    # the fold's table is the check of those rows against the refit
    again = check(fold.fit, frame.iloc[held], prob=0.9, seed=CONFIG.seed, rows=held)
    pd.testing.assert_frame_equal(fold.check, again, check_like=False)
    # an honest extrapolation 8x beyond the fitted range: close, and mostly covered
    o = fold.to_dict()["overall"]
    assert o[names.N_ROWS] == 3 and o[names.MAE] < 0.04 and o[names.COVERAGE] >= 2 / 3
    groups = fold.groups()
    assert groups[names.SETTING].tolist() == ["Qwen3-8B | grpo | math+code"]
    assert groups[names.MAE].iloc[0] == pytest.approx(o[names.MAE])
    rows = result.rows()
    assert rows[names.FOLD].unique().tolist() == [LEAVE_OUT] and len(rows) == 3


def test_cli_crossval(tmp_path, capsys, monkeypatch):
    """The command end to end, its refit replaced by the shared small fit of the same rows."""
    result = cv_result()
    (fold,) = result.folds
    seen = []

    def cached_fit(table, spec, config):
        seen.append((table.sha256, spec.name, config.draws, config.chains, config.seed))
        return fold.fit

    monkeypatch.setattr(bayesscale.law.inference, "fit", cached_fit)
    obs, spec = tmp_path / "subset.csv", tmp_path / "spec.toml"
    subset_frame().to_csv(obs, index=False)
    spec.write_text(SPEC_TEXT)
    args = ["crossval", str(obs), "--leave-out", "rollouts=max", "--spec", str(spec)]
    args += ["--draws", str(CONFIG.draws), "--chains", "2", "--seed", "1", "--quiet"]
    assert main([*args, "--json", "--out", str(tmp_path / "rows.csv")]) == 0
    assert seen == [(fold.train.sha256, SPEC.name, CONFIG.draws, 2, 1)]
    data = json.loads(capsys.readouterr().out)
    (entry,) = data["folds"]
    assert entry["matched"] == "rollouts=64" and entry["n_train"] == 45
    assert entry["overall"] == fold.to_dict()["overall"]
    rows = pd.read_csv(tmp_path / "rows.csv")
    assert rows[names.ROW].tolist() == fold.check[names.ROW].tolist()
    assert rows[names.LINE].tolist() == [r + 1 for r in rows[names.ROW]]  # a CSV file now

    assert main(args) == 0
    text = capsys.readouterr().out
    assert "left out rollouts=64: refit on 45 rows, predicted 3 rows" in text

    assert main(["crossval", str(obs), "--leave-out", "n_envs=max", "--spec", str(spec)]) == 2
    assert "cannot be fitted" in capsys.readouterr().err
    assert len(seen) == 2  # the failing rule never reached the sampler
