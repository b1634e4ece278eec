"""The Laplace approximation: a Gaussian at the posterior mode, for ``--preview`` fits.

In the unconstrained space ``x`` the sampler uses (log spreads, log levels, ...):

.. math::

    \\hat x = \\arg\\max_x \\log p(x \\mid y), \\qquad
    H = -\\nabla^2 \\log p(\\hat x \\mid y), \\qquad x^{(s)} \\sim \\mathcal{N}(\\hat x, H^{-1})

The mode comes from L-BFGS on the model's JAX log density and gradient; ``H`` from central
differences of the gradient (no second compilation), symmetrised and, where it is not
positive definite (a mode not reached), its eigenvalues taken in absolute value and floored. Draws are mapped to
every stored quantity as NUTS draws are. This is a *preview*: quick enough to iterate on a
spec (under 5 s on the reference data), and wrong where the posterior is not Gaussian in
``x`` — hierarchical spreads with mass near zero above all. ``docs/speed.md`` gives its
measured agreement with the full fit. Fits made this way are marked as previews.

Example
-------
>>> result = laplace(LogDensity.from_model(model), draws=1000, seed=1)  # doctest: +SKIP
>>> result.posterior["alpha_pop"].shape  # doctest: +SKIP
(1, 1000, 3)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize

from bayesscale.sampling.logdensity import LogDensity, evaluate_over_draws

FD_STEP = 1e-4  # central-difference step for the Hessian, in unconstrained units
MAX_ITERATIONS = 2000
EIGEN_FLOOR = 1e-8  # relative to the largest eigenvalue of H


@dataclass
class LaplaceResult:
    """Draws ``(1, draws, ...)`` of every stored quantity, the mode, whether L-BFGS
    converged, and seconds spent compiling and in total."""

    posterior: dict[str, np.ndarray]
    mode: np.ndarray
    converged: bool
    message: str
    iterations: int
    compile_seconds: float
    seconds: float


def laplace(density: LogDensity, draws: int = 1000, seed: int = 0) -> LaplaceResult:
    """Fit the Laplace approximation of ``density`` and draw from it."""
    import jax

    start = time.perf_counter()

    def negative(x: Any) -> Any:
        return -density.logp(x, *density.data_values)

    value_and_grad = jax.jit(jax.value_and_grad(negative))
    x0 = np.asarray(density.x0, dtype=float)
    tic = time.perf_counter()
    value_and_grad(x0)[0].block_until_ready()
    compile_seconds = time.perf_counter() - tic

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = value_and_grad(x)
        value, grad = float(value), np.asarray(grad, dtype=float)
        if not np.isfinite(value) or not np.all(np.isfinite(grad)):
            return np.inf, np.zeros_like(x)
        return value, grad

    found = optimize.minimize(
        fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": MAX_ITERATIONS}
    )
    mode = np.asarray(found.x, dtype=float)
    hessian = _hessian(lambda x: fun(x)[1], mode)
    cov_factor = _covariance_factor(hessian)
    rng = np.random.default_rng(seed)
    z = mode + rng.standard_normal((draws, mode.size)) @ cov_factor.T
    tic = time.perf_counter()
    derived = jax.jit(jax.vmap(density.derived))
    posterior = evaluate_over_draws(derived, density.var_names, z[None])  # one "chain"
    compile_seconds += time.perf_counter() - tic  # derived is compiled at first call
    return LaplaceResult(
        posterior=posterior,
        mode=mode,
        converged=bool(found.success),
        message=str(found.message),
        iterations=int(found.nit),
        compile_seconds=compile_seconds,
        seconds=time.perf_counter() - start,
    )


def _hessian(grad: Any, x: np.ndarray) -> np.ndarray:
    """Central differences of ``grad`` at ``x``, symmetrised."""
    n = x.size
    h = np.empty((n, n))
    for j in range(n):
        step = np.zeros(n)
        step[j] = FD_STEP
        h[:, j] = (grad(x + step) - grad(x - step)) / (2 * FD_STEP)
    return 0.5 * (h + h.T)


def _covariance_factor(hessian: np.ndarray) -> np.ndarray:
    """``L`` with ``L L^T = H^-1``; eigenvalues of ``H`` in absolute value, floored."""
    eigenvalues, vectors = np.linalg.eigh(hessian)
    floor = max(float(np.max(np.abs(eigenvalues))), 1.0) * EIGEN_FLOOR
    eigenvalues = np.maximum(np.abs(eigenvalues), floor)
    return vectors / np.sqrt(eigenvalues)
