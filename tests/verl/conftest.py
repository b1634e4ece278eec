"""Fixtures for the verl tests: small pools, planned sweeps, one real loopback Ray head."""

from __future__ import annotations

from pathlib import Path

import pytest
from verl_testlib import SMALL_SPEC, crossed_pool, write_jsonl


@pytest.fixture
def small_spec(tmp_path: Path) -> Path:
    pool = write_jsonl(crossed_pool(10, 20, worlds=3), tmp_path / "pool.jsonl")
    spec = tmp_path / "sweep.toml"
    spec.write_text(SMALL_SPEC.format(pool=pool.name))
    return spec


@pytest.fixture
def small_sweep(small_spec: Path, tmp_path: Path) -> Path:
    from bayesscale.verl.plan import plan_sweep
    from bayesscale.verl.sweep import load_sweep_spec

    return plan_sweep(load_sweep_spec(small_spec), tmp_path / "sweep").sweep_dir
