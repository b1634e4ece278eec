"""The default sampler (MAMS on the package's JAX log density) against an independent one:
nutpie's NUTS on PyMC's own log density (PyTensor's Numba backend, nutpie's Rust sampler
and adaptation), both fitting the law model to the bundled reference data.

Every scalar of the posterior (325 on the reference data) is compared on its mean and its 5%
and 95% quantiles, ``z = (a - b) / sqrt(MCSE_a^2 + MCSE_b^2)`` with ArviZ's MCSEs
(``benchmarks/sampler_agreement.py``, which runs the same comparison with longer runs and
prints it). Two exact samplers keep every ``|z|`` under the Bonferroni bound for 975
comparisons (4.89, family-wise 0.1%: the suite runs on every machine, and a check an exact
pair fails by chance on 1% of runs blocks 1% of them), ``|z| > 3`` about as rarely as
N(0, 1) (2.6 expected; at most 12, which even pairs of fully dependent scalars exceed with
chance 0.0004),
and the z-scores of each statistic centred. The session's shared law fit (MAMS, the package's
defaults) is the one compared; nutpie runs PyMC's default length (1,000 warm-up, 1,000
draws, 2 chains). A negative control shows the check can fail: the same MAMS draws spread 5%
wider about their means (a sampler whose intervals are 5% too wide) must fail it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import xarray as xr
from testdata import REFERENCE

ROOT = Path(__file__).resolve().parents[2]
MAX_BEYOND_3 = 12  # N(0, 1) expects 2.6 of 975; scalars come in dependent pairs (alpha, log)
MAX_MEAN_Z = 0.4  # |mean z| of a statistic over the 325 scalars
MAX_SD_Z = 1.3


def _agreement_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "sampler_agreement", ROOT / "benchmarks" / "sampler_agreement.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


agreement_of = _agreement_module()


@pytest.fixture(scope="module")
def nutpie_fit() -> xr.DataTree:
    from bayesscale.data.observations import load_observations, prepare
    from bayesscale.data.spec import load_spec
    from bayesscale.law.inference import FitConfig, sample
    from bayesscale.law.model import build_law_model

    spec = load_spec()
    design = prepare(load_observations(REFERENCE / "observations.csv", spec), spec)
    config = FitConfig(sampler="nutpie", chains=2, seed=1, tune=1000, draws=1000, progress=False)
    tree, _ = sample(build_law_model(design), config)
    return tree


def failures(agreement: Any) -> list[str]:
    """What makes two fits disagree (empty when they agree)."""
    z = agreement.z
    found = []
    if agreement.worst >= agreement.bound:
        found.append(f"worst |z| {agreement.worst:.2f} >= {agreement.bound:.2f}")
    if agreement.beyond_3 > MAX_BEYOND_3:
        found.append(f"{agreement.beyond_3} |z| > 3")
    for j, name in enumerate(agreement_of.STATISTICS):
        if abs(z[:, j].mean()) >= MAX_MEAN_Z:
            found.append(f"{name}: mean z {z[:, j].mean():+.2f}")
    if z.std() >= MAX_SD_Z:
        found.append(f"z sd {z.std():.2f}")
    return found


def test_mams_and_nutpie_agree_on_every_scalar(
    law_fit: xr.DataTree, nutpie_fit: xr.DataTree
) -> None:
    ours = law_fit["posterior"].to_dataset()
    theirs = nutpie_fit["posterior"].to_dataset()
    assert set(ours.data_vars) == set(theirs.data_vars)
    agreement = agreement_of.compare(ours, theirs)
    assert agreement.comparisons == 3 * 325
    assert agreement.bound == pytest.approx(4.89, abs=0.01)
    assert failures(agreement) == [], agreement_of.describe(agreement)
    # nutpie's NUTS did not stray either (PyMC's default NUTS diverges about once a fit here)
    assert int(nutpie_fit["sample_stats"]["diverging"].sum()) <= 3

    # the negative control: 5% too wide
    centre = ours.mean(("chain", "draw"))
    wider = agreement_of.compare(centre + 1.05 * (ours - centre), theirs)
    assert failures(wider), agreement_of.describe(wider)
    assert np.all(np.isfinite(wider.z))
