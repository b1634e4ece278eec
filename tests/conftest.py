"""Shared fixtures.

Compiled samplers are cached (JAX's persistent compilation cache) in a folder of this test
session's own, never the user's: ``BAYESSCALE_CACHE_DIR`` is set here before anything
configures JAX, unless the caller set it.

The two sampled fits (the law on the reference data, the pricing model on the reference
pricing data) are session fixtures shared by every test module that needs one: each is
sampled once per test run. For development only, ``BAYESSCALE_FIT_CACHE=DIR`` keeps them in
DIR between runs, keyed by the data's SHA-256, the spec text, the sampler settings and the
package version; CI never sets it, so CI always samples.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import xarray as xr
from testdata import PRICING, REFERENCE

os.environ.setdefault("BAYESSCALE_CACHE_DIR", tempfile.mkdtemp(prefix="bayesscale-test-jax-"))

import bayesscale.names
from bayesscale import __version__
from bayesscale.data.fitfile import load_fit, save_fit
from bayesscale.data.observations import load_observations
from bayesscale.data.spec import load_spec
from bayesscale.law.inference import FitConfig, fit
from bayesscale.pricing.fit import fit_pricing
from bayesscale.pricing.spec import load_pricing_spec
from bayesscale.pricing.table import load_pricing
from bayesscale.sampling.config import PRICING_TARGET_ACCEPT

# The package's defaults: what a user's `bayesscale fit` / `price` does.
LAW_CONFIG = FitConfig(seed=11, progress=False)
PRICING_CONFIG = FitConfig(seed=5, target_accept=PRICING_TARGET_ACCEPT, progress=False)


def _cached(key_parts: list[str], kind: str, make: Callable[[], xr.DataTree]) -> xr.DataTree:
    cache = os.environ.get("BAYESSCALE_FIT_CACHE")
    if not cache:
        return make()
    key = hashlib.sha256("\n".join([__version__, *key_parts]).encode()).hexdigest()[:16]
    path = Path(cache) / f"{kind}-{key}.nc"
    if path.exists():
        return load_fit(path, kind=kind)
    tree = make()
    save_fit(tree, path, overwrite=True)
    return tree


@pytest.fixture(scope="session")
def reference_frame() -> pd.DataFrame:
    return pd.read_csv(REFERENCE / "observations.csv")


@pytest.fixture(scope="session")
def law_fit() -> xr.DataTree:
    """The default law (models/agentic_rl.toml) fitted to data/reference/observations.csv."""
    spec = load_spec()
    table = load_observations(REFERENCE / "observations.csv", spec)
    return _cached(
        [table.sha256, spec.text, repr(LAW_CONFIG)],
        bayesscale.names.KIND_LAW_FIT,
        lambda: fit(table, spec, LAW_CONFIG),
    )


@pytest.fixture(scope="session")
def pricing_fit() -> xr.DataTree:
    """The pricing model (models/pricing.toml) fitted to data/pricing/pricing.csv."""
    spec = load_pricing_spec()
    path = PRICING / "pricing.csv"
    return _cached(
        [hashlib.sha256(path.read_bytes()).hexdigest(), spec.text, repr(PRICING_CONFIG)],
        bayesscale.names.KIND_PRICING_FIT,
        lambda: fit_pricing(load_pricing(path, spec), spec, PRICING_CONFIG),
    )
