"""The value of a run or a batch by preposterior analysis on the fit's posterior draws
(:class:`ValueEngine`): simulated outcomes, their log-likelihood under every draw, the target's
reduction under the importance weights, and the batch value's Monte Carlo standard errors
(:func:`value_and_mcse`). The math on weights is :mod:`bayesscale.design.preposterior`.

>>> ll = np.zeros((4, 10))                    # outcomes that move no weight
>>> f = np.arange(20.0).reshape(10, 2)
>>> value_and_mcse(f, lambda x: x[..., 0], ll, blocks=5)
(0.0, 0.0, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bayesscale.core import laws
from bayesscale.design.defaults import TARGET_DECISION
from bayesscale.design.preposterior import (
    beta_binomial_logpmf,
    kish_ess,
    normalized_weights,
    simulate_beta_binomial,
    weighted_variance,
)
from bayesscale.design.results import Array, Candidate
from bayesscale.law.posterior import LawDraws
from bayesscale.law.predict import with_collapses

JACKKNIFE_BLOCKS = 20  # blocks of consecutive posterior draws in the batch value's jackknife


@dataclass
class ValueEngine:
    """The preposterior values of one target on the posterior draws ``draws`` (concentration
    ``phi``): ``trials`` trials per run, outcomes simulated from the ``outer`` draws with
    ``seed``; ``regret`` (decision target: per target setting, the (S, J) regret of every draw
    under each action) or ``exponents`` (exponents target: (S, n) draws of ``alpha_pop``)."""

    draws: LawDraws
    phi: Array  # (S,), or (S, G) where each setting has its own concentration
    trials: int
    outer: NDArray[np.int64]  # (M,) outer draw indices
    seed: int
    target: str
    regret: list[Array]  # decision: per target setting (S, J), see preposterior.regret
    exponents: Array | None  # exponents: (S, n)
    contamination: Array | None = None  # (S,): the share of collapsed runs, where modelled
    _stacked: NDArray[np.float32] | None = None
    _now: Array | None = None

    def p_at(self, cand: Candidate) -> Array:
        """(S,): every draw's success rate at the candidate's sizes."""
        law = self.draws.law(setting=self.draws.settings.index(cand.setting))
        loss = law.loss(np.asarray(cand.sizes, dtype=float)[None, :])
        return np.asarray(laws.success_from_loss(loss), dtype=float)

    def phi_at(self, cand: Candidate) -> Array:
        """(S,): every draw's concentration in the candidate's setting."""
        if self.phi.ndim == 1:
            return self.phi
        return self.phi[:, self.draws.settings.index(cand.setting)]

    def outcomes(self, index: int, repeat: int, p: Array, phi: Array) -> NDArray[np.int64]:
        """(M,): the outcome of this candidate's ``repeat``-th run (success rate ``p`` and
        concentration ``phi`` per draw) simulated from each outer draw (its own seeded stream,
        so every call gives the same outcomes)."""
        rng = np.random.default_rng([self.seed, 7, index, repeat])
        k = simulate_beta_binomial(rng, self.trials, p[self.outer], phi[self.outer])
        if self.contamination is None:
            return k
        collapsed = rng.uniform(size=k.shape) < self.contamination[self.outer]
        return np.where(collapsed, rng.integers(0, self.trials + 1, size=k.shape), k)

    def loglik(self, index: int, repeat: int, p: Array, phi: Array) -> Array:
        """(M, S): the log-likelihood under every draw of :meth:`outcomes`."""
        k = self.outcomes(index, repeat, p, phi)
        ll = beta_binomial_logpmf(k[:, None], self.trials, p[None, :], phi[None, :])
        if self.contamination is None:
            return ll
        return with_collapses(ll, self.trials, self.contamination[None, :])

    def score(self, ll: Array) -> tuple[Array, Array, Array]:
        """Per outer draw: the target's reduction so far (M,), per target part (M, T), and
        the Kish ESS of the weights (M,)."""
        w = normalized_weights(ll)
        ess = kish_ess(w)
        if self.target == TARGET_DECISION:
            if self._stacked is None or self._now is None:
                # one float32 product for every target (S, T * J): the cost of a step
                self._stacked = np.hstack(self.regret).astype(np.float32)
                self._now = np.array([np.min(R.mean(axis=0)) for R in self.regret])
            after = (w.astype(np.float32) @ self._stacked).reshape(w.shape[0], len(self.regret), -1)
            parts = self._now[None, :] - after.min(axis=-1).astype(float)
        else:
            assert self.exponents is not None
            now = np.var(self.exponents, axis=0)
            parts = now[None, :] - weighted_variance(self.exponents, w)
        total = parts.mean(axis=-1) if self.target == TARGET_DECISION else parts.sum(axis=-1)
        return total, parts, ess

    def target_now(self) -> float:
        """The target before any run is seen: the mean over target settings of the smallest
        mean regret over the actions (decision), or the summed variance of the exponents."""
        if self.target == TARGET_DECISION:
            return float(np.mean([np.min(R.mean(axis=0)) for R in self.regret]))
        assert self.exponents is not None
        return float(np.var(self.exponents, axis=0).sum())

    def batch_value(self, ll: Array, blocks: int = JACKKNIFE_BLOCKS) -> tuple[float, float, float]:
        """The target's expected reduction given the simulated log-likelihoods ``ll`` (M, S)
        of a batch, and its Monte Carlo standard errors from the outcomes and from the draws
        (:func:`value_and_mcse`, in float64)."""
        if self.target == TARGET_DECISION:
            features = np.hstack(self.regret)
            n_targets = len(self.regret)

            def statistic(x: Array) -> Array:
                return np.asarray(x.reshape(*x.shape[:-1], n_targets, -1).min(-1).mean(-1))

        else:
            assert self.exponents is not None
            centred = self.exponents - self.exponents.mean(axis=0)
            features = np.hstack([centred, centred**2])
            n = centred.shape[1]

            def statistic(x: Array) -> Array:
                return np.asarray(np.maximum(x[..., n:] - x[..., :n] ** 2, 0.0).sum(-1))

        return value_and_mcse(features, statistic, ll, blocks)


def value_and_mcse(
    features: Array, statistic: Callable[[Array], Array], ll: Array, blocks: int = JACKKNIFE_BLOCKS
) -> tuple[float, float, float]:
    """The preposterior value ``statistic(mean_s f_s) - mean_m statistic(sum_s w_ms f_s)`` of
    ``features`` (S, K) under the normalised weights ``w_m = softmax(ll_m)`` (``ll``: (M, S)),
    and its two Monte Carlo standard errors: over the ``M`` simulated outcomes (the spread of
    the per-outcome reductions over ``sqrt(M)``), and over the ``S`` draws (a delete-a-block
    jackknife, ``sqrt((B - 1) / B sum_b (v_b - mean v)^2)``, with ``v_b`` the value without
    the ``b``-th of ``B`` blocks of consecutive draws, in the weights and in the first term
    alike, the outcomes held). ``statistic`` maps (..., K) feature means to the target, e.g.
    the minimum over actions of the mean regret (decision) or the summed variance from the
    first two moments (exponents).

    Each block's weighted means and log mass are computed once, so the jackknife costs about
    one pass over the draws.

    >>> rng = np.random.default_rng(0)
    >>> theta = rng.standard_normal(2000)               # a N(0, 1) posterior
    >>> y = theta[:256] + rng.standard_normal(256)      # outcomes, noise sd 1
    >>> ll = -0.5 * (y[:, None] - theta[None, :]) ** 2
    >>> f = np.stack([theta, theta**2], axis=1)
    >>> value, se_y, se_s = value_and_mcse(f, lambda x: x[..., 1] - x[..., 0] ** 2, ll)
    >>> bool(abs(value - 0.5) < 3 * np.hypot(se_y, se_s))  # exact: 1 - 1/2
    True
    """
    f = np.asarray(features, dtype=float)
    ll = np.asarray(ll, dtype=float)
    S, M = f.shape[0], ll.shape[0]
    B = max(1, min(int(blocks), S))
    edges = np.linspace(0, S, B + 1).round().astype(int)
    means = np.empty((B, M, f.shape[1]))  # within-block weighted feature means
    mass = np.empty((B, M))  # log of each block's unnormalised weight
    sums = np.empty((B, f.shape[1]))
    for b in range(B):
        part = ll[:, edges[b] : edges[b + 1]]
        top = np.max(part, axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        e = np.exp(part - top)
        z = e.sum(axis=1)
        means[b] = (e @ f[edges[b] : edges[b + 1]]) / np.maximum(z, 1e-300)[:, None]
        with np.errstate(divide="ignore"):
            mass[b] = top[:, 0] + np.log(z)
        sums[b] = f[edges[b] : edges[b + 1]].sum(axis=0)
    counts = np.diff(edges).astype(float)

    def value(keep: NDArray[np.bool_]) -> tuple[float, Array]:
        lm = np.where(keep[:, None], mass, -np.inf)
        top = np.max(lm, axis=0)
        pi = np.exp(lm - np.where(np.isfinite(top), top, 0.0))
        pi /= np.maximum(pi.sum(axis=0), 1e-300)
        after = statistic(np.einsum("bm,bmk->mk", pi, means))
        now = float(statistic(sums[keep].sum(axis=0) / counts[keep].sum()))
        gain = now - after
        return float(gain.mean()), gain

    everything = np.ones(B, dtype=bool)
    total, gain = value(everything)
    se_outcomes = float(gain.std(ddof=1) / math.sqrt(M)) if M > 1 else 0.0
    if B < 2:
        return total, se_outcomes, 0.0
    left = np.array([value(everything & (np.arange(B) != b))[0] for b in range(B)])
    se_draws = float(math.sqrt((B - 1) / B * np.sum((left - left.mean()) ** 2)))
    return total, se_outcomes, se_draws
