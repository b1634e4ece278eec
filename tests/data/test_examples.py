"""The bundled example datasets: what ``bs.load_example`` reads, what ``bayesscale example``
writes, and that the files the package ships are the repository's own (models/, data/, lab/)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import bayesscale as bs
from bayesscale import _bundled, atomic
from bayesscale.cli import main, missing_optional
from bayesscale.core.prices import PRICES_FILE, load_prices
from bayesscale.data.examples import EXAMPLES, example_files, write_example
from bayesscale.data.observations import Table, load_observations
from bayesscale.data.spec import SPEC_DIR, load_spec

ROOT = Path(__file__).resolve().parents[2]
BUNDLED_SPECS = ("agentic_rl", "chinchilla", "pricing", "prices")


def test_every_bundled_file_is_the_repositorys_own() -> None:
    """In a checkout the package's bundled files are the repository's (links, not copies)."""
    files = {*example_files(["all"]), *(f"models/{s}.toml" for s in BUNDLED_SPECS)}
    for relative in sorted(files):
        shipped = _bundled.path(*relative.split("/"))
        assert shipped.read_bytes() == (ROOT / relative).read_bytes(), relative
    assert _bundled.root() / "models" == SPEC_DIR
    assert PRICES_FILE.read_bytes() == (ROOT / "models/prices.toml").read_bytes()
    assert load_prices(PRICES_FILE).unit == load_prices().unit
    assert sorted(p.stem for p in SPEC_DIR.glob("*.toml")) == sorted(BUNDLED_SPECS)
    assert load_spec("chinchilla").name == load_spec(ROOT / "models/chinchilla.toml").name


def test_a_missing_bundled_file_is_named() -> None:
    with pytest.raises(_bundled.BundledFileError, match=r"data/x\.csv: not in this installation"):
        _bundled.path("data", "x.csv")


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_load_example_reads_the_tables_with_their_provenance(name: str) -> None:
    ex = bs.load_example(name)
    info = EXAMPLES[name]
    assert set(ex.tables) == set(info.tables)
    for table, relative in info.tables.items():
        source = ROOT / relative
        expected = (
            pd.read_json(source, lines=True) if source.suffix == ".jsonl" else pd.read_csv(source)
        )
        pd.testing.assert_frame_equal(ex[table], expected)
        assert ex[table].attrs["source"] == f"bayesscale example {name}: {relative}"
    assert ex.specs == {s: (ROOT / s).read_text() for s in info.specs}
    assert set(ex.provenance["sha256"]) == set(info.files)
    if info.truth is not None:
        assert ex.provenance["truth"] == json.loads((ROOT / info.truth).read_text())
    assert ex.provenance["simulated"] is info.simulated
    assert name in repr(ex)


def test_reference_example_is_the_documented_dataset() -> None:
    """... and ``bs.fit(ex["observations"])`` fits the table ``bayesscale fit`` reads."""
    ex = bs.load_example("reference")
    spec = load_spec()
    table = Table.from_frame(ex["observations"], spec)
    from_file = load_observations(ROOT / "data/reference/observations.csv", spec)
    pd.testing.assert_frame_equal(table.frame, from_file.frame)
    assert len(ex["observations"]) == 1008 and len(ex["heldout"]) == 315
    assert ex["observations"][["model", "algorithm", "domain"]].drop_duplicates().shape[0] == 21
    assert not bs.load_example("lab").provenance["simulated"]


def test_an_unknown_example_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="no such example; the examples are reference, pricing"):
        bs.load_example("nope")


def test_write_example_makes_a_new_folder_at_the_documented_paths(tmp_path: Path) -> None:
    out = tmp_path / "new" / "try"
    done = write_example(["reference"], out)
    assert done.written == EXAMPLES["reference"].files and not done.unchanged
    for relative in done.written:
        assert (out / relative).read_bytes() == (ROOT / relative).read_bytes()
        assert not (out / relative).is_symlink()
    assert sorted(p.name for p in out.parent.iterdir()) == ["try"]  # no temporary left
    assert not atomic.PENDING


def test_write_example_never_replaces_other_content_unless_forced(tmp_path: Path) -> None:
    write_example(["reference"], tmp_path)
    edited = tmp_path / "models/agentic_rl.toml"
    edited.write_text("# mine\n")
    before = sorted(p for p in tmp_path.rglob("*"))
    with pytest.raises(FileExistsError, match=r"models/agentic_rl\.toml already there.*--force"):
        write_example(["lab"], tmp_path)  # the lab's other files are not written either
    assert sorted(p for p in tmp_path.rglob("*")) == before
    assert edited.read_text() == "# mine\n"
    done = write_example(["lab"], tmp_path, force=True)
    assert "models/agentic_rl.toml" in done.written
    assert edited.read_bytes() == (ROOT / "models/agentic_rl.toml").read_bytes()
    again = write_example(["all"], tmp_path)
    assert set(again.unchanged) == set(EXAMPLES["reference"].files + EXAMPLES["lab"].files)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_write_example_refuses_a_file_as_the_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file; --out takes a folder"):
        write_example(["pricing"], tmp_path / "f")
    (tmp_path / "d" / "data" / "pricing" / "pricing.csv").mkdir(parents=True)
    with pytest.raises(IsADirectoryError, match=r"pricing\.csv is a folder"):
        write_example(["pricing"], tmp_path / "d", force=True)


def test_example_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example"]) == 0
    listing = capsys.readouterr().out
    assert all(f"{name}: " in listing for name in EXAMPLES)
    out = tmp_path / "try"
    assert main(["example", "pricing", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out / 'data/pricing/pricing.csv'}" in printed
    assert "bayesscale price data/pricing/pricing.csv --out price.nc" in printed
    (out / "data/pricing/truth.json").write_text("{}")
    assert main(["example", "pricing", "--out", str(out)]) == 2
    assert "data/pricing/truth.json already there" in capsys.readouterr().err
    assert main(["example", "pricing", "--out", str(out), "--force"]) == 0


def test_a_missing_example_file_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["fit", "data/lab/observations.csv", "--out", "fit.nc"]) == 2
    err = capsys.readouterr().err
    assert "data/lab/observations.csv: no such file (bayesscale example lab writes it" in err


def test_an_optional_package_that_is_missing_is_named_with_its_extra() -> None:
    assert missing_optional(ModuleNotFoundError("x", name="ray.job_submission")) == (
        "needs ray, which is not installed: pip install 'bayesscale[ray]'"
    )
    assert missing_optional(ModuleNotFoundError("x", name="numpy")) is None
