"""Fixtures for the verl tests: small pools, planned sweeps, one real loopback Ray head."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from verl_testlib import HERE, SMALL_SPEC, crossed_pool, write_jsonl


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


@pytest.fixture(scope="session")
def ray_head() -> Iterator[str]:
    """A real Ray head on 127.0.0.1 with 2 fake GPUs, one per test session; shut down after."""
    temp = tempfile.mkdtemp(prefix="bsray")  # short: Ray's socket paths must stay < 108 chars
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "ray_head.py"),
            "--gpus",
            "2",
            "--cpus",
            "2",
            "--temp-dir",
            temp,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail("the test Ray head did not start (tests/verl/ray_head.py)")
    try:
        yield json.loads(line)["address"]
    finally:
        proc.stdin.close()
        proc.stdout.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(temp, ignore_errors=True)
