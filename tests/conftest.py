"""Shared fixtures. Importing bayesscale.inference first sets XLA's host device count."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

import bayesscale.inference  # noqa: F401  (sets XLA_FLAGS before JAX is imported)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "data" / "reference"
EXTERNAL = Path(os.environ.get("BAYESSCALE_EXTERNAL", ROOT.parent / "shared" / "external"))


@pytest.fixture(scope="session")
def reference_frame() -> pd.DataFrame:
    return pd.read_csv(REFERENCE / "observations.csv")
