"""``bayesscale example NAME --out DIR``: write a bundled example dataset and its specs into a
folder, at the paths the documentation uses, so its commands run from there."""

from __future__ import annotations

import argparse

from bayesscale.cli import add_force
from bayesscale.data.examples import ALL, EXAMPLES


def register(subparsers: argparse._SubParsersAction) -> None:
    listing = "; ".join(f"{name}: {info.description}" for name, info in EXAMPLES.items())
    parser = subparsers.add_parser(
        "example",
        help="write a bundled example dataset and its specs into a folder",
        description="Write the files of a bundled example (the datasets that ship inside the "
        "package, with their specs) into --out at the paths the documentation uses "
        "(data/reference/observations.csv, models/agentic_rl.toml, ...), so the documented "
        "commands run from that folder, and print those commands. A file already there with "
        "the same content is left alone; one with other content is refused unless --force; "
        "a new folder appears whole or not at all. Without NAME, list the examples. From "
        f"Python: bayesscale.load_example(NAME). The examples: {listing}.",
    )
    parser.add_argument(
        "name",
        metavar="NAME",
        nargs="?",
        choices=(*EXAMPLES, ALL),
        help=f"{', '.join(EXAMPLES)}, or {ALL}",
    )
    parser.add_argument(
        "--out",
        default=".",
        metavar="DIR",
        help="the folder to write into (made if missing; default: the current folder)",
    )
    add_force(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bayesscale.data.examples import write_example

    if args.name is None:
        for name, info in EXAMPLES.items():
            print(f"{name}: {info.description}")
            print(f"    {', '.join(info.files)}")
        return 0
    done = write_example([args.name], args.out, force=args.force)
    for relative in done.written:
        print(f"wrote {done.folder / relative}")
    for relative in done.unchanged:
        print(f"unchanged {done.folder / relative} (already there)")
    chosen = EXAMPLES.values() if args.name == ALL else [EXAMPLES[args.name]]
    commands = [c for info in chosen for c in info.commands]
    here = done.folder.resolve() == done.folder.cwd().resolve()
    print("then:" if here else f"then, from {done.folder}:")
    for command in commands:
        print(f"    {command}")
    return 0
