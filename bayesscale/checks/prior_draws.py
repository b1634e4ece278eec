"""Exact draws from a law model's prior, and data simulated from its own likelihood.

The law model's prior is not only its random variables: the soft wall
``pm.Potential("floor_positive", sum_s log sigmoid(L_inf,s / eps))`` multiplies it, and
parameters that put ``L <= 0`` at a design row (success above 1) have no likelihood at all,
so a sampler never visits them. The prior simulation-based calibration must draw from is
therefore

.. math::

    \\pi(\\theta) \\propto \\pi_0(\\theta)\\, e^{\\Phi(\\theta)}\\, 1[\\theta \\text{ valid}],
    \\qquad \\Phi = \\sum \\text{potentials} \\le 0,

which :func:`prior_datasets` draws exactly by rejection: a draw of the random variables
(``pm.sample_prior_predictive``, which ignores potentials) is kept with probability
``exp(Phi(theta))`` and only if every likelihood parameter is finite and positive.
Rejecting only draws with a negative floor would match the wall only approximately
(the wall also thins draws just above zero and keeps some just below it).
:func:`scale_variable` makes a deliberately broken simulator for negative controls.

Example
-------
>>> import numpy as np
>>> scale_exponents(2.0)({"log_alpha_pop": np.array([0.0])})["log_alpha_pop"].round(4)
array([0.6931])
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from bayesscale import names
from bayesscale.checks.calibration_io import DATASET
from bayesscale.sampling.jaxconfig import configure

if TYPE_CHECKING:
    import pymc as pm

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

POTENTIAL_WARNING: Final = "The effect of Potentials on other parameters is ignored"
# PyTensor's Numba backend draws the beta-binomial in object mode (NumPy's generator) and
# says so with a UserWarning; that is only slower, so the message is silenced where we sample.
OBJECT_MODE_WARNING: Final = "Numba will use object mode"


MAX_PRIOR_ROUNDS = 100


@dataclass
class PriorDatasets:
    """Parameters drawn from the model's prior (potentials and validity included) and one
    simulated outcome vector per draw. ``truth`` has dim ``dataset`` first; ``outcomes`` is
    ``(dataset, obs)``; ``proposed`` counts prior draws before rejection."""

    truth: xr.Dataset
    outcomes: np.ndarray
    proposed: int
    invalid: int

    @property
    def acceptance(self) -> float:
        return self.truth.sizes[DATASET] / self.proposed


Perturbation = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


def scale_variable(variable: str, factor: float) -> Perturbation:
    """A deliberately broken simulator for SBC negative controls: the free random variable
    ``variable`` multiplied by ``factor`` in the data, the truth left as drawn (for a
    ``log_*`` variable, pass the factor of the variable itself: ``log factor`` is added).

    >>> scale_variable("concentration", 4.0)({"concentration": np.array([100.0])})
    {'concentration': array([400.])}
    """
    if factor <= 0:
        raise ValueError(f"factor must be > 0, got {factor}")

    def perturb(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if variable not in values:
            raise KeyError(f"{variable!r} is not a free random variable of the model")
        out = dict(values)
        if variable.startswith("log_"):
            out[variable] = np.asarray(values[variable]) + math.log(factor)
        else:
            out[variable] = np.asarray(values[variable]) * factor
        return out

    return perturb


def scale_exponents(factor: float) -> Perturbation:
    """Every exponent multiplied by ``factor`` in the simulated data (``log_alpha_pop``)."""
    return scale_variable(names.LOG_ALPHA_POP, factor)


def _prior_checks(model: pm.Model) -> Callable[[list[np.ndarray]], tuple[Array, BoolArray]]:
    """Compile ``free RV values (batched) -> (sum of potentials, likelihood valid)`` in JAX.

    Valid: every parameter of the likelihood finite and, for counts (the beta-binomial),
    positive.
    """
    configure()
    import jax
    import jax.numpy as jnp
    import pytensor.tensor as pt
    from pymc.sampling.jax import get_jaxified_graph
    from pytensor.graph.replace import clone_replace

    observed_rv = model[names.OUTCOME]
    params = [
        i
        for i in observed_rv.owner.inputs
        if isinstance(i.type, pt.TensorType) and i.type.dtype.startswith("float")
    ]
    positive = observed_rv.type.dtype.startswith("int")  # counts: beta-binomial parameters
    total = pt.as_tensor(0.0)
    for potential in model.potentials:
        total = total + pt.sum(potential)
    inputs = [rv.type() for rv in model.free_RVs]
    outputs = clone_replace(
        [total, *params], replace=dict(zip(model.free_RVs, inputs, strict=True))
    )
    graph = get_jaxified_graph(inputs=inputs, outputs=outputs)

    def one(*values: Any) -> tuple[Any, Any]:
        phi, *pars = graph(*values)
        ok = jnp.all(jnp.asarray([jnp.all(jnp.isfinite(p)) for p in pars]))
        if positive:
            ok = ok & jnp.all(jnp.asarray([jnp.all(p > 0) for p in pars]))
        return phi, ok

    batched = jax.jit(jax.vmap(one))

    def check(values: list[np.ndarray]) -> tuple[Array, BoolArray]:
        phi, ok = batched(*[jnp.asarray(v) for v in values])
        return np.array(phi, dtype=float), np.array(ok, dtype=bool)

    return check


def prior_datasets(
    model: pm.Model,
    n: int,
    seed: int,
    variables: Sequence[str] = (),
    perturb: Perturbation | None = None,
    batch: int | None = None,
) -> PriorDatasets:
    """``n`` exact draws from the model's prior and data simulated from its likelihood.

    Draws of the random variables come from ``pm.sample_prior_predictive`` (which ignores
    potentials); each is kept with probability ``exp(sum of potentials)`` (all potentials must
    be <= 0) and only if every likelihood parameter is finite (and, for the beta-binomial,
    positive): the prior the fitted model actually has. Outcomes come from
    ``pm.sample_posterior_predictive`` on the kept draws: the model's own likelihood.
    ``perturb`` changes the free random variables *before simulating only* (a broken
    simulator for negative controls); ``truth`` keeps the drawn values.
    """
    import pymc as pm

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    free = [rv.name for rv in model.free_RVs]
    keep_vars = sorted(set(free) | set(variables))
    check = _prior_checks(model)
    seeds = np.random.SeedSequence(seed).spawn(3)
    accept_rng = np.random.default_rng(seeds[1])
    batch = batch or max(2 * n, 50)
    kept: list[xr.Dataset] = []
    simulated: list[dict[str, np.ndarray]] = []
    proposed = invalid = 0
    for round_seed in seeds[0].spawn(MAX_PRIOR_ROUNDS):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=POTENTIAL_WARNING, category=UserWarning)
            prior = pm.sample_prior_predictive(
                draws=batch,
                model=model,
                var_names=keep_vars,
                random_seed=np.random.default_rng(round_seed),
            )["prior"].to_dataset()
        prior = prior.isel({names.CHAIN_DIM: 0}, drop=True)
        values = {v: prior[v].values for v in free}
        sim = perturb(values) if perturb is not None else values
        potential, valid = check([values[v] for v in free])
        if np.any(potential > 1e-9):
            raise ValueError(
                f"a potential of the model is positive ({potential.max():.3g}); rejection "
                "sampling of its prior needs every potential <= 0"
            )
        if perturb is not None:
            valid &= check([sim[v] for v in free])[1]
        accept = valid & (accept_rng.uniform(size=batch) < np.exp(potential))
        need = n - len(kept)
        take = np.flatnonzero(accept)[:need]
        for d in take:
            kept.append(prior.isel({names.DRAW_DIM: int(d)}, drop=True))
            simulated.append({v: sim[v][d] for v in free})
        # proposals consumed: up to the last draw taken once enough are kept
        used = int(take[-1]) + 1 if len(take) == need else batch
        proposed += used
        invalid += int(np.sum(~valid[:used]))
        if len(kept) == n:
            break
    else:
        raise RuntimeError(
            f"only {len(kept)} of {n} prior draws accepted after {proposed} proposals"
        )
    truth = xr.concat(kept, dim=DATASET).assign_coords({DATASET: np.arange(n)})
    trace = xr.Dataset(
        {
            v: (
                (names.CHAIN_DIM, names.DRAW_DIM, *prior[v].dims[1:]),
                np.stack([s[v] for s in simulated])[None],
            )
            for v in free
        },
        coords={
            names.CHAIN_DIM: [0],
            names.DRAW_DIM: np.arange(n),
            **{d: prior.coords[d].values for v in free for d in prior[v].dims[1:]},
        },
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=POTENTIAL_WARNING, category=UserWarning)
        warnings.filterwarnings("ignore", message=OBJECT_MODE_WARNING, category=UserWarning)
        predictive = pm.sample_posterior_predictive(
            trace,
            model=model,
            var_names=[names.OUTCOME],
            random_seed=np.random.default_rng(seeds[2]),
            progressbar=False,
        )
    outcomes = predictive["posterior_predictive"][names.OUTCOME].values[0]
    return PriorDatasets(
        truth=truth, outcomes=np.asarray(outcomes), proposed=proposed, invalid=invalid
    )
