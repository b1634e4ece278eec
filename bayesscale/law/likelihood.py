"""Likelihoods of observed outcomes, declared in PyMC and evaluated fast in JAX.

**Success counts** of run ``i`` in cell ``g[i]`` (a cell is one distinct setting and set of
axis sizes: the seeds of one grid point share it) are beta-binomial around the law's
success probability ``p_g``:

.. math::

    k_i \\sim \\mathrm{BetaBinomial}(n_i, p_{g[i]} \\phi, q_{g[i]} \\phi), \\qquad q = 1 - p,

    \\log f(k_i) = \\log\\binom{n_i}{k_i} + \\ln\\Gamma(k_i + a_g) + \\ln\\Gamma(n_i - k_i + b_g)
        - \\ln\\Gamma(n_i + \\phi) - \\ln\\Gamma(a_g) - \\ln\\Gamma(b_g) + \\ln\\Gamma(\\phi)

with ``a = p phi`` and ``b = q phi``; ``phi`` is shared by the settings, or with
``[outcome] concentration_spread > 0`` each setting's own (then the cell's setting's, and
``ln Gamma(n_i + phi)`` is taken per row). Declared as a ``pm.CustomDist`` whose random draws are
PyMC's own ``BetaBinomial`` over rows, and whose log density is
:class:`GroupedBetaBinomialLogp`, an ``OpFromGraph`` of exactly the formula above in
standard PyTensor ops (what PyMC's and nutpie's samplers compile). Its JAX translation
evaluates the same formula with the terms that depend only on the cell (``a_g``, ``b_g``)
or only on the trials computed once per cell or per distinct trial count, log-gamma and
digamma as Stirling series after a shift of six (``|error| < 1e-9`` absolute, ``3e-12``
relative, against SciPy), and a hand-written gradient: about 3x cheaper than PyMC's
``BetaBinomial`` per row on the reference data. A test holds the two translations equal.

**Collapsed runs** (``[outcome] seed_noise = "contaminated"``): RL runs now and then fail to
learn at all while their siblings take off. With probability ``epsilon`` a run's count is
uniform on ``0..n_i`` (a beta-binomial with ``a = b = 1``: no information about the cell),
otherwise beta-binomial as above:

.. math::

    f_c(k_i) = (1 - \\epsilon) f(k_i) + \\frac{\\epsilon}{n_i + 1}, \\qquad
    \\epsilon \\sim \\mathrm{Beta}(1, 19)

(a priori 5% of runs, 90% below 11%). One such run then costs the law ``log(epsilon / (n +
1))`` instead of the beta-binomial's far tail, so it no longer drags the cell's mean or
widens the seed spread of every cell. Whether it is needed: compare the two fits' LOO
(``bayesscale compare``) and their held-out checks.

**A continuous loss** is Student-t on the log scale, ``log y_i ~ StudentT(nu, log L_i,
sigma)``, as Epoch's Chinchilla replication used a Huber loss on log loss.

Example
-------
>>> import numpy as np
>>> op = GroupedBetaBinomialLogp(trials=np.array([10, 10]), cell_index=np.array([0, 0]), n_cells=1)
>>> f = op(np.array([3, 4]), np.array([0.3]), np.array([0.7]), np.array(20.0)).eval()
>>> from scipy.stats import betabinom
>>> bool(np.allclose(f, betabinom.logpmf([3, 4], 10, 6.0, 14.0)))
True
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.compile.builders import OpFromGraph
from pytensor.link.jax.dispatch import jax_funcify
from scipy import special

from bayesscale import names
from bayesscale.data.spec import BETA_BINOMIAL, CONTAMINATED, LogNormalPrior

CONTAMINATION_PRIOR = (1.0, 19.0)  # epsilon ~ Beta(1, 19): mean 5%, 90% below 11%
STIRLING_SHIFT = 6  # lgamma(x) = lgamma(x + 6) - log(x (x+1) ... (x+5)); Stirling at x + 6
_HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))


class GroupedBetaBinomialLogp(OpFromGraph):
    """Per-row beta-binomial log pmf of counts ``k`` given per-cell ``p``, ``q`` and a
    concentration ``phi``, shared or (``per_cell_phi``) per cell; rows belong to cells by
    ``cell_index``, ``trials`` per row.

    Inputs ``(k, p, q, phi)``: ``k`` (rows,), ``p`` and ``q`` (cells,), ``phi`` () or
    (cells,). Output: (rows,). The trials and the cell of each row are part of the op (data,
    not inputs).
    """

    def __init__(
        self,
        trials: np.ndarray,
        cell_index: np.ndarray,
        n_cells: int,
        per_cell_phi: bool = False,
    ) -> None:
        self.trials = np.asarray(trials, dtype=np.int64)
        self.cell_index = np.asarray(cell_index, dtype=np.int64)
        self.n_cells = int(n_cells)
        self.per_cell_phi = bool(per_cell_phi)
        if self.trials.shape != self.cell_index.shape or self.trials.ndim != 1:
            raise ValueError("trials and cell_index must be 1-d arrays of the same length")
        if self.cell_index.size and not (
            0 <= self.cell_index.min() <= self.cell_index.max() < n_cells
        ):
            raise ValueError(f"cell_index must lie in [0, {n_cells})")
        k = pt.vector("k", dtype="int64", shape=(self.trials.size,))
        p = pt.vector("p", shape=(self.n_cells,))
        q = pt.vector("q", shape=(self.n_cells,))
        phi = pt.vector("phi", shape=(self.n_cells,)) if self.per_cell_phi else pt.scalar("phi")
        n = pt.as_tensor(self.trials)
        idx = pt.as_tensor(self.cell_index)
        a, b = p * phi, q * phi
        per_row = (
            pt.gammaln(n + 1)
            - pt.gammaln(k + 1)
            - pt.gammaln(n - k + 1)
            + pt.gammaln(k + a[idx])
            + pt.gammaln(n - k + b[idx])
            - pt.gammaln(n + (phi[idx] if self.per_cell_phi else phi))
        )
        per_cell = pt.gammaln(a) + pt.gammaln(b) - pt.gammaln(phi)
        super().__init__([k, p, q, phi], [per_row - per_cell[idx]], inline=False)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and self.n_cells == other.n_cells
            and self.per_cell_phi == other.per_cell_phi
            and np.array_equal(self.trials, other.trials)
            and np.array_equal(self.cell_index, other.cell_index)
        )

    def __hash__(self) -> int:
        return hash(
            (
                type(self),
                self.n_cells,
                self.per_cell_phi,
                self.trials.tobytes(),
                self.cell_index.tobytes(),
            )
        )


def stirling_lgamma(x: Any) -> Any:
    """``ln Gamma(x)`` for ``x > 0`` in JAX: Stirling's series at ``x + 6``, shifted back."""
    import jax.numpy as jnp

    y = x + STIRLING_SHIFT
    r = 1.0 / y
    r2 = r * r
    series = r * (1 / 12 + r2 * (-1 / 360 + r2 * (1 / 1260 + r2 * (-1 / 1680 + r2 / 1188))))
    product = x
    for i in range(1, STIRLING_SHIFT):
        product = product * (x + i)
    return (y - 0.5) * jnp.log(y) - y + _HALF_LOG_2PI + series - jnp.log(product)


def stirling_digamma(x: Any) -> Any:
    """``psi(x)`` for ``x > 0`` in JAX, the derivative of :func:`stirling_lgamma`."""
    import jax.numpy as jnp

    y = x + STIRLING_SHIFT
    r = 1.0 / y
    r2 = r * r
    psi = (
        jnp.log(y)
        - 0.5 * r
        - r2 * (1 / 12 + r2 * (-1 / 120 + r2 * (1 / 252 + r2 * (-1 / 240 + r2 / 132))))
    )
    # psi(x) = psi(x + 6) - sum_{i<6} 1 / (x + i) = psi(x + 6) - P'(x) / P(x), P = prod (x + i)
    value, slope = x, jnp.ones_like(x)
    for i in range(1, STIRLING_SHIFT):
        slope = slope * (x + i) + value
        value = value * (x + i)
    return psi - slope / value


@jax_funcify.register(GroupedBetaBinomialLogp)
def _grouped_beta_binomial_jax(op: GroupedBetaBinomialLogp, **kwargs: Any) -> Any:
    import jax
    import jax.numpy as jnp

    trials = op.trials.astype(float)
    idx = op.cell_index
    n_cells = op.n_cells
    levels, level_of_row = np.unique(trials, return_inverse=True)
    lg, dg = stirling_lgamma, stirling_digamma

    def segment(values: Any) -> Any:
        return jax.ops.segment_sum(values, idx, num_segments=n_cells)

    def per_level(values: Any) -> Any:
        if levels.size == 1:
            return jnp.sum(values)[None]
        return jax.ops.segment_sum(values, level_of_row, num_segments=levels.size)

    def binomial_coefficient(k: Any) -> Any:
        """``log C(n, k)``: data only, so computed once in NumPy for observed counts."""
        if isinstance(k, np.ndarray):
            counts = k.astype(float)
            return (
                special.gammaln(trials + 1)
                - special.gammaln(counts + 1)
                - special.gammaln(trials - counts + 1)
            )
        kf = jnp.asarray(k, dtype=float)
        gammaln = jax.scipy.special.gammaln
        return gammaln(trials + 1) - gammaln(kf + 1) - gammaln(trials - kf + 1)

    def normaliser(phi: Any) -> Any:  # ln Gamma(n_i + phi) per row
        if op.per_cell_phi:
            return lg(trials + phi[idx])
        return lg(levels + phi)[level_of_row]

    def forward(k: Any, p: Any, q: Any, phi: Any) -> tuple[Any, Any]:
        a, b = p * phi, q * phi
        x1, x2 = k + a[idx], trials - k + b[idx]
        per_cell = lg(a) + lg(b) - lg(phi)
        out = lg(x1) + lg(x2) - normaliser(phi) - per_cell[idx]
        return out, (p, q, phi, a, b, x1, x2)

    @jax.custom_vjp
    def core(k: Any, p: Any, q: Any, phi: Any) -> Any:
        return forward(k, p, q, phi)[0]

    def core_fwd(k: Any, p: Any, q: Any, phi: Any) -> tuple[Any, Any]:
        out, saved = forward(k, p, q, phi)
        return out, (jnp.zeros_like(k), saved)

    def core_bwd(residual: Any, ct: Any) -> tuple[Any, Any, Any, Any]:
        zero_k, (p, q, phi, a, b, x1, x2) = residual
        ct_cell = segment(ct)
        d_a = segment(ct * dg(x1)) - ct_cell * dg(a)
        d_b = segment(ct * dg(x2)) - ct_cell * dg(b)
        if op.per_cell_phi:  # each cell's own: d/dphi_g of its rows
            d_phi = ct_cell * dg(phi) - segment(ct * dg(trials + phi[idx])) + d_a * p + d_b * q
        else:
            d_phi = (
                jnp.sum(ct) * dg(phi)
                - jnp.sum(per_level(ct) * dg(levels + phi))
                + jnp.sum(d_a * p + d_b * q)
            )
        return zero_k, d_a * phi, d_b * phi, d_phi

    core.defvjp(core_fwd, core_bwd)

    def grouped(k: Any, p: Any, q: Any, phi: Any) -> Any:
        return binomial_coefficient(k) + core(jnp.asarray(k, dtype=float), p, q, phi)

    return grouped


# --- declarations inside a model ----------------------------------------------------------


def _beta_binomial_rows(p: Any, q: Any, phi: Any, cell: Any, trials: Any, size: Any) -> Any:
    return pm.BetaBinomial.dist(n=trials, alpha=(p * phi)[cell], beta=(q * phi)[cell])


def grouped_beta_binomial(
    name: str,
    p: Any,
    q: Any,
    phi: Any,
    cell_index: np.ndarray,
    trials: np.ndarray,
    observed: Any,
    dims: str | tuple[str, ...] | None = None,
    per_cell: bool = False,
) -> Any:
    """Observed counts, ``k_i ~ BetaBinomial(n_i, p[g_i] phi, q[g_i] phi)``, per row;
    ``phi`` shared, or with ``per_cell`` one per cell (a vector)."""
    cell_index = np.asarray(cell_index, dtype=np.int64)
    trials = np.asarray(trials, dtype=np.int64)
    n_cells = int(cell_index.max()) + 1 if cell_index.size else 0  # every cell has a row
    op = GroupedBetaBinomialLogp(trials, cell_index, n_cells, per_cell_phi=per_cell)

    def logp(value: Any, p_: Any, q_: Any, phi_: Any, cell_: Any, trials_: Any) -> Any:
        return op(pt.cast(value, "int64"), p_, q_, phi_)

    return pm.CustomDist(
        name,
        p,
        q,
        phi,
        cell_index,
        trials,
        dist=_beta_binomial_rows,
        logp=logp,
        signature="(c),(c),(c),(n),(n)->(n)" if per_cell else "(c),(c),(),(n),(n)->(n)",
        observed=observed,
        dims=dims,
        dtype="int64",
    )


def _contaminated_rows(
    p: Any, q: Any, phi: Any, eps: Any, cell: Any, trials: Any, size: Any
) -> Any:
    """Random rows of the contaminated beta-binomial: per row, with probability ``eps`` a
    uniform count on ``0..n`` (beta-binomial ``(1, 1)``), else the cell's beta-binomial."""
    return pm.Mixture.dist(
        w=pt.stack([1.0 - eps, eps]),
        comp_dists=[
            pm.BetaBinomial.dist(n=trials, alpha=(p * phi)[cell], beta=(q * phi)[cell]),
            pm.BetaBinomial.dist(n=trials, alpha=1.0, beta=1.0),
        ],
    )


def contaminated_beta_binomial(
    name: str,
    p: Any,
    q: Any,
    phi: Any,
    eps: Any,
    cell_index: np.ndarray,
    trials: np.ndarray,
    observed: Any,
    dims: str | tuple[str, ...] | None = None,
    per_cell: bool = False,
) -> Any:
    """Observed counts, ``k_i ~ (1 - eps) BetaBinomial(n_i, p[g_i] phi, q[g_i] phi) + eps
    Uniform{0..n_i}``, per row (the beta-binomial part is :class:`GroupedBetaBinomialLogp`,
    so the JAX log density keeps its per-cell terms and hand-written gradient); ``phi``
    shared, or with ``per_cell`` one per cell."""
    cell_index = np.asarray(cell_index, dtype=np.int64)
    trials = np.asarray(trials, dtype=np.int64)
    n_cells = int(cell_index.max()) + 1 if cell_index.size else 0
    op = GroupedBetaBinomialLogp(trials, cell_index, n_cells, per_cell_phi=per_cell)
    log_uniform = -np.log1p(trials.astype(float))

    def logp(value: Any, p_: Any, q_: Any, phi_: Any, eps_: Any, cell_: Any, trials_: Any) -> Any:
        bb = op(pt.cast(value, "int64"), p_, q_, phi_)
        return pt.logaddexp(pt.log1p(-eps_) + bb, pt.log(eps_) + log_uniform)

    return pm.CustomDist(
        name,
        p,
        q,
        phi,
        eps,
        cell_index,
        trials,
        dist=_contaminated_rows,
        logp=logp,
        signature="(c),(c),(c),(),(n),(n)->(n)" if per_cell else "(c),(c),(),(),(n),(n)->(n)",
        observed=observed,
        dims=dims,
        dtype="int64",
    )


def _lognormal_location(prior: LogNormalPrior) -> tuple[float, float]:
    return float(np.log(prior.median)), prior.log_sd


def success_likelihood(
    loss: Any,
    cell_index: np.ndarray,
    trials: np.ndarray | None,
    successes: Any,
    concentration: LogNormalPrior,
    seed_noise: str = BETA_BINOMIAL,
    per_setting: tuple[np.ndarray, float] | None = None,
) -> None:
    """Beta-binomial held-out successes around ``p = exp(-L)`` per cell, in logits form
    (``logit p = -L - log(-expm1(-L))``; ``p = exp(-L)`` directly gave NaN gradients at the
    start in JAX), inside a model context; with ``seed_noise = "contaminated"`` a share
    ``epsilon`` of runs uniform instead. ``loss`` is per cell.

    One concentration ``phi ~ LogNormal`` (the spec's prior), or with ``per_setting`` (each
    cell's setting index, and the spread's scale ``s``) one per setting, non-centred:
    ``log phi_s = log phi_pop + sigma z_s``, ``log phi_pop`` the spec's prior, ``sigma ~
    HalfNormal(s)``, ``z_s ~ Normal(0, 1)``."""
    if trials is None:
        raise ValueError("a success-count likelihood needs the trials column (prepare() fills it)")
    c_mu, c_sd = _lognormal_location(concentration)
    if per_setting is None:
        phi = pm.LogNormal(names.CONCENTRATION, c_mu, c_sd)
    else:
        cell_setting, scale = per_setting
        log_pop = pm.Normal(names.LOG_CONCENTRATION_POP, c_mu, c_sd)
        pm.Deterministic(names.CONCENTRATION_POP, pt.exp(log_pop))
        spread = pm.HalfNormal(names.CONCENTRATION_SPREAD, sigma=scale)
        z = pm.Normal(names.CONCENTRATION_Z, 0.0, 1.0, dims=names.SETTING_DIM)
        by_setting = pm.Deterministic(
            names.CONCENTRATION, pt.exp(log_pop + spread * z), dims=names.SETTING_DIM
        )
        phi = by_setting[np.asarray(cell_setting, dtype=np.int64)]
    logit_p = -loss - pt.log(-pt.expm1(-loss))
    p, q = pm.math.sigmoid(logit_p), pm.math.sigmoid(-logit_p)
    if seed_noise == CONTAMINATED:
        eps = pm.Beta(names.CONTAMINATION, *CONTAMINATION_PRIOR)
        contaminated_beta_binomial(
            names.OUTCOME, p, q, phi, eps, cell_index, trials, observed=successes,
            dims=names.OBS_DIM, per_cell=per_setting is not None,
        )  # fmt: skip
        return
    if seed_noise != BETA_BINOMIAL:
        raise ValueError(f"unknown seed_noise {seed_noise!r}")
    grouped_beta_binomial(
        names.OUTCOME, p, q, phi, cell_index, trials, observed=successes, dims=names.OBS_DIM,
        per_cell=per_setting is not None,
    )  # fmt: skip


def log_loss_likelihood(loss: Any, observed: np.ndarray, sigma_scale: float, nu: float) -> None:
    """Robust likelihood of a continuous loss: ``log y ~ StudentT(nu, log L, sigma)``;
    ``loss`` per row."""
    sigma = pm.HalfNormal(names.LOG_LOSS_SIGMA, sigma=sigma_scale)
    pm.StudentT(
        names.OUTCOME,
        nu=nu,
        mu=pt.log(loss),
        sigma=sigma,
        observed=np.log(observed),
        dims=names.OBS_DIM,
    )


class Outcomes(Protocol):
    """What a design holds of the observed outcome (law and pricing designs alike)."""

    @property
    def trials(self) -> np.ndarray | None: ...
    @property
    def successes(self) -> np.ndarray | None: ...
    @property
    def loss(self) -> np.ndarray | None: ...


class OutcomeModel(Protocol):
    """What a spec says of the outcome's likelihood (law and pricing specs alike)."""

    @property
    def outcome(self) -> str: ...
    @property
    def concentration(self) -> LogNormalPrior: ...
    @property
    def log_loss_sigma(self) -> float: ...
    @property
    def student_nu(self) -> float: ...
    @property
    def seed_noise(self) -> str: ...


def observe(
    loss: Any,
    index: np.ndarray,
    design: Outcomes,
    spec: OutcomeModel,
    per_setting: tuple[np.ndarray, float] | None = None,
) -> None:
    """The likelihood of the observed outcome around the law's ``loss`` per cell (``index``:
    each row's cell): beta-binomial successes (:func:`success_likelihood`, with a
    concentration per setting where ``per_setting`` gives each cell's setting and the
    spread's scale) or Student-t log loss (:func:`log_loss_likelihood`), as ``spec.outcome``
    says. The one switch both models share."""
    if spec.outcome == "success":
        success_likelihood(
            loss,
            index,
            design.trials,
            design.successes,
            spec.concentration,
            spec.seed_noise,
            per_setting,
        )
        return
    if design.loss is None:
        raise ValueError("a loss outcome needs the table's loss column")
    log_loss_likelihood(loss[index], design.loss, spec.log_loss_sigma, spec.student_nu)
