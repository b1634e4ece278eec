"""The lab's trainer: GRPO on CPU, where ``python -m verl.trainer.main_ppo`` stands.

It takes verl's Hydra overrides as ``bayesscale plan`` writes them (``key=value`` arguments),
reads verl's RL dataset parquet files, trains :class:`policy.Policy` with verl's own GRPO
advantage (``core_algos.compute_grpo_outcome_advantage``) and clipped policy loss
(``compute_policy_loss_vanilla``), and logs through verl's ``Tracking`` (console + the file
logger at ``$VERL_FILE_LOGGER_PATH``) the keys ``bayesscale ingest`` reads:

* ``perf/total_num_tokens`` per step: prompt + response tokens of every trajectory;
* ``critic/score/mean`` per step: the mean reward of the step's sampled responses;
* ``val-core/<data_source>/acc/mean@1`` before training and, when ``trainer.test_freq`` > 0,
  at every ``test_freq`` step and the last: greedy success on ``data.val_files`` (one record
  per step, as verl writes).

As verl's trainer: an epoch draws the training file's rows in a seeded random order
(``data.seed``; verl's ``data.shuffle``), ``data.train_batch_size`` rows per step, dropping an
incomplete last batch; each row gets ``rollout.n`` sampled responses (temperature 1; seed
``actor_rollout_ref.rollout.seed``, which also initialises the policy), rewarded by the row's
verifier (one or two tool calls, each in its acceptable set: ``reward_model.ground_truth``);
GRPO's advantage groups a row's responses; one pass of ``ppo_mini_batch_size``-row
mini-batches, whole groups in order, each an Adam step (learning rate 1e-3) after the gradient
is clipped at ``actor.grad_clip`` (1.0). The model is ``actor_rollout_ref.model.path`` =
``lab://width-<W>``. Keys of verl's config that have no meaning here are listed once at the
start and otherwise ignored; what the lab cannot run (another estimator, another model,
``val_kwargs.n`` > 1, a mini-batch that does not divide the batch) exits 2 with a message.

    VERL_FILE_LOGGER_PATH=/abs/run.jsonl python lab/train.py data.train_files=... ...
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from policy import ANS, BOS, MAX_LEN, PAD, SEP, Policy, Vocabulary

MODEL_PREFIX = "lab://width-"
LEARNING_RATE = 1e-3
USED_KEYS = {
    "algorithm.adv_estimator",
    "data.train_files",
    "data.val_files",
    "data.train_batch_size",
    "data.train_max_samples",
    "data.seed",
    "actor_rollout_ref.model.path",
    "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.rollout.seed",
    "actor_rollout_ref.rollout.val_kwargs.n",
    "trainer.total_training_steps",
    "trainer.test_freq",
    "trainer.project_name",
    "trainer.experiment_name",
    "trainer.logger",
}


class ConfigError(ValueError):
    pass


def parse_overrides(argv: Sequence[str]) -> dict[str, str]:
    out = {}
    for arg in argv:
        if "=" not in arg:
            raise ConfigError(f"not a key=value override: {arg!r}")
        key, value = arg.split("=", 1)
        out[key.lstrip("+")] = value
    return out


@dataclass(frozen=True)
class Config:
    train_files: str
    val_files: str
    batch_size: int
    max_samples: int
    mini_batch: int
    rollouts: int
    steps: int
    test_freq: int
    width: int
    data_seed: int  # the order rows are drawn in (verl: data.shuffle with data.seed)
    seed: int  # initialisation and sampling (actor_rollout_ref.rollout.seed)
    val_n: int
    project: str
    experiment: str

    @classmethod
    def from_overrides(cls, over: dict[str, str]) -> Config:
        def need(key: str) -> str:
            if key not in over:
                raise ConfigError(f"missing override {key}")
            return over[key]

        estimator = over.get("algorithm.adv_estimator", "grpo")
        if estimator != "grpo":
            raise ConfigError(f"algorithm.adv_estimator={estimator}: the lab runs grpo only")
        model = need("actor_rollout_ref.model.path")
        if not model.startswith(MODEL_PREFIX):
            raise ConfigError(f"actor_rollout_ref.model.path={model}: expected {MODEL_PREFIX}<W>")
        val_n = int(over.get("actor_rollout_ref.rollout.val_kwargs.n", "1"))
        if val_n != 1:
            raise ConfigError(
                f"actor_rollout_ref.rollout.val_kwargs.n={val_n}: the lab validates with one "
                "greedy response per task (val_n = 1)"
            )
        batch_size = int(need("data.train_batch_size"))
        mini = int(over.get("actor_rollout_ref.actor.ppo_mini_batch_size", str(batch_size)))
        if mini <= 0 or batch_size % mini:
            raise ConfigError(
                f"actor_rollout_ref.actor.ppo_mini_batch_size={mini} must divide "
                f"data.train_batch_size={batch_size}"
            )
        data_seed = int(over.get("data.seed", "1"))
        return cls(
            train_files=need("data.train_files"),
            val_files=need("data.val_files"),
            batch_size=batch_size,
            max_samples=int(over.get("data.train_max_samples", "-1")),
            mini_batch=mini,
            rollouts=int(need("actor_rollout_ref.rollout.n")),
            steps=int(need("trainer.total_training_steps")),
            test_freq=int(over.get("trainer.test_freq", "-1")),
            width=int(model[len(MODEL_PREFIX) :]),
            data_seed=data_seed,
            seed=int(over.get("actor_rollout_ref.rollout.seed", str(data_seed))),
            val_n=val_n,
            project=over.get("trainer.project_name", "lab"),
            experiment=over.get("trainer.experiment_name", "run"),
        )


@dataclass
class Batch:
    """Prompts as left-padded token ids, each row's allowed tools, steps and acceptable sets."""

    tokens: torch.Tensor  # (rows, length)
    allowed: torch.Tensor  # (rows, vocab) bool
    steps: np.ndarray  # (rows,)
    accept: list[list[set[int]]]
    sources: np.ndarray

    def take(self, idx: np.ndarray) -> Batch:
        i = torch.as_tensor(idx)
        return Batch(
            self.tokens[i],
            self.allowed[i],
            self.steps[idx],
            [self.accept[k] for k in idx],
            self.sources[idx],
        )


def _turns(prompt: object) -> tuple[str, str]:
    turns = list(prompt)  # type: ignore[call-overload]
    system = " ".join(t["content"] for t in turns if t["role"] == "system")
    user = " ".join(t["content"] for t in turns if t["role"] == "user")
    return system, user


def encode(frame: pd.DataFrame, vocab: Vocabulary, source: str) -> Batch:
    rows, allowed, steps, accept = [], [], [], []
    for k, row in enumerate(frame.itertuples(index=False)):
        system, user = _turns(row.prompt)
        truth = json.loads(row.reward_model["ground_truth"])
        tools = list(row.extra_info["tools"])
        ids = [BOS, *vocab.ids(system), SEP, *vocab.ids(user), ANS]
        if any(vocab.index.get(t) is None for t in tools):
            raise ConfigError(f"{source}: row {k}: a tool name is not a word of the prompts")
        if len(ids) + MAX_STEPS > MAX_LEN:
            raise ConfigError(
                f"{source}: row {k}: column 'prompt': {len(ids)} tokens; the policy reads at "
                f"most {MAX_LEN - MAX_STEPS}"
            )
        rows.append(ids)
        mask = np.zeros(len(vocab), dtype=bool)
        mask[[vocab.index[t] for t in tools]] = True
        allowed.append(mask)
        steps.append(len(truth))
        accept.append([{vocab.index.get(t, -1) for t in step} for step in truth])
    width = max(map(len, rows))
    tokens = torch.full((len(rows), width), PAD, dtype=torch.long)
    for k, ids in enumerate(rows):
        tokens[k, width - len(ids) :] = torch.tensor(ids)
    return Batch(
        tokens,
        torch.as_tensor(np.stack(allowed)),
        np.asarray(steps),
        accept,
        frame["data_source"].to_numpy(),
    )


MAX_STEPS = 2


def rollout(
    policy: Policy, batch: Batch, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Responses (rows, MAX_STEPS) sampled (or greedy when ``generator`` is None) and the
    sequences they complete (prompt + response)."""
    seq = batch.tokens
    picks = []
    with torch.no_grad():
        for _ in range(MAX_STEPS):
            logits = policy(seq)[:, -1].masked_fill(~batch.allowed, -math.inf)
            if generator is None:
                nxt = logits.argmax(-1)
            else:
                nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0]
            picks.append(nxt)
            seq = torch.cat([seq, nxt[:, None]], 1)
    return torch.stack(picks, 1), seq


def response_mask(batch: Batch) -> torch.Tensor:
    return torch.as_tensor(np.arange(MAX_STEPS)[None, :] < batch.steps[:, None]).float()


def rewards(batch: Batch, response: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(len(batch.steps))
    picked = response.numpy()
    for k, sets in enumerate(batch.accept):
        out[k] = float(all(picked[k, j] in s for j, s in enumerate(sets)))
    return out


def log_probs(policy: Policy, seq: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Log-probabilities (rows, MAX_STEPS) of the response tokens at the end of ``seq``."""
    logits = policy(seq[:, :-1])[:, -MAX_STEPS:]
    logits = logits.masked_fill(~batch.allowed[:, None, :], -math.inf)
    picked = seq[:, -MAX_STEPS:]
    return torch.log_softmax(logits, -1).gather(-1, picked[..., None])[..., 0]


def validate(policy: Policy, val: Batch, chunk: int = 512) -> dict[str, float]:
    ok = []
    for start in range(0, len(val.steps), chunk):
        part = val.take(np.arange(start, min(start + chunk, len(val.steps))))
        ok.append(rewards(part, rollout(policy, part, None)[0]))
    success = torch.cat(ok).numpy()
    return {str(ds): float(success[val.sources == ds].mean()) for ds in np.unique(val.sources)}


def train(cfg: Config, log: object) -> None:
    from verl.trainer.ppo import core_algos
    from verl.workers.config.actor import FSDPActorConfig

    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    train_frame = pd.read_parquet(cfg.train_files)
    val_frame = pd.read_parquet(cfg.val_files)
    if cfg.max_samples > 0:
        train_frame = train_frame.iloc[: cfg.max_samples]
    texts = [" ".join(_turns(p)) for p in pd.concat([train_frame, val_frame])["prompt"]]
    vocab = Vocabulary.from_texts(texts)
    train_set = encode(train_frame, vocab, cfg.train_files)
    val_set = encode(val_frame, vocab, cfg.val_files)
    policy = Policy(len(vocab), cfg.width)
    optimiser = torch.optim.Adam(policy.parameters(), lr=LEARNING_RATE)
    mini = cfg.mini_batch
    actor = FSDPActorConfig(
        strategy="fsdp",
        ppo_mini_batch_size=mini,
        ppo_micro_batch_size_per_gpu=mini,
        use_dynamic_bsz=False,
        rollout_n=cfg.rollouts,
    )
    n_rows = len(train_set.steps)
    per_epoch = n_rows // cfg.batch_size  # verl's loader drops an incomplete last batch
    if per_epoch == 0:
        raise ConfigError(
            f"{cfg.train_files}: {n_rows} rows are fewer than data.train_batch_size="
            f"{cfg.batch_size}"
        )
    shuffle = torch.Generator().manual_seed(cfg.data_seed)
    order = np.arange(n_rows)
    val_key = "val-core/{}/acc/mean@" + str(cfg.val_n)

    def validation() -> dict[str, float]:
        return {val_key.format(ds): acc for ds, acc in validate(policy, val_set).items()}

    log.log(validation(), step=0)  # type: ignore[attr-defined]  # verl's val_before_train
    for step in range(1, cfg.steps + 1):
        t0 = time.perf_counter()
        k = (step - 1) % per_epoch
        if k == 0:  # a new epoch: a new seeded order of the rows
            order = torch.randperm(n_rows, generator=shuffle).numpy()
        rows = order[k * cfg.batch_size : (k + 1) * cfg.batch_size]
        prompts = train_set.take(np.repeat(rows, cfg.rollouts))
        policy.eval()
        response, seq = rollout(policy, prompts, generator)
        reward = rewards(prompts, response)
        mask = response_mask(prompts)
        token_rewards = torch.zeros_like(mask)
        last = torch.as_tensor(prompts.steps - 1)
        token_rewards[torch.arange(len(reward)), last] = reward
        advantages, _ = core_algos.compute_grpo_outcome_advantage(
            token_rewards, mask, np.repeat(rows, cfg.rollouts)
        )
        with torch.no_grad():
            old = log_probs(policy, seq, prompts)
        policy.train()
        per_mini = mini * cfg.rollouts  # whole groups, in order (verl: actor.shuffle = False)
        for start in range(0, len(reward), per_mini):
            idx = np.arange(start, start + per_mini)
            part = prompts.take(idx)
            new = log_probs(policy, seq[idx], part)
            loss, _ = core_algos.compute_policy_loss_vanilla(
                old[idx], new, advantages[idx], mask[idx], "token-mean", actor
            )
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), actor.grad_clip)
            optimiser.step()
        tokens = int((prompts.tokens != PAD).sum()) + int(mask.sum())
        metrics = {
            "training/global_step": step,
            "perf/total_num_tokens": tokens,
            "critic/score/mean": float(reward.mean()),
            "timing_s/step": time.perf_counter() - t0,
        }
        if cfg.test_freq > 0 and (step % cfg.test_freq == 0 or step == cfg.steps):
            metrics.update(validation())  # as verl: one record per step, validation included
        log.log(metrics, step=step)  # type: ignore[attr-defined]


def main(argv: Sequence[str]) -> int:
    torch.set_num_threads(1)
    try:
        over = parse_overrides(argv)
        cfg = Config.from_overrides(over)
    except ConfigError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 2
    ignored = sorted(set(over) - USED_KEYS)
    if ignored:
        print("lab: verl keys without meaning here: " + ", ".join(ignored))
    from verl.utils.tracking import Tracking

    backends = [b for b in ("console", "file") if b in over.get("trainer.logger", "file")]
    if os.environ.get("VERL_FILE_LOGGER_PATH") and "file" not in backends:
        backends.append("file")
    log = Tracking(cfg.project, cfg.experiment, default_backend=backends)
    try:
        train(cfg, log)
    except ConfigError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 2
    finally:
        log.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
