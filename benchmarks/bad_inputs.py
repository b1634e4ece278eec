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
``tests/cli/test_bad_inputs.py`` runs the same cases and asks for every message to be clear.
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

    v = Files(
        folder=folder,
        csv=csv,
        fit=fit,
        sweeps=sweeps,
        missing=missing,
        fit_out=fit_out,
        exists=exists,
        a_dir=a_dir,
        broken_spec=broken_spec,
        odd_spec=odd_spec,
        csv_as_fit=csv_as_fit,
        empty_nc=empty_nc,
        recipe=recipe,
        run_id=run_id,
    )
    return [case for section in SECTIONS for case in section(v)]


@dataclass(frozen=True)
class Files:
    """The files and arguments the cases share (made by :func:`cases`)."""

    folder: Path
    csv: dict[str, Path]
    fit: str
    sweeps: dict[str, Path]
    missing: str
    fit_out: tuple[str, ...]
    exists: Path
    a_dir: Path
    broken_spec: Path
    odd_spec: Path
    csv_as_fit: str
    empty_nc: str
    recipe: tuple[str, ...]
    run_id: str


def _c(name: str, argv: Sequence[str], *needles: str, status: tuple[int, ...] = (2,)) -> Case:
    return Case(name, tuple(argv), needles, status)


def _missing_files(v: Files) -> list[Case]:
    """Missing files."""
    return [
        _c("fit: missing table", ["fit", f"{v.missing}.csv", *v.fit_out], f"{v.missing}.csv"),
        _c(
            "recipe: missing fit",
            ["recipe", f"{v.missing}.nc", "--budget", "1e4"],
            f"{v.missing}.nc",
        ),
        _c("check: missing held-out", ["check", v.fit, f"{v.missing}.csv"], f"{v.missing}.csv"),
        _c(
            "price: missing table",
            ["price", f"{v.missing}.csv", "--out", str(v.folder / "p.nc")],
            f"{v.missing}.csv",
        ),
        _c(
            "recipe: missing prices",
            [*v.recipe, "--budget", "1e4", "--prices", f"{v.missing}.toml"],
            f"{v.missing}.toml",
        ),
        _c(
            "next: missing costs",
            ["next", v.fit, "--budget", "1e4", "--costs", f"{v.missing}.toml"],
            f"{v.missing}.toml",
        ),
        _c(
            "ingest: missing sweep",
            ["ingest", v.missing, "--out", str(v.folder / "o.csv")],
            v.missing,
        ),
        _c(
            "plan: missing spec",
            ["plan", f"{v.missing}.toml", "--out", str(v.folder / "pl")],
            f"{v.missing}.toml",
        ),
        _c(
            "fit: a folder as the table",
            ["fit", str(v.a_dir), *v.fit_out],
            str(v.a_dir),
            "directory",
        ),
    ]


def _bad_csv_rows_and_columns(v: Files) -> list[Case]:
    """Bad CSV rows and columns."""
    return [
        _c(
            "fit: column missing",
            ["fit", str(v.csv["no_trials"]), *v.fit_out],
            "no_trials.csv",
            "trials",
        ),
        _c(
            "fit: text in a count",
            ["fit", str(v.csv["text_count"]), *v.fit_out],
            "text_count.csv",
            "n_envs",
            "row",
        ),
        _c(
            "fit: negative successes",
            ["fit", str(v.csv["negative"]), *v.fit_out],
            "negative.csv",
            "successes",
            "row",
        ),
        _c(
            "fit: successes > trials",
            ["fit", str(v.csv["over"]), *v.fit_out],
            "over.csv",
            "successes",
            "row",
        ),
        _c(
            "fit: zero tasks",
            ["fit", str(v.csv["zero_tasks"]), *v.fit_out],
            "zero_tasks.csv",
            "n_tasks",
            "row",
        ),
        _c(
            "fit: blank setting key",
            ["fit", str(v.csv["blank_model"]), *v.fit_out],
            "blank_model.csv",
            "model",
            "row",
        ),
        _c("fit: empty file", ["fit", str(v.csv["empty"]), *v.fit_out], "empty.csv", "empty"),
        _c("fit: header only", ["fit", str(v.csv["header"]), *v.fit_out], "header.csv", "no"),
        _c("fit: not a CSV", ["fit", str(v.csv["binary"]), *v.fit_out], "binary.csv"),
        _c(
            "price: column missing",
            ["price", str(v.csv["pricing_no_synthetic"]), "--out", str(v.folder / "p.nc")],
            "pricing_no_synthetic.csv",
            "synthetic",
        ),
    ]


def _bad_budgets(v: Files) -> list[Case]:
    """Bad budgets."""
    return [
        _c("budget 0", [*v.recipe, "--budget", "0"], "--budget", "> 0"),
        _c("budget negative", [*v.recipe, "--budget", "-5"], "--budget"),
        _c("budget text", [*v.recipe, "--budget", "abc"], "--budget", "abc"),
        _c("budget N = 0", [*v.recipe, "--budget", "1e3:1e6:0"], "--budget", "N = 0"),
        _c("budget HI < LO", [*v.recipe, "--budget", "1e6:1e3:3"], "--budget", "below"),
        _c("budget two parts", [*v.recipe, "--budget", "1e3:1e6"], "--budget", "LO:HI:N"),
        _c("budget nan", [*v.recipe, "--budget", "nan"], "--budget", "finite"),
        _c("budget inf", [*v.recipe, "--budget", "inf"], "--budget", "finite"),
        _c("next: budget 0", ["next", v.fit, "--budget", "0"], "budget"),
    ]


def _bad_specs(v: Files) -> list[Case]:
    """Bad specs."""
    return [
        _c(
            "spec agentic-rl",
            ["fit", str(OBS), "--spec", "agentic-rl", *v.fit_out],
            "agentic-rl",
            "did you mean 'agentic_rl'",
        ),
        _c(
            "spec prices",
            ["fit", str(OBS), "--spec", "prices", *v.fit_out],
            "prices.toml",
            "unit-prices",
            "--prices",
        ),
        _c(
            "spec pricing",
            ["fit", str(OBS), "--spec", "pricing", *v.fit_out],
            "pricing.toml",
            "pricing spec",
            "price --spec",
        ),
        _c(
            "spec broken TOML",
            ["fit", str(OBS), "--spec", str(v.broken_spec), *v.fit_out],
            "broken.toml",
            "line",
        ),
        _c(
            "spec unknown key",
            ["fit", str(OBS), "--spec", str(v.odd_spec), *v.fit_out],
            "odd.toml",
            "surprise",
        ),
    ]


def _bad_fits_and_flags(v: Files) -> list[Case]:
    """Bad fits and flags."""
    return [
        _c("recipe: a CSV as the fit", ["recipe", v.csv_as_fit, "--budget", "1e4"], "over.csv"),
        _c("recipe: an empty fit file", ["recipe", v.empty_nc, "--budget", "1e4"], "empty.nc"),
        _c(
            "recipe: a law fit as --pricing",
            [*v.recipe, "--budget", "1e4", "--pricing", v.fit],
            "fit.nc",
            "pricing",
        ),
        _c(
            "check: settings not in the fit",
            ["check", v.fit, str(HELDOUT)],
            "heldout.csv",
            "setting",
        ),
        _c("kappa above 1", [*v.recipe, "--budget", "1e4", "--kappa", "env=100"], "env", "kappa"),
        _c("kappa 0", [*v.recipe, "--budget", "1e4", "--kappa", "env=0"], "env", "kappa"),
        _c("kappa unknown axis", [*v.recipe, "--budget", "1e4", "--kappa", "pages=0.5"], "pages"),
        _c(
            "kappa not a number",
            [*v.recipe, "--budget", "1e4", "--kappa", "env=lots"],
            "kappa",
            "lots",
        ),
        _c("prob 1.5", [*v.recipe, "--budget", "1e4", "--prob", "1.5"], "--prob", "1.5"),
        _c(
            "unknown setting",
            [*v.recipe, "--budget", "1e4", "--setting", "Nope | x | y"],
            "Nope | x | y",
        ),
        _c(
            "bounds not a number",
            [*v.recipe, "--budget", "1e4", "--bounds", "env=abc"],
            "--bounds",
            "env",
        ),
        _c(
            "within-data below 1",
            [*v.recipe, "--budget", "1e4", "--within-data", "0.5"],
            "--within-data",
        ),
        _c("unknown flag", [*v.recipe, "--budget", "1e4", "--budgte", "3"], "--budgte"),
    ]


def _outputs(v: Files) -> list[Case]:
    """Outputs."""
    return [
        _c(
            "out exists",
            [*v.recipe, "--budget", "1e4", "--out", str(v.exists)],
            "exists.nc",
            "--force",
        ),
        _c(
            "out is a folder",
            [*v.recipe, "--budget", "1e4", "--out", str(v.a_dir)],
            "a_dir",
            "directory",
        ),
        _c(
            "out read-only",
            [*v.recipe, "--budget", "1e4", "--out", str(READ_ONLY / "r.nc")],
            str(READ_ONLY / "r.nc"),
            "permission",
        ),
        _c("out is an input", [*v.recipe, "--budget", "1e4", "--out", v.fit], "fit.nc", "input"),
    ]


def _sweep_cases(v: Files) -> list[Case]:
    """Sweeps."""
    return [
        _c(
            "ingest: truncated manifest",
            ["ingest", str(v.sweeps["truncated"]), "--out", str(v.folder / "o.csv")],
            "manifest.csv",
            "truncated",
            "line",
        ),
        _c(
            "ingest: deleted val.parquet",
            ["ingest", str(v.sweeps["no_val"]), "--out", str(v.folder / "o.csv")],
            "val.parquet",
            "no such file",
            v.run_id,
        ),
        _c(
            "launch: missing verl",
            [
                "launch",
                str(v.sweeps["sweep"]),
                "--local",
                "--run",
                v.run_id,
                "--entrypoint",
                f"{sys.executable} -m no_such_verl_here.trainer.main_ppo",
            ],
            "no_such_verl_here",
            "nothing was run",
        ),
        _c(
            "launch: unknown run",
            [
                "launch",
                str(v.sweeps["sweep"]),
                "--local",
                "--run",
                "nope",
                "--entrypoint",
                f"{sys.executable} -c pass",
            ],
            "nope",
        ),
        _c(
            "plan: broken sweep TOML",
            ["plan", str(v.sweeps["broken_toml"]), "--out", str(v.folder / "pl2")],
            "broken_sweep.toml",
            "line",
        ),
    ]


SECTIONS = (
    _missing_files,
    _bad_csv_rows_and_columns,
    _bad_budgets,
    _bad_specs,
    _bad_fits_and_flags,
    _outputs,
    _sweep_cases,
)


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
