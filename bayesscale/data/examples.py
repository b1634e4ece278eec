"""The example datasets that ship inside the package, as ArviZ's ``load_arviz_data`` serves its.

Each example is a small dataset with its provenance and the specs it is analysed with, bundled
in the package (``bayesscale._bundled``, copied from the repository's ``data/``, ``models/``
and ``lab/`` when the package is built), so they are there wherever the package is installed:

* ``reference``: the simulated reference dataset (21 settings, 1,008 runs; 315 larger-scale
  held-out runs) and the declared truth it was simulated from; the default law spec and prices.
* ``pricing``: the simulated pricing dataset (nine methods) and its declared truth.
* ``lab``: real RL runs of a small transformer (the repository's lab, ``docs/lab.md``): the
  sweep, the held-out runs, the recipe's and ``bayesscale next``'s runs, the lab's prices.
* ``verl_example``: an example verl sweep spec and its task pool (20 environments, 150 tasks).

:func:`load_example` reads one into memory (tables as pandas frames, with the provenance);
:func:`write_example` (``bayesscale example NAME --out DIR``) writes its files into a folder
at the paths the documentation uses (``data/reference/observations.csv``, ...), so the
documented commands run from that folder as they do from a checkout.

Example
-------
>>> ex = load_example("reference")
>>> ex.tables["observations"].shape
(1008, 11)
>>> ex.provenance["simulated"], sorted(ex.specs)
(True, ['models/agentic_rl.toml', 'models/prices.toml'])
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bayesscale import _bundled
from bayesscale.atomic import default_mode, track, untrack

if TYPE_CHECKING:  # pandas is imported on first load: the command line lists examples fast
    import pandas as pd

ALL = "all"  # ``bayesscale example all``: every example


@dataclass(frozen=True)
class ExampleInfo:
    """What an example holds: its files (paths relative to the folder it is written to, the
    same as in the repository), which are tables, which is its declared truth, which specs."""

    name: str
    description: str
    tables: dict[str, str]
    specs: tuple[str, ...]
    simulated: bool
    generator: str
    truth: str | None = None
    commands: tuple[str, ...] = ()

    @property
    def files(self) -> tuple[str, ...]:
        """Every file of the example, tables first."""
        truth = (self.truth,) if self.truth else ()
        return (*self.tables.values(), *truth, *self.specs)


EXAMPLES: dict[str, ExampleInfo] = {
    info.name: info
    for info in (
        ExampleInfo(
            name="reference",
            description="simulated reference dataset: 21 (model, algorithm, domain) settings "
            "x 3 axes x 6 grid points x 3 seeds (1,008 runs) and 315 larger-scale held-out "
            "runs, simulated from a declared truth calibrated to values the paper reports "
            "(not the paper's data)",
            tables={
                "observations": "data/reference/observations.csv",
                "heldout": "data/reference/heldout.csv",
            },
            truth="data/reference/truth.json",
            specs=("models/agentic_rl.toml", "models/prices.toml"),
            simulated=True,
            generator="data/make_reference.py",
            commands=(
                "bayesscale fit data/reference/observations.csv --out fit.nc",
                "bayesscale summary fit.nc",
                "bayesscale check fit.nc data/reference/heldout.csv",
                "bayesscale recipe fit.nc --budget 1e5",
            ),
        ),
        ExampleInfo(
            name="pricing",
            description="simulated pricing dataset: nine synthetic-data methods on the "
            "paper's ratio grid and a finer collapse grid, three seeds, simulated from a "
            "declared truth",
            tables={"pricing": "data/pricing/pricing.csv"},
            truth="data/pricing/truth.json",
            specs=("models/pricing.toml",),
            simulated=True,
            generator="data/make_pricing.py",
            commands=(
                "bayesscale price data/pricing/pricing.csv --out price.nc",
                "bayesscale pricing-table price.nc",
            ),
        ),
        ExampleInfo(
            name="lab",
            description="measured, not simulated: GRPO runs of a small transformer on "
            "procedurally generated tool-use tasks (the repository's lab, docs/lab.md): the "
            "90-run sweep, 24 held-out runs beyond it, and the runs of the recipe's and "
            "`bayesscale next`'s decisions",
            tables={
                "observations": "data/lab/observations.csv",
                "heldout": "data/lab/heldout.csv",
                "recipe": "data/lab/recipe.csv",
                "next": "data/lab/next.csv",
                "next_decision": "data/lab/next_decision.csv",
            },
            specs=("models/agentic_rl.toml", "lab/prices.toml"),
            simulated=False,
            generator="lab/ (planned by bayesscale plan, run by launch, read by ingest)",
            commands=(
                "bayesscale fit data/lab/observations.csv --out lab_fit.nc",
                "bayesscale check lab_fit.nc data/lab/heldout.csv",
                "bayesscale recipe lab_fit.nc --budget 944.32 --prices lab/prices.toml",
            ),
        ),
        ExampleInfo(
            name="verl_example",
            description="an example verl sweep spec (13 grid points x 2 algorithms x 3 "
            "seeds) and its task pool: 20 environments in 5 worlds, 150 distinct tasks",
            tables={"pool": "data/verl_example/pool.jsonl"},
            specs=("data/verl_example/sweep.toml",),
            simulated=False,
            generator="data/verl_example/make_pool.py",
            commands=("bayesscale plan data/verl_example/sweep.toml --out sweeps/example",),
        ),
    )
}


@dataclass(frozen=True)
class Example:
    """A bundled example in memory: ``tables`` (pandas frames by name), ``provenance`` (what
    the data are, the script that made them, the declared truth of a simulated one, every
    file's SHA-256) and ``specs`` (TOML text by path). ``ex["observations"]`` is a table."""

    name: str
    description: str
    tables: dict[str, pd.DataFrame]
    provenance: dict[str, Any]
    specs: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, table: str) -> pd.DataFrame:
        return self.tables[table]

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {len(v):,} rows" for k, v in self.tables.items())
        return f"Example({self.name!r}; {shapes}; specs {', '.join(self.specs)})"


def example_info(name: str) -> ExampleInfo:
    """The catalogue entry of ``name``; an error listing the examples otherwise.

    >>> example_info("lab").tables["heldout"]
    'data/lab/heldout.csv'
    """
    if name not in EXAMPLES:
        raise ValueError(f"{name!r}: no such example; the examples are {', '.join(EXAMPLES)}")
    return EXAMPLES[name]


def example_for(message: str) -> str | None:
    """The example that holds the file an error message says is missing (``PATH: no such
    file``), if the path is one of the examples' documented paths.

    >>> example_for("data/lab/heldout.csv: no such file")
    'lab'
    >>> example_for("my.csv: no such file") is None
    True
    """
    path, _, problem = message.partition(": ")
    if not problem.startswith("no such file"):
        return None
    relative = Path(path).as_posix().removeprefix("./")
    return next((n for n, info in EXAMPLES.items() if relative in info.tables.values()), None)


def bundled_file(relative: str) -> Path:
    """The installed copy of an example's file (``data/reference/heldout.csv``)."""
    return _bundled.path(*relative.split("/"))


def load_example(name: str) -> Example:
    """Read the bundled example ``name`` (``reference``, ``pricing``, ``lab``,
    ``verl_example``): its tables, provenance and specs.

    A table is read as the commands read the file (CSV as-is; the verl pool's JSON lines one
    row per task-environment cell), so ``bs.fit(ex["observations"])`` fits what
    ``bayesscale fit data/reference/observations.csv`` fits.

    >>> ex = load_example("pricing")
    >>> ex.provenance["generator"], sorted(ex.provenance["truth"])[:2]
    ('data/make_pricing.py', ['axes', 'concentration'])
    """
    import pandas as pd

    from bayesscale.data.observations import read_table

    info = example_info(name)
    tables = {}
    for table, relative in info.tables.items():
        path = bundled_file(relative)
        if path.suffix == ".jsonl":
            tables[table] = pd.read_json(path, lines=True)
        else:
            tables[table] = read_table(path)[0]
        tables[table].attrs["source"] = f"bayesscale example {name}: {relative}"
    provenance: dict[str, Any] = {
        "description": info.description,
        "simulated": info.simulated,
        "generator": info.generator,
        "sha256": {f: hashlib.sha256(bundled_file(f).read_bytes()).hexdigest() for f in info.files},
    }
    if info.truth is not None:
        provenance["truth"] = json.loads(bundled_file(info.truth).read_text())
    specs = {s: bundled_file(s).read_text() for s in info.specs}
    return Example(info.name, info.description, tables, provenance, specs)


@dataclass(frozen=True)
class Written:
    """What :func:`write_example` did: files written (or replaced) and files already there with
    the same content (left as they were)."""

    folder: Path
    written: tuple[str, ...]
    unchanged: tuple[str, ...]


def example_files(names: Iterable[str]) -> list[str]:
    """The files of the examples ``names`` (``all``: every example), each once, in order.

    >>> example_files(["reference", "lab"])[-2:]
    ['data/lab/next_decision.csv', 'lab/prices.toml']
    """
    chosen = list(EXAMPLES) if ALL in names else [example_info(n).name for n in names]
    files: list[str] = []
    for name in chosen:
        files += [f for f in EXAMPLES[name].files if f not in files]
    return files


def write_example(names: Iterable[str], out: str | Path, force: bool = False) -> Written:
    """Write the examples' files into the folder ``out`` at their documented paths
    (``out/data/reference/observations.csv``, ``out/models/agentic_rl.toml``, ...).

    Nothing of a user's is replaced unless ``force``: a file already there with other content
    is refused (all are checked before anything is written), one with the same content is left
    alone. Each file is written whole or not at all; a new folder appears whole or not at all.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp()) / "try"
    >>> write_example(["pricing"], folder).written
    ('data/pricing/pricing.csv', 'data/pricing/truth.json', 'models/pricing.toml')
    >>> write_example(["pricing"], folder).unchanged[0]
    'data/pricing/pricing.csv'
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out} is a file; --out takes a folder")
    files = example_files(names)
    sources = {f: bundled_file(f) for f in files}
    unchanged, conflicts = _compare(out, sources)
    if conflicts and not force:
        raise FileExistsError(
            f"{out}: {', '.join(conflicts)} already there with other content; pass --force "
            "(force=True) to replace them, or choose another folder"
        )
    todo = [f for f in files if f not in unchanged]
    _copy_into(out, {f: sources[f] for f in todo})
    return Written(out, tuple(todo), tuple(unchanged))


def _compare(out: Path, sources: dict[str, Path]) -> tuple[list[str], list[str]]:
    """The files already in ``out`` with the same bytes, and those with other content."""
    same: list[str] = []
    other: list[str] = []
    for relative, source in sources.items():
        target = out / relative
        if target.is_dir():
            raise IsADirectoryError(f"{target} is a folder; cannot write {relative} there")
        if target.exists():
            (same if target.read_bytes() == source.read_bytes() else other).append(relative)
    return same, other


def _copy_into(out: Path, sources: dict[str, Path]) -> None:
    """Copy the files into a hidden folder first, then move them into place: a new ``out``
    is renamed into place whole; into an existing one each file is renamed over its target."""
    if not sources:
        return
    fresh = not out.exists()
    parent = out.absolute().parent if fresh else out
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.absolute().name}.example-", dir=parent))
    tmp.chmod(default_mode(directory=True))  # mkdtemp gives 0o700
    track(tmp)
    try:
        for relative, source in sources.items():
            target = tmp / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)  # the file's bytes (a checkout's are links)
            target.chmod(default_mode())
        if fresh:
            tmp.rename(out)
            untrack(tmp, out)
            return
        for relative in sources:
            (out / relative).parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / relative, out / relative)
            untrack(tmp / relative, out / relative)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        untrack(tmp)
