"""Paths of the data the tests read (the bundled reference data and ../shared/external), the
rows the small law fits share, simulated curves with a knee, and the check that a model's JAX
log density is PyMC's."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesscale import names
from bayesscale.core import forms
from bayesscale.law.stack import (
    ATTR_SEPARATED,
    LOO_ELPD,
    LOO_SE,
    OUT_OF_SCALE_ELPD,
    WEIGHT,
    WEIGHT_LOWER,
    WEIGHT_UPPER,
    stack_tree,
)
from bayesscale.recipe.synthetic import synthetic_fit

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "data" / "reference"
EXTERNAL = Path(os.environ.get("BAYESSCALE_EXTERNAL", ROOT.parent / "shared" / "external"))
PRICING = ROOT / "data" / "pricing"


def small_reference_frame() -> pd.DataFrame:
    """Two settings of the reference data (Qwen3-4B, GRPO, on math+code and SWE; 96 runs):
    the tests that sample a small law fit use these same rows, so that the compiled sampler
    of the first is reused (JAX's compilation cache) by the others."""
    frame = pd.read_csv(REFERENCE / "observations.csv")
    keep = (
        frame[names.MODEL].eq("Qwen3-4B")
        & frame[names.ALGORITHM].eq("grpo")
        & frame[names.DOMAIN].isin(["math+code", "swe"])
    )
    return frame[keep].reset_index(drop=True)


# --- curves with a knee (the offset-power form): its recovery and the comparison of forms -----

# one axis `size` over datasets; .format(outcome=..., form=...) fills the [outcome] table's
# extra keys and the axis's form
ONE_AXIS_SPEC = """
[model]
name = "one-axis-recovery"
[outcome]
kind = "success"
{outcome}
[settings]
keys = ["dataset"]
[[axes]]
name = "size"
column = "size"
exponent = {{ median = 0.3, log_sd = 0.75 }}
{form}
"""
# .format(form='form = "offset_power"') or form="" (the power law)
KNEE_SPEC = ONE_AXIS_SPEC.replace("{outcome}", "")
KNEE_SIZES = 16.0 * 2.0 ** np.arange(11)  # 16 .. 16,384: D_ref = 512
TRUE_KNEE, TRUE_ALPHA = 0.5, 0.5  # D0 = 256


def knee_curves(
    seed: int = 0, settings: int = 6, seeds: int = 3, knees: Sequence[float] = (TRUE_KNEE,)
) -> pd.DataFrame:
    """Success counts of ``settings`` curves whose loss is an offset power law with the knee
    ``TRUE_KNEE`` (flat below ``D0 = 256``; curve ``s`` has ``knees[s % len(knees)]``),
    beta-binomial runs, ``seeds`` per size."""
    return form_curves(
        forms.OFFSET_POWER, "alpha", TRUE_ALPHA, {"knee": TRUE_KNEE}, (0.3, 0.6),
        seed, settings, seeds, per_curve={"knee": knees},
    )  # fmt: skip


def form_curves(
    form: str,
    exponent: str,
    exponent_median: float,
    shape: dict[str, float],
    amplitudes: tuple[float, float],
    seed: int = 0,
    settings: int = 6,
    seeds: int = 3,
    per_curve: Mapping[str, Sequence[float]] | None = None,
) -> pd.DataFrame:
    """Success counts of ``settings`` curves whose loss is the floor (uniform on 0.1-0.3) plus
    ``form``'s term over ``KNEE_SIZES``: its ``exponent`` parameter ``exponent_median e^(0.1 z)``
    per curve, the ``shape`` parameters shared (or, for those in ``per_curve``, curve ``s``'s
    the value ``s`` modulo their count), an amplitude uniform on ``amplitudes``;
    beta-binomial runs (concentration 300, 500 trials), ``seeds`` per size."""
    rng = np.random.default_rng(seed)
    reference = float(np.sqrt(KNEE_SIZES.min() * KNEE_SIZES.max()))
    rows = []
    for s in range(settings):
        value = exponent_median * np.exp(0.1 * rng.standard_normal())
        amplitude, floor = rng.uniform(*amplitudes), rng.uniform(0.1, 0.3)
        own = {k: v[s % len(v)] for k, v in (per_curve or {}).items()}
        params = {"amplitude": amplitude, exponent: value, **shape, **own}
        p = np.exp(-(floor + forms.evaluate_term(form, KNEE_SIZES, reference, params)))
        for seed_ in range(seeds):
            q = rng.beta(p * 300, (1 - p) * 300)
            k = rng.binomial(500, q)
            rows += [(f"d{s}", d, seed_, int(ki), 500) for d, ki in zip(KNEE_SIZES, k, strict=True)]
    return pd.DataFrame(rows, columns=["dataset", "size", names.SEED, names.SUCCESSES, "trials"])


def assert_jax_density_is_pymcs(model: Any, points: int, atol: float = 0.0) -> None:
    """The sampler's log density of ``model`` (its JAX translation,
    :class:`bayesscale.sampling.logdensity.LogDensity`) equals PyMC's own compiled one at the
    initial point and ``points`` seeded random points around it, to 1e-11 relative."""
    import pytest

    from bayesscale.sampling.logdensity import LogDensity

    density = LogDensity.from_model(model)
    theirs = model.compile_logp()
    rng = np.random.default_rng(0)
    point = model.initial_point()
    values = [point]
    for _ in range(points):
        values.append({k: v + rng.uniform(-0.3, 0.3, np.shape(v)) for k, v in point.items()})
    for value in values:
        flat = np.concatenate([np.ravel(value[name]) for name in density.value_names])
        assert float(density.logp(flat)) == pytest.approx(float(theirs(value)), rel=1e-11, abs=atol)


# three rows the synthetic fit (recipe.synthetic.synthetic_fit) predicts: its settings S0 and
# S1 at small, middle and large sizes
SYNTHETIC_ROWS = pd.DataFrame(
    {
        "model": ["S0", "S1", "S0"],
        "algorithm": ["grpo"] * 3,
        "domain": ["math"] * 3,
        "n_envs": [8, 64, 2048],
        "n_tasks": [100, 3000, 200_000],
        "rollouts": [2, 16, 512],
        "trials": [100, 100, 100],
    }
)


# --- a stacked fit without sampling: the synthetic power law and its offset-power twin ------


def stacked_synthetic_fit(
    offset_weight: float, root: xr.DataTree | None = None, knee: float = 0.5
) -> xr.DataTree:
    """A power-law fit (``root``, else the synthetic one) as the root of a stack whose other
    member is the same fit with the task axis given the offset power (``knee`` D0 / D_ref), at
    ``offset_weight``; the stack's scores are made up (LOO and out-of-scale elpd 0)."""
    synthetic = root is None
    root = synthetic_fit(draws=10, spread=0.02) if root is None else root.copy()
    other = root.copy()
    other.attrs[names.ATTR_SPEC] = root.attrs[names.ATTR_SPEC].replace(
        'column = "n_tasks"\n', 'column = "n_tasks"\nform = "offset_power"\n'
    )
    post = other["posterior"].to_dataset()
    knee = xr.full_like(post[names.ALPHA].isel({names.SETTING_DIM: 0, names.AXIS_DIM: [0]}), knee)
    post[names.KNEE] = knee.rename({names.AXIS_DIM: names.KNEE_AXIS_DIM}).assign_coords(
        {names.KNEE_AXIS_DIM: ["task"]}
    )
    other["posterior"] = xr.DataTree(post)
    weights = [1 - offset_weight, offset_weight]
    scores = {
        WEIGHT: weights,
        WEIGHT_LOWER: [max(0.0, w - 0.2) for w in weights],
        WEIGHT_UPPER: [min(1.0, w + 0.2) for w in weights],
        LOO_ELPD: [0.0, 0.0],
        LOO_SE: [1.0, 1.0],
        OUT_OF_SCALE_ELPD: [0.0, 0.0],
    }
    attrs = {ATTR_SEPARATED: 0, names.ATTR_PROB: 0.9, "out_of_scale_points": 12}
    tree = stack_tree({"power": root, "offset_power": other}, "power", scores, attrs)
    if synthetic:
        tree.attrs[names.ATTR_DATA_SOURCE] = "synthetic"  # what a figure's provenance names
        tree.attrs[names.ATTR_DATA_HASH] = "0" * 64
    return tree
