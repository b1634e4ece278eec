"""Reading a fit needs no PyMC: the commands that only read fits start quickly."""

from __future__ import annotations

import subprocess
import sys


def test_reading_a_fit_imports_neither_pymc_nor_jax() -> None:
    code = (
        "import sys\n"
        "import bayesscale.cli.summary, bayesscale.cli.recipe, bayesscale.cli.check\n"
        "import bayesscale.data.fitfile, bayesscale.law.summary, bayesscale.recipe, bayesscale.checks.heldout\n"
        "heavy = sorted(m for m in ('pymc', 'pytensor', 'jax') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_a_fit_file_missing_a_variable_is_refused_in_one_line(tmp_path) -> None:
    """A file changed after it was written fails when read, naming what it lacks, not with a
    KeyError deep in whichever reader touched the variable first."""
    import pytest

    from bayesscale import names
    from bayesscale.data.fitfile import ATTR_FORMAT, FORMAT_VERSION, FitFileError, load_fit
    from bayesscale.recipe.synthetic import synthetic_fit

    tree = synthetic_fit(draws=5)
    tree.attrs[ATTR_FORMAT] = FORMAT_VERSION
    whole = tmp_path / "whole.nc"
    tree.to_netcdf(whole, engine="h5netcdf")
    assert names.ALPHA_POP in load_fit(whole)["posterior"].data_vars
    tree["posterior"] = tree["posterior"].to_dataset().drop_vars(names.ALPHA_POP)
    cut = tmp_path / "cut.nc"
    tree.to_netcdf(cut, engine="h5netcdf")
    with pytest.raises(FitFileError, match=r"cut.nc: group 'posterior' lacks 'alpha_pop'"):
        load_fit(cut)
