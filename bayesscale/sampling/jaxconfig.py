"""JAX set-up, by explicit call at the entry points (never as an import side effect).

Two things must be settled before JAX starts its CPU backend:

* **host devices.** Chains run in parallel only with one XLA host device per chain
  (``jax.pmap``). :func:`configure` asks for ``max(chains, 4, cores)`` devices with
  ``jax.config.update("jax_num_cpu_devices", n)``; PyMC's ``pymc.sampling.jax`` sets
  ``XLA_FLAGS`` to 100 devices on import, and the config option wins over that flag.
* **the persistent compilation cache.** Compiled samplers are kept on disk, keyed by the
  program XLA compiles (the model's structure and its data), so a second fit of the same
  model and data in a new process skips most of the compilation. The cache folder is
  ``$BAYESSCALE_CACHE_DIR`` if set (``off`` disables it), else
  ``$XDG_CACHE_HOME/bayesscale/jax`` (``~/.cache/bayesscale/jax``).

Example
-------
>>> from bayesscale.sampling.jaxconfig import configure
>>> configure(chains=4)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

CACHE_ENV = "BAYESSCALE_CACHE_DIR"
MIN_DEVICES = 4  # cheap (a thread each): a later fit with more chains still runs in parallel
CACHE_OFF = "off"

_configured: dict[str, object] = {}


def cache_dir() -> Path | None:
    """Where compiled programs are cached, or ``None`` when caching is off."""
    value = os.environ.get(CACHE_ENV)
    if value is not None:
        return None if value.strip().lower() in ("", CACHE_OFF) else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bayesscale" / "jax"


def _backend_started() -> bool:
    from jax._src import xla_bridge

    return bool(getattr(xla_bridge, "_backends", None))


def configure(chains: int = 4) -> int:
    """Set JAX's CPU device count (at least ``chains``), float64 and the compilation cache.

    Call once before anything runs on JAX; later calls only check. Returns the number of
    host devices JAX has. If JAX had already started with fewer devices than ``chains``,
    warns that chains will share devices (they still run, vectorised).
    """
    import jax
    import pymc.sampling.jax  # noqa: F401  (its import rewrites XLA_FLAGS; let it, then override)

    wanted = max(int(chains), MIN_DEVICES, os.cpu_count() or 1)
    if not _backend_started() and not _configured.get("devices"):
        jax.config.update("jax_num_cpu_devices", wanted)
        _configured["devices"] = wanted
    jax.config.update("jax_enable_x64", True)
    if "cache" not in _configured:
        folder = cache_dir()
        if folder is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                jax.config.update("jax_compilation_cache_dir", str(folder))
                jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
                jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
            except OSError as exc:
                warnings.warn(
                    f"compilation cache {folder} unusable ({exc}); compiling afresh each time",
                    RuntimeWarning,
                    stacklevel=2,
                )
        _configured["cache"] = folder
    devices = jax.local_device_count()
    if devices < chains:
        warnings.warn(
            f"JAX started with {devices} host device(s) before bayesscale could configure it; "
            f"{chains} chains share them (vectorised). Call "
            "bayesscale.sampling.configure(chains) before using JAX.",
            RuntimeWarning,
            stacklevel=2,
        )
    return devices


def release_compiled() -> None:
    """Drop every program JAX keeps compiled in this process's memory (``jax.clear_caches``;
    the persistent cache on disk stays).

    JAX keeps each fit's compiled sampler, derived quantities and log densities in its
    in-memory caches for the life of the process, even after the fit is gone: about 650
    memory maps per fit of a new data layout. A process may hold 65,530 maps
    (``vm.max_map_count``), so a study that refits about a hundred times in one process
    crashed with ``LLVM compilation error: Cannot allocate memory``. Every fit calls this
    before it compiles: a later fit builds its functions afresh anyway (its model is a new
    graph), and finds its compiled programs in the persistent cache.
    """
    import jax

    jax.clear_caches()
