"""Do two versions of the package give the same numbers on the bundled data?

    # the outputs of one checkout, from fits made once and reused on both sides
    python benchmarks/outputs_diff.py produce CHECKOUT OUTDIR --fit F.nc --pricing-fit P.nc \
        [--sensitivity-fit S.nc] [--no-report]
    # compare two output folders (or checkouts: their outputs are produced first, in OUTDIR/a, OUTDIR/b)
    python benchmarks/outputs_diff.py diff BEFORE AFTER [--rtol 1e-6] [--atol 1e-12]
    python benchmarks/outputs_diff.py both CHECKOUT_A CHECKOUT_B OUTDIR --fit F.nc --pricing-fit P.nc

The fits: ``bayesscale fit data/reference/observations.csv --out F.nc`` and ``bayesscale price
data/pricing/pricing.csv --out P.nc`` (and, for the report's prior-sensitivity section,
``bayesscale fit data/reference/observations.csv --prior-scale 2 --out S.nc``; without it the
report runs with ``--sensitivity-scale 0``). A checkout is run as ``PYTHONPATH=CHECKOUT python -c
'...bayesscale.cli.main()'`` with ``--python`` (default: this interpreter), from the checkout's root, so
relative data paths are the checkout's own.

What is produced (one file each): the recipe JSON at budgets 1e4 and 1e5 without and with
``--pricing P.nc``, the check JSON on data/reference/heldout.csv, the summary JSON, and the
report (``--fit``/``--pricing-fit`` reuse) as its Markdown: report.md and every table.

How they are compared. JSON: the same keys, lists of the same length, strings and integers
identical, floats equal within ``--rtol`` (relative, default 1e-6, the solvers' tolerance:
allocations, multipliers and the decision are solver outputs) or ``--atol`` (absolute, default
1e-12, for values that are zero up to rounding). Text (Markdown, and JSON strings): split into
numbers and the words between them; the words must be identical, and a printed number equal,
or else at most one unit apart in its last printed digit (a rounding flip: a number printed to
3 digits that moves by 1e-6 relative can flip its last digit). Flips are listed apart and do
not fail the comparison; ``--strict-text`` makes them fail. Exit status 0 when nothing differs
beyond these tolerances, 1 otherwise; every difference is listed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUDGETS = "1e4,1e5"
HELDOUT = "data/reference/heldout.csv"
OBSERVATIONS = "data/reference/observations.csv"
PRICING_CSV = "data/pricing/pricing.csv"
# What a report writes that is not one of its numbers: figures, fit copies, the manifest
# (file hashes and versions).
REPORT_TEXT = (".md",)


def _run(python: str, checkout: Path, args: list[str]) -> str:
    env = dict(os.environ, PYTHONPATH=str(checkout.resolve()))
    done = subprocess.run(
        [python, "-c", "import sys; from bayesscale.cli import main; sys.exit(main())", *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"`bayesscale {' '.join(args)}` in {checkout} exited {done.returncode}:\n{done.stderr}"
        )
    return done.stdout


def produce(
    checkout: Path,
    out: Path,
    fit: Path,
    pricing_fit: Path,
    sensitivity_fit: Path | None,
    report: bool,
    python: str,
) -> None:
    """Write the outputs of ``checkout`` on the bundled data into ``out`` (created)."""
    out.mkdir(parents=True, exist_ok=False)
    fit, pricing_fit = fit.resolve(), pricing_fit.resolve()
    jobs = {
        "recipe.json": ["recipe", str(fit), "--budget", BUDGETS, "--json"],
        "recipe_priced.json": [
            "recipe",
            str(fit),
            "--budget",
            BUDGETS,
            "--pricing",
            str(pricing_fit),
            "--json",
        ],
        "check.json": ["check", str(fit), HELDOUT, "--json"],
        "summary.json": ["summary", str(fit), "--json"],
    }
    for name, args in jobs.items():
        print(f"  {name}: bayesscale {' '.join(args)}", flush=True)
        (out / name).write_text(_run(python, checkout, args))
    if not report:
        return
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp) / "report"
        args = [
            "report",
            OBSERVATIONS,
            "--pricing",
            PRICING_CSV,
            "--heldout",
            HELDOUT,
            "--fit",
            str(fit),
            "--pricing-fit",
            str(pricing_fit),
            "--out",
            str(where),
        ]
        if sensitivity_fit is None:
            args += ["--sensitivity-scale", "0"]
        else:
            args += ["--sensitivity-fit", str(sensitivity_fit.resolve())]
        print(f"  report: bayesscale {' '.join(args)}", flush=True)
        _run(python, checkout, args)
        for path in sorted(where.rglob("*")):
            if path.is_file() and path.suffix in REPORT_TEXT:
                target = out / "report" / path.relative_to(where)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)


# -- comparing ------------------------------------------------------------------------------

NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass
class Differences:
    rtol: float
    atol: float
    beyond: list[str] = field(default_factory=list)
    within: list[str] = field(default_factory=list)  # floats unequal but within tolerance
    flips: list[str] = field(default_factory=list)  # printed numbers one last digit apart
    compared: int = 0

    def number(self, where: str, a: float, b: float) -> None:
        self.compared += 1
        if a == b or (math.isnan(a) and math.isnan(b)):
            return
        gap = abs(a - b)
        rel = gap / max(abs(a), abs(b))
        line = f"{where}: {a!r} -> {b!r} (rel {rel:.2e})"
        if gap <= self.atol or rel <= self.rtol:
            self.within.append(line)
        else:
            self.beyond.append(line)


def _last_digit_unit(token: str) -> float:
    """One unit in the last printed digit of a number as printed (``"12.30"`` -> 0.01)."""
    mantissa, _, exponent = token.replace(",", "").lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (-decimals + (int(exponent) if exponent else 0))


def _as_float(token: str) -> float:
    return float(token.replace(",", ""))


def compare_text(where: str, a: str, b: str, d: Differences) -> None:
    """Words identical; printed numbers equal or one unit apart in their last digit."""
    words_a, words_b = NUMBER.split(a), NUMBER.split(b)
    nums_a, nums_b = NUMBER.findall(a), NUMBER.findall(b)
    if words_a != words_b or len(nums_a) != len(nums_b):
        lines_a, lines_b = a.splitlines(), b.splitlines()
        shown = 0
        for i in range(max(len(lines_a), len(lines_b))):
            la = lines_a[i] if i < len(lines_a) else "<none>"
            lb = lines_b[i] if i < len(lines_b) else "<none>"
            if NUMBER.split(la) != NUMBER.split(lb):
                d.beyond.append(f"{where} line {i + 1}: words differ\n    - {la}\n    + {lb}")
                shown += 1
                if shown >= 20:
                    d.beyond.append(f"{where}: ... more lines differ")
                    break
        if shown == 0:
            d.beyond.append(f"{where}: text differs")
        return
    # Locate each number by line for the listing.
    line_of = _line_numbers(a)
    for i, (ta, tb) in enumerate(zip(nums_a, nums_b, strict=True)):
        d.compared += 1
        if ta == tb:
            continue
        va, vb = _as_float(ta), _as_float(tb)
        unit = max(_last_digit_unit(ta), _last_digit_unit(tb))
        spot = f"{where} line {line_of[i]}: {ta} -> {tb}"
        if va == vb:
            d.within.append(spot + " (same value, printed differently)")
        elif abs(va - vb) <= unit * (1 + 1e-9):
            d.flips.append(spot)
        else:
            d.beyond.append(spot)


def _line_numbers(text: str) -> list[int]:
    lines = []
    for match in NUMBER.finditer(text):
        lines.append(text.count("\n", 0, match.start()) + 1)
    return lines


def compare_json(where: str, a: Any, b: Any, d: Differences) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                side = "before" if key in a else "after"
                d.beyond.append(f"{where}.{key}: only {side}")
                continue
            compare_json(f"{where}.{key}", a[key], b[key], d)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            d.beyond.append(f"{where}: {len(a)} items -> {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            compare_json(f"{where}[{i}]", x, y, d)
    elif isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        d.compared += 1
        if a != b or type(a) is not type(b):
            d.beyond.append(f"{where}: {a!r} -> {b!r}")
    elif isinstance(a, int) and isinstance(b, int):
        d.compared += 1
        if a != b:
            d.beyond.append(f"{where}: {a} -> {b}")
    elif isinstance(a, int | float) and isinstance(b, int | float):
        d.number(where, float(a), float(b))
    elif isinstance(a, str) and isinstance(b, str):
        compare_text(where, a, b, d)
    else:
        d.beyond.append(f"{where}: {type(a).__name__} -> {type(b).__name__}")


def diff(before: Path, after: Path, rtol: float, atol: float) -> Differences:
    d = Differences(rtol=rtol, atol=atol)
    files_a = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    files_b = {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    for rel in sorted(files_a ^ files_b):
        d.beyond.append(f"{rel}: only {'before' if rel in files_a else 'after'}")
    for rel in sorted(files_a & files_b):
        text_a, text_b = (before / rel).read_text(), (after / rel).read_text()
        if rel.suffix == ".json":
            compare_json(str(rel), json.loads(text_a), json.loads(text_b), d)
        else:
            compare_text(str(rel), text_a, text_b, d)
    return d


def report(d: Differences, strict_text: bool) -> int:
    print(f"{d.compared} numbers compared (rtol {d.rtol:g}, atol {d.atol:g})")
    for title, lines in (
        ("within tolerance (unequal)", d.within),
        ("rounding flips (one unit in the last printed digit)", d.flips),
        ("BEYOND tolerance", d.beyond),
    ):
        print(f"\n{title}: {len(lines)}")
        for line in lines:
            print(f"  {line}")
    failed = bool(d.beyond) or (strict_text and bool(d.flips))
    print("\nverdict:", "DIFFERENT" if failed else "the same up to the stated tolerances")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def fits(p: argparse.ArgumentParser) -> None:
        p.add_argument("--fit", type=Path, required=True, help="law fit of the reference data")
        p.add_argument("--pricing-fit", type=Path, required=True, help="pricing fit")
        p.add_argument("--sensitivity-fit", type=Path, help="the law refit with --prior-scale 2")
        p.add_argument("--no-report", action="store_true", help="skip the report")
        p.add_argument("--python", default=sys.executable, help="interpreter with the deps")

    def tolerances(p: argparse.ArgumentParser) -> None:
        p.add_argument("--rtol", type=float, default=1e-6)
        p.add_argument("--atol", type=float, default=1e-12)
        p.add_argument("--strict-text", action="store_true", help="rounding flips fail too")

    p = sub.add_parser("produce", help="write one checkout's outputs")
    p.add_argument("checkout", type=Path)
    p.add_argument("out", type=Path)
    fits(p)
    p = sub.add_parser("diff", help="compare two output folders")
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    tolerances(p)
    p = sub.add_parser("both", help="produce from two checkouts, then compare")
    p.add_argument("before", type=Path, help="a checkout, or an output folder already produced")
    p.add_argument("after", type=Path, help="a checkout")
    p.add_argument("out", type=Path)
    fits(p)
    tolerances(p)
    args = parser.parse_args(argv)

    def outputs(source: Path, target: Path) -> Path:
        if not (source / "bayesscale" / "__init__.py").exists():
            return source  # already an output folder
        print(f"producing {target} from {source}", flush=True)
        produce(
            source,
            target,
            args.fit,
            args.pricing_fit,
            args.sensitivity_fit,
            not args.no_report,
            args.python,
        )
        return target

    if args.command == "produce":
        outputs(args.checkout, args.out)
        return 0
    if args.command == "diff":
        return report(diff(args.before, args.after, args.rtol, args.atol), args.strict_text)
    before = outputs(args.before, args.out / "before")
    after = outputs(args.after, args.out / "after")
    return report(diff(before, after, args.rtol, args.atol), args.strict_text)


if __name__ == "__main__":
    sys.exit(main())
