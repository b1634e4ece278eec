"""Runs of the package's sampler that tests of both kernels (NUTS in test_sampling.py, MAMS in
test_mams.py) check the same way."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from bayesscale.sampling import engine
from bayesscale.sampling.diagnostics import convergence
from bayesscale.sampling.engine import CompiledSampler, RunResult, RunSettings
from bayesscale.sampling.logdensity import LogDensity

SCALES = np.array([0.01, 1.0, 30.0])


def gaussian_model() -> pm.Model:
    """Independent normals of scales ``SCALES`` (a badly scaled target), their squares as a
    deterministic, and a half-normal."""
    with pm.Model(coords={"k": ["a", "b", "c"]}) as model:
        x = pm.Normal("x", mu=[1.0, -2.0, 5.0], sigma=SCALES, dims="k")
        pm.Deterministic("x_squared", x**2, dims="k")
        pm.HalfNormal("s", sigma=2.0)
    return model


def runs_cut_two_ways(
    sampler: CompiledSampler, settings: RunSettings, monkeypatch: pytest.MonkeyPatch
) -> tuple[RunResult, RunResult]:
    """The same run cut into chunks of one transition and of the longest chunks (chunk
    lengths otherwise follow the wall clock)."""
    runs = []
    for length in (1, engine.CAPACITY):
        monkeypatch.setattr(engine._Clock, "chunk_length", lambda self, n=length: n)
        runs.append(sampler.run(settings))
    return runs[0], runs[1]


def assert_stops_at_the_ess_target(density: LogDensity, sampler: CompiledSampler) -> None:
    """From 100 draws, extended until ESS 800 (and R-hat <= 1.01), well before 3,000."""
    result = sampler.run(RunSettings(tune=200, draws=100, seed=1, ess_target=800, max_draws=3000))
    check = convergence(result.posterior, density.dims)
    draws = result.stats["diverging"].shape[1]
    assert min(check.min_ess_bulk, check.min_ess_tail) >= 800 and check.max_rhat <= 1.01
    assert result.extensions >= 1 and 100 < draws < 3000
