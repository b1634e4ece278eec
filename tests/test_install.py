"""The package as a user installs it: the sdist and the wheel built from this repository, the
wheel installed into a fresh virtual environment outside it, and the commands run from an
empty folder on the data the package bundles (``bayesscale example``).

Offline and quick: the build uses the setuptools of the running environment (no build
isolation, nothing downloaded), the wheel is installed ``--no-deps``, and the fresh
environment sees the running one's packages (PyMC, JAX, ...) through a ``.pth`` file naming
its ``site-packages``, which holds no copy of bayesscale (an editable install there is a
``.pth`` of its own, which Python does not follow from a ``.pth`` line), so the package
imported is the installed wheel's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from bayesscale._version import __version__
from bayesscale.data.examples import EXAMPLES, example_files

ROOT = Path(__file__).resolve().parents[1]
# What the sdist is built from (MANIFEST.in and pyproject.toml's package-data name no more)
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "CHANGELOG.md")
SOURCE_FOLDERS = ("bayesscale", "models", "data")
SHIPPED = sorted(
    {*example_files(["all"]), *(f"models/{p.name}" for p in ROOT.glob("models/*.toml"))}
)
WHEEL = f"bayesscale-{__version__}-py3-none-any.whl"


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """The command's standard output; its error output too when it fails."""
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(command)}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _outside_env() -> dict[str, str]:
    """The environment of a process that must not see the repository (no PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return {**env, "MPLBACKEND": "Agg"}


def _build(hook: str, source: Path, out: Path) -> Path:
    """``setuptools.build_meta.<hook>`` in ``source`` (warnings are errors), as pip would."""
    code = (
        "import warnings; from setuptools import build_meta, warnings as w; "
        "warnings.simplefilter('error'); "
        # an editable build always says, as a warning, that it is one
        "warnings.filterwarnings('ignore', category=w.InformationOnly); "
        f"print(build_meta.{hook}({str(out)!r}))"
    )
    printed = _run([sys.executable, "-c", code], cwd=source)
    return out / printed.strip().splitlines()[-1]


def _copy_sources(dest: Path) -> Path:
    """A copy of what the sdist is made from, links kept (the checkout stays clean)."""
    source = dest / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for folder in SOURCE_FOLDERS:
        shutil.copytree(ROOT / folder, source / folder, symlinks=True, ignore=ignore)
    for name in (*SOURCES, "lab/prices.toml"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    return source


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist, built from the sources, and the wheel, built from the unpacked sdist (so
    the sdist is shown to be complete)."""
    base = tmp_path_factory.mktemp("build")
    sdist = _build("build_sdist", _copy_sources(base), base / "dist")
    with tarfile.open(sdist) as archive:
        archive.extractall(base / "unpacked", filter="data")
    wheel = _build("build_wheel", base / "unpacked" / f"bayesscale-{__version__}", base / "dist")
    assert wheel.name == WHEEL
    return sdist, wheel


@pytest.fixture(scope="module")
def venv(dists: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed; the running environment's
    packages are visible to it, bayesscale is not."""
    deps = Path(sysconfig.get_paths()["purelib"])
    assert not (deps / "bayesscale").exists(), f"{deps} holds a copy of bayesscale"
    env = tmp_path_factory.mktemp("venv") / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", str(env)], cwd=env.parent)
    python = env / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    _run([*pip, "--no-deps", "--no-index", str(dists[1])], cwd=env.parent)
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=env.parent).strip())  # fmt: skip
    (site / "_bayesscale_test_deps.pth").write_text(f"{deps}\n")
    return env


def _names(dist: Path) -> list[str]:
    if dist.suffix == ".whl":
        return zipfile.ZipFile(dist).namelist()
    with tarfile.open(dist) as archive:
        return [m.name.partition("/")[2] for m in archive.getmembers() if m.isfile()]


def test_wheel_holds_the_package_its_bundled_files_and_nothing_else(
    dists: tuple[Path, Path],
) -> None:
    names = _names(dists[1])
    wheel = zipfile.ZipFile(dists[1])
    for relative in SHIPPED:
        assert wheel.read(f"bayesscale/_bundled/{relative}") == (ROOT / relative).read_bytes()
    bundled = {n.removeprefix("bayesscale/_bundled/") for n in names if "/_bundled/" in n}
    assert bundled == {*SHIPPED, "__init__.py"}
    assert "bayesscale/py.typed" in names and "bayesscale/cli/example.py" in names
    tops = {n.split("/")[0] for n in names}
    assert tops == {"bayesscale", f"bayesscale-{__version__}.dist-info"}, tops  # no tests/, lab/
    info = f"bayesscale-{__version__}.dist-info"
    assert wheel.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    meta = wheel.read(f"{info}/METADATA").decode()
    assert f"\nVersion: {__version__}\n" in meta and "License-Expression: Apache-2.0" in meta
    assert "Description-Content-Type: text/markdown" in meta and "## Quick start" in meta
    for extra in ("ray", "nutpie", "minilm", "docs", "dev"):
        assert f"Provides-Extra: {extra}\n" in meta, extra
    requires = [line.split()[1] for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    assert "pymc>=6" in requires and not [r for r in requires if r.startswith("rich")]


def test_sdist_holds_the_sources_of_what_the_package_bundles(dists: tuple[Path, Path]) -> None:
    names = set(_names(dists[0]))  # regular files only: links are followed when it is made
    assert {*SHIPPED, *SOURCES, "data/make_reference.py", "bayesscale/py.typed"} <= names
    assert {f"bayesscale/_bundled/{r}" for r in SHIPPED} <= names
    assert not [n for n in names if n.startswith(("tests/", "notebooks/", "docs/"))]


def test_installed_package_runs_from_an_empty_folder(venv: Path, tmp_path: Path) -> None:
    """Outside the repository, with nothing but the installed wheel: the example data, a
    short fit, and the commands that read it."""
    env = _outside_env()
    python, bayesscale = str(venv / "bin" / "python"), str(venv / "bin" / "bayesscale")
    here = tmp_path / "empty"
    here.mkdir()
    where = json.loads(_run([python, "-c", "import bayesscale, json, sys; print(json.dumps([bayesscale.__file__, bayesscale.__version__, sys.path]))"], here, env))  # fmt: skip
    assert Path(where[0]).is_relative_to(venv) and where[1] == __version__
    assert str(ROOT) not in where[2] and "" not in where[2][1:]

    out = _run([bayesscale, "example", "reference", "--out", "."], here, env)
    assert sorted(str(p.relative_to(here)) for p in here.rglob("*") if p.is_file()) == sorted(
        EXAMPLES["reference"].files
    )
    assert "bayesscale fit data/reference/observations.csv --out fit.nc" in out
    short = ["--draws", "60", "--tune", "60", "--ess-target", "0", "--chains", "1", "--seed", "1"]
    fit = [bayesscale, "fit", "data/reference/observations.csv", "--out", "fit.nc", *short]
    fit += ["--forms", "power"]  # the packaging is the subject; the default stack needs more draws
    assert "wrote fit.nc" in _run(fit, here, env)
    assert "Qwen3-8B | grpo | search" in _run([bayesscale, "summary", "fit.nc"], here, env)
    check = _run([bayesscale, "check", "fit.nc", "data/reference/heldout.csv"], here, env)
    assert "coverage" in check.lower()
    recipe = _run([bayesscale, "recipe", "fit.nc", "--budget", "1e5"], here, env)
    assert "budget 100,000 USD" in recipe

    _run([bayesscale, "example", "verl_example", "--out", "."], here, env)
    plan = [bayesscale, "plan", "data/verl_example/sweep.toml", "--out", "sweeps/example"]
    assert "next: bayesscale launch" in _run(plan, here, env)
    assert (here / "sweeps/example/plan.json").is_file()


def test_wheel_from_the_checkout_is_the_wheel_from_the_sdist(
    dists: tuple[Path, Path], tmp_path: Path
) -> None:
    """``pip wheel .`` in a checkout builds from the tree itself, where the bundled files are
    links: the wheel holds the same files, with the files' bytes."""
    direct = _build("build_wheel", _copy_sources(tmp_path), tmp_path / "dist")
    assert sorted(_names(direct)) == sorted(_names(dists[1]))
    for relative in SHIPPED:
        name = f"bayesscale/_bundled/{relative}"
        assert zipfile.ZipFile(direct).read(name) == zipfile.ZipFile(dists[1]).read(name)


def test_editable_install_finds_the_bundled_files(tmp_path: Path) -> None:
    """An editable install (``pip install -e .``, setuptools' import hook) reads the bundled
    specs and examples through the links in the source tree."""
    source = _copy_sources(tmp_path)
    env = tmp_path / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", str(env)], cwd=tmp_path)
    editable = _build("build_editable", source, tmp_path / "dist")  # what pip install -e builds
    pip = [sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "-q"]
    _run([*pip, "--no-deps", "--no-index", str(editable)], tmp_path)
    site = next((env / "lib").glob("python3*/site-packages"))
    (site / "_bayesscale_test_deps.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n")
    code = (
        "import bayesscale as bs; from bayesscale.data.spec import load_spec; "
        "print(bs.__file__); print(load_spec('chinchilla').source); "
        "print(len(bs.load_example('lab')['observations']))"
    )
    printed = _run([str(env / "bin" / "python"), "-c", code], tmp_path, _outside_env()).split()
    assert printed[0] == str(source / "bayesscale" / "__init__.py")
    assert printed[1] == str(source / "bayesscale/_bundled/models/chinchilla.toml")
    assert printed[2] == "90"
