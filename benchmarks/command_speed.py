"""How long the commands take on the reference fit, start to finish, each run a fresh process.

    python benchmarks/command_speed.py --fit F.nc [--repeat 5] [--checkout DIR]
        [--report --pricing-fit P.nc [--sensitivity-fit S.nc]]

``F.nc``: ``bayesscale fit data/reference/observations.csv --out F.nc`` (21 settings);
``P.nc``: ``bayesscale price data/pricing/pricing.csv --out P.nc``; ``S.nc`` the law refitted
with ``--prior-scale 2`` (without it the report runs with ``--sensitivity-scale 0``). Times
``recipe F.nc --budget 1e5`` (every setting, the expected-success decision included, and the
bounded recipe the data vouch for), the same with ``--no-decision``, ``summary``, ``check``
on the held-out runs and, with ``--report``, the report reusing the fits. Prints per command
the median, minimum and maximum wall time of ``--repeat`` runs and the median CPU time
(user + system) of the process: on a shared machine the minimum wall time and the CPU time
are what the code costs, the median what the load left. ``--checkout`` runs another tree's
code (``PYTHONPATH``), e.g. main, to compare on the same machine at the same time. The
targets (issue 44, on 2 quiet cores): recipe <= 3 s, a read-only command <= 1.5 s, the
report <= 60 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELDOUT = "data/reference/heldout.csv"
CLI = "import sys; from bayesscale.cli import main; sys.exit(main())"


def timed(python: str, checkout: Path, args: list[str], repeat: int) -> tuple[list[float], float]:
    """Wall times of ``repeat`` fresh runs and the median CPU time of one."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            [python, "-c", CLI, *args], check=True, capture_output=True, cwd=checkout, env=env
        )
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(
            after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
        )
    return walls, statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", type=Path, required=True, help="law fit of the reference data")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the tree whose code runs")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--report", action="store_true", help="time the report too (once)")
    parser.add_argument("--pricing-fit", type=Path, help="pricing fit (for --report)")
    parser.add_argument("--sensitivity-fit", type=Path, help="--prior-scale 2 fit (--report)")
    args = parser.parse_args()
    fit = str(args.fit.resolve())
    commands: dict[str, list[str]] = {
        "recipe 1e5": ["recipe", fit, "--budget", "1e5"],
        "recipe --no-decision": ["recipe", fit, "--budget", "1e5", "--no-decision"],
        "summary": ["summary", fit],
        "check": ["check", fit, HELDOUT],
    }
    checkout = args.checkout.resolve()
    print(f"code: {checkout}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}")
    print(f"{'command':<22} {'median s':>9} {'min s':>7} {'max s':>7} {'cpu s':>7}   runs")
    for name, command in commands.items():
        walls, cpu = timed(args.python, checkout, command, args.repeat)
        print(
            f"{name:<22} {statistics.median(walls):9.2f} {min(walls):7.2f} {max(walls):7.2f} "
            f"{cpu:7.2f}   {len(walls)}",
            flush=True,
        )
    if args.report:
        if args.pricing_fit is None:
            parser.error("--report needs --pricing-fit")
        with tempfile.TemporaryDirectory() as tmp:
            report = [
                "report",
                "data/reference/observations.csv",
                "--pricing",
                "data/pricing/pricing.csv",
                "--heldout",
                HELDOUT,
                "--fit",
                fit,
                "--pricing-fit",
                str(args.pricing_fit.resolve()),
                "--out",
                str(Path(tmp) / "report"),
            ]
            if args.sensitivity_fit is None:
                report += ["--sensitivity-scale", "0"]
            else:
                report += ["--sensitivity-fit", str(args.sensitivity_fit.resolve())]
            walls, cpu = timed(args.python, checkout, report, 1)
            print(f"{'report (fits reused)':<22} {walls[0]:9.2f} {'':>7} {'':>7} {cpu:7.2f}   1")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
