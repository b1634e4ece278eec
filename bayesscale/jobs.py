"""Run a list of seeded jobs serially or as Ray tasks, with the same results either way.

A leaf of the package (it imports NumPy only, and Ray where it runs jobs on Ray): the heavy
studies (simulation-based calibration, coverage over redraws, out-of-scale cross-validation,
the next-runs and design studies) are lists of independent fits. :func:`run_jobs` runs
``fn(shared, item, seed)`` for every ``item``, either in this process (serial, the default)
or as Ray tasks on a cluster, and returns the results **in job order**. Job ``i``'s seed is

.. math::

    s_i = \\mathrm{SeedSequence}([s, i]).\\mathrm{generate\\_state}(1)_0,

a function of the study seed ``s`` and the job's index ``i`` only (:func:`job_seed`): not of
the order in which jobs finish, of the worker that runs them or of how many workers there are.
A job that draws all its randomness from its seed gives the same result serially and on
Ray, bit for bit (the tests check it on SBC ranks), provided it computes the same way in
both: the package's full fit (:func:`bayesscale.law.inference.fit`, used by cross-validation
and the next-runs study) differs in the last bits with the number of NumPy's BLAS threads, and
Ray workers run with one (``WORKER_ENV``; Ray sets ``OMP_NUM_THREADS=1`` anyway). Run the
serial reference with ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1`` to get
the workers' numbers exactly (checked on two cross-validation folds of the reference data:
identical; with the machine's default threads, 38 of 157 figures differed in the 3rd-4th
digit). The SBC and coverage fits (:class:`~bayesscale.checks.law_sampler.CompiledLawSampler`,
JAX only) gave identical ranks either way.

``ray_address``: ``None`` with ``workers <= 1`` runs serially; ``None`` with ``workers > 1``
starts a throwaway local Ray instance of ``workers`` CPUs (``address="local"``: never one
already running on the machine; loopback only; shut down afterwards); any other address
(``"auto"``, ``"ray://head:10001"``, ``"10.0.0.5:6379"``) connects with
``ray.init(address=...)``, and ``workers`` then caps the tasks in flight (default: the
cluster's CPUs). Each task asks for ``cpus_per_job`` CPUs. The package must be importable
on every node (installed in the workers' Python).

**JAX in workers.** Every Ray worker is its own process, and JAX's settings are per process:
each job function must call :func:`bayesscale.sampling.jaxconfig.configure` before it touches JAX
(the package's fits and :class:`~bayesscale.checks.law_sampler.CompiledLawSampler` do). Two
workers on a 2-core machine each running 2 chains (one XLA host device per chain) would put
4 busy threads on 2 cores, and XLA's own intra-op thread pool sizes itself to the machine:
``WORKER_ENV`` (the default ``env``) limits XLA and the BLAS libraries to one thread per
process, so a worker uses about the one CPU it asked for.

Example
-------
>>> def job(shared, item, seed):
...     return shared + item, seed
>>> out = run_jobs(job, [1, 2], seed=0, shared=10)
>>> [v for v, _ in out], out[0][1] == job_seed(0, 0)
([11, 12], True)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

LOCAL: Final = "local"
# one thread per process: XLA's Eigen pool and the BLAS libraries would otherwise size
# themselves to every core of the node, whatever CPUs the task asked Ray for
WORKER_ENV: Final[Mapping[str, str]] = {
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
PASSED_ENV: Final = ("BAYESSCALE_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONPATH")


def job_seed(study_seed: int, index: int) -> int:
    """The seed of job ``index`` of a study seeded ``study_seed``: a 32-bit integer from
    ``SeedSequence([study_seed, index])``, independent of the other jobs.

    >>> job_seed(0, 1) == job_seed(0, 1) != job_seed(0, 2)
    True
    """
    if study_seed < 0 or index < 0:
        raise ValueError("study seed and job index must be >= 0")
    return int(np.random.SeedSequence([int(study_seed), int(index)]).generate_state(1)[0])


@dataclass(frozen=True)
class FanoutInfo:
    """How :func:`run_jobs` ran: ``mode`` (``serial`` or ``ray``), the Ray address, the tasks
    in flight at most, the jobs, and the wall seconds."""

    mode: str
    address: str | None
    workers: int
    jobs: int
    seconds: float


_LAST: list[FanoutInfo] = []


def last_run() -> FanoutInfo | None:
    """What the latest :func:`run_jobs` call in this process did (``None`` before any)."""
    return _LAST[-1] if _LAST else None


@contextmanager
def ray_session(
    ray_address: str | None, workers: int | None = None, env: Mapping[str, str] | None = None
) -> Iterator[bool]:
    """Connect to Ray for several :func:`run_jobs` calls (they reuse the connection, and a
    worker keeps what it compiled between them); yields whether Ray is used. ``None`` with
    ``workers <= 1``: serial, nothing started. ``None`` or ``"local"`` otherwise: a
    throwaway local instance of ``workers`` CPUs; else ``ray.init(address=ray_address)``.
    Disconnects (and stops a local instance) on exit.

    >>> with ray_session(None) as on_ray:
    ...     on_ray
    False
    """
    if ray_address is None and (workers is None or workers <= 1):
        yield False
        return
    import ray

    folder = _connect(ray_address, workers, env)
    try:
        yield True
    finally:
        _shutdown(ray, folder)


# ray.init starts its processes with subprocess (fork, then exec at once); JAX, already
# running in this process, warns at every fork that a forked multithreaded process may
# deadlock, which does not apply to a child that only execs
FORK_WARNING: Final = r"os\.fork\(\) was called"


def _connect(address: str | None, workers: int | None, env: Mapping[str, str] | None) -> str | None:
    """Start or join Ray; the temporary folder of a local instance started here, else None."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=FORK_WARNING, category=RuntimeWarning)
        return _init(address, workers, env)


def _shutdown(ray: Any, folder: str | None) -> None:
    """Disconnect; remove the temporary folder (logs, sockets) of a local instance."""
    ray.shutdown()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _init(address: str | None, workers: int | None, env: Mapping[str, str] | None) -> str | None:
    import ray

    runtime_env = {"env_vars": _worker_env(env)}
    if address is None or address == LOCAL:
        folder = tempfile.mkdtemp(prefix="bsray", dir="/tmp")  # short: socket paths
        ray.init(
            address=LOCAL,  # a new instance, never one already running on this machine
            num_cpus=max(1, int(workers or os.cpu_count() or 1)),
            include_dashboard=False,
            _node_ip_address="127.0.0.1",  # loopback only
            _temp_dir=folder,
            configure_logging=False,
            log_to_driver=False,
            runtime_env=runtime_env,
        )
        return folder
    ray.init(address=address, runtime_env=runtime_env, log_to_driver=False)
    return None


def _call(fn: Callable[[Any, Any, int], Any], shared: Any, item: Any, seed: int) -> Any:
    return fn(shared, item, seed)


def run_jobs(
    fn: Callable[[Any, Any, int], Any],
    items: Sequence[Any],
    seed: int,
    shared: Any = None,
    ray_address: str | None = None,
    workers: int | None = None,
    cpus_per_job: float = 1.0,
    env: Mapping[str, str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    time_limit: float | None = None,
) -> list[Any]:
    """``[fn(shared, items[i], job_seed(seed, i)) for i]``, serially or as Ray tasks.

    ``fn`` must be a module-level function (Ray pickles it; a function of the running script
    is pickled by value). ``shared`` is sent to the cluster once (``ray.put``) and passed to
    every job. ``progress(done, total)`` is called as jobs finish. ``env``: environment
    variables of the Ray workers (default ``WORKER_ENV``, plus the caller's
    ``BAYESSCALE_CACHE_DIR``, ``XDG_CACHE_HOME`` and ``PYTHONPATH`` where set); ignored
    serially. Results come back in the order of ``items``; a job's exception is raised here.

    ``time_limit`` (seconds): no job starts after that much wall time; the jobs in flight
    finish and the results of the jobs run so far come back. They are always the first
    ``k`` jobs (jobs start in order), each with the result it has in a full run, so a
    truncated study is the full study's first ``k`` jobs.

    >>> run_jobs(lambda shared, item, seed: item * shared, [1, 2, 3], seed=5, shared=2)
    [2, 4, 6]
    """
    n = len(items)
    seeds = [job_seed(seed, i) for i in range(n)]
    start = time.perf_counter()
    if ray_address is None and (workers is None or workers <= 1) and not _ray_connected():
        out = []
        for i, item in enumerate(items):
            if time_limit is not None and time.perf_counter() - start > time_limit:
                break
            out.append(fn(shared, item, seeds[i]))
            if progress is not None:
                progress(i + 1, n)
        _LAST.append(FanoutInfo("serial", None, 1, len(out), time.perf_counter() - start))
        return out
    results = _run_ray(
        fn, items, seeds, shared, ray_address, workers, cpus_per_job, env, progress,
        None if time_limit is None else start + time_limit,
    )  # fmt: skip
    _LAST.append(
        FanoutInfo(
            "ray", ray_address or LOCAL, results[1], len(results[0]), time.perf_counter() - start
        )
    )
    return results[0]


def _ray_connected() -> bool:
    return "ray" in sys.modules and bool(sys.modules["ray"].is_initialized())


def _worker_env(env: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(WORKER_ENV if env is None else env)
    for key in PASSED_ENV:
        if key in os.environ and key not in out:
            out[key] = os.environ[key]
    return out


def _run_ray(
    fn: Callable[[Any, Any, int], Any],
    items: Sequence[Any],
    seeds: list[int],
    shared: Any,
    address: str | None,
    workers: int | None,
    cpus_per_job: float,
    env: Mapping[str, str] | None,
    progress: Callable[[int, int], None] | None,
    deadline: float | None,
) -> tuple[list[Any], int]:
    import ray

    started = not ray.is_initialized()  # else the caller's connection stands (left open)
    folder = _connect(address, workers, env) if started else None
    try:
        cluster = int(ray.cluster_resources().get("CPU", 1))
        limit = max(1, int(workers) if workers else int(cluster // max(cpus_per_job, 1e-9)))
        task = ray.remote(num_cpus=cpus_per_job, max_retries=0)(_call)
        fn_ref = ray.put(fn)
        shared_ref = ray.put(shared)
        results: list[Any] = [None] * len(items)
        pending: dict[Any, int] = {}
        nxt = done = 0
        total = len(items)
        while done < total:
            if deadline is not None and time.perf_counter() > deadline:
                total = nxt  # start no more; finish those in flight
                if done >= total:
                    break
            while nxt < total and len(pending) < limit:
                pending[task.remote(fn_ref, shared_ref, items[nxt], seeds[nxt])] = nxt
                nxt += 1
            [ready], _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(ready)
            results[index] = ray.get(ready)
            done += 1
            if progress is not None:
                progress(done, total)
        return results[:total], limit
    finally:
        if started:
            _shutdown(ray, folder)
