"""``bayesscale launch SWEEP``: submit a planned sweep to Ray (or run it locally), resumable."""

from __future__ import annotations

import argparse
import sys

from bayesscale.cli import CommandError

EXIT_RUNS_FAILED = 1  # runs ended failed with every attempt used


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "launch",
        help="submit a sweep's runs to a Ray cluster (queued against free GPUs) or run locally",
        description=(
            "Submit each planned run through Ray's job API, only as many as the cluster's free "
            "GPUs allow, and poll; job ids and states go into manifest.csv as they change. Stop "
            "at any time and run again to resume: succeeded, running and pending runs are never "
            "resubmitted; failed ones get a new attempt (new log path)."
        ),
    )
    parser.add_argument("sweep", help="sweep directory (from bayesscale plan)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--ray-address", help="Ray dashboard / job API address, http://HEAD:8265")
    where.add_argument("--local", action="store_true", help="run one by one on this machine")
    where.add_argument("--dry-run", action="store_true", help="print each run's command only")
    parser.add_argument("--no-wait", action="store_true", help="submit what fits now and return")
    parser.add_argument("--poll", type=float, default=30.0, help="seconds between polls (30)")
    parser.add_argument("--timeout", type=float, default=None, help="stop polling after S seconds")
    parser.add_argument("--max-attempts", type=int, default=3, help="attempts per run (3)")
    parser.add_argument("--max-concurrent", type=int, default=None, help="cap on active runs")
    parser.add_argument("--gpu-resource", default="GPU", help="Ray resource that counts GPUs")
    parser.add_argument("--entrypoint", default=None, help="replace the spec's verl entrypoint")
    parser.add_argument("--run", action="append", default=None, help="only this run id (repeat)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bayesscale.verl import launch as ln

    if args.max_attempts < 1:
        raise CommandError("--max-attempts must be >= 1")
    if args.dry_run:
        for run_id, command in ln.commands_of(args.sweep, entrypoint=args.entrypoint).items():
            if args.run is None or run_id in args.run:
                print(command.shell())
        return 0
    backend: ln.Backend
    if args.local:
        backend = ln.LocalBackend()
    else:
        backend = ln.RayBackend(args.ray_address, gpu_resource=args.gpu_resource)
    try:
        summary = ln.launch(
            args.sweep,
            backend,
            wait=not args.no_wait,
            poll_s=args.poll,
            max_attempts=args.max_attempts,
            max_concurrent=args.max_concurrent,
            entrypoint=args.entrypoint,
            runs=args.run,
            timeout_s=args.timeout,
            echo=print,
        )
    except ln.LaunchError as exc:
        raise CommandError(str(exc)) from exc
    except KeyboardInterrupt:
        print("interrupted: the manifest is up to date; run launch again to resume")
        return 130
    print(summary.text())
    if summary.gave_up:
        run_id, reason = next(iter(summary.gave_up.items()))
        print(
            f"bayesscale launch: {len(summary.gave_up)} run(s) failed with every attempt used "
            f"(--max-attempts {args.max_attempts}), e.g. {run_id}: {reason}. Fix the cause, then "
            f"bayesscale launch {args.sweep} ... --max-attempts {args.max_attempts + 1} runs "
            "them again",
            file=sys.stderr,
        )
        return EXIT_RUNS_FAILED
    return 0
