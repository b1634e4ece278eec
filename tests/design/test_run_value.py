"""The value engine's outcomes and likelihood under collapsed runs (seed_noise = "contaminated")."""

from __future__ import annotations

import numpy as np

from bayesscale.design.defaults import TARGET_DECISION
from bayesscale.design.run_value import ValueEngine

S, TRIALS = 6, 50
PHI = np.full(S, 80.0)


def _engine(contamination: np.ndarray | None) -> ValueEngine:
    return ValueEngine(
        draws=None,  # type: ignore[arg-type]  # outcomes and loglik take p directly
        phi=PHI,
        trials=TRIALS,
        outer=np.arange(S),
        seed=3,
        target=TARGET_DECISION,
        regret=[],
        exponents=None,
        contamination=contamination,
    )


def test_no_collapses_is_the_beta_binomial() -> None:
    p = np.linspace(0.2, 0.7, S)
    plain, zero = _engine(None), _engine(np.zeros(S))
    np.testing.assert_array_equal(plain.outcomes(0, 0, p, PHI), zero.outcomes(0, 0, p, PHI))
    np.testing.assert_allclose(plain.loglik(0, 0, p, PHI), zero.loglik(0, 0, p, PHI), rtol=1e-13)


def test_every_run_collapsed_is_uniform_and_tells_nothing() -> None:
    p = np.full(S, 0.99)  # the law says nearly every trial succeeds
    engine = _engine(np.ones(S))
    k = np.concatenate([engine.outcomes(i, 0, p, PHI) for i in range(200)])
    assert k.min() >= 0 and k.max() <= TRIALS and np.mean(k) < 0.7 * TRIALS  # not near 50
    # a uniform count has the same likelihood under every draw: no draw is reweighted
    np.testing.assert_allclose(engine.loglik(0, 0, p, PHI), -np.log(TRIALS + 1), rtol=1e-12)
