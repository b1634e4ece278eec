"""How long the commands that only read a fit take, start to finish, in fresh processes.

    .venv/bin/python benchmarks/startup.py                   # fits the reference data first
    .venv/bin/python benchmarks/startup.py --fit out/fit.nc  # or times an existing fit

Prints, per command, the median and the range of ``--repeat`` wall times (each a new Python
process, as a user runs it), and whether PyMC or JAX was imported by the same reads done in
one process. A fit written by ``bayesscale fit`` carries its diagnostics and identification,
so reading it computes neither; the first read of an older fit computes both (seconds).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "bayesscale"
HELDOUT = ROOT / "data" / "reference" / "heldout.csv"


def timed(command: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", type=Path, help="a law fit to read (default: fit one now)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fit = args.fit
        if fit is None:
            fit = Path(tmp) / "law.nc"
            print("fitting the reference data (seed 1) ...", flush=True)
            subprocess.run(
                [
                    str(BIN),
                    "fit",
                    str(ROOT / "data/reference/observations.csv"),
                    "--out",
                    str(fit),
                    "--seed",
                    "1",
                    "--quiet",
                    "--forms",
                    "power",
                ],
                check=True,
                cwd=ROOT,
            )
        commands = {
            "--help": [str(BIN), "--help"],
            "summary": [str(BIN), "summary", str(fit)],
            "recipe": [str(BIN), "recipe", str(fit), "--budget", "1e5", "--max-draws", "200"],
            "check": [str(BIN), "check", str(fit), str(HELDOUT)],
        }
        print(f"{'command':<10} {'median s':>9} {'min s':>7} {'max s':>7}   ({args.repeat} runs)")
        for name, command in commands.items():
            t = timed(command, args.repeat)
            print(f"{name:<10} {statistics.median(t):9.2f} {min(t):7.2f} {max(t):7.2f}")
        code = (
            "import sys, bayesscale as bs\n"
            f"fit = bs.load({str(fit)!r})\n"
            f"fit.summary(); fit.recipe([1e5], max_draws=50); fit.check({str(HELDOUT)!r})\n"
            "print(sorted(m for m in ('pymc', 'pytensor', 'jax') if m in sys.modules))"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        print(f"heavy modules imported reading a fit: {done.stdout.strip() or done.stderr}")


if __name__ == "__main__":
    main()
