"""Unit prices: defaults, TOML overrides, validation."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bayesscale import names
from bayesscale.core.prices import (
    DEFAULT_PRICES,
    PRICES_FILE,
    PricesError,
    check_kappa,
    default_prices,
    load_prices,
    parse_prices,
)

AXES = list(names.PAPER_AXES)


def test_defaults_are_the_papers() -> None:
    assert default_prices().for_axes(AXES).tolist() == [4.10, 0.18, 0.02]
    assert default_prices().currency == "USD"


def test_bundled_file_matches_the_defaults() -> None:
    bundled = load_prices(PRICES_FILE)
    assert dict(bundled.unit) == DEFAULT_PRICES
    assert bundled.currency == "USD"


def test_override_from_file(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text('currency = "EUR"\n[prices]\nenv = 3.5\ntraj = 0.05\n')
    p = load_prices(f)
    assert p.for_axes(AXES).tolist() == [3.5, 0.18, 0.05]
    assert p.currency == "EUR"
    assert p.explicit == {names.ENV, names.TRAJ}


def test_integer_price_is_accepted() -> None:
    assert parse_prices("[prices]\nenv = 4").unit[names.ENV] == 4.0


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[prices]\nenv = -4.1", "must be a finite price > 0"),
        ("[prices]\nenv = 0", "must be a finite price > 0"),
        ('[prices]\nenv = "cheap"', "must be a number"),
        ("[prices]\nenv = true", "must be a number"),
        ("[prices]\nenv = nan", "must be a finite price > 0"),
        ("price = 3", "unknown key"),
        ("[prices\nenv = 3", "not valid TOML"),
        ("currency = 3", "currency"),
        ("prices = 3", "must be a table"),
    ],
)
def test_bad_prices(text: str, match: str) -> None:
    with pytest.raises(PricesError, match=match):
        parse_prices(text, source="bad.toml")


def test_error_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "neg.toml"
    f.write_text("[prices]\ntask = -1\n")
    with pytest.raises(PricesError, match=r"neg\.toml: \[prices\] task"):
        load_prices(f)


def test_axis_the_fit_does_not_have() -> None:
    p = parse_prices("[prices]\nworld = 40.0", source="w.toml")
    with pytest.raises(PricesError, match=r"w\.toml: prices name axis/axes \['world'\]"):
        p.check_axes(AXES)
    # Defaults for axes a fit lacks are fine; a fit axis without a price is not.
    default_prices().check_axes([names.ENV, names.TASK])
    with pytest.raises(PricesError, match="no price for axis 'N'"):
        default_prices().for_axes(["N", "D"])


def test_missing_file() -> None:
    with pytest.raises(FileNotFoundError):
        load_prices("/nonexistent/prices.toml")


def test_kappa_validation() -> None:
    assert check_kappa({names.ENV: 0.71, names.TASK: 1}) == {names.ENV: 0.71, names.TASK: 1.0}
    assert check_kappa({names.ENV: 1}) == {names.ENV: 1.0}  # real data
    for bad in (0.0, -0.5, 1.0001, 100, math.inf, math.nan):
        with pytest.raises(PricesError, match=r"must lie in \(0, 1\]"):
            check_kappa({names.ENV: bad})
    with pytest.raises(PricesError, match="must be a number"):
        check_kappa({names.ENV: "x"})  # type: ignore[dict-item]


def test_fixed_cells_prices_rollouts_as_cells_times_rollouts() -> None:
    """A sweep's run trains on [alignment] cells whatever its environments and tasks: with
    trajectories = "fixed-cells" the rollout axis costs c_traj x cells per rollout."""
    from bayesscale.core.prices import money_cost
    from bayesscale.recipe.notes import price_unit_note

    p = parse_prices('[cost]\ntrajectories = "fixed-cells"\ncells = 2048')
    assert (p.trajectories, p.cells) == ("fixed-cells", 2048)
    cost = money_cost(AXES, ["n_envs", "n_tasks", "rollouts"], p)
    assert float(cost([24, 256, 8])) == pytest.approx(4.10 * 24 + 0.18 * 256 + 0.02 * 2048 * 8)
    summary = {
        "unit_prices": dict(zip(AXES, p.for_axes(AXES).tolist(), strict=True)),
        "money_cost_powers": cost.powers.tolist(),
        "money_cost_weights": cost.weights.tolist(),
    }
    assert price_unit_note(summary) == (
        "the traj price is per trajectory (one rollout of one task): a run trains on 2,048 "
        "task-environment cells, so an allocation buys 2,048 x traj trajectories"
    )
    # overriding prices keeps the rule and its cells
    assert p.with_overrides({"env": 3.0}, "<x>").cells == 2048


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[cost]\ntrajectories = "fixed-cells"', "needs cells = the number"),
        ('[cost]\ntrajectories = "fixed-cells"\ncells = 0', "cells: must be a whole number >= 1"),
        ('[cost]\ntrajectories = "fixed-cells"\ncells = 2.5', "cells: must be a whole number"),
        (
            '[cost]\ntrajectories = "tasks"\ncells = 8',
            'cells is only used with trajectories = "fixed-cells"',
        ),
        ("[cost]\ncells = 8", "cells is only used with"),
        ("[cost]\nrows = 8", r"unknown key\(s\) \['rows'\]"),
    ],
)
def test_bad_cost_table_is_refused_naming_the_key(text: str, match: str) -> None:
    with pytest.raises(PricesError, match=match):
        parse_prices(text, source="p.toml")
