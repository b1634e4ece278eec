"""The held-out check's two-sided binomial p-value against SciPy's ``binomtest``."""

from __future__ import annotations

import pytest
from scipy import stats

from bayesscale.checks.heldout import binomial_p_value


@pytest.mark.parametrize("n", [1, 7, 40, 168, 1000])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.95])
def test_binomial_p_value_is_scipys(n: int, p: float) -> None:
    for k in range(n + 1):
        expected = stats.binomtest(k, n, p).pvalue
        assert binomial_p_value(k, n, p) == pytest.approx(expected, rel=1e-9, abs=1e-250)
