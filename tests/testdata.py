"""Paths of the data the tests read (the bundled reference data and ../shared/external), and
the rows the small law fits share."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from bayesscale import names

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "data" / "reference"
EXTERNAL = Path(os.environ.get("BAYESSCALE_EXTERNAL", ROOT.parent / "shared" / "external"))
PRICING = ROOT / "data" / "pricing"


def small_reference_frame() -> pd.DataFrame:
    """Two settings of the reference data (Qwen3-4B, GRPO, on math+code and SWE; 96 runs):
    the tests that sample a small law fit use these same rows, so that the compiled sampler
    of the first is reused (JAX's compilation cache) by the others."""
    frame = pd.read_csv(REFERENCE / "observations.csv")
    keep = (
        frame[names.MODEL].eq("Qwen3-4B")
        & frame[names.ALGORITHM].eq("grpo")
        & frame[names.DOMAIN].isin(["math+code", "swe"])
    )
    return frame[keep].reset_index(drop=True)
