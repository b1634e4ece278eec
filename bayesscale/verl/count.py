"""Count a pool's axes the way the law needs them (PAPER.md §1).

* tasks  D_T: distinct task statements after merging near-duplicates: two tasks are the
  same when the cosine distance of their sentence embeddings is ≤ ``threshold`` (0.15, the
  paper's rule); merging is transitive (connected components of the ≤-threshold graph).
* environments D_E: distinct *structural signatures*, the SHA-256 of the canonical JSON of
  (tool/API surface, state schema, transition semantics, verifier interface). Content
  seeds and initial states are not part of it, so environments that differ only there
  count once. Tools are a set: their order does not matter.
* worlds D_W: distinct ``world_id``.

Embeddings come from the pool's ``embedding`` column (any model, computed by the user), or
from an ``Embedder`` (``bayesscale.verl.embed.MiniLM``: all-MiniLM-L6-v2 in NumPy).

    cos_dist(u, v) = 1 − u·v / (‖u‖‖v‖)

>>> from bayesscale.verl.embed import load_model
>>> model = load_model("all-MiniLM-L6-v2")  # doctest: +SKIP
>>> result = count_pool(read_pool("data/verl_example/pool.jsonl"), embedder=model.encode)  # doctest: +SKIP
>>> result.law_counts()  # doctest: +SKIP
{'n_tasks': 150, 'n_envs': 20, 'n_worlds': 5}
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bayesscale import names
from bayesscale.verl.pool import Pool, PoolError

DEFAULT_THRESHOLD = 0.15
BLOCK = 2048

Embedder = Callable[[Sequence[str]], np.ndarray]


@dataclass
class CountResult:
    tasks_raw: int
    tasks: int
    task_groups: list[list[str]]
    envs_raw: int
    envs: int
    env_groups: list[list[str]]
    worlds: int | None
    threshold: float
    embedding_source: str
    notes: list[str] = field(default_factory=list)
    task_unit: dict[str, str] = field(default_factory=dict)
    """``{task_id: unit}``: the smallest task id of its near-duplicate group."""
    env_unit: dict[str, str] = field(default_factory=dict)
    """``{env_id: unit}``: the environment's signature hash (its id without signatures)."""

    def law_counts(self) -> dict[str, int | None]:
        """The counts the law should use."""
        return {names.N_TASKS: self.tasks, names.N_ENVS: self.envs, names.N_WORLDS: self.worlds}

    def to_dict(self) -> dict[str, Any]:
        return {
            "law": self.law_counts(),
            "tasks": {
                "ids": self.tasks_raw,
                "distinct": self.tasks,
                "merged_groups": self.task_groups,
                "threshold": self.threshold,
                "embedding": self.embedding_source,
            },
            "envs": {
                "ids": self.envs_raw,
                "distinct_signatures": self.envs,
                "same_signature": self.env_groups,
            },
            "worlds": self.worlds,
            "notes": self.notes,
        }

    def text(self) -> str:
        lines = [
            f"tasks        {self.tasks:>8}  distinct (of {self.tasks_raw} ids; near-duplicates at "
            f"cosine distance <= {self.threshold:g} merged, {self.embedding_source})",
            f"environments {self.envs:>8}  distinct structural signatures (of {self.envs_raw} ids)",
            f"worlds       {'-' if self.worlds is None else self.worlds:>8}  distinct world ids",
        ]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def near_duplicate_labels(vectors: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """Component label per row: rows within cosine distance ``threshold`` are joined.

    Blocked (``BLOCK`` rows at a time), O(n²·d) time, O(BLOCK·n) memory.

    >>> near_duplicate_labels(np.array([[1.0, 0], [0.99, 0.05], [0, 1.0]]))
    array([0, 0, 2])
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or len(x) == 0:
        raise ValueError(f"embeddings must be a non-empty 2-d array, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1)
    if not np.all(np.isfinite(x)) or np.any(norms == 0):
        raise ValueError("embeddings must be finite and non-zero")
    x = x / norms[:, None]
    parent = np.arange(len(x))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    for start in range(0, len(x), BLOCK):
        sims = x[start : start + BLOCK] @ x.T
        rows, cols = np.nonzero(1.0 - sims <= threshold + 1e-12)
        for r, c in zip(rows + start, cols, strict=True):
            if c > r:
                a, b = find(int(r)), find(int(c))
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return np.array([find(i) for i in range(len(x))])


def canonical(value: Any, key: str | None = None) -> Any:
    """Canonical JSON value: dict keys sorted, JSON strings parsed, tools as a sorted set."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return canonical(json.loads(stripped), key)
            except json.JSONDecodeError:
                return value
        return value
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, dict):
        return {
            str(k): canonical(v, str(k))
            for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
        }
    if isinstance(value, list | tuple):
        items = [canonical(v) for v in value]
        if key == names.SIG_TOOLS:
            items = sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
        return items
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def signature_hash(signature: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a structural signature."""
    text = json.dumps(canonical(signature), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def env_signatures(pool: Pool) -> tuple[dict[str, str], list[str]]:
    """``{env_id: signature hash}`` and notes; an env whose rows disagree is an error."""
    frame = pool.frame
    notes = []
    fields = [f for f in names.SIGNATURE_FIELDS if f in frame.columns]
    if names.SIGNATURE in frame.columns:
        fields = [names.SIGNATURE]
    if not fields:
        notes.append(
            "no structural signature columns "
            f"({', '.join(names.SIGNATURE_FIELDS)} or {names.SIGNATURE}): environments counted "
            "by env_id, which counts content-seed variants as distinct"
        )
        return {str(e): str(e) for e in frame[names.ENV_ID].unique()}, notes
    missing = (
        [f for f in names.SIGNATURE_FIELDS if f not in frame.columns]
        if fields != [names.SIGNATURE]
        else []
    )
    if missing:
        notes.append(f"signature columns {missing} absent: signatures use {fields} only")
    hashes: dict[str, str] = {}
    first_row: dict[str, int] = {}
    for i, (env, *values) in enumerate(
        zip(frame[names.ENV_ID], *(frame[f] for f in fields), strict=True)
    ):
        digest = signature_hash(dict(zip(fields, values, strict=True)))
        if env in hashes and hashes[env] != digest:
            raise PoolError(
                f"{pool.source}: columns {fields}, {pool.rows_text([first_row[env], i])}: "
                f"environment {env!r} has two different structural signatures"
            )
        hashes.setdefault(env, digest)
        first_row.setdefault(env, i)
    return hashes, notes


def task_texts(pool: Pool, text_column: str | None = None) -> pd.Series:
    """One statement per task id: ``text_column``, else the prompt's last user turn."""
    frame = pool.frame.drop_duplicates(names.TASK_ID)
    if text_column is not None:
        if text_column not in frame.columns:
            raise PoolError(f"{pool.source}: no column {text_column!r} for task texts")
        return pd.Series(frame[text_column].astype(str).to_numpy(), index=frame[names.TASK_ID])
    texts = []
    for prompt in frame[names.PROMPT]:
        users = [turn["content"] for turn in prompt if turn["role"] == "user"]
        texts.append(users[-1] if users else prompt[-1]["content"])
    return pd.Series(texts, index=frame[names.TASK_ID].to_numpy())


def task_embeddings(pool: Pool, column: str = names.EMBEDDING) -> np.ndarray:
    """The first embedding of each task id from the pool's embedding column. Every embedding
    given is checked (a list of finite numbers, not all zero, one length for all); a row may
    leave it out where another row of its task gives it. Errors name the file, column and row
    (line, for JSONL)."""

    def fail(position: int, problem: str) -> PoolError:
        return pool.error(column, [position], problem)

    width: int | None = None
    first: dict[str, np.ndarray] = {}
    first_row: dict[str, int] = {}
    tasks = pool.frame[names.TASK_ID].to_numpy()
    for position, value in enumerate(pool.frame[column]):
        task = str(tasks[position])
        first_row.setdefault(task, position)
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue  # left out here: another row of the task must give it
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise fail(position, f"not a JSON list of numbers: {value[:40]!r}") from None
        try:
            vector = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise fail(position, f"expected a list of finite numbers, got {value!r:.40}") from None
        if vector.ndim != 1 or vector.size == 0 or not np.all(np.isfinite(vector)):
            raise fail(position, "expected a list of finite numbers")
        if not np.any(vector):
            raise fail(position, "an all-zero embedding has no direction")
        if width is not None and vector.size != width:
            raise fail(position, f"an embedding of {vector.size} numbers; the first has {width}")
        width = vector.size
        first.setdefault(task, vector)
    missing = [task for task in first_row if task not in first]
    if missing:
        raise fail(first_row[missing[0]], f"no row of task {missing[0]!r} gives its embedding")
    return np.vstack([first[task] for task in first_row])


def count_pool(
    pool: Pool,
    threshold: float = DEFAULT_THRESHOLD,
    embedder: Embedder | None = None,
    embedding_column: str | None = None,
    text_column: str | None = None,
    embedder_name: str = "embedder",
    tasks_by_id: bool = False,
) -> CountResult:
    """Distinct tasks, environments and worlds of a pool (see the module docstring).

    Without an embedding column or ``embedder`` this raises, unless ``tasks_by_id``: then
    every task id counts as distinct, and a note says so (``bayesscale plan`` does that).
    """
    if not 0 <= threshold < 2:
        raise ValueError(f"threshold is a cosine distance in [0, 2), got {threshold!r}")
    notes: list[str] = []
    ids = pool.frame.drop_duplicates(names.TASK_ID)[names.TASK_ID].to_numpy()
    column = embedding_column or (
        names.EMBEDDING if names.EMBEDDING in pool.frame.columns else None
    )
    vectors: np.ndarray | None
    if column is not None and embedder is None:
        if column not in pool.frame.columns:
            raise PoolError(f"{pool.source}: no embedding column {column!r}")
        vectors = task_embeddings(pool, column)
        source = f"column {column!r}"
    elif embedder is not None:
        vectors = np.asarray(embedder(list(task_texts(pool, text_column))), dtype=np.float64)
        source = embedder_name
    elif tasks_by_id:
        vectors = None  # nothing merges
        source = "no embeddings"
        notes.append(
            f"no '{names.EMBEDDING}' column and no embedding model: tasks counted by "
            f"{names.TASK_ID}, which counts near-duplicate statements as distinct"
        )
    else:
        raise ValueError(
            f"{pool.source}: no '{names.EMBEDDING}' column and no embedding model: give "
            "--embedding-column, or --model all-MiniLM-L6-v2 (see docs/verl.md)"
        )
    labels = np.arange(len(ids)) if vectors is None else near_duplicate_labels(vectors, threshold)
    groups = pd.Series(ids).groupby(labels).agg(list)
    task_groups = sorted([sorted(map(str, g)) for g in groups if len(g) > 1])
    task_unit = {str(t): min(map(str, g)) for g in groups for t in g}

    hashes, env_notes = env_signatures(pool)
    notes += env_notes
    by_hash = pd.Series(list(hashes.keys())).groupby(list(hashes.values())).agg(list)
    env_groups = sorted([sorted(g) for g in by_hash if len(g) > 1])
    worlds = int(pool.frame[names.WORLD_ID].nunique()) if pool.has_worlds else None
    if worlds is None:
        notes.append(f"no {names.WORLD_ID!r} column: worlds not counted")
    return CountResult(
        tasks_raw=len(ids),
        tasks=len(groups),
        task_groups=task_groups,
        envs_raw=len(hashes),
        envs=len(by_hash),
        env_groups=env_groups,
        worlds=worlds,
        threshold=threshold,
        embedding_source=source,
        notes=notes,
        task_unit=task_unit,
        env_unit={str(e): h for e, h in hashes.items()},
    )
