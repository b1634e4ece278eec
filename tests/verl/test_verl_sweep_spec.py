"""Sweep spec parsing: defaults from the paper, and errors that name the key."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from bayesscale import names
from bayesscale.verl.sweep import (
    DEFAULT_ENTRYPOINT,
    TASK_ENV,
    SpecError,
    geometric_grid,
    load_sweep_spec,
    parse_sweep_spec,
)

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
        ("[holdout]\nby = 'task,env'\n", r"\[holdout\]: key 'by' must be one of .*'task\+env'"),
        ("[verl]\nentrypoint = 'python3 \"x.py'\n", r"\[verl\]: key 'entrypoint' is not a command"),
        ("[verl]\nentrypoint = ' '\n", r"\[verl\]: key 'entrypoint' is empty"),
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


def test_holdout_by_task_and_env_parses() -> None:
    spec = parse_sweep_spec(BASE + '[holdout]\nby = "task+env"\ncount = 2\n')
    assert spec.holdout.by == TASK_ENV == "task+env" and spec.holdout.count == 2


def test_entrypoint_words_relative_to_the_spec(tmp_path: Path) -> None:
    """``./`` and ``../`` words are made absolute against the spec's folder (the folder's
    links followed, the word's own path kept: a venv's bin/python link stays that link);
    other words, and an entrypoint without such words, are left exactly as written."""
    lab = tmp_path / "lab"
    lab.mkdir()
    venv = tmp_path / ".venv-verl" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    (tmp_path / "link").symlink_to(lab)
    entry = "../.venv-verl/bin/python ./train.py -m x tests/verl/fake_verl.py 'a=./b' './my dir/'"
    (lab / "sweep.toml").write_text(BASE + f"[verl]\nentrypoint = {json.dumps(entry)}\n")
    for spec_path in (lab / "sweep.toml", tmp_path / "link" / "sweep.toml"):
        words = shlex.split(load_sweep_spec(spec_path).verl.entrypoint)
        real = tmp_path.resolve()
        assert words == [
            str(real / ".venv-verl/bin/python"),  # not the interpreter it links to
            str(real / "lab/train.py"),
            "-m",
            "x",
            "tests/verl/fake_verl.py",
            "a=./b",
            str(real / "lab/my dir"),
        ]
    assert parse_sweep_spec(BASE).verl.entrypoint == DEFAULT_ENTRYPOINT
    kept = "python3  'tests/verl/fake_verl.py'"  # no relative word: the string as written
    assert (
        parse_sweep_spec(BASE + f'[verl]\nentrypoint = "{kept}"\n', base=lab).verl.entrypoint
        == kept
    )
    here = parse_sweep_spec(BASE + '[verl]\nentrypoint = "./t.py"\n').verl.entrypoint
    assert here == str(Path.cwd().resolve() / "t.py")  # no base: the working directory
