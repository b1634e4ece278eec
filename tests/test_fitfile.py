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
