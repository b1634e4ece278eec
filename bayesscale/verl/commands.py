"""The verl command of one run: ``python3 -m verl.trainer.main_ppo`` + Hydra overrides.

Keys checked against verl 0.9.1's composed config (``verl/trainer/config/
_generated_ppo_trainer.yaml``); the tests run verl's own ``--cfg job`` on them::

    algorithm.adv_estimator=grpo|gae        data.train_files / data.val_files
    data.train_max_samples=C                 data.train_batch_size=C/U
    data.seed=S (verl's default is unseeded) actor_rollout_ref.model.path=…
    actor_rollout_ref.rollout.n=D_τ          actor_rollout_ref.rollout.name=vllm
    actor_rollout_ref.rollout.seed=S         actor_rollout_ref.actor.data_loader_seed=S
    trainer.total_training_steps=U           trainer.test_freq=…
    trainer.project_name / experiment_name   trainer.logger=["console","file"]
    trainer.n_gpus_per_node / trainer.nnodes trainer.default_local_dir=<abs checkpoints>
    (ppo) critic.model.path=…, critic.data_loader_seed=S

and the environment variable ``VERL_FILE_LOGGER_PATH`` = the attempt's absolute log path
(verl's file logger runs inside a Ray actor, whose working directory is not the caller's).
The experiment name and checkpoint folder are the run's, not the attempt's, so a retried
attempt resumes from the run's last checkpoint (``trainer.resume_mode=auto``) while logging
to a fresh file.

>>> cmd = run_command(row, spec.verl, "/abs/sweep")  # doctest: +SKIP
>>> cmd.shell()  # doctest: +SKIP
"VERL_FILE_LOGGER_PATH=/abs/sweep/runs/…/attempt-1/verl.jsonl python3 -m verl.trainer.main_ppo …"
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bayesscale import names
from bayesscale.verl import manifest as mf
from bayesscale.verl.sweep import ALGORITHMS, VerlSettings

LOGGER_ENV = "VERL_FILE_LOGGER_PATH"
FILE_LOGGERS = '["console","file"]'


@dataclass(frozen=True)
class Command:
    """argv plus the environment variables it needs."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        """One shell line (env assignments first), every word quoted."""
        assigns = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        return " ".join([*assigns, shlex.join(self.argv)])

    def entrypoint(self) -> str:
        """The line a Ray job runs (env goes in the job's runtime_env)."""
        return shlex.join(self.argv)


def overrides(
    row: Mapping[str, Any], verl: VerlSettings, sweep_dir: str | Path, project: str
) -> list[str]:
    """Hydra overrides of one manifest row (paths made absolute against ``sweep_dir``)."""
    seed = int(row[names.SEED])
    batch = int(row[names.TRAIN_BATCH_SIZE])
    algorithm = str(row[names.ALGORITHM])
    if algorithm not in ALGORITHMS:
        raise ValueError(
            f"run {row[names.RUN_ID]!r}: column {names.ALGORITHM!r}: "
            f"unknown algorithm {algorithm!r}; use one of {sorted(ALGORITHMS)}"
        )
    run = str(row[names.RUN_ID])
    out = [
        f"algorithm.adv_estimator={ALGORITHMS[algorithm]}",
        f"data.train_files={mf.absolute(sweep_dir, str(row[names.TRAIN_PATH]))}",
        f"data.val_files={mf.absolute(sweep_dir, str(row[names.VAL_PATH]))}",
        f"data.train_max_samples={int(row[names.N_CELLS])}",
        f"data.train_batch_size={batch}",
        f"data.seed={seed}",
        f"actor_rollout_ref.model.path={row[names.MODEL_PATH]}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={min(verl.ppo_mini_batch_size, batch)}",
        f"actor_rollout_ref.actor.data_loader_seed={seed}",
        f"actor_rollout_ref.rollout.name={verl.rollout_name}",
        f"actor_rollout_ref.rollout.n={int(row[names.ROLLOUTS])}",
        f"actor_rollout_ref.rollout.seed={seed}",
        f"actor_rollout_ref.rollout.val_kwargs.n={int(row[names.VAL_N])}",
    ]
    if int(row[names.VAL_N]) > 1:  # greedy decoding would repeat one sample N times
        out += [
            "actor_rollout_ref.rollout.val_kwargs.do_sample=True",
            "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
        ]
    if algorithm == "ppo":
        out += [f"critic.model.path={row[names.MODEL_PATH]}", f"critic.data_loader_seed={seed}"]
    out += [
        f"trainer.total_training_steps={int(row[names.UPDATES])}",
        f"trainer.test_freq={verl.test_freq}",
        f"trainer.project_name={project}",
        f"trainer.experiment_name={run}",
        f"trainer.logger={FILE_LOGGERS}",
        f"trainer.n_gpus_per_node={verl.n_gpus_per_node}",
        f"trainer.nnodes={verl.nnodes}",
        f"trainer.default_local_dir={mf.absolute(sweep_dir, f'runs/{run}/checkpoints')}",
    ]
    return out + list(verl.extra_overrides)


def run_command(
    row: Mapping[str, Any],
    verl: VerlSettings,
    sweep_dir: str | Path,
    project: str = "bayesscale",
    entrypoint: str | None = None,
) -> Command:
    """The full command of the row's current attempt (its ``log_path``)."""
    program = shlex.split(entrypoint or verl.entrypoint)
    log = mf.absolute(sweep_dir, str(row[names.LOG_PATH]))
    return Command(
        tuple(program + overrides(row, verl, sweep_dir, verl.project_name or project)),
        {LOGGER_ENV: str(log)},
    )
