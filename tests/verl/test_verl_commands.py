"""verl commands: the overrides, and verl 0.9.1's own config composition (``--cfg job``)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from verl_testlib import VERL_VENV

from bayesscale import names
from bayesscale.verl import manifest as mf
from bayesscale.verl.commands import LOGGER_ENV, run_command
from bayesscale.verl.launch import commands_of
from bayesscale.verl.sweep import load_sweep_spec

VERL_PYTHON = Path(os.environ.get("BAYESSCALE_VERL_PYTHON", VERL_VENV / "bin" / "python"))


def overrides_of(argv: tuple[str, ...]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in argv if "=" in a)


def test_overrides(small_sweep: Path) -> None:
    spec = load_sweep_spec(small_sweep / mf.SPEC_COPY)
    manifest = mf.read_manifest(small_sweep)
    row = manifest[manifest[names.ALGORITHM] == "ppo"].iloc[0].to_dict()
    cmd = run_command(row, spec.verl, small_sweep, project="small")
    assert cmd.argv[:3] == ("python3", "-m", "verl.trainer.main_ppo")
    o = overrides_of(cmd.argv)
    assert o["algorithm.adv_estimator"] == "gae"  # PPO = GAE with a critic
    assert o["critic.model.path"] == "/models/tiny" == o["actor_rollout_ref.model.path"]
    assert Path(o["data.train_files"]).is_absolute() and Path(o["data.train_files"]).exists()
    assert Path(o["data.val_files"]).is_absolute() and Path(o["data.val_files"]).exists()
    assert o["data.train_max_samples"] == "64" and o["data.train_batch_size"] == "16"
    assert o["trainer.total_training_steps"] == "4"
    seed = str(row[names.SEED])
    assert o["data.seed"] == o["actor_rollout_ref.rollout.seed"] == seed
    assert o["actor_rollout_ref.actor.data_loader_seed"] == o["critic.data_loader_seed"] == seed
    assert o["actor_rollout_ref.rollout.n"] == str(row[names.ROLLOUTS])
    assert o["trainer.logger"] == '["console","file"]'
    assert o["trainer.experiment_name"] == row[names.RUN_ID]
    assert Path(o["trainer.default_local_dir"]).is_absolute()
    log = Path(cmd.env[LOGGER_ENV])
    assert log.is_absolute() and log == small_sweep / row[names.LOG_PATH]
    assert (
        "VERL_FILE_LOGGER_PATH=" in cmd.shell()
        and '\'trainer.logger=["console","file"]\'' in cmd.shell()
    )
    grpo = manifest[manifest[names.ALGORITHM] == "grpo"].iloc[0].to_dict()
    g = overrides_of(run_command(grpo, spec.verl, small_sweep).argv)
    assert g["algorithm.adv_estimator"] == "grpo" and "critic.model.path" not in g


def test_attempts_get_their_own_log(small_sweep: Path) -> None:
    spec = load_sweep_spec(small_sweep / mf.SPEC_COPY)
    row = mf.read_manifest(small_sweep).iloc[0].to_dict()
    first = run_command(row, spec.verl, small_sweep).env[LOGGER_ENV]
    row[names.ATTEMPT], row[names.LOG_PATH] = 2, mf.attempt_log(row[names.RUN_ID], 2)
    second = run_command(row, spec.verl, small_sweep)
    assert second.env[LOGGER_ENV] != first and "attempt-2" in second.env[LOGGER_ENV]
    # the experiment (checkpoint folder) stays the run's, so verl resumes from it
    assert overrides_of(second.argv)["trainer.experiment_name"] == row[names.RUN_ID]


def composed(output: str) -> dict:
    """The YAML config that ``--cfg job`` prints (after verl's import-time log lines)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^[a-z_]+:", line))
    return yaml.safe_load("\n".join(lines[start:]))


def _cfg_job(argv: tuple[str, ...]) -> subprocess.Popen:
    return subprocess.Popen(
        [str(VERL_PYTHON), *argv[1:], "--cfg", "job"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=VERL_VENV.parent,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def test_verl_composes_the_generated_config(small_sweep: Path) -> None:
    """verl 0.9.1 itself composes every override (a wrong key fails here), CPU only."""
    if not VERL_PYTHON.exists():
        pytest.fail(
            f"{VERL_PYTHON} is missing: this test runs verl 0.9.1's own config composition. "
            "Build the verl environment with scripts/setup-verl-env (about 2 minutes, 1.9 GB)."
        )
    manifest = mf.read_manifest(small_sweep)
    manifest[names.VAL_N] = 4  # sampled validation: val_kwargs.n, do_sample, temperature
    mf.write_manifest(manifest, small_sweep)
    commands = commands_of(small_sweep)
    grpo = manifest[manifest[names.ALGORITHM] == "grpo"].iloc[0][names.RUN_ID]
    ppo = manifest[manifest[names.ALGORITHM] == "ppo"].iloc[-1][names.RUN_ID]
    cmds = {"grpo": commands[grpo], "ppo": commands[ppo]}
    assert cmds["grpo"].argv[1:3] == ("-m", "verl.trainer.main_ppo")
    bad = (*cmds["grpo"].argv, "data.trian_files=/x")  # a misspelled key must fail
    procs = {name: _cfg_job(c.argv) for name, c in cmds.items()} | {"bad": _cfg_job(bad)}
    out = {name: p.communicate(timeout=240)[0] for name, p in procs.items()}
    for name in ("grpo", "ppo"):
        assert procs[name].returncode == 0, (
            f"verl rejected the {name} overrides:\n{out[name][-3000:]}"
        )
    assert procs["bad"].returncode != 0 and "trian_files" in out["bad"]
    for name, cmd in cmds.items():
        config = composed(out[name])
        o = overrides_of(cmd.argv)
        assert config["algorithm"]["adv_estimator"] == o["algorithm.adv_estimator"]
        assert config["data"]["train_max_samples"] == 64 and config["data"]["seed"] == int(
            o["data.seed"]
        )
        assert config["trainer"]["total_training_steps"] == 4
        assert config["trainer"]["logger"] == ["console", "file"]
        assert config["actor_rollout_ref"]["rollout"]["n"] == int(o["actor_rollout_ref.rollout.n"])
        assert config["actor_rollout_ref"]["rollout"]["val_kwargs"]["n"] == 4
        assert config["trainer"]["experiment_name"] == o["trainer.experiment_name"]
    assert shlex.split(cmds["ppo"].shell())[0].startswith("VERL_FILE_LOGGER_PATH=")
