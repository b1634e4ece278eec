"""One format for every number printed: huge budgets and factors never as digit runs."""

from __future__ import annotations

import re

from bayesscale.formatting import format_number, money, times


def test_huge_values_are_scientific_not_digit_runs() -> None:
    for x in (1e15, 1e30, 5.563260937246271e24, 1e300):
        for text in (money(x), times(x), format_number(x, None)):
            assert "e+" in text, text
            assert not re.search(r"\d{5}", text.replace(",", "")), text
    assert money(9694.4) == "9,694" and money(1e14) == "100,000,000,000,000"
    assert times(7600.0) == "7,600x" and times(999_999.0) == "999,999x"
    assert times(5.563260937246271e24) == "5.56e+24x"


def test_recipe_text_of_a_huge_budget() -> None:
    from bayesscale.recipe.output import to_json
    from bayesscale.recipe.solve import recipe
    from bayesscale.recipe.synthetic import synthetic_fit
    from bayesscale.report.recipe_text import format_recipe

    text = format_recipe(to_json(recipe(synthetic_fit(draws=20, spread=0.0), [1e30])))
    assert "budget 1.00e+30 USD" in text
    assert not re.search(r"\d{16}", text.replace(",", "")), text
