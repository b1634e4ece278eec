"""Small refits shared by test_crossval.py and test_compare.py, sampled once per test run.

One setting (Qwen3-8B | grpo | math+code, 48 rows) and a law without the size term: a
hierarchy of few settings is a funnel that costs NUTS hundreds of steps per draw, one setting
about twenty. ``cv_result`` leaves out the largest rollout count (3 rows) and refits;
``binomial_fit`` fits the same training rows with a concentration pinned at 1e5 (no seed-to-
seed spread beyond binomial noise), a deliberately wrong likelihood for the reference data
(simulated with concentration 800).
"""

from __future__ import annotations

import functools

import pandas as pd
import xarray as xr
from testdata import REFERENCE

from bayesscale import names
from bayesscale.checks.crossval import CrossvalResult, crossval
from bayesscale.data.observations import Table, frame_sha256, validate
from bayesscale.data.spec import ModelSpec, parse_spec
from bayesscale.law.inference import FitConfig, fit

SETTING = {names.MODEL: "Qwen3-8B", names.ALGORITHM: "grpo", names.DOMAIN: "math+code"}
CONFIG = FitConfig(chains=2, draws=300, tune=300, seed=1, progress=False, ess_target=0)
LEAVE_OUT = "rollouts=max"

_AXES = """
[settings]
keys = ["model", "algorithm", "domain"]

[[axes]]
name = "env"
column = "n_envs"
exponent = { median = 0.25, log_sd = 0.75 }

[[axes]]
name = "task"
column = "n_tasks"
exponent = { median = 0.25, log_sd = 0.75 }

[[axes]]
name = "traj"
column = "rollouts"
exponent = { median = 0.25, log_sd = 0.75 }

[level]
prior = { median = 1.0, log_sd = 1.0 }

[slope]
prior = { median = 0.03, log_sd = 1.5 }
"""

SPEC_TEXT = f"""
[model]
name = "one-setting"

[outcome]
kind = "success"
concentration = {{ median = 200.0, log_sd = 1.0 }}
{_AXES}"""

BINOMIAL_TEXT = f"""
[model]
name = "one-setting-binomial"

[outcome]
kind = "success"
concentration = {{ median = 100000.0, log_sd = 0.01 }}
{_AXES}"""

SPEC: ModelSpec = parse_spec(SPEC_TEXT, "one-setting")
BINOMIAL: ModelSpec = parse_spec(BINOMIAL_TEXT, "one-setting-binomial")


def subset_frame() -> pd.DataFrame:
    frame = pd.read_csv(REFERENCE / "observations.csv")
    keep = (frame[list(SETTING)] == pd.Series(SETTING)).all(axis=1)
    return frame[keep].reset_index(drop=True)


def subset_table() -> Table:
    frame = subset_frame()
    return Table(validate(frame, SPEC, "subset"), "subset", frame_sha256(frame))


@functools.cache
def cv_result() -> CrossvalResult:
    return crossval(subset_table(), SPEC, [LEAVE_OUT], CONFIG, prob=0.9)


@functools.cache
def binomial_fit() -> xr.DataTree:
    return fit(cv_result().folds[0].train, BINOMIAL, CONFIG)
