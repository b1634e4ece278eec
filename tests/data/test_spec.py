from __future__ import annotations

import pytest

from bayesscale.data.spec import SpecError, load_spec, parse_spec

MINIMAL = """
[model]
name = "m"
[outcome]
kind = "loss"
[[axes]]
name = "N"
column = "params"
"""


def test_bundled_specs_load():
    default = load_spec()
    assert default.axis_names == ("env", "task", "traj")
    assert default.size is not None and default.size.groups == ("algorithm", "domain")
    chinchilla = load_spec("chinchilla")
    assert chinchilla.outcome == "loss" and chinchilla.setting_keys == ()


def test_spec_text_is_kept_for_the_fit_file():
    spec = parse_spec(MINIMAL, source="x.toml")
    assert parse_spec(spec.text).axes == spec.axes


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (('kind = "loss"', 'kind = "probit"'), r"x.toml: \[outcome\] kind: must be one of"),
        (('column = "params"', "column = 3"), r"\[axes #1\] column: must be a string"),
        (
            ('name = "N"', 'name = "N"\nexponent = { median = -1.0, log_sd = 1.0 }'),
            r"median: must be > 0",
        ),
        (("[model]", "[model]\ncolour = 1"), r"\[model\] unknown key\(s\) \['colour'\]"),
        (
            ("[[axes]]", "[interaction]\naxes=['N','N']\nunits='reference'\n[[axes]]"),
            r"units: only",
        ),
        # TOML's nan and inf are numbers no prior or setting can take
        (
            ('name = "N"', 'name = "N"\nexponent = { median = 0.3, log_sd = inf }'),
            r"x.toml: \[axes #1.exponent\] log_sd: must be a finite number, got inf",
        ),
        (
            ('name = "N"', 'name = "N"\nexponent = { median = nan, log_sd = 1.0 }'),
            r"median: must be a finite number, got nan",
        ),
    ],
)
def test_bad_specs_name_file_and_key(patch, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(MINIMAL.replace(*patch), source="x.toml")


def test_not_toml():
    with pytest.raises(SpecError, match=r"x\.toml: not valid TOML"):
        parse_spec("[model\n", source="x.toml")


def test_unknown_bundled_name():
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec("no-such-spec")


def test_success_spec_needs_setting_keys():
    text = MINIMAL.replace('kind = "loss"', 'kind = "success"')
    with pytest.raises(SpecError, match=r"\[settings\] keys"):
        parse_spec(text, source="x.toml")


def test_a_spec_that_names_no_form_is_fitted_as_the_default_stack() -> None:
    """What a fit of a spec fits (``forms_to_fit``): the default stack for a spec that names no
    axis's form; the spec as written once it names one; one form alone; two or more stacked."""
    from bayesscale.core.forms import DEFAULT_STACK
    from bayesscale.data.spec import forms_to_fit, load_spec, parse_spec

    spec = load_spec()
    assert not any(a.form_named for a in spec.axes)
    assert forms_to_fit(spec) == (spec, DEFAULT_STACK) == (spec, ("power", "offset_power"))
    named = parse_spec(spec.text.replace('name = "task"\n', 'name = "task"\nform = "power"\n'))
    assert [a.form_named for a in named.axes] == [False, True, False]
    assert forms_to_fit(named) == (named, ())  # as written: the power law on every axis
    assert forms_to_fit(spec, preview=True) == (spec, ())  # a preview fits one law
    alone, stack = forms_to_fit(spec, ["offset_power"])
    assert stack == () and {a.form for a in alone.axes} == {"offset_power"}
    assert forms_to_fit(spec, ["power"]) == (spec, ())
    assert forms_to_fit(spec, ["power", "saturating"]) == (spec, ("power", "saturating"))
    with pytest.raises(SpecError, match="name their form"):
        forms_to_fit(named, ["offset_power"])
