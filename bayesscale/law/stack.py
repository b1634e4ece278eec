"""A stacked law fit, read: the candidate forms' fits and their stacking weights.

``bayesscale fit --forms power,offset_power`` (:mod:`bayesscale.checks.form_scores`) fits the
law with each form on every axis, scores each on the scales it left out (the out-of-scale
refits) and stacks them (:mod:`bayesscale.checks.stacking`). It writes one fit file: the root
is the fit of the form with the largest weight (every reader that takes one fit reads it), and
the group ``stack`` holds, per form (dim ``form``), the weight with its Bayesian-bootstrap
interval, the PSIS-LOO and out-of-scale log scores, and under ``stack/<form>`` the fit of each
other form. Its predictions are the mixture

.. math::

    p(\\tilde y \\mid y) = \\sum_k w_k\\, p_k(\\tilde y \\mid y)

(:func:`bayesscale.law.predict.mixture`, each form's draws in proportion to its weight), so the
held-out check, ``predict`` and the pointwise scores read the stack.

>>> members(fit)  # doctest: +SKIP
[Member(form='power', weight=0.62, ...), Member(form='offset_power', weight=0.38, ...)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import xarray as xr

from bayesscale import names
from bayesscale.core.forms import POWER
from bayesscale.data.fitfile import diagnose

WEIGHT, WEIGHT_LOWER, WEIGHT_UPPER = "weight", "weight_lower", "weight_upper"
LOO_ELPD, LOO_SE, OUT_OF_SCALE_ELPD = "loo_elpd", "loo_se", "out_of_scale_elpd"
ATTR_ROOT_FORM: Final = "root_form"  # the form whose fit is the file's root
ATTR_SEPARATED: Final = "separated"  # 1 where the data separate the leading form
NEGLIGIBLE_WEIGHT: Final = 1e-3  # a form with less weight than this does not move a number


class StackError(ValueError):
    """A stacked fit file whose stack group is incomplete."""


@dataclass(frozen=True)
class Member:
    """One form of a stacked fit: its stacking weight and its own fit (a complete law fit)."""

    form: str
    weight: float
    tree: xr.DataTree


SCORES: Final = (WEIGHT, WEIGHT_LOWER, WEIGHT_UPPER, LOO_ELPD, LOO_SE, OUT_OF_SCALE_ELPD)


def stack_tree(
    fits: Mapping[str, xr.DataTree],
    root_form: str,
    scores: Mapping[str, Sequence[float]],
    attrs: Mapping[str, Any],
) -> xr.DataTree:
    """The stacked fit file that :func:`members` and :func:`stack_summary` read: the fit of
    ``root_form`` at the root, the group ``stack`` with one entry per form of ``fits`` (in
    their order) holding every column of ``SCORES`` (``scores``), the attrs ``attrs`` and
    ``ATTR_ROOT_FORM``, and every other form's fit under ``stack/<form>``."""
    forms = list(fits)
    if root_form not in forms:
        raise StackError(f"the stack's root form {root_form!r} is not among its forms {forms}")
    missing = [c for c in SCORES if c not in scores]
    if missing:
        raise StackError(f"a stack's table needs the columns {missing}")
    dim = names.FORM_DIM
    table = xr.Dataset(
        {column: (dim, [float(v) for v in scores[column]]) for column in SCORES},
        coords={dim: forms},
        attrs={**attrs, ATTR_ROOT_FORM: root_form},
    )
    tree = fits[root_form].copy()
    tree[names.STACK_GROUP] = xr.DataTree(table)
    for form in forms:
        if form != root_form:
            tree[f"{names.STACK_GROUP}/{form}"] = fits[form].copy()
    return tree


def stack_summary(tree: xr.DataTree) -> xr.Dataset | None:
    """The ``stack`` group's per-form table (weights, intervals, scores), else ``None``."""
    if names.STACK_GROUP not in tree.children:
        return None
    return tree[names.STACK_GROUP].to_dataset()


def members(tree: xr.DataTree) -> list[Member] | None:
    """The forms of a stacked fit with their weights and fits, the root's form first; ``None``
    for a fit of one form. The root's form's own fit is the root without the group ``stack``
    and without the stack's out-of-scale check (``out_of_scale``: the mixture's, not the
    form's)."""
    table = stack_summary(tree)
    if table is None:
        return None
    node = tree[names.STACK_GROUP]
    root_form = str(table.attrs.get(ATTR_ROOT_FORM, ""))
    forms = [str(f) for f in table[names.FORM_DIM].to_numpy()]
    if root_form not in forms:
        raise StackError(f"the stack's root form {root_form!r} is not among its forms {forms}")
    root = tree.copy()
    del root[names.STACK_GROUP]
    if names.OUT_OF_SCALE_GROUP in root.children:
        del root[names.OUT_OF_SCALE_GROUP]
    out = []
    for form in [root_form, *(f for f in forms if f != root_form)]:
        weight = float(table[WEIGHT].sel({names.FORM_DIM: form}))
        if form == root_form:
            out.append(Member(form, weight, root))
        elif form in node.children:
            out.append(Member(form, weight, node.children[form].copy()))
        else:
            raise StackError(f"the stack has a weight for {form!r} but not its fit")
    return out


def other_forms_weight(tree: xr.DataTree) -> dict[str, float]:
    """Of a stacked fit, the forms other than the power law that carry weight (at least
    ``NEGLIGIBLE_WEIGHT``), with their weights; ``{}`` for a fit of one form."""
    table = stack_summary(tree)
    if table is None:
        return {}
    out = {}
    for form, weight in zip(
        table[names.FORM_DIM].to_numpy(), table[WEIGHT].to_numpy(), strict=True
    ):
        if str(form) != POWER and float(weight) >= NEGLIGIBLE_WEIGHT:
            out[str(form)] = float(weight)
    return out


def stack_report(tree: xr.DataTree) -> dict[str, Any] | None:
    """A stacked fit's forms as ``bayesscale summary`` reports them (JSON-ready): per form its
    weight with its interval, PSIS-LOO and out-of-scale log scores and diagnostics; the root's
    form and whether the data separate the leader; ``None`` for a fit of one form."""
    table = stack_summary(tree)
    if table is None:
        return None
    found = {m.form: m.tree for m in members(tree) or []}
    forms: dict[str, Any] = {}
    for form in (str(f) for f in table[names.FORM_DIM].to_numpy()):
        row = table.sel({names.FORM_DIM: form})
        forms[form] = {
            "weight": float(row[WEIGHT]),
            "interval": [float(row[WEIGHT_LOWER]), float(row[WEIGHT_UPPER])],
            "loo_elpd": float(row[LOO_ELPD]),
            "loo_se": float(row[LOO_SE]),
            "out_of_scale_elpd": float(row[OUT_OF_SCALE_ELPD]),
            "diagnostics": diagnose(found[form]).to_dict(),
        }
    return {
        "root_form": str(table.attrs[ATTR_ROOT_FORM]),
        "separated": bool(int(table.attrs[ATTR_SEPARATED])),
        "prob": float(table.attrs[names.ATTR_PROB]),
        "out_of_scale_points": int(table.attrs.get("out_of_scale_points", 0)),
        "forms": forms,
    }
