"""The lab's worlds, environments and tasks: procedurally generated tool use (pure Python).

A **world** has eight tools with made-up names (``foundry.kalomi``), each able to do one of
four intents (heat, clean, cut, move) to any object, every intent done by at least one tool.
An **environment** exposes four or five of its world's tools that between them do every
intent, a state schema and a verifier; its structural signature (tools, state schema,
transition, verifier) is what ``bayesscale count`` hashes. No two environments expose the same
tools, so environments that are distinct by signature also differ in what a policy sees and
is rewarded for (the schema and verifier are labels: they change neither). A **task**
asks for one step or two, each an intent said by one of eight verbs on an object ("Scrub the
dusty lantern in the cellar, then haul the oar."); it is solved in an environment when every
step calls, in order, a tool of that environment that does the step's intent:

    success(task, env) = prod_k [ tool_k in env.tools  and  intent(world, tool_k) = intent_k ]

Everything a policy needs is in the prompt: the environment's world and tool names (system
turn) and the task's words (user turn). Verbs and objects are drawn with Zipf weights, so rare
verbs are met only in large task sets, and a tool is learnt only from the environments that
expose it (objects, adjectives and places make statements distinct but do not change the
answer: a step's answer depends on its verb and the environment's tools only): held-out success (a new task in a new environment) grows with the number of
distinct tasks and of distinct environments (more worlds and tools seen), and a policy that
has seen neither is at chance (one tool in four or five).

>>> lab = Lab.generate(seed=0)
>>> env = lab.environments(4, seed=0)[0]
>>> task = lab.tasks(3, seed=0)[0]
>>> lab.solves(env, task, lab.reference_answer(env, task))
True
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property

INTENTS: dict[str, tuple[str, ...]] = {
    "heat": ("heat", "warm", "bake", "toast", "roast", "boil", "simmer", "scorch"),
    "clean": ("clean", "rinse", "scrub", "wash", "wipe", "polish", "dust", "sweep"),
    "cut": ("cut", "slice", "trim", "carve", "chop", "saw", "split", "shear"),
    "move": ("move", "carry", "haul", "shift", "drag", "lift", "push", "hoist"),
}
CATEGORIES: dict[str, tuple[str, ...]] = {
    "metal": (
        "kettle",
        "wrench",
        "hinge",
        "bucket",
        "anchor",
        "lantern",
        "spoon",
        "chain",
        "bell",
        "kettledrum",
        "padlock",
        "ladle",
        "rivet",
        "compass",
        "trumpet",
    ),
    "wood": (
        "plank",
        "crate",
        "barrel",
        "stool",
        "paddle",
        "spindle",
        "drawer",
        "oar",
        "easel",
        "cradle",
        "mallet",
        "bowl",
        "chest",
        "ladder",
        "canoe",
    ),
    "glass": (
        "bottle",
        "window",
        "goblet",
        "lens",
        "vial",
        "mirror",
        "jar",
        "prism",
        "decanter",
        "marble",
        "flask",
        "vase",
        "beaker",
        "lamp",
        "hourglass",
    ),
    "fabric": (
        "towel",
        "curtain",
        "sail",
        "scarf",
        "blanket",
        "apron",
        "banner",
        "glove",
        "rug",
        "tent",
        "cushion",
        "napkin",
        "quilt",
        "hammock",
        "sack",
    ),
}
ADJECTIVES = (
    "chipped",
    "dusty",
    "ancient",
    "tiny",
    "heavy",
    "crooked",
    "shiny",
    "faded",
    "spare",
    "borrowed",
    "cracked",
    "polished",
    "damp",
    "painted",
    "rusty",
    "fragile",
    "sturdy",
    "forgotten",
    "striped",
    "tall",
    "hollow",
    "gilded",
    "muddy",
    "velvet",
)
PLACES = (
    "by the north window",
    "in the cellar",
    "on the top shelf",
    "near the harbor gate",
    "behind the stable",
    "under the stairs",
    "in the greenhouse",
    "beside the well",
    "at the market stall",
    "in the attic",
    "next to the forge",
    "on the balcony",
    "inside the chapel",
    "by the river bank",
    "in the workshop corner",
    "under the old oak",
)
WORLD_NAMES = (
    "foundry",
    "galley",
    "orchard",
    "archive",
    "harbor",
    "quarry",
    "bazaar",
    "clinic",
    "mill",
    "tannery",
    "bakery",
    "smithy",
    "dockyard",
    "vineyard",
    "apiary",
    "observatory",
)
SCHEMA_FIELDS = ("inventory", "location", "temperature", "cleanliness", "damage", "log", "budget")
VERIFIERS = ("final_state", "tool_trace", "state_and_trace")
TOOLS_PER_WORLD = 8
TOOL_INTENTS = 1
TOOL_CATEGORIES = len(CATEGORIES)
MIN_COVER = 1
ENV_TOOLS = (4, 5)
ZIPF = 1.1
TWO_STEP = 0.25  # share of two-step tasks


@dataclass(frozen=True)
class World:
    name: str
    tools: tuple[str, ...]
    capable: frozenset[tuple[str, str, str]]  # (tool, intent, category): every category


@dataclass(frozen=True)
class Environment:
    env_id: str
    world: str
    tools: tuple[str, ...]
    state_schema: tuple[str, ...]
    verifier: str

    def signature(self) -> dict:
        """The structural signature ``bayesscale count`` hashes."""
        return {
            "tools": [
                {"name": t, "args": {"object": "str"}, "returns": "state"} for t in self.tools
            ],
            "state_schema": {f: "str" for f in self.state_schema},
            "transition": f"{self.world}:capability-table:deterministic",
            "verifier": {"kind": self.verifier},
        }

    def system_prompt(self) -> str:
        return f"World {self.world}. Tools: " + " ".join(self.tools) + "."


@dataclass(frozen=True)
class Step:
    intent: str
    verb: str
    adjective: str
    obj: str
    place: str

    @property
    def category(self) -> str:
        return OBJECT_CATEGORY[self.obj]

    def clause(self) -> str:
        return f"{self.verb} the {self.adjective} {self.obj} {self.place}"


@dataclass(frozen=True)
class Task:
    task_id: str
    steps: tuple[Step, ...]

    def statement(self) -> str:
        text = ", then ".join(step.clause() for step in self.steps)
        return text[0].upper() + text[1:] + "."


OBJECT_CATEGORY = {obj: cat for cat, objs in CATEGORIES.items() for obj in objs}
VERB_INTENT = {verb: intent for intent, verbs in INTENTS.items() for verb in verbs}


def _zipf_weights(n: int) -> list[float]:
    return [1.0 / (k + 1) ** ZIPF for k in range(n)]


@dataclass(frozen=True)
class Lab:
    """All worlds of one lab, and the seeded draws of its environments and tasks."""

    worlds: tuple[World, ...]
    seed: int

    @classmethod
    def generate(cls, seed: int = 0, n_worlds: int = len(WORLD_NAMES)) -> Lab:
        rng = random.Random(f"lab-worlds-{seed}")
        worlds = []
        for name in WORLD_NAMES[:n_worlds]:
            tools = _tool_names(rng, name)
            while True:  # every intent done by at least MIN_COVER tools
                capable = set()
                for tool in tools:
                    for intent in rng.sample(list(INTENTS), TOOL_INTENTS):
                        for category in rng.sample(list(CATEGORIES), TOOL_CATEGORIES):
                            capable.add((tool, intent, category))
                cover = [
                    sum((t, i, c) in capable for t in tools) for i in INTENTS for c in CATEGORIES
                ]
                if min(cover) >= MIN_COVER:
                    break
            worlds.append(World(name, tools, frozenset(capable)))
        return cls(tuple(worlds), seed)

    def world(self, name: str) -> World:
        return next(w for w in self.worlds if w.name == name)

    def environments(self, n: int, seed: int = 0) -> list[Environment]:
        """``n`` environments with distinct tool sets (so distinct signatures), worlds in turn."""
        rng = random.Random(f"lab-envs-{self.seed}-{seed}")
        out: list[Environment] = []
        seen: set[tuple] = set()
        while len(out) < n:
            world = self.worlds[len(out) % len(self.worlds)]
            k = rng.randint(*ENV_TOOLS)
            tools = tuple(sorted(rng.sample(world.tools, k)))
            schema = tuple(sorted(rng.sample(SCHEMA_FIELDS, rng.randint(2, 4))))
            verifier = rng.choice(VERIFIERS)
            # distinct tool sets: the schema and verifier alone would make a signature new
            # without changing what a policy sees or is rewarded for
            key = (world.name, tools)
            if key in seen or not _covers(world, tools):
                continue
            seen.add(key)
            out.append(
                Environment(f"{world.name}-{len(out):03d}", world.name, tools, schema, verifier)
            )
        return out

    @cached_property
    def object_order(self) -> list[str]:
        """Every object, in this lab's seeded order: the first are the commonest (Zipf)."""
        objects = [o for objs in CATEGORIES.values() for o in objs]
        return random.Random(f"lab-object-order-{self.seed}").sample(objects, len(objects))

    def draw_step(self, rng: random.Random) -> Step:
        intent = rng.choice(list(INTENTS))
        verbs = INTENTS[intent]
        verb = rng.choices(verbs, weights=_zipf_weights(len(verbs)))[0]
        order = self.object_order
        obj = rng.choices(order, weights=_zipf_weights(len(order)))[0]
        return Step(intent, verb, rng.choice(ADJECTIVES), obj, rng.choice(PLACES))

    def tasks(self, n: int, seed: int = 0, two_step: float = TWO_STEP) -> list[Task]:
        """``n`` seeded task candidates (not yet filtered for near-duplicates)."""
        rng = random.Random(f"lab-tasks-{self.seed}-{seed}")
        out = []
        for i in range(n):
            k = 2 if rng.random() < two_step else 1
            out.append(Task(f"task-{seed}-{i:05d}", tuple(self.draw_step(rng) for _ in range(k))))
        return out

    def solves(self, env: Environment, task: Task, answer: list[str]) -> bool:
        """The verifier: every step in order calls a tool of ``env`` capable of it."""
        world = self.world(env.world)
        if len(answer) != len(task.steps):
            return False
        return all(
            tool in env.tools and (tool, step.intent, step.category) in world.capable
            for tool, step in zip(answer, task.steps, strict=True)
        )

    def reference_answer(self, env: Environment, task: Task) -> list[str]:
        """One correct answer (the first capable tool of the environment per step)."""
        world = self.world(env.world)
        return [
            next(t for t in env.tools if (t, s.intent, s.category) in world.capable)
            for s in task.steps
        ]


def _covers(world: World, tools: tuple[str, ...]) -> bool:
    return all(any((t, i, c) in world.capable for t in tools) for i in INTENTS for c in CATEGORIES)


def _tool_names(rng: random.Random, world: str) -> tuple[str, ...]:
    names: set[str] = set()
    while len(names) < TOOLS_PER_WORLD:
        names.add(f"{world}.{_tool_word(rng)}")
    return tuple(sorted(names))


_SYLLABLES = ("ka", "lo", "mi", "ru", "te", "va", "zo", "pe", "qui", "dra", "sen", "bo")


def _tool_word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(3))
