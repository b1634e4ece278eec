"""The fast JAX evaluation of the likelihood against its PyMC declaration and SciPy: the
grouped beta-binomial per row and its gradient, the Stirling log-gamma, and the whole law
model's log density as the sampler sees it against PyMC's own compiled log density."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytensor.tensor as pt
import pytest
from pymc.sampling.jax import get_jaxified_graph
from scipy import special, stats
from testdata import REFERENCE, assert_jax_density_is_pymcs

from bayesscale.data.observations import cells_of, load_observations, prepare
from bayesscale.data.spec import load_spec
from bayesscale.law.likelihood import GroupedBetaBinomialLogp, stirling_digamma, stirling_lgamma
from bayesscale.law.model import build_law_model
from bayesscale.sampling import configure


@pytest.fixture(scope="module", autouse=True)
def _jax() -> None:
    configure(2)


def _case(seed: int = 0):
    rng = np.random.default_rng(seed)
    cells, rows = 7, 40
    index = rng.integers(0, cells, rows)
    index[:cells] = np.arange(cells)  # every cell has a row
    trials = rng.choice([50, 2000], rows)
    k = np.floor(rng.uniform(0, 1, rows) * (trials + 1)).astype(np.int64)
    p = rng.uniform(0.02, 0.98, cells)
    return index, trials, k, p, 1 - p, 37.5


def _phi(per_cell: bool, phi: float, cells: int = 7) -> tuple[np.ndarray, pt.TensorVariable]:
    """The concentration as the op takes it: shared (a scalar), or per cell (a vector of
    different values, so a mixed-up cell would show)."""
    if per_cell:
        return phi * np.linspace(0.3, 3.0, cells), pt.vector("phi")
    return np.asarray(phi), pt.scalar("phi")


@pytest.mark.parametrize("per_cell", [False, True])
def test_grouped_beta_binomial_equals_scipy_in_both_translations(per_cell: bool) -> None:
    index, trials, k, p, q, phi = _case()
    phi_value, fv = _phi(per_cell, phi)
    op = GroupedBetaBinomialLogp(trials, index, 7, per_cell_phi=per_cell)
    cell_phi = np.broadcast_to(phi_value, (7,))[index]
    reference = stats.betabinom.logpmf(k, trials, p[index] * cell_phi, q[index] * cell_phi)
    kv, pv, qv = pt.lvector("k"), pt.vector("p"), pt.vector("q")
    out = op(kv, pv, qv, fv)
    np.testing.assert_allclose(
        out.eval({kv: k, pv: p, qv: q, fv: phi_value}), reference, atol=1e-10
    )
    (jax_fn,) = [get_jaxified_graph(inputs=[kv, pv, qv, fv], outputs=[out])]
    np.testing.assert_allclose(np.asarray(jax_fn(k, p, q, phi_value)[0]), reference, atol=1e-8)


@pytest.mark.parametrize("per_cell", [False, True])
def test_grouped_beta_binomial_gradient_equals_pytensor(per_cell: bool) -> None:
    index, trials, k, p, q, phi = _case(1)
    phi_value, fv = _phi(per_cell, phi)
    op = GroupedBetaBinomialLogp(trials, index, 7, per_cell_phi=per_cell)
    pv, qv = pt.vector("p"), pt.vector("q")
    weights = np.random.default_rng(2).normal(size=k.size)  # a cotangent that is not all ones
    total = pt.sum(op(pt.as_tensor(k), pv, qv, fv) * weights)
    theirs = [g.eval({pv: p, qv: q, fv: phi_value}) for g in pt.grad(total, [pv, qv, fv])]
    (fn,) = [get_jaxified_graph(inputs=[pv, qv, fv], outputs=[total])]
    ours = jax.grad(lambda a, b, c: fn(a, b, c)[0], argnums=(0, 1, 2))(
        jnp.asarray(p), jnp.asarray(q), jnp.asarray(phi_value)
    )
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-9, atol=1e-9)


def test_stirling_series_match_scipy() -> None:
    x = np.geomspace(1e-4, 1e7, 4000)
    np.testing.assert_allclose(
        np.asarray(stirling_lgamma(x)), special.gammaln(x), rtol=1e-12, atol=1e-8
    )
    np.testing.assert_allclose(
        np.asarray(stirling_digamma(x)), special.digamma(x), rtol=1e-11, atol=1e-10
    )


def test_model_log_density_in_jax_equals_pymc() -> None:
    """The sampler's log density (the fast JAX translation) equals PyMC's own compiled one
    (C backend, standard ops) at the initial point and random points around it."""
    spec = load_spec()
    model = build_law_model(prepare(load_observations(REFERENCE / "observations.csv", spec), spec))
    assert_jax_density_is_pymcs(model, points=5, atol=1e-8)


def test_cells_group_the_seeds_of_a_grid_point() -> None:
    spec = load_spec()
    design = prepare(load_observations(REFERENCE / "observations.csv", spec), spec)
    cells = design.cells()
    assert cells.n_cells * 3 == design.n_obs  # three seeds per grid point
    first = cells.first_row[cells.index]
    np.testing.assert_array_equal(design.sizes[first], design.sizes)
    np.testing.assert_array_equal(design.setting_index[first], design.setting_index)
    assert np.all(np.diff(cells.first_row) > 0)  # numbered by first appearance
    dense = cells_of(np.zeros(4, int), np.ones((4, 1)), np.array([False, True, False, True]))
    assert dense.index.tolist() == [0, 1, 0, 1]
