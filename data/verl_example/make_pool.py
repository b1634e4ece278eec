"""Generate the example task pool (pool.jsonl): deterministic, small, fully crossed.

20 environments in 5 worlds (4 per world), 150 arithmetic tasks, every task runnable in
every environment: 3,000 task-environment cells in verl's vocabulary (prompt as a chat list,
``data_source`` containing a '/', ``reward_model`` = rule + ground truth, ``extra_info``).
Each environment carries a structural signature (tools, state schema, transition, verifier).
Environments ``*-s1`` differ from ``*-s0`` only by a content seed, so ``bayesscale count``
finds 10 distinct structures among the 20 environment ids, in 5 worlds.

Run: ``python data/verl_example/make_pool.py`` (rewrites pool.jsonl next to it).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

WORLDS = ("calc", "ledger", "shop", "sheet", "units")
STRUCTURES = ("basic", "audited")
N_TASKS = 150
DATA_SOURCE = "synthetic/arith"


def environments() -> list[dict]:
    envs = []
    for world in WORLDS:
        for structure in STRUCTURES:
            tools = [{"name": f"{world}.eval", "args": {"expr": "str"}, "returns": "number"}]
            if structure == "audited":
                tools.append({"name": f"{world}.log", "args": {"note": "str"}, "returns": "none"})
            for seed in (0, 1):
                envs.append(
                    {
                        "env_id": f"{world}-{structure}-s{seed}",
                        "world_id": world,
                        "tools": tools,
                        "state_schema": {
                            "memory": "list[number]",
                            "audited": structure == "audited",
                        },
                        "transition": f"{world}:{structure}:deterministic",
                        "verifier": {"kind": "exact_match", "type": "number"},
                        "content_seed": seed,
                    }
                )
    return envs


def tasks() -> list[dict]:
    rng = random.Random(0)
    out = []
    for i in range(N_TASKS):
        a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 9)
        out.append(
            {
                "task_id": f"arith-{i:03d}",
                "question": f"Compute ({a} + {b}) * {c}.",
                "answer": str((a + b) * c),
            }
        )
    return out


def main() -> None:
    path = Path(__file__).with_name("pool.jsonl")
    with path.open("w", encoding="utf-8") as fh:
        for task in tasks():
            for env in environments():
                system = f"You act in environment {env['env_id']}. Tools: " + ", ".join(
                    t["name"] for t in env["tools"]
                )
                row = {
                    "task_id": task["task_id"],
                    "env_id": env["env_id"],
                    "world_id": env["world_id"],
                    "prompt": [
                        {"role": "system", "content": system},
                        {"role": "user", "content": task["question"]},
                    ],
                    "data_source": DATA_SOURCE,
                    "reward_model": {"style": "rule", "ground_truth": task["answer"]},
                    "extra_info": {"question": task["question"]},
                    "tools": env["tools"],
                    "state_schema": env["state_schema"],
                    "transition": env["transition"],
                    "verifier": env["verifier"],
                    "content_seed": env["content_seed"],
                }
                fh.write(json.dumps(row, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
