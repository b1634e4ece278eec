"""What one gradient of the law's log density costs, and how much of a default fit is
transitions that no fixed cost can shrink.

    .venv/bin/python benchmarks/gradient_floor.py [--seed 2] [--pymc-seconds 43.4]

On the reference law model (``data/reference/observations.csv``, 1,008 rows, 170 free
parameters) it prints:

* one value and gradient of the log density, in microseconds, under three evaluators of the
  same PyMC model: the package's JAX translation (in a compiled loop on one device, then one
  loop on each of two devices at once, as two chains run), PyTensor's C backend (what PyMC's
  default NUTS calls) and its Numba backend (the graph nutpie compiles; nutpie calls it from
  Rust, here it is called through PyTensor's function); and the kernels XLA runs for the
  JAX one, by kind;
* one default fit (``FitConfig()``'s sampler, ESS target and chains, warm compilation cache
  after a first run of this script): its seconds in model building, compilation, warm-up
  and sampling, the integration steps per chain of each phase, and the seconds spent inside
  the compiled transitions alone (``RunResult.transition_seconds``);
* with ``--pymc-seconds`` (PyMC's default NUTS on the same model, from
  ``benchmarks/fit_reference.py``), the seconds an 8x speed-up would allow the whole fit,
  beside the transitions' own.

It asserts nothing: the figures are for docs/speed.md and the issue's closing note.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LOOP = 4000  # gradients per timed JAX loop
CALLS = 2000  # calls per timed PyTensor function


def reference_model() -> Any:
    from bayesscale.data.observations import load_observations, prepare
    from bayesscale.data.spec import load_spec
    from bayesscale.law.model import build_law_model

    spec = load_spec()
    table = load_observations(ROOT / "data" / "reference" / "observations.csv", spec)
    return build_law_model(prepare(table, spec))


def jax_gradient(model: Any) -> tuple[dict[str, float], dict[str, int]]:
    """Microseconds per value and gradient of the package's JAX log density, in a compiled
    ``fori_loop``: one loop on one device, then one loop on each of two devices at once; and
    the kernels XLA runs a call (:func:`entry_kernels`)."""
    import jax

    from bayesscale.sampling.logdensity import LogDensity

    density = LogDensity.from_model(model)
    value_and_grad = jax.value_and_grad(density.logp)

    def loop(x: Any) -> Any:
        def body(_: Any, carry: Any) -> Any:
            z, total = carry
            value, grad = value_and_grad(z)
            return z + 1e-12 * grad, total + value  # each gradient depends on the last

        return jax.lax.fori_loop(0, LOOP, body, (x, 0.0))[1]

    x0 = np.asarray(density.x0)
    one = jax.jit(loop)
    two = jax.pmap(loop)
    pair = np.stack([x0, x0])
    program = jax.jit(value_and_grad).lower(x0).compile().as_text() or ""
    out: dict[str, float] = {}
    one(x0).block_until_ready()
    two(pair).block_until_ready()
    for name, f, arg in (("jax_one_core_us", one, x0), ("jax_two_cores_us", two, pair)):
        best = np.inf
        for _ in range(3):
            tic = time.perf_counter()
            f(arg).block_until_ready()
            best = min(best, (time.perf_counter() - tic) / LOOP * 1e6)
        out[name] = best
    return out, entry_kernels(program)


# instructions of an optimised HLO entry computation that launch no kernel of their own
NOT_KERNELS = ("parameter", "constant", "tuple", "get-tuple-element", "bitcast")


def entry_kernels(program: str) -> dict[str, int]:
    r"""The kernels XLA runs per call of an optimised HLO module's entry computation, by kind
    (``fusion``, ``copy``, ``scatter``, ...): every entry instruction that is not a
    parameter, constant, tuple or bitcast.

    >>> entry_kernels("ENTRY %m {\n  %p = f64[3] parameter(0)\n  ROOT %f = f64[3] fusion(%p)\n}")
    {'fusion': 1}
    """
    start = program.find("ENTRY")
    if start < 0:
        return {}
    counts: dict[str, int] = {}
    for line in program[start:].splitlines()[1:]:
        if line.startswith("}"):
            break
        match = re.search(r"= \S+ ([a-z][a-z0-9-]*)\(", line)
        if match and match.group(1) not in NOT_KERNELS:
            counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return counts


def pytensor_gradient(model: Any, mode: str) -> float:
    """Microseconds per call of PyMC's compiled value-and-gradient function in ``mode``,
    called through PyTensor's ``Function`` (a few microseconds of Python a call)."""
    from bayesscale.sampling.logdensity import flat_point

    function = model.logp_dlogp_function(ravel_inputs=True, mode=mode)
    function.set_extra_values({})
    x0, _ = flat_point(model)  # the value variables raveled in model.value_vars order
    compiled = function._pytensor_function
    compiled.trust_input = True
    compiled(x0)
    best = np.inf
    for _ in range(3):
        tic = time.perf_counter()
        for _ in range(CALLS):
            compiled(x0)
        best = min(best, (time.perf_counter() - tic) / CALLS * 1e6)
    return best


def default_fit(seed: int) -> dict[str, float]:
    """One run of the default sampler on the reference model, timed by phase."""
    from bayesscale.law.inference import log_density_terms
    from bayesscale.sampling.config import FitConfig
    from bayesscale.sampling.engine import CompiledSampler, RunSettings
    from bayesscale.sampling.logdensity import LogDensity

    config = FitConfig(seed=seed, progress=False)
    tic = time.perf_counter()
    model = reference_model()
    density = LogDensity.from_model(model, per_draw=log_density_terms(model))
    built = time.perf_counter() - tic
    result = CompiledSampler.from_config(density, config).run(RunSettings.from_config(config))
    wall = time.perf_counter() - tic
    sampling_steps = float(result.stats["n_steps"].sum(axis=1).mean())
    steps = result.warmup_steps + sampling_steps
    return {
        "chains": config.chains,
        "draws": int(result.stats["n_steps"].shape[1]),
        "wall_s": wall,
        "model_and_functions_s": built,
        "compile_s": result.compile_seconds,
        "warmup_s": result.warmup_seconds,
        "sampling_s": result.sampling_seconds,
        "transitions_s": result.transition_seconds,
        "warmup_steps": result.warmup_steps,
        "sampling_steps": sampling_steps,
        "us_per_step": result.transition_seconds / max(steps, 1.0) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--pymc-seconds", type=float, default=None)
    parser.add_argument("--skip-pytensor", action="store_true", help="JAX and the fit only")
    args = parser.parse_args()

    from bayesscale.sampling import configure

    configure(2)
    model = reference_model()
    print("one value and gradient of the reference law's log density (best of 3 loops):")
    grads, kernels = jax_gradient(model)
    print(f"  JAX (the package's), one core:            {grads['jax_one_core_us']:7.1f} us")
    print(f"  JAX, both cores at once, per loop:        {grads['jax_two_cores_us']:7.1f} us")
    detail = ", ".join(f"{n} {kind}" for kind, n in sorted(kernels.items(), key=lambda kv: -kv[1]))
    print(f"  XLA kernels a call:                       {sum(kernels.values()):7d} ({detail})")
    if not args.skip_pytensor:
        c_backend = pytensor_gradient(model, "FAST_RUN")
        print(f"  PyTensor C backend (PyMC's default):      {c_backend:7.1f} us")
        numba_backend = pytensor_gradient(model, "NUMBA")
        print(f"  PyTensor Numba backend (nutpie's graph):  {numba_backend:7.1f} us")

    fit = default_fit(args.seed)
    print(
        f"\none default fit, seed {args.seed}, {fit['chains']:.0f} chains x {fit['draws']} draws:"
    )
    print(f"  wall (model, functions, sampler, checks): {fit['wall_s']:7.2f} s")
    print(f"  model and its JAX functions:              {fit['model_and_functions_s']:7.2f} s")
    print(f"  compilation (trace, lower, load/compile): {fit['compile_s']:7.2f} s")
    print(f"  warm-up:                                  {fit['warmup_s']:7.2f} s")
    print(f"  sampling, convergence checks included:    {fit['sampling_s']:7.2f} s")
    print(f"  inside the compiled transitions:          {fit['transitions_s']:7.2f} s")
    print(
        f"  integration steps per chain:              {fit['warmup_steps']:7.0f} warm-up + "
        f"{fit['sampling_steps']:.0f} sampling (mean of the chains), "
        f"{fit['us_per_step']:.1f} us a step (the chains wait for each other at every chunk)"
    )
    if args.pymc_seconds:
        allowed = args.pymc_seconds / 8
        print(
            f"\n8x PyMC's {args.pymc_seconds:.1f} s allows {allowed:.2f} s for the whole fit; "
            f"the transitions alone took {fit['transitions_s']:.2f} s "
            f"({fit['transitions_s'] / allowed:.2f}x of it)"
        )


if __name__ == "__main__":
    main()
