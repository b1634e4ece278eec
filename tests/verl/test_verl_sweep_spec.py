"""Sweep spec parsing: defaults from the paper, and errors that name the key."""

from __future__ import annotations

import pytest

from bayesscale import names
from bayesscale.verl.sweep import SpecError, geometric_grid, parse_sweep_spec

BASE = 'pool = "p.jsonl"\n[[models]]\npath = "Qwen/Qwen3-8B"\nparams_b = 8\n'


def test_paper_defaults() -> None:
    spec = parse_sweep_spec(BASE)
    assert spec.anchors == {names.N_ENVS: 256, names.N_TASKS: 10_240, names.ROLLOUTS: 8}
    assert spec.grid_points("env") == (8, 16, 32, 64, 128, 256)
    assert spec.grid_points("task") == (320, 640, 1280, 2560, 5120, 10240)
    assert spec.grid_points("traj") == (1, 2, 4, 8, 16, 32)
    assert (spec.cells, spec.updates, spec.train_batch_size) == (256_000, 1_000, 256)
    assert spec.seeds == (0, 1, 2) and spec.algorithms == ("grpo",)
    assert spec.models[0].name == "Qwen3-8B"


def test_grid_spans_the_ratio() -> None:
    for anchor in (256, 10_240):
        grid = geometric_grid(anchor, 6, 32)
        assert grid[-1] == anchor and grid[-1] / grid[0] == pytest.approx(32)
    # an anchor below the span (rollouts 8 over 32x) sweeps 1..32 around it
    assert geometric_grid(16, 6, 32) == (1, 2, 4, 8, 16, 32)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("colour = 1\n", r"unknown key\(s\) \['colour'\]"),
        ("[grid]\naxes = ['env', 'tokens']\n", r"\[grid\]: key 'axes': unknown \['tokens'\]"),
        ("[alignment]\ncells = 1000\nupdates = 3\n", "must be a multiple of updates"),
        ("[holdout]\nfraction = 1.5\n", r"\[holdout\]: key 'fraction' must lie in"),
        ("[holdout]\nfraction = 0.1\ncount = 3\n", "not both"),
        ("[verl]\nnnodes = 0\n", r"\[verl\]: key 'nnodes' must be a positive integer"),
        ("[anchors]\nn_env = 3\n", r"\[anchors\]: unknown key"),
        ("[count]\nthreshold = 2.5\n", r"\[count\]: key 'threshold' is a cosine distance"),
        ("[count]\nthreshold = 'x'\n", r"key 'threshold' must be a number, got 'x'"),
        ("[count]\nthreshold = nan\n", r"key 'threshold' must be a finite number, got nan"),
        ("[count]\nmodel = 'm'\nembedding_column = 'v'\n", r"\[count\]: give 'model' or"),
        ("[count]\nembeding_column = 'v'\n", r"\[count\]: unknown key\(s\) \['embeding_column'\]"),
    ],
)
def test_errors_name_the_key(extra: str, message: str) -> None:
    text = (
        BASE.replace("[[models]]", extra + "[[models]]")
        if not extra.startswith("[")
        else BASE + extra
    )
    with pytest.raises(SpecError, match=message):
        parse_sweep_spec(text, source="s.toml")


def test_algorithms_and_models_checked() -> None:
    with pytest.raises(SpecError, match=r"key 'algorithms': unknown \['dpo'\]"):
        parse_sweep_spec('algorithms = ["dpo"]\n' + BASE)
    with pytest.raises(SpecError, match=r"at least one \[\[models\]\]"):
        parse_sweep_spec('pool = "p.jsonl"\n')
