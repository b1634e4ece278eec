"""Unit prices: defaults, TOML overrides, validation."""

from __future__ import annotations

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
    with pytest.raises(PricesError, match="kappa must be finite and > 0"):
        check_kappa({names.ENV: 0.0})
    with pytest.raises(PricesError, match="must be a number"):
        check_kappa({names.ENV: "x"})  # type: ignore[dict-item]


def test_docstring_examples() -> None:
    import doctest

    import bayesscale.core.prices

    result = doctest.testmod(bayesscale.core.prices, raise_on_error=False)
    assert result.attempted >= 4 and result.failed == 0


def test_toml_reader_docstring_examples() -> None:
    """The reader every TOML file of the package goes through (prices, costs, specs, sweeps)."""
    import doctest

    import bayesscale.tomlfile

    result = doctest.testmod(bayesscale.tomlfile, raise_on_error=False)
    assert result.attempted >= 2 and result.failed == 0
