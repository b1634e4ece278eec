"""Paths of the data the tests read (the bundled reference data and ../shared/external)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "data" / "reference"
EXTERNAL = Path(os.environ.get("BAYESSCALE_EXTERNAL", ROOT.parent / "shared" / "external"))
PRICING = ROOT / "data" / "pricing"
