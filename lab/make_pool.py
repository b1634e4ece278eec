"""Write the lab's task pool: every task crossed with every environment, in verl's schema.

Tasks are seeded candidates kept only when their statement is farther than the count's rule
from every task kept before (all-MiniLM-L6-v2, cosine similarity below ``--max-similarity``,
default 0.83 against the rule's 0.85), so ``bayesscale count`` finds as many distinct tasks as
there are task ids; environments have distinct structural signatures by construction.

    .venv/bin/python lab/make_pool.py --out lab/pool.parquet --force   # 128 envs x 1440 tasks
    .venv/bin/python lab/make_pool.py --envs 16 --tasks 96 --out small.parquet

Each row: ``task_id``, ``env_id``, ``world_id``, ``prompt`` (system: the environment's world
and tools; user: the task), ``data_source`` = ``lab/tooluse``, ``reward_model`` (rule; the
ground truth is the JSON list of acceptable tools per step in this environment),
``extra_info`` (the question, the environment's tools), and the signature columns.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bayesscale.atomic import write_atomically

sys.path.insert(0, str(Path(__file__).resolve().parent))
from world import Environment, Lab, Task

DATA_SOURCE = "lab/tooluse"
MAX_SIMILARITY = 0.83


def distinct_tasks(lab: Lab, n: int, max_similarity: float, seed: int = 0) -> list[Task]:
    """The first ``n`` seeded candidates whose statements are pairwise below ``max_similarity``."""
    from bayesscale.verl.embed import load_model

    model = load_model("all-MiniLM-L6-v2")
    kept: list[Task] = []
    vectors: list[np.ndarray] = []
    batch = 0
    while len(kept) < n:
        candidates = lab.tasks(max(64, 2 * (n - len(kept))), seed=seed * 1000 + batch)
        batch += 1
        emb = model.encode([t.statement() for t in candidates])
        emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
        for task, v in zip(candidates, emb, strict=True):
            if vectors and float(np.max(np.stack(vectors) @ v)) >= max_similarity:
                continue
            kept.append(task)
            vectors.append(v)
            if len(kept) == n:
                break
    return [Task(f"task-{i:05d}", t.steps) for i, t in enumerate(kept)]


def cell(lab: Lab, env: Environment, task: Task) -> dict:
    world = lab.world(env.world)
    acceptable = [
        sorted(t for t in env.tools if (t, s.intent, s.category) in world.capable)
        for s in task.steps
    ]
    sig = env.signature()
    return {
        "task_id": task.task_id,
        "env_id": env.env_id,
        "world_id": env.world,
        "prompt": [
            {"role": "system", "content": env.system_prompt()},
            {"role": "user", "content": task.statement()},
        ],
        "data_source": DATA_SOURCE,
        "reward_model": {"style": "rule", "ground_truth": json.dumps(acceptable)},
        "extra_info": {"question": task.statement(), "tools": list(env.tools)},
        "tools": json.dumps(sig["tools"]),
        "state_schema": json.dumps(sig["state_schema"]),
        "transition": sig["transition"],
        "verifier": json.dumps(sig["verifier"]),
    }


def build_pool(
    n_envs: int, n_tasks: int, seed: int = 0, max_similarity: float = MAX_SIMILARITY
) -> pd.DataFrame:
    lab = Lab.generate(seed)
    envs = lab.environments(n_envs, seed=seed)
    tasks = distinct_tasks(lab, n_tasks, max_similarity, seed=seed)
    return pd.DataFrame([cell(lab, e, t) for t in tasks for e in envs])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=128)
    parser.add_argument("--tasks", type=int, default=1440)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-similarity", type=float, default=MAX_SIMILARITY)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--force", action="store_true", help="replace an existing --out")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.force:
        print(f"make_pool: {args.out} exists; pass --force to replace it", file=sys.stderr)
        return 2
    frame = build_pool(args.envs, args.tasks, args.seed, args.max_similarity)

    def write(tmp: Path) -> None:
        if args.out.suffix == ".jsonl":
            frame.to_json(tmp, orient="records", lines=True)
        else:
            frame.to_parquet(tmp, index=False)

    write_atomically(args.out, write, overwrite=args.force)
    print(f"wrote {args.out}: {args.envs} environments x {args.tasks} tasks = {len(frame)} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
