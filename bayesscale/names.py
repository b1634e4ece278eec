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
# What identifies one run of an observation table, in the order tables list them.
RUN_COLUMNS: Final = (
    MODEL,
    ALGORITHM,
    DOMAIN,
    PARAMS_B,
    N_ENVS,
    N_TASKS,
    ROLLOUTS,
    N_WORLDS,
    REWARD,
    SEED,
)
REWARD_LEVELS: Final = ("sparse", "dense")
DENSE: Final = "dense"

# --- the paper's axes (a spec may declare others) -------------------------------
ENV: Final = "env"
TASK: Final = "task"
TRAJ: Final = "traj"
PAPER_AXES: Final = (ENV, TASK, TRAJ)

# What one unit of an axis is, by the observation column it counts (short for table headers,
# long for help texts and docs). An axis of another column is in "units of <column>".
UNIT_SHORT: Final = {
    N_ENVS: "environments",
    N_TASKS: "tasks",
    ROLLOUTS: "rollouts per task",
    N_WORLDS: "worlds",
    PARAMS_B: "billion parameters",
}
UNIT_LONG: Final = {
    N_ENVS: "distinct environments (structural signatures)",
    N_TASKS: "distinct task statements",
    ROLLOUTS: "rollouts per task (the mean per task-environment cell: the GRPO group size)",
    N_WORLDS: "distinct worlds",
    PARAMS_B: "billions of model parameters",
}

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
AMPLITUDE_POP: Final = "amplitude_pop"  # (axis) the amplitude at the population's exponent
# and slope (and, per setting, its knees' median kappa z_50 and its midpoints' mean)
# with [outcome] concentration_spread > 0: CONCENTRATION is (setting), around its population's
LOG_CONCENTRATION_POP: Final = "log_concentration_pop"  # () log of the settings' median
CONCENTRATION_POP: Final = "concentration_pop"  # () the settings' median concentration
CONCENTRATION_SPREAD: Final = "concentration_spread"  # () sd of the settings' log concentrations
CONCENTRATION_Z: Final = "concentration_z"  # (setting) standardised deviation
CONTAMINATION: Final = "contamination"  # () share of runs that collapse ([outcome] seed_noise)
KNEE: Final = "knee"  # (setting, knee_axis) the offset-power form's knee D0 / D_ref ((knee_axis)
# in a fit of one setting, and in files written before knees were per setting)
KNEE_SCALE: Final = "knee_scale"  # (knee_axis) the per-setting knees' half-normal scale
KNEE_Z: Final = "knee_z"  # (setting, knee_axis) the knee over its scale, HalfNormal(1)
KNEE_AXIS_DIM: Final = "knee_axis"  # the axes whose form is the offset power
MIDPOINT: Final = "midpoint"  # (setting, midpoint_axis) the saturating form's log(D_mid / D_ref)
# ((midpoint_axis) in a fit of one setting, and in files written before midpoints were per setting)
MIDPOINT_POP: Final = "midpoint_pop"  # (midpoint_axis) the per-setting midpoints' mean
MIDPOINT_SPREAD: Final = "midpoint_spread"  # (midpoint_axis) their sd across settings
MIDPOINT_Z: Final = "midpoint_z"  # (setting, midpoint_axis) standardised deviation
MIDPOINT_AXIS_DIM: Final = "midpoint_axis"  # the axes whose form is the saturating one
LOSS_FLOOR: Final = "loss_floor"  # (setting) irreducible loss, size term excluded
SIZE_AMPLITUDE: Final = "size_amplitude"  # () size term at the reference size
ALPHA_SIZE: Final = "alpha_size"  # () model-size exponent
INTERACTION_GAMMA: Final = "interaction_gamma"  # (setting) env x task interaction weight
INTERACTION_BETA: Final = "interaction_beta"  # () interaction exponent
DENSE_MULTIPLIER: Final = "dense_multiplier"  # () effective-rollout multiplier of dense reward
CONCENTRATION: Final = "concentration"  # () or (setting): beta-binomial seed-to-seed concentration
LOG_LOSS_SIGMA: Final = "log_loss_sigma"  # () Student-t scale on log loss
OUTCOME: Final = "outcome"  # observed variable

# --- free variables of the law model (bayesscale.law.model; read back by predict, calibration)
LOG_ALPHA_POP: Final = "log_alpha_pop"  # (axis) log population exponent
ALPHA_Z: Final = "alpha_z"  # (setting, axis) standardised setting effects on log alpha
LOG_SLOPE_POP: Final = "log_slope_pop"  # (axis) log population slope A * alpha at D_ref
SLOPE_SPREAD: Final = "slope_spread"  # (axis) sd of the settings' log slopes
SLOPE_Z: Final = "slope_z"  # (setting, axis) standardised setting effects on log slope
LOG_LEVEL_GROUP: Final = "log_level_group"  # (size_group) log loss level per size group
LOG_LEVEL_POP: Final = "log_level_pop"  # log loss level of a law without a size term
LEVEL: Final = "level"  # (setting) c_s, the loss at the reference point (size term included)
LEVEL_SPREAD: Final = "level_spread"  # sd of the settings' log levels
LOG_ALPHA_SIZE: Final = "log_alpha_size"  # log exponent of model size
LOG_SIZE_SLOPE: Final = "log_size_slope"  # log slope of the size term
LOG_DENSE_MULTIPLIER: Final = "log_dense_multiplier"  # log scale of a dense reward's loss
INTERACTION_WEIGHT: Final = "interaction_weight"  # (setting) weight of the interaction term
FLOOR_POSITIVE: Final = "floor_positive"  # the potential keeping the loss floor positive


def group_effect_name(key: str) -> str:
    """``alpha_<key>_z``: a setting key's exponent-group effects (standardised)."""
    return f"alpha_{key}_z"


def group_spread_name(key: str) -> str:
    """``alpha_<key>_spread``: the sd of a setting key's exponent-group effects."""
    return f"alpha_{key}_spread"


# --- constant_data of a law fit -------------------------------------------------------
REFERENCE_SCALE: Final = "reference_scale"  # (axis) D_ref per axis
SIZE_REFERENCE: Final = "size_reference"  # () N_ref, same unit as the size column
SWEPT_MIN: Final = "swept_min"  # (setting, axis) smallest value of the axis in the setting's rows
SWEPT_MAX: Final = "swept_max"  # (setting, axis) largest value of the axis in the setting's rows

# --- root attributes of a saved fit ----------------------------------------------------
ATTR_VERSION: Final = "bayesscale_version"
ATTR_SPEC: Final = "model_spec_toml"
ATTR_DATA_HASH: Final = "data_sha256"
ATTR_DATA_SOURCE: Final = "data_source"
ATTR_SAMPLER: Final = "sampler"
ATTR_SEED: Final = "random_seed"
ATTR_KIND: Final = "bayesscale_kind"
ATTR_PREVIEW: Final = "preview"  # 1 for a --preview fit (Laplace approximation), else 0
SAMPLER_PREVIEW: Final = "laplace (preview)"  # the sampler attribute of a preview fit
KIND_LAW_FIT: Final = "law_fit"
ATTR_CONVERGENCE: Final = "convergence_json"  # R-hat/ESS kept with the fit (data.fitfile.diagnose)
ATTR_IDENTIFICATION: Final = "identification_json"  # law.sensitivity.assess, kept with the fit

# --- pricing tables and fits (synthetic data: discount kappa(r), collapse ratio r*) -------
METHOD: Final = "method"  # column and dim: the synthetic-data generator
AXIS_COLUMN: Final = (
    "axis"  # column: which axis the method synthesises (env|task|traj|cross-axis label)
)
REAL: Final = "real"  # column: real count on that axis
SYNTHETIC: Final = "synthetic"  # column: synthetic count on that axis
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

# --- verl sweeps: task pools, sweep manifests, ingested runs (bayesscale.verl) -------------
# task pool columns (one row per task-environment cell)
TASK_ID: Final = "task_id"
ENV_ID: Final = "env_id"
WORLD_ID: Final = "world_id"
PROMPT: Final = "prompt"
DATA_SOURCE: Final = "data_source"  # verl's reward_fn_key and metric prefix
REWARD_MODEL: Final = "reward_model"  # verl: {"style": ..., "ground_truth": ...}
EXTRA_INFO: Final = "extra_info"
AGENT_NAME: Final = "agent_name"  # verl multi-turn agent loop selector (optional)
GROUND_TRUTH: Final = "ground_truth"
REWARD_STYLE: Final = "style"
EMBEDDING: Final = "embedding"  # optional per-task sentence embedding (list of floats)
# structural signature of an environment (what makes two environments different)
SIG_TOOLS: Final = "tools"  # typed tool/API surface
SIG_STATE_SCHEMA: Final = "state_schema"
SIG_TRANSITION: Final = "transition"  # transition semantics
SIG_VERIFIER: Final = "verifier"  # verifier interface
SIGNATURE_FIELDS: Final = (SIG_TOOLS, SIG_STATE_SCHEMA, SIG_TRANSITION, SIG_VERIFIER)
SIGNATURE: Final = "signature"  # one JSON object holding the fields above
# sweep manifest columns (one row per run)
RUN_ID: Final = "run_id"
SWEEP_AXIS: Final = "sweep_axis"  # which per-axis sweep a run belongs to (env|task|traj)
TRAIN_PATH: Final = "train_path"
VAL_PATH: Final = "val_path"
LOG_PATH: Final = "log_path"
STATUS: Final = "status"
ATTEMPT: Final = "attempt"
JOB_ID: Final = "job_id"
MODEL_PATH: Final = "model_path"
N_CELLS: Final = "n_cells"  # task-environment cells per run (training-signal alignment)
# ids a run trains on; n_envs / n_tasks count the distinct ones (signatures, merged statements)
ENV_IDS: Final = "env_ids"
TASK_IDS: Final = "task_ids"
UPDATES: Final = "updates"  # optimiser updates (trainer.total_training_steps)
TRAIN_BATCH_SIZE: Final = "train_batch_size"
VAL_SIZE: Final = "val_size"  # held-out prompts
VAL_N: Final = "val_n"  # samples per held-out prompt
N_GPUS: Final = "n_gpus"
MESSAGE: Final = "message"
UPDATED_AT: Final = "updated_at"
# ingested-run extras
STEP: Final = "step"
VAL_METRIC: Final = "val_metric"
TOKENS: Final = "tokens"

# --- budget recipe (bayesscale.core.allocate, bayesscale.recipe) ---------------------------------
# dims
BASELINE_DIM: Final = "baseline"  # comparison allocations at equal budget
QUANTILE_DIM: Final = "quantile"  # summary quantiles of a per-draw quantity
SHARE_DIM: Final = "share"  # iso-budget curves: budget share of the varied axis
# baseline labels (coords of BASELINE_DIM)
TRAJ_HEAVY: Final = "traj_heavy"  # anchors held at the reference scale, rest to one axis
CHINCHILLA: Final = "chinchilla"  # every axis scaled by one common factor from the anchors
# per-draw outputs (chain, draw, setting, budget[, axis|baseline])
ALLOCATION: Final = "allocation"  # per-draw optimal sizes D* (effective units the law sees)
PURCHASED: Final = "purchased"  # per-draw optimal units bought (D* / kappa)
SPEND_SHARE: Final = "spend_share"  # money on the axis's own monomial / budget
SHADOW_PRICE: Final = "shadow_price"  # lambda: loss reduction per unit of money at the optimum
SUCCESS_OPTIMUM: Final = "success_at_optimum"  # p at the draw's own optimum
RECIPE_EXPONENT: Final = "recipe_exponent"  # local e_i = dlog D_i / dlog B
SUCCESS_DECISION: Final = "success_at_decision"  # p of the single decision, per draw
BASELINE_UNITS: Final = "baseline_units"  # (budget, baseline, axis) a baseline's purchased units
SUCCESS_BASELINE: Final = "success_at_baseline"  # p of a baseline allocation, per draw
SUCCESS_GAIN: Final = "success_gain"  # p(decision) - p(baseline), per draw
COMPUTE_MULTIPLIER: Final = "compute_multiplier"  # budget factor a baseline needs to match
SWITCH_PRICE: Final = "switch_price"  # price above which an axis is bought only at its floor
# one decision per (setting, budget)
DECISION: Final = "decision"  # (setting, budget, axis) sizes maximising E[p] (purchased units)
DECISION_SPEND: Final = "decision_spend"  # (setting, budget, axis) money per axis
EXPECTED_SUCCESS: Final = "expected_success"  # (setting, budget) E[p] of the decision
# how far beyond the data (bayesscale.data.extrapolation)
EXTRAPOLATION: Final = "extrapolation"  # per draw: units bought / largest swept value, per axis
DECISION_EXTRAPOLATION: Final = "decision_extrapolation"  # (setting, budget, axis) the decision's
TRAJECTORIES: Final = "trajectories"  # per draw: purchased tasks x rollouts per task
DECISION_TRAJECTORIES: Final = "decision_trajectories"  # (setting, budget) the decision's
BEYOND_DATA: Final = "beyond_data"  # (setting, budget) the unbounded recipe lies beyond the data
ISO_SUCCESS: Final = "iso_budget_success"  # (chain, draw, setting, axis, share)
ISO_UNITS: Final = "iso_budget_units"  # (setting, axis, share) median effective units bought
ISO_INSIDE: Final = "iso_budget_inside"  # (setting, axis, share) the split lies in the box
# attributes
ATTR_COST_MODEL: Final = "cost_model"
ATTR_COST_KIND: Final = "cost_kind"  # exact | linearised | compute
ATTR_COST_POWERS: Final = "cost_powers_json"  # the money cost's monomials (axis x axis)
ATTR_COST_WEIGHTS: Final = "cost_weights_json"  # the money cost's weights (one per monomial)
ATTR_FIXED_CELLS: Final = "fixed_cells"  # cells per run of [cost] trajectories = "fixed-cells"
ATTR_CURRENCY: Final = "currency"
ATTR_PRICES: Final = "unit_prices_json"
ATTR_KAPPA_SOURCE: Final = "kappa_source"
ATTR_LAW_FORMS: Final = "law_forms"  # a recipe of a stack: JSON {form: weight} of its mixture

# --- pricing fits: further variables, constant data and attributes (bayesscale.pricing) --------
KAPPA0_SPREAD: Final = "kappa0_spread"  # () sd of method logit-kappa0 within an axis
KAPPA_ZERO: Final = "kappa_zero_ratio"  # (method) r_0 = c k0 / (1 - k0), where kappa = 0
KAPPA_ZERO_AXIS: Final = "kappa_zero_ratio_axis"  # (priced_axis) pooled median of r_0
KAPPA_ZERO_SPREAD: Final = "kappa_zero_ratio_spread"  # () sd of method log r_0 within an axis
PRICING_LEVEL: Final = "pricing_level"  # (method) loss at the axis reference scale, pure real
PRICING_SLOPE: Final = "pricing_slope"  # (priced_axis) -dL/dlog D at the reference scale
PRICING_ALPHA: Final = "pricing_alpha"  # (priced_axis) the axis law's exponent
PRICING_FLOOR: Final = "pricing_floor"  # (method) irreducible loss level - slope / alpha
METHOD_AXIS: Final = "method_axis"  # constant data (method): the axis each method synthesises
BASELINE_REAL: Final = "baseline_real"  # constant data (method): real count r* is evaluated at
PRICING_REFERENCE: Final = "pricing_reference"  # constant data (priced_axis): D_ref per axis
OBS_METHOD: Final = "obs_method"  # constant data (obs): the row's method
ATTR_EXCLUSIONS: Final = "pricing_exclusions_json"  # what the fit left out, and why
ATTR_THRESHOLD: Final = "collapse_threshold"  # S(r*) = threshold (default 0.95)
ATTR_FRAME: Final = "collapse_frame"  # fixed_real | fixed_total
ATTR_EXPONENT_SOURCE: Final = "exponent_source"  # where each axis exponent's prior came from

# --- held-out checks, cross-validation, comparison (bayesscale.law.predict, check, crossval, compare)
# per-row columns of a held-out check (bayesscale.checks.heldout.check); the figures code reads these
ROW: Final = "row"  # 1-based data row of the checked table (of the original table in crossval)
OUTSIDE_SWEPT: Final = (
    "outside_swept"  # check: how many times outside the swept range (max over axes)
)
OVER_MAX_SUFFIX: Final = "_over_max"  # check: column <axis>_over_max, size / largest swept value
LINE: Final = "line"  # CSV file line of that row (the header is line 1); <NA> for parquet
SETTING: Final = "setting"  # the row's setting label, keys joined by " | "
OBSERVED: Final = "observed"  # observed success rate k/n (loss outcome: the observed loss)
PREDICTED: Final = "predicted"  # median of the posterior predictive rate (or loss)
LOWER: Final = "lower"  # central predictive interval at prob: seed spread + binomial noise
UPPER: Final = "upper"
MEAN_LOWER: Final = "mean_lower"  # central interval of the expected rate p = exp(-L): law only
MEAN_UPPER: Final = "mean_upper"
PERCENTILE: Final = "percentile"  # predictive percentile of the observation (randomised PIT)
COVERED: Final = "covered"  # lower <= observed <= upper
NEW_SETTING: Final = "new_setting"  # True where the setting was drawn from the population
# per-group summaries (bayesscale.checks.heldout.by_setting, bayesscale.checks.crossval)
N_ROWS: Final = "n_rows"
MAE: Final = "mae"  # mean |observed - predicted|
COVERAGE: Final = "coverage"  # share of rows with covered == True
MEAN_PERCENTILE: Final = "mean_percentile"  # 0.5 when calibrated on average
FOLD: Final = "fold"  # crossval: the leave-out rule a row was predicted under
# attributes of a check table (DataFrame.attrs)
ATTR_PROB: Final = "prob"
ATTR_COVERAGE: Final = "coverage"
ATTR_MAE: Final = "mae"
# new settings: how unknown groups are handled (bayesscale.law.predict)
NEW_GROUPS_POOLED: Final = "pooled"
# the arviz group holding the pointwise log-likelihood (bayesscale.checks.compare)
LOG_LIKELIHOOD_GROUP: Final = "log_likelihood"
# a stacked fit (bayesscale.law.stack): per form, the weights and scores, and the other forms' fits
STACK_GROUP: Final = "stack"
FORM_DIM: Final = "form"
# the out-of-scale check a fit may store (bayesscale.checks.out_of_scale): one entry per
# (axis, ratio bucket) tested, and the recipe's reach read from it
OUT_OF_SCALE_GROUP: Final = "out_of_scale"
OUT_OF_SCALE_DIM: Final = "out_of_scale_check"
ATTR_DRIFT: Final = "drift"  # its JSON attr: the drift beyond the sweep (bayesscale.law.drift)
# prior sensitivity (bayesscale.law.sensitivity): the fit stores the log prior of every top-level
# free variable (arviz group) and the log-likelihood summed over rows per draw (sample_stats)
LOG_PRIOR_GROUP: Final = "log_prior"
LOG_LIKELIHOOD_TOTAL: Final = "log_likelihood_total"
# terms the package's own samplers evaluate at every draw (bayesscale.law.inference.sample's
# per_draw), in memory only: a fit computes its log densities from them and does not store them
PER_DRAW_GROUP: Final = "per_draw_terms"
ATTR_PRIOR_SCALE: Final = "exponent_prior_scale"  # [priors] exponent_scale of the fit's spec
