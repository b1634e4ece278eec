"""The law per draw of any fit the recipe takes, a stack's mixture included.

A stacked fit (:mod:`bayesscale.law.stack`) predicts with the mixture ``sum_k w_k p_k`` of its
forms' posteriors. Its draws for the recipe are that mixture too: in every chain, each form
gives its share ``w_k n`` of the ``n`` draws (largest-remainder rounding,
:func:`~bayesscale.law.predict.draw_shares`), evenly spaced through its own chain, so every
number the recipe derives from the draws (the per-draw allocations and their intervals, the
decision's expected success) includes the uncertainty about the form. A form whose weight is
below ``NEGLIGIBLE_WEIGHT`` (0.001) gives no draws, and the others' weights are renormalised.
A fit of one form reads
as :func:`~bayesscale.law.posterior.law_draws` reads it, with its axes' shapes.

>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> recipe_draws(synthetic_fit(draws=10, spread=0.0)).has_forms
False
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from bayesscale.law.posterior import (
    Array,
    LawDraws,
    PosteriorError,
    at_draws,
    law_draws,
    variable,
)
from bayesscale.law.predict import draw_shares
from bayesscale.law.stack import NEGLIGIBLE_WEIGHT, members


def recipe_draws(
    fit: xr.DataTree,
    settings: Sequence[str] | None = None,
    max_draws: int | None = None,
    size_axis: bool = False,
) -> LawDraws:
    """The law's draws for the recipe: a stack's mixture of its forms (module docstring), or
    one fit's draws with the shapes of its forms; arguments as
    :func:`~bayesscale.law.posterior.law_draws`."""
    return draws_with(fit, (), settings, max_draws, size_axis)[0]


def draws_with(
    fit: xr.DataTree,
    variables: Sequence[str],
    settings: Sequence[str] | None = None,
    max_draws: int | None = None,
    size_axis: bool = False,
) -> tuple[LawDraws, dict[str, Array]]:
    """:func:`recipe_draws`, with the values ``(S, ...)`` of the posterior ``variables`` at
    every draw, each taken from the fit of the form the draw came from (a stack's draws are
    renumbered, so :func:`~bayesscale.law.posterior.at_draws` on the file's root would read
    another form's values).

    >>> from bayesscale.recipe.synthetic import synthetic_fit
    >>> draws, values = draws_with(synthetic_fit(draws=10, spread=0.0), ["alpha_pop"])
    >>> values["alpha_pop"].shape
    (20, 3)
    """
    stacked = members(fit)
    if stacked is None:
        draws = law_draws(fit, settings, max_draws, size_axis, forms=True)
        return draws, {v: at_draws(variable(fit, v), draws) for v in variables}
    chosen = [m for m in stacked if m.weight >= NEGLIGIBLE_WEIGHT]  # as mixture_weights
    weights = np.array([m.weight for m in chosen])
    parts = [law_draws(m.tree, settings, max_draws, size_axis, forms=True) for m in chosen]
    rows = _mixture_rows(parts, weights / weights.sum())
    values = {
        v: np.concatenate([at_draws(variable(chosen[k].tree, v), parts[k])[r] for k, r in rows])
        for v in variables
    }
    return _mix_rows(parts, rows), values


def mixture_weights(fit: xr.DataTree) -> dict[str, float]:
    """The forms a stack's recipe mixes, with their weights (those of at least
    ``NEGLIGIBLE_WEIGHT``, 0.001: a smaller weight gives a form no draw of a posterior's
    thousands); ``{}`` for a fit of one form.

    >>> from bayesscale.recipe.synthetic import synthetic_fit
    >>> mixture_weights(synthetic_fit(draws=10, spread=0.0))
    {}
    """
    return {m.form: m.weight for m in members(fit) or [] if m.weight >= NEGLIGIBLE_WEIGHT}


def _shape(part: LawDraws, name: str) -> np.ndarray:
    """A part's ``knee``, ``midpoint`` (S, G, n) or ``saturating`` (S, n), zeros where the
    part's form has none."""
    value = getattr(part, name)
    if value is not None:
        return np.asarray(value)
    if name == "saturating":
        return np.zeros((part.samples, len(part.axes)), dtype=bool)
    return np.zeros_like(part.alpha)


def mix(parts: Sequence[LawDraws], weights: Sequence[float] | np.ndarray) -> LawDraws:
    """The mixture of ``parts`` (one form's draws each, the same axes and settings) with
    ``weights`` summing to 1: in every chain the parts' shares of the fewest draws any part
    has in a chain, evenly spaced through each part's chain; draws renumbered from 0."""
    return _mix_rows(parts, _mixture_rows(parts, weights))


def _mixture_rows(
    parts: Sequence[LawDraws], weights: Sequence[float] | np.ndarray
) -> list[tuple[int, NDArray[np.int64]]]:
    """The mixture's draws, chain by chain: ``(part, rows of that part)`` in order (see
    :func:`mix`)."""
    first = parts[0]
    for part in parts[1:]:
        if part.axes != first.axes or part.settings != first.settings:
            raise PosteriorError("the stack's forms differ in their axes or settings")
    if any(p.pair is not None for p in parts):
        raise PosteriorError("a stack's recipe takes laws without an interaction term")
    chains = [np.unique(p.chain) for p in parts]
    if any(not np.array_equal(c, chains[0]) for c in chains[1:]):
        raise PosteriorError("the stack's forms were sampled with different chains")
    n_draw = min(p.samples // chains[0].size for p in parts)
    shares = draw_shares(np.asarray(weights, dtype=float), n_draw)
    rows = []
    for c in chains[0]:
        for k, part in enumerate(parts):
            mine = np.flatnonzero(part.chain == c)
            if shares[k]:
                pick = np.linspace(0, mine.size - 1, shares[k]).round().astype(int)
                rows.append((k, mine[pick]))
    return rows


def _mix_rows(parts: Sequence[LawDraws], rows: Sequence[tuple[int, NDArray[np.int64]]]) -> LawDraws:
    """The draws of ``parts`` at ``rows`` (:func:`_mixture_rows`), renumbered chain by chain."""
    chains = np.unique(parts[0].chain)
    n_draw = sum(r.size for _, r in rows) // chains.size

    def stacked(name: str) -> np.ndarray:
        if name in ("knee", "midpoint", "saturating"):
            return np.concatenate([_shape(parts[k], name)[r] for k, r in rows])
        return np.concatenate([np.asarray(getattr(parts[k], name))[r] for k, r in rows])

    return replace(
        parts[0],
        chain=np.repeat(chains, n_draw).astype(float),
        draw=np.tile(np.arange(n_draw), chains.size).astype(float),
        coef=stacked("coef"),
        alpha=stacked("alpha"),
        floor=stacked("floor"),
        knee=stacked("knee"),
        midpoint=stacked("midpoint"),
        saturating=stacked("saturating"),
        left_out=sum(p.left_out for p in parts),
    )
