"""The lab's worlds (lab/world.py, pure Python): environments distinct and solvable, tasks
seeded, the verifier exact."""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

from bayesscale.verl.count import signature_hash

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
import world

REPO = Path(__file__).resolve().parents[2]


def test_every_environment_is_distinct_and_does_every_intent() -> None:
    lab = world.Lab.generate(seed=0)
    envs = lab.environments(128, seed=0)
    # distinct as `bayesscale count` hashes them, and in what a policy sees (the tool set)
    assert len({signature_hash(e.signature()) for e in envs}) == 128
    assert len({(e.world, e.tools) for e in envs}) == 128
    assert {e.world for e in envs} == set(world.WORLD_NAMES)
    for env in envs:
        w = lab.world(env.world)
        assert set(env.tools) <= set(w.tools)
        assert world.ENV_TOOLS[0] <= len(env.tools) <= world.ENV_TOOLS[1]
        for category in world.CATEGORIES:
            done = {i for t in env.tools for i in world.INTENTS if (t, i, category) in w.capable}
            assert done == set(world.INTENTS), env.env_id


def test_every_tool_does_one_intent_to_every_category() -> None:
    lab = world.Lab.generate(seed=3)
    for w in lab.worlds:
        for tool in w.tools:
            pairs = {(i, c) for t, i, c in w.capable if t == tool}
            intents = {i for i, _ in pairs}
            assert len(intents) == world.TOOL_INTENTS
            assert pairs == {(i, c) for i in intents for c in world.CATEGORIES}


def test_draws_are_seeded() -> None:
    a, b = world.Lab.generate(seed=1), world.Lab.generate(seed=1)
    assert a == b
    assert a.tasks(50, seed=2) == b.tasks(50, seed=2)
    assert a.tasks(50, seed=2) != a.tasks(50, seed=3)
    assert a.environments(20, seed=0) == b.environments(20, seed=0)
    assert world.Lab.generate(seed=2) != a


def test_the_verifier_accepts_exactly_the_capable_tools_in_order() -> None:
    lab = world.Lab.generate(seed=0)
    envs = lab.environments(16, seed=0)
    tasks = lab.tasks(200, seed=0)
    assert {len(t.steps) for t in tasks} == {1, 2}
    rng = random.Random(0)
    for env, task in itertools.islice(zip(itertools.cycle(envs), tasks), 200):
        w = lab.world(env.world)
        assert lab.solves(env, task, lab.reference_answer(env, task))
        answers = itertools.product(env.tools, repeat=len(task.steps))
        for answer in answers:
            expected = all(
                (t, s.intent, s.category) in w.capable
                for t, s in zip(answer, task.steps, strict=True)
            )
            assert lab.solves(env, task, list(answer)) == expected
        assert not lab.solves(env, task, [*lab.reference_answer(env, task)[::-1], "x"])
        other = rng.choice([t for t in w.tools if t not in env.tools] or ["none.tool"])
        assert not lab.solves(env, task, [other] * len(task.steps))


def test_statements_read_as_the_steps() -> None:
    step = world.Step("heat", "warm", "dusty", "kettle", "in the cellar")
    task = world.Task("t", (step, world.Step("move", "haul", "tiny", "oar", "by the well")))
    assert (
        task.statement()
        == "Warm the dusty kettle in the cellar, then haul the tiny oar by the well."
    )
    assert step.category == "metal"


def test_the_pool_ground_truth_is_the_verifier() -> None:
    import json

    import make_pool

    lab = world.Lab.generate(seed=0)
    envs = lab.environments(8, seed=0)
    for task in lab.tasks(40, seed=1):
        for env in envs:
            row = make_pool.cell(lab, env, task)
            accept = json.loads(row["reward_model"]["ground_truth"])
            assert row["extra_info"]["tools"] == list(env.tools)
            assert row["prompt"][1]["content"] == task.statement()
            for answer in itertools.product(env.tools, repeat=len(task.steps)):
                ok = all(tool in step for tool, step in zip(answer, accept, strict=True))
                assert ok == lab.solves(env, task, list(answer))
