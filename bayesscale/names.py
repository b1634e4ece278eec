"""Every column, dimension, variable and attribute name, declared once.

Code elsewhere imports these constants instead of spelling strings, so that a
rename is one edit and a typo is an ``AttributeError``, not a silent miss.
"""

from __future__ import annotations

from typing import Final

# --- observation table columns -------------------------------------------------
MODEL: Final = "model"
ALGORITHM: Final = "algorithm"
DOMAIN: Final = "domain"
PARAMS_B: Final = "params_b"
N_ENVS: Final = "n_envs"
N_TASKS: Final = "n_tasks"
ROLLOUTS: Final = "rollouts"
N_WORLDS: Final = "n_worlds"
REWARD: Final = "reward"
SEED: Final = "seed"
SUCCESSES: Final = "successes"
TRIALS: Final = "trials"
LOSS: Final = "loss"
COMPUTE: Final = "compute"
SPLIT: Final = "split"

SETTING_KEYS: Final = (MODEL, ALGORITHM, DOMAIN)
REWARD_LEVELS: Final = ("sparse", "dense")
DENSE: Final = "dense"

# --- the paper's axes (a spec may declare others) -------------------------------
ENV: Final = "env"
TASK: Final = "task"
TRAJ: Final = "traj"
PAPER_AXES: Final = (ENV, TASK, TRAJ)

# --- dimensions -------------------------------------------------------------------
OBS_DIM: Final = "obs"
SETTING_DIM: Final = "setting"
AXIS_DIM: Final = "axis"
SIZE_GROUP_DIM: Final = "size_group"
EXPONENT_GROUP_DIM: Final = "exponent_group"
CHAIN_DIM: Final = "chain"
DRAW_DIM: Final = "draw"

# --- posterior variables of a law fit ----------------------------------------------
ALPHA_POP: Final = "alpha_pop"  # (axis) population (median) exponent
ALPHA_SPREAD: Final = "alpha_spread"  # (axis) sd of per-setting log-exponents
ALPHA: Final = "alpha"  # (setting, axis) per-setting exponent
AMPLITUDE: Final = "amplitude"  # (setting, axis) term value at the reference scale
AMPLITUDE_POP: Final = "amplitude_pop"  # (axis) population median amplitude
LOSS_FLOOR: Final = "loss_floor"  # (setting) irreducible loss, size term excluded
SIZE_AMPLITUDE: Final = "size_amplitude"  # () size term at the reference size
ALPHA_SIZE: Final = "alpha_size"  # () model-size exponent
INTERACTION_GAMMA: Final = "interaction_gamma"  # (setting) env x task interaction weight
INTERACTION_BETA: Final = "interaction_beta"  # () interaction exponent
DENSE_MULTIPLIER: Final = "dense_multiplier"  # () effective-rollout multiplier of dense reward
CONCENTRATION: Final = "concentration"  # () beta-binomial seed-to-seed concentration
LOG_LOSS_SIGMA: Final = "log_loss_sigma"  # () Student-t scale on log loss
EXPECTED_LOSS: Final = "expected_loss"  # (obs) deterministic law value per row
OUTCOME: Final = "outcome"  # observed variable

# --- constant_data of a law fit -------------------------------------------------------
REFERENCE_SCALE: Final = "reference_scale"  # (axis) D_ref per axis
SIZE_REFERENCE: Final = "size_reference"  # () N_ref, same unit as the size column

# --- root attributes of a saved fit ----------------------------------------------------
ATTR_VERSION: Final = "bayesscale_version"
ATTR_SPEC: Final = "model_spec_toml"
ATTR_DATA_HASH: Final = "data_sha256"
ATTR_DATA_SOURCE: Final = "data_source"
ATTR_SAMPLER: Final = "sampler"
ATTR_SEED: Final = "random_seed"
ATTR_SETTINGS_TABLE: Final = "settings_json"
ATTR_KIND: Final = "bayesscale_kind"
KIND_LAW_FIT: Final = "law_fit"

# --- pricing tables and fits (synthetic data: discount kappa(r), collapse ratio r*) -------
METHOD: Final = "method"  # column and dim: the synthetic-data generator
AXIS_COLUMN: Final = "axis"  # column: which axis the method synthesises (env|task|traj|cross-axis label)
REAL: Final = "real"  # column: real count on that axis
SYNTHETIC: Final = "synthetic"  # column: synthetic count on that axis
RATIO: Final = "ratio"  # derived: synthetic / real
METHOD_DIM: Final = "method"
PRICED_AXIS_DIM: Final = "priced_axis"  # axes that some method synthesises
KAPPA0: Final = "kappa0"  # (method) small-ratio discount intercept
KAPPA0_AXIS: Final = "kappa0_axis"  # (priced_axis) pooled discount intercept of an axis
COLLAPSE_SCALE: Final = "collapse_scale"  # (method) c_m in kappa(r) = k0 - (1 - k0) r / c
R_STAR: Final = "r_star"  # (method) collapse ratio: success falls below threshold x baseline
PEAK_RATIO: Final = "peak_ratio"  # (method) ratio of peak benefit
KIND_PRICING_FIT: Final = "pricing_fit"

# --- allocation ---------------------------------------------------------------------------
BUDGET_DIM: Final = "budget"
