"""Shared fixtures.

Compiled samplers are cached (JAX's persistent compilation cache) in a folder of this test
run's own, never the user's, removed when the run ends: ``BAYESSCALE_CACHE_DIR`` is set here
before anything configures JAX, unless the caller set it.

The two sampled fits (the law on the reference data, the pricing model on the reference
pricing data) are session fixtures shared by every test module that needs one: each is
sampled once per test run. Under pytest-xdist every worker is a session of its own, so the
first worker that needs a fit samples it and saves it in the run's shared temporary folder,
holding a file lock, and the others wait and read it. For development only,
``BAYESSCALE_FIT_CACHE=DIR`` keeps them in DIR between runs, keyed by the data's SHA-256,
the spec text, the sampler settings and the package version; CI never sets it, so CI always
samples (once).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
import xarray as xr
from filelock import FileLock
from testdata import PRICING, REFERENCE

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


_OWN_CACHE: list[str] = []  # the compilation cache this run made (in the main process)


def pytest_configure(config: pytest.Config) -> None:
    """The main process makes the run's compilation cache before xdist starts its workers
    (they, notebooks' kernels and the commands the tests run inherit the variable, so a
    worker never makes one); JAX reads it at the first fit. A cache the caller names is used
    and kept."""
    if "BAYESSCALE_CACHE_DIR" not in os.environ:
        _OWN_CACHE.append(tempfile.mkdtemp(prefix="bayesscale-test-jax-"))
        os.environ["BAYESSCALE_CACHE_DIR"] = _OWN_CACHE[-1]


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the compilation cache this process made (and its variable)."""
    while _OWN_CACHE:
        folder = _OWN_CACHE.pop()
        if os.environ.get("BAYESSCALE_CACHE_DIR") == folder:
            del os.environ["BAYESSCALE_CACHE_DIR"]
        shutil.rmtree(folder, ignore_errors=True)


# The test files with the most work, most first (seconds of work measured with `pytest
# --durations=0` on a fresh clone's `.ci/run` at stop 49: 157, 64, 61, 53, 46, 44, 39, 38, 37,
# 35, 35, 34, 34, 32, 28, 26, 25, 24, 24, 23, 22, 22, 21; the session fits, sampled by each
# worker before its first test, counted with that test). `make test` runs xdist with
# `--dist loadfile --no-loadscope-reorder`, so files are handed out in this order: longest
# first, the short ones fill in at the end and neither worker is left with a long file while
# the other idles. xdist's own reordering puts files with the most *tests* first, which sent
# the notebooks last. A stale list costs time, never a result; files not listed follow in
# their usual order.
LONGEST_FIRST = (
    "test_lab_loop.py",
    "test_jobs.py",
    "test_notebooks.py",
    "test_report.py",
    "test_extrapolation_benchmark.py",
    "test_lab_train.py",
    "test_form_scores.py",
    "test_fit.py",
    "test_next.py",
    "test_cli_errors.py",
    "test_nutpie_agreement.py",
    "test_decision_sweep.py",
    "test_sampling.py",
    "test_verl_launch.py",
    "test_verl_example_loop.py",
    "test_install.py",
    "test_pricing.py",
    "test_docs.py",
    "test_geometric.py",
    "test_calibration.py",
    "test_mams.py",
    "test_fit_objects.py",
    "test_seed_noise.py",
    "test_verl_commands.py",
    "test_mams_stress.py",
    "test_compare.py",
    "test_blackjax_parity.py",
    "test_sensitivity.py",
    "test_offset_form.py",
)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Order the collected tests by :data:`LONGEST_FIRST`, file by file (a stable sort: the
    tests of a file keep their order)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def _shared(
    folder: Path, key_parts: list[str], kind: str, make: Callable[[], xr.DataTree]
) -> xr.DataTree:
    """The fit ``make`` returns, made once per key: saved in ``folder`` by whichever process
    gets the lock first, read by every other (fits round-trip exactly: test_fit)."""
    key = hashlib.sha256("\n".join([__version__, *key_parts]).encode()).hexdigest()[:16]
    path = folder / f"{kind}-{key}.nc"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if not path.exists():
            save_fit(make(), path)
        # every worker reads the same file, whichever sampled it
        return load_fit(path, kind=kind)


@pytest.fixture(scope="session")
def fit_folder(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """Where the session fits are kept: ``BAYESSCALE_FIT_CACHE`` if set, else this run's
    temporary folder, shared by its xdist workers."""
    cache = os.environ.get("BAYESSCALE_FIT_CACHE")
    if cache:
        return Path(cache)
    base = tmp_path_factory.getbasetemp()
    return (base if worker_id == "master" else base.parent) / "session-fits"


# Under xdist, which worker samples each session fit first thing (when a collected test needs it).
_FIRST_FIT_OF_WORKER = {"gw0": "law_fit", "gw1": "pricing_fit"}


@pytest.fixture(scope="session", autouse=True)
def _start_session_fits(request: pytest.FixtureRequest, worker_id: str) -> None:
    """Worker gw0 samples the law fit and gw1 the pricing fit before their first test, if
    any collected test needs that fit: otherwise the first two files that need the law fit
    often start together and one worker waits for the other's fit, idle (xdist hands out
    files in collection order). Total work is unchanged: every fit is sampled once. If the
    fit fails, only the tests that need it fail (pytest keeps the fixture's error for them),
    not every test of the worker."""
    name = _FIRST_FIT_OF_WORKER.get(worker_id)
    if name and any(name in item.fixturenames for item in request.session.items):
        with contextlib.suppress(Exception):
            request.getfixturevalue(name)


@pytest.fixture(scope="session")
def reference_frame() -> pd.DataFrame:
    return pd.read_csv(REFERENCE / "observations.csv")


@pytest.fixture(scope="session")
def law_fit(fit_folder: Path) -> xr.DataTree:
    """The default law (models/agentic_rl.toml) fitted to data/reference/observations.csv."""
    spec = load_spec()
    table = load_observations(REFERENCE / "observations.csv", spec)
    return _shared(
        fit_folder,
        [table.sha256, spec.text, repr(LAW_CONFIG), LAW_CONFIG.kernel],
        bayesscale.names.KIND_LAW_FIT,
        lambda: fit(table, spec, LAW_CONFIG),
    )


@pytest.fixture(scope="session")
def pricing_fit(fit_folder: Path) -> xr.DataTree:
    """The pricing model (models/pricing.toml) fitted to data/pricing/pricing.csv."""
    spec = load_pricing_spec()
    path = PRICING / "pricing.csv"
    return _shared(
        fit_folder,
        [
            hashlib.sha256(path.read_bytes()).hexdigest(),
            spec.text,
            repr(PRICING_CONFIG),
            PRICING_CONFIG.kernel,
        ],
        bayesscale.names.KIND_PRICING_FIT,
        lambda: fit_pricing(load_pricing(path, spec), spec, PRICING_CONFIG),
    )


@pytest.fixture(scope="session")
def ray_head() -> Iterator[str]:
    """A real Ray head on 127.0.0.1 with 2 fake GPUs, one per test session; shut down after."""
    temp = tempfile.mkdtemp(prefix="bsray")  # short: Ray's socket paths must stay < 108 chars
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).parent / "ray_head.py"),
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
        pytest.fail("the test Ray head did not start (tests/ray_head.py)")
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
