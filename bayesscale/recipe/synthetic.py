"""A hand-made law fit with known parameters, for tests, docs and examples.

>>> fit = synthetic_fit(draws=10, spread=0.0)
>>> sorted(fit.children)[:2]
['constant_data', 'posterior']
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.data.extrapolation import SweptRange
from bayesscale.recipe.draws import Array

# --- a hand-made fit (tests, docs, examples) ---------------------------------------------------

_SYNTH_SPEC = """
[model]
name = "synthetic"
[outcome]
kind = "success"
[settings]
keys = ["model", "algorithm", "domain"]
[[axes]]
name = "env"
column = "n_envs"
[[axes]]
name = "task"
column = "n_tasks"
[[axes]]
name = "traj"
column = "rollouts"
"""


def synthetic_fit(
    draws: int = 200,
    chains: int = 2,
    spread: float = 0.05,
    seed: int = 0,
    alpha: Sequence[Sequence[float]] = ((0.41, 0.26, 0.11), (0.38, 0.24, 0.12)),
    amplitude: Sequence[Sequence[float]] = ((0.35, 0.30, 0.12), (0.30, 0.25, 0.10)),
    floor: Sequence[float] = (0.45, 0.55),
    reference: Sequence[float] = (45.25, 1810.2, 11.31),
    interaction: tuple[float, float] | None = None,
    spec_text: str = _SYNTH_SPEC,
    swept: tuple[Sequence[float], Sequence[float]] | None = None,
) -> xr.DataTree:
    """A law-fit DataTree whose posterior is lognormal around a known truth (``spread`` is the
    sd of log parameters; 0 gives a point mass). ``interaction = (gamma, beta)`` adds the
    env x task term (the spec text must then declare it). ``swept`` = (lowest, highest) value
    per axis, the same for every setting (default: the paper's grids, 8-256 environments,
    320-10,240 tasks, 2-64 rollouts per task). Settings are ``"S0 | grpo | math"``, ... For tests and examples, not a fit of any
    data."""
    rng = np.random.default_rng(seed)
    a = np.asarray(alpha, dtype=float)
    amp = np.asarray(amplitude, dtype=float)
    fl = np.asarray(floor, dtype=float)
    g, n = a.shape

    def jitter(x: Array) -> Array:
        return np.asarray(
            x * np.exp(spread * rng.standard_normal((chains, draws, *x.shape))), dtype=float
        )

    settings = [f"S{i} | grpo | math" for i in range(g)]
    axes = list(names.PAPER_AXES)[:n]
    post: dict[str, tuple[tuple[str, ...], Array]] = {
        names.ALPHA: (
            (names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM, names.AXIS_DIM),
            jitter(a),
        ),
        names.AMPLITUDE: (
            (names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM, names.AXIS_DIM),
            jitter(amp),
        ),
        names.LOSS_FLOOR: ((names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM), jitter(fl)),
        names.ALPHA_POP: (
            (names.CHAIN_DIM, names.DRAW_DIM, names.AXIS_DIM),
            jitter(a.mean(axis=0)),
        ),
    }
    if interaction is not None:
        post[names.INTERACTION_GAMMA] = (
            (names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM),
            jitter(np.full(g, interaction[0])),
        )
        post[names.INTERACTION_BETA] = (
            (names.CHAIN_DIM, names.DRAW_DIM),
            jitter(np.array(interaction[1])),
        )
    coords = {
        names.CHAIN_DIM: np.arange(chains),
        names.DRAW_DIM: np.arange(draws),
        names.SETTING_DIM: settings,
        names.AXIS_DIM: axes,
    }
    ref = np.asarray(reference, dtype=float)
    swept = swept or ((8.0, 320.0, 2.0)[:n], (256.0, 10240.0, 64.0)[:n])
    const = xr.merge(
        [
            xr.Dataset(
                {names.REFERENCE_SCALE: ((names.AXIS_DIM,), ref)}, coords={names.AXIS_DIM: axes}
            ),
            SweptRange(
                tuple(axes),
                tuple(settings),
                np.broadcast_to(np.asarray(swept[0], dtype=float), (g, n)).copy(),
                np.broadcast_to(np.asarray(swept[1], dtype=float), (g, n)).copy(),
            ).dataset(),
        ]
    )
    tree = xr.DataTree.from_dict(
        {"posterior": xr.Dataset(post, coords=coords), "constant_data": const}
    )
    tree.attrs = {names.ATTR_KIND: names.KIND_LAW_FIT, names.ATTR_SPEC: spec_text}
    return tree
