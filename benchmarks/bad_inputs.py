"""Try every bad input a new user is likely to give, and count the messages that say what is wrong.

    .venv/bin/python benchmarks/bad_inputs.py             # the counts and every poor message
    .venv/bin/python benchmarks/bad_inputs.py --all       # every message
    PYTHONPATH=OTHER_CHECKOUT .venv/bin/python benchmarks/bad_inputs.py   # another version's

Each case runs a command in this process (``bayesscale.cli.main``, no sampling: every case
fails before a fit would start, or is a fit with ``--preview``) on files made in a temporary
folder: missing files, bad CSV rows and columns, bad budgets and flags, bad specs, fits of the
wrong kind, outputs that cannot be written, broken sweeps. A message is **clear** when the
command exits with a failure status (2, or 3 for a refused fit), prints no traceback, says it in
one line on standard error, and that line holds every needle of the case: where (the file, the
row, the column or the flag) and what (``N = 0``, ``truncated``, ``did you mean``, ...). Else it
is **poor**. The needles are what a user needs to read, written before the messages were fixed.
``tests/test_bad_inputs.py`` runs the same cases and asks for every message to be clear.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OBS = ROOT / "data" / "reference" / "observations.csv"
HELDOUT = ROOT / "data" / "reference" / "heldout.csv"
PRICING = ROOT / "data" / "pricing" / "pricing.csv"
EXAMPLE_SWEEP = ROOT / "data" / "verl_example" / "sweep.toml"
READ_ONLY = Path("/sys")  # a read-only file system: a folder root cannot write in either


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    needles: tuple[str, ...]  # what the one error line must hold (where, and what)
    status: tuple[int, ...] = (2,)


@dataclass(frozen=True)
class Outcome:
    case: Case
    status: int
    message: str
    clear: bool
    why: str


def run(argv: Sequence[str]) -> tuple[int, str]:
    """``bayesscale ARGV`` in this process: (exit status, standard error)."""
    from bayesscale.cli import main

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            status = main(list(argv))
        except SystemExit as exc:  # argparse's usage errors
            status = int(exc.code) if isinstance(exc.code, int) else 2
        except Exception:  # a traceback a user would see
            import traceback

            traceback.print_exc(file=err)
            status = 1
    return status, err.getvalue()


def judge(case: Case, status: int, stderr: str) -> Outcome:
    lines = [line for line in stderr.splitlines() if line.strip()]
    # the error line: the last line that says error (argparse's usage lines come before it)
    errors = [line for line in lines if "error" in line.lower()]
    message = errors[-1] if errors else (lines[-1] if lines else "")
    if "Traceback" in stderr:
        why = "a traceback"
    elif status not in case.status:
        why = f"exit status {status}, not {' or '.join(map(str, case.status))}"
    elif not message:
        why = "nothing on standard error"
    else:
        missing = [n for n in case.needles if n.lower() not in message.lower()]
        why = f"does not say {missing}" if missing else ""
    return Outcome(case, status, message, not why, why)


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def _csv_variants(folder: Path) -> dict[str, Path]:
    """Observation tables with one defect each (from the bundled reference rows)."""
    import pandas as pd

    frame = pd.read_csv(OBS).head(60)
    out: dict[str, Path] = {}

    def save(name: str, f: pd.DataFrame) -> None:
        out[name] = folder / f"{name}.csv"
        f.to_csv(out[name], index=False)

    save("no_trials", frame.drop(columns=["trials"]))
    bad = frame.astype({"n_envs": object})
    bad.loc[5, "n_envs"] = "many"
    save("text_count", bad)
    neg = frame.copy()
    neg.loc[7, "successes"] = -3
    save("negative", neg)
    over = frame.copy()
    over.loc[9, "successes"] = over.loc[9, "trials"] + 1
    save("over", over)
    zero = frame.copy()
    zero.loc[11, "n_tasks"] = 0
    save("zero_tasks", zero)
    blank = frame.astype({"model": object})
    blank.loc[13, "model"] = None
    save("blank_model", blank)
    out["empty"] = _write(folder, "empty.csv", "")
    out["header"] = _write(folder, "header.csv", OBS.read_text().splitlines()[0] + "\n")
    out["binary"] = folder / "binary.csv"
    out["binary"].write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
    pricing = pd.read_csv(PRICING).drop(columns=["synthetic"])
    out["pricing_no_synthetic"] = folder / "pricing_no_synthetic.csv"
    pricing.to_csv(out["pricing_no_synthetic"], index=False)
    return out


def _fit(folder: Path) -> Path:
    from bayesscale.data.fitfile import ATTR_FORMAT, FORMAT_VERSION
    from bayesscale.recipe.synthetic import synthetic_fit

    tree = synthetic_fit(draws=40, chains=2)
    tree.attrs[ATTR_FORMAT] = FORMAT_VERSION
    path = folder / "fit.nc"
    tree.to_netcdf(path, engine="h5netcdf")
    return path


def _sweeps(folder: Path) -> dict[str, Path]:
    """A planned sweep of the bundled example, and copies with one defect each."""
    import pandas as pd

    plan = folder / "sweep"
    status, err = run(["plan", str(EXAMPLE_SWEEP), "--out", str(plan)])
    if status != 0:
        raise RuntimeError(f"planning the example sweep failed: {err}")
    out = {"sweep": plan}
    cut = folder / "cut_sweep"
    shutil.copytree(plan, cut)
    text = (cut / "manifest.csv").read_text()
    (cut / "manifest.csv").write_text(text[: len(text) // 2])
    out["truncated"] = cut
    gone = folder / "no_val"
    shutil.copytree(plan, gone)
    manifest = pd.read_csv(gone / "manifest.csv")
    manifest.loc[0, "status"] = "succeeded"
    manifest.to_csv(gone / "manifest.csv", index=False)
    for val in (gone / "data").glob("val*.parquet"):
        val.unlink()
    out["no_val"] = gone
    out["broken_toml"] = _write(folder, "broken_sweep.toml", "name = 'x'\n[verl\n")
    return out


def cases(folder: Path) -> list[Case]:
    """Every case, its files made in ``folder``."""
    csv = _csv_variants(folder)
    fit = str(_fit(folder))
    sweeps = _sweeps(folder)
    missing = str(folder / "missing")
    fit_out = ("--out", str(folder / "out.nc"), "--preview")
    exists = _write(folder, "exists.nc", "")
    a_dir = folder / "a_dir"
    a_dir.mkdir()
    broken_spec = _write(folder, "broken.toml", "[model\nname = 'x'\n")
    odd_spec = _write(
        folder, "odd.toml", (ROOT / "models" / "agentic_rl.toml").read_text() + "\nsurprise = 1\n"
    )
    csv_as_fit = str(csv["over"])
    empty_nc = str(_write(folder, "empty.nc", ""))
    recipe = ("recipe", fit)
    run_id = "qwen3-4b-grpo-e1-t128-r4-s0"

    def c(name: str, argv: Sequence[str], *needles: str, status: tuple[int, ...] = (2,)) -> Case:
        return Case(name, tuple(argv), needles, status)

    return [
        # missing files
        c("fit: missing table", ["fit", f"{missing}.csv", *fit_out], f"{missing}.csv"),
        c("recipe: missing fit", ["recipe", f"{missing}.nc", "--budget", "1e4"], f"{missing}.nc"),
        c("check: missing held-out", ["check", fit, f"{missing}.csv"], f"{missing}.csv"),
        c(
            "price: missing table",
            ["price", f"{missing}.csv", "--out", str(folder / "p.nc")],
            f"{missing}.csv",
        ),
        c(
            "recipe: missing prices",
            [*recipe, "--budget", "1e4", "--prices", f"{missing}.toml"],
            f"{missing}.toml",
        ),
        c(
            "next: missing costs",
            ["next", fit, "--budget", "1e4", "--costs", f"{missing}.toml"],
            f"{missing}.toml",
        ),
        c("ingest: missing sweep", ["ingest", missing, "--out", str(folder / "o.csv")], missing),
        c(
            "plan: missing spec",
            ["plan", f"{missing}.toml", "--out", str(folder / "pl")],
            f"{missing}.toml",
        ),
        c("fit: a folder as the table", ["fit", str(a_dir), *fit_out], str(a_dir), "directory"),
        # bad CSV rows and columns
        c(
            "fit: column missing",
            ["fit", str(csv["no_trials"]), *fit_out],
            "no_trials.csv",
            "trials",
        ),
        c(
            "fit: text in a count",
            ["fit", str(csv["text_count"]), *fit_out],
            "text_count.csv",
            "n_envs",
            "row",
        ),
        c(
            "fit: negative successes",
            ["fit", str(csv["negative"]), *fit_out],
            "negative.csv",
            "successes",
            "row",
        ),
        c(
            "fit: successes > trials",
            ["fit", str(csv["over"]), *fit_out],
            "over.csv",
            "successes",
            "row",
        ),
        c(
            "fit: zero tasks",
            ["fit", str(csv["zero_tasks"]), *fit_out],
            "zero_tasks.csv",
            "n_tasks",
            "row",
        ),
        c(
            "fit: blank setting key",
            ["fit", str(csv["blank_model"]), *fit_out],
            "blank_model.csv",
            "model",
            "row",
        ),
        c("fit: empty file", ["fit", str(csv["empty"]), *fit_out], "empty.csv", "empty"),
        c("fit: header only", ["fit", str(csv["header"]), *fit_out], "header.csv", "no"),
        c("fit: not a CSV", ["fit", str(csv["binary"]), *fit_out], "binary.csv"),
        c(
            "price: column missing",
            ["price", str(csv["pricing_no_synthetic"]), "--out", str(folder / "p.nc")],
            "pricing_no_synthetic.csv",
            "synthetic",
        ),
        # bad budgets
        c("budget 0", [*recipe, "--budget", "0"], "--budget", "> 0"),
        c("budget negative", [*recipe, "--budget", "-5"], "--budget"),
        c("budget text", [*recipe, "--budget", "abc"], "--budget", "abc"),
        c("budget N = 0", [*recipe, "--budget", "1e3:1e6:0"], "--budget", "N = 0"),
        c("budget HI < LO", [*recipe, "--budget", "1e6:1e3:3"], "--budget", "below"),
        c("budget two parts", [*recipe, "--budget", "1e3:1e6"], "--budget", "LO:HI:N"),
        c("budget nan", [*recipe, "--budget", "nan"], "--budget", "finite"),
        c("budget inf", [*recipe, "--budget", "inf"], "--budget", "finite"),
        c("next: budget 0", ["next", fit, "--budget", "0"], "budget"),
        # bad specs
        c(
            "spec agentic-rl",
            ["fit", str(OBS), "--spec", "agentic-rl", *fit_out],
            "agentic-rl",
            "did you mean 'agentic_rl'",
        ),
        c(
            "spec prices",
            ["fit", str(OBS), "--spec", "prices", *fit_out],
            "prices.toml",
            "unit-prices",
            "--prices",
        ),
        c(
            "spec pricing",
            ["fit", str(OBS), "--spec", "pricing", *fit_out],
            "pricing.toml",
            "pricing spec",
            "price --spec",
        ),
        c(
            "spec broken TOML",
            ["fit", str(OBS), "--spec", str(broken_spec), *fit_out],
            "broken.toml",
            "line",
        ),
        c(
            "spec unknown key",
            ["fit", str(OBS), "--spec", str(odd_spec), *fit_out],
            "odd.toml",
            "surprise",
        ),
        # bad fits and flags
        c("recipe: a CSV as the fit", ["recipe", csv_as_fit, "--budget", "1e4"], "over.csv"),
        c("recipe: an empty fit file", ["recipe", empty_nc, "--budget", "1e4"], "empty.nc"),
        c(
            "recipe: a law fit as --pricing",
            [*recipe, "--budget", "1e4", "--pricing", fit],
            "fit.nc",
            "pricing",
        ),
        c("check: settings not in the fit", ["check", fit, str(HELDOUT)], "heldout.csv", "setting"),
        c("kappa above 1", [*recipe, "--budget", "1e4", "--kappa", "env=100"], "env", "kappa"),
        c("kappa 0", [*recipe, "--budget", "1e4", "--kappa", "env=0"], "env", "kappa"),
        c("kappa unknown axis", [*recipe, "--budget", "1e4", "--kappa", "pages=0.5"], "pages"),
        c(
            "kappa not a number",
            [*recipe, "--budget", "1e4", "--kappa", "env=lots"],
            "kappa",
            "lots",
        ),
        c("prob 1.5", [*recipe, "--budget", "1e4", "--prob", "1.5"], "--prob", "1.5"),
        c(
            "unknown setting",
            [*recipe, "--budget", "1e4", "--setting", "Nope | x | y"],
            "Nope | x | y",
        ),
        c(
            "bounds not a number",
            [*recipe, "--budget", "1e4", "--bounds", "env=abc"],
            "--bounds",
            "env",
        ),
        c(
            "within-data below 1",
            [*recipe, "--budget", "1e4", "--within-data", "0.5"],
            "--within-data",
        ),
        c("unknown flag", [*recipe, "--budget", "1e4", "--budgte", "3"], "--budgte"),
        # outputs
        c("out exists", [*recipe, "--budget", "1e4", "--out", str(exists)], "exists.nc", "--force"),
        c(
            "out is a folder",
            [*recipe, "--budget", "1e4", "--out", str(a_dir)],
            "a_dir",
            "directory",
        ),
        c(
            "out read-only",
            [*recipe, "--budget", "1e4", "--out", str(READ_ONLY / "r.nc")],
            str(READ_ONLY / "r.nc"),
            "permission",
        ),
        c("out is an input", [*recipe, "--budget", "1e4", "--out", fit], "fit.nc", "input"),
        # sweeps
        c(
            "ingest: truncated manifest",
            ["ingest", str(sweeps["truncated"]), "--out", str(folder / "o.csv")],
            "manifest.csv",
            "truncated",
            "line",
        ),
        c(
            "ingest: deleted val.parquet",
            ["ingest", str(sweeps["no_val"]), "--out", str(folder / "o.csv")],
            "val.parquet",
            "no such file",
            run_id,
        ),
        c(
            "launch: missing verl",
            [
                "launch",
                str(sweeps["sweep"]),
                "--local",
                "--run",
                run_id,
                "--entrypoint",
                f"{sys.executable} -m no_such_verl_here.trainer.main_ppo",
            ],
            "no_such_verl_here",
            "nothing was run",
        ),
        c(
            "launch: unknown run",
            [
                "launch",
                str(sweeps["sweep"]),
                "--local",
                "--run",
                "nope",
                "--entrypoint",
                f"{sys.executable} -c pass",
            ],
            "nope",
        ),
        c(
            "plan: broken sweep TOML",
            ["plan", str(sweeps["broken_toml"]), "--out", str(folder / "pl2")],
            "broken_sweep.toml",
            "line",
        ),
    ]


def sweep(folder: Path, echo: Callable[[str], None] = print) -> list[Outcome]:
    out = []
    for case in cases(folder):
        status, err = run(case.argv)
        out.append(judge(case, status, err))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="print every message")
    args = parser.parse_args()
    import bayesscale

    with tempfile.TemporaryDirectory() as tmp:
        outcomes = sweep(Path(tmp))
        clear = sum(o.clear for o in outcomes)
        print(f"bayesscale from {Path(bayesscale.__file__).parent}")
        print(f"{len(outcomes)} bad inputs: {clear} clear, {len(outcomes) - clear} poor")
        for o in outcomes:
            if args.all or not o.clear:
                mark = "clear" if o.clear else f"POOR ({o.why})"
                print(f"- {o.case.name}: {mark}\n    exit {o.status}: {o.message[:400]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
