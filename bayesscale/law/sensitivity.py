"""What the data identify: how far each exponent moved from its prior.

Two measures per exponent (population ``alpha_pop`` per axis, and ``alpha`` per setting and
axis), both read from a saved fit without PyMC:

* **Contraction** ``1 - Var_post(log alpha) / Var_prior(log alpha)``, on the log scale on which
  the priors are declared (Normal there). The prior variance is analytic from the fit's spec:
  ``(K s)^2`` for a population exponent with declared log-sd ``s`` and prior scale ``K``, and
  ``(K s)^2 + sum_g (K sigma_g)^2 + (K tau)^2`` for a setting's exponent (its per-setting
  deviation ``tau z`` and any exponent-group effects: a half-normal scale times a standard
  normal has variance ``scale^2``). The soft floor wall is left out of the prior. Were prior
  and likelihood Gaussian, the contraction would be exactly the data's share of the
  posterior's precision: ``0.5`` means prior and data carry equal information.
* **Power-scaling sensitivity** (Kallioinen et al. 2024, ArviZ's ``arviz_stats.psense``): how
  much the posterior of ``alpha`` changes when the prior (or the likelihood) is raised to a
  power near 1, by importance weighting the draws. The fit stores what it needs: the log prior
  of each top-level free variable (the ``log_prior`` group;
  :func:`bayesscale.law.model.top_level_priors`) and the total log-likelihood per draw
  (``sample_stats``).
  :func:`psense_tree` assembles the tree ``arviz_stats.psense_summary`` takes.

Flags, named once here (``FLAG_*``), from the thresholds below:

* **prior-dominated** (``‡``): contraction below ``CONTRACTION_DOMINATED`` (0.5: the prior
  carries more information than the data), or power-scaling finds a strong prior and a weak
  likelihood (prior sensitivity >= ``PSENSE_THRESHOLD``, likelihood sensitivity below it);
* **prior-sensitive** (``†``): otherwise, contraction below ``CONTRACTION_SENSITIVE`` (0.8: the
  prior still carries a fifth of the information or more), or prior sensitivity >=
  ``PSENSE_THRESHOLD`` (ArviZ's "prior-data conflict");
* **borderline** (``?``): the contraction is an estimate from the draws, with a Monte Carlo
  error (:func:`contraction_mcse`: the error of the posterior variance over the prior's); where
  ``BORDERLINE_Z`` of those errors either side of it straddle ``CONTRACTION_SENSITIVE``, the
  draws cannot tell prior-sensitive from identified, and the flag says so rather than flip
  with the seed (flagged or not is what a reader acts on; between prior-dominated and
  prior-sensitive, both flags, the estimate decides).

The model-size exponent ``alpha_size``, a population scalar, is assessed the same way
(``size``) against its own prior.

A flagged exponent's interval says as much about the prior as about the data: refit with
``bayesscale fit --prior-scale 2`` and compare (docs/identification.md).

Example
-------
>>> result = assess(load_fit("fit.nc"))  # doctest: +SKIP
>>> result["population"]["traj"]["flag"]  # doctest: +SKIP
'prior-sensitive'
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.data.spec import ModelSpec

CONTRACTION_DOMINATED: Final = 0.5
CONTRACTION_SENSITIVE: Final = 0.8
PSENSE_THRESHOLD: Final = 0.05  # Kallioinen et al. (2024) and arviz_stats.psense_summary
PSENSE_ALPHAS: Final = (0.99, 1.01)
FLAG_DOMINATED: Final = "prior-dominated"
FLAG_SENSITIVE: Final = "prior-sensitive"
FLAG_BORDERLINE: Final = "borderline"
MARKERS: Final = {FLAG_DOMINATED: "‡", FLAG_SENSITIVE: "†", FLAG_BORDERLINE: "?"}
BORDERLINE_Z: Final = 2.0  # Monte Carlo errors either side of the contraction's estimate
SAMPLE: Final = (names.CHAIN_DIM, names.DRAW_DIM)

RULE: Final = (
    f"{MARKERS[FLAG_DOMINATED]} {FLAG_DOMINATED}: prior contraction of log alpha < "
    f"{CONTRACTION_DOMINATED} (the prior carries more information than the data) or power-"
    f"scaling prior sensitivity >= {PSENSE_THRESHOLD} with likelihood sensitivity < "
    f"{PSENSE_THRESHOLD}; {MARKERS[FLAG_SENSITIVE]} {FLAG_SENSITIVE}: contraction < "
    f"{CONTRACTION_SENSITIVE} or prior sensitivity >= {PSENSE_THRESHOLD}; "
    f"{MARKERS[FLAG_BORDERLINE]} {FLAG_BORDERLINE}: the contraction +- {BORDERLINE_Z:g} Monte "
    f"Carlo errors straddles {CONTRACTION_SENSITIVE}"
)

__all__ = [
    "BORDERLINE_Z",
    "CONTRACTION_DOMINATED",
    "CONTRACTION_SENSITIVE",
    "FLAG_BORDERLINE",
    "FLAG_DOMINATED",
    "FLAG_SENSITIVE",
    "MARKERS",
    "PSENSE_THRESHOLD",
    "RULE",
    "assess",
    "contraction",
    "contraction_mcse",
    "flag",
    "has_log_densities",
    "prior_log_sd",
    "psense_skipped",
    "psense_tree",
    "sensitivity",
]


def prior_log_sd(spec: ModelSpec, n_settings: int) -> tuple[np.ndarray, np.ndarray]:
    """The prior sd of ``log alpha_pop`` and of a setting's ``log alpha``, per axis, as the
    spec declares them (its ``[priors] exponent_scale`` already applied)."""
    pop = np.array([a.exponent.log_sd for a in spec.axes])
    var = pop**2 + len(spec.exponent_groups) * spec.exponent_group_spread**2
    if n_settings > 1:
        var = var + np.array([a.exponent_spread for a in spec.axes]) ** 2
    return pop, np.sqrt(var)


def contraction(tree: xr.DataTree, spec: ModelSpec) -> tuple[xr.DataArray, xr.DataArray]:
    """``1 - Var_post / Var_prior`` of the log exponents: population ``(axis)`` and per
    setting ``(setting, axis)``."""
    post = tree["posterior"].to_dataset()
    alpha_pop, alpha = post[names.ALPHA_POP], post[names.ALPHA]
    pop_sd, setting_sd = prior_log_sd(spec, int(alpha.sizes[names.SETTING_DIM]))
    axis = [str(a) for a in alpha_pop[names.AXIS_DIM].values]
    if axis != list(spec.axis_names):
        raise ValueError(f"the fit's axes {axis} are not its spec's {list(spec.axis_names)}")
    pop_var = xr.DataArray(pop_sd**2, dims=names.AXIS_DIM, coords={names.AXIS_DIM: axis})
    set_var = xr.DataArray(setting_sd**2, dims=names.AXIS_DIM, coords={names.AXIS_DIM: axis})
    log_pop = xr.apply_ufunc(np.log, alpha_pop)
    log_alpha = xr.apply_ufunc(np.log, alpha)
    return 1 - log_pop.var(SAMPLE) / pop_var, 1 - log_alpha.var(SAMPLE) / set_var


def _log_draws(da: xr.DataArray, *rest: str) -> np.ndarray:
    """``log`` of a positive variable as (scalars, chains, draws), scalars over ``rest``."""
    x = np.log(da.transpose(*rest, *SAMPLE).to_numpy().astype(float))
    return x.reshape(-1, *x.shape[-2:])


def variance_mcse(x: np.ndarray) -> np.ndarray:
    """Monte Carlo error of the variance of each scalar's draws ``x`` (scalars, chains,
    draws): the error of the mean of the squared deviations, ``sd((x - m)^2) / sqrt(ESS)``.

    >>> x = np.random.default_rng(0).normal(size=(1, 4, 2000))
    >>> bool(0.01 < variance_mcse(x)[0] < 0.03)  # sqrt(2 / 8000) = 0.016 for independent draws
    True
    """
    from bayesscale.sampling.diagnostics import ess_mean

    squared = (x - x.mean(axis=(1, 2), keepdims=True)) ** 2
    flat = squared.reshape(len(x), -1)
    return np.asarray(flat.std(axis=1, ddof=1) / np.sqrt(ess_mean(squared)), dtype=float)


def contraction_mcse(tree: xr.DataTree, spec: ModelSpec) -> tuple[xr.DataArray, xr.DataArray]:
    """The Monte Carlo error of :func:`contraction`: the posterior variance's error over the
    prior variance, population ``(axis)`` and per setting ``(setting, axis)``."""
    post = tree["posterior"].to_dataset()
    alpha_pop, alpha = post[names.ALPHA_POP], post[names.ALPHA]
    pop_sd, setting_sd = prior_log_sd(spec, int(alpha.sizes[names.SETTING_DIM]))
    axis, setting = names.AXIS_DIM, names.SETTING_DIM
    pop = variance_mcse(_log_draws(alpha_pop, axis)) / pop_sd**2
    per = variance_mcse(_log_draws(alpha, setting, axis)).reshape(alpha.sizes[setting], -1)
    per = per / setting_sd[None, :] ** 2
    return (
        xr.DataArray(pop, dims=axis, coords={axis: alpha_pop[axis].values}),
        xr.DataArray(
            per,
            dims=(setting, axis),
            coords={setting: alpha[setting].values, axis: alpha[axis].values},
        ),
    )


def size_contraction(tree: xr.DataTree, spec: ModelSpec) -> tuple[float, float] | None:
    """Contraction of the model-size exponent ``log alpha_size`` against its prior, and its
    Monte Carlo error; ``None`` for a law without a size term."""
    post = tree["posterior"].to_dataset()
    if spec.size is None or names.ALPHA_SIZE not in post:
        return None
    x = _log_draws(post[names.ALPHA_SIZE])
    prior_var = spec.size.exponent.log_sd**2
    return 1 - float(x.var()) / prior_var, float(variance_mcse(x)[0]) / prior_var


def has_log_densities(tree: xr.DataTree) -> bool:
    """Whether the fit stores the log prior and total log-likelihood that power-scaling needs
    (fits made before this version, and synthetic fits, do not)."""
    return (
        names.LOG_PRIOR_GROUP in tree.children
        and "sample_stats" in tree.children
        and names.LOG_LIKELIHOOD_TOTAL in tree["sample_stats"].data_vars
    )


def psense_tree(tree: xr.DataTree, var_names: list[str] | None = None) -> xr.DataTree:
    """A tree for ``arviz_stats.psense`` / ``psense_summary``: the fit's posterior (or
    ``var_names`` of it), its ``log_prior`` group and a ``log_likelihood`` group holding the
    total log-likelihood per draw (power-scaling sums the pointwise values anyway).

    >>> from arviz_stats import psense_summary  # doctest: +SKIP
    >>> psense_summary(psense_tree(load_fit("fit.nc")), var_names=["alpha_pop"])  # doctest: +SKIP
    """
    if not has_log_densities(tree):
        raise ValueError(
            "this fit has no log prior / log-likelihood (made before bayesscale stored them, "
            "or not by `bayesscale fit`); refit to check prior sensitivity"
        )
    post = tree["posterior"].to_dataset()
    total = tree["sample_stats"].to_dataset()[names.LOG_LIKELIHOOD_TOTAL]
    return xr.DataTree.from_dict(
        {
            "posterior": post if var_names is None else post[var_names],
            names.LOG_PRIOR_GROUP: tree[names.LOG_PRIOR_GROUP].to_dataset(),
            names.LOG_LIKELIHOOD_GROUP: total.to_dataset(name=names.OUTCOME),
        }
    )


def psense_skipped(tree: xr.DataTree) -> str | None:
    """Why the power-scaling check does not apply to this fit, or ``None`` when it does."""
    if int(tree.attrs.get(names.ATTR_PREVIEW, 0)):
        return "a preview's Laplace draws are not a posterior sample to reweight"
    if not has_log_densities(tree):
        return "the fit lacks the log prior and log-likelihood; refit to add them"
    return None


def sensitivity(tree: xr.DataTree, var_names: list[str]) -> xr.Dataset | None:
    """Power-scaling sensitivity of ``var_names``: a Dataset with a ``component`` dimension
    (``prior``, ``likelihood``), exactly ``arviz_stats.psense`` on :func:`psense_tree`;
    ``None`` when :func:`psense_skipped` gives a reason."""
    if psense_skipped(tree) is not None:
        return None
    from arviz_stats import psense

    data = psense_tree(tree, var_names)
    with np.errstate(all="ignore"):  # extreme importance weights: a non-finite value, below
        parts = [
            psense(data, var_names=var_names, group=group, alphas=PSENSE_ALPHAS)
            for group in ("prior", "likelihood")
        ]
    return xr.concat(parts, dim="component").assign_coords(component=["prior", "likelihood"])


def flag(
    contraction_value: float,
    prior: float | None,
    likelihood: float | None,
    mcse: float = 0.0,
) -> str | None:
    """``FLAG_DOMINATED``, ``FLAG_SENSITIVE``, ``FLAG_BORDERLINE`` or ``None`` by the rule of
    this module (from the contraction alone when a sensitivity is ``None``): borderline where
    ``contraction_value +- BORDERLINE_Z mcse`` straddles ``CONTRACTION_SENSITIVE``.

    >>> flag(0.79, None, None), flag(0.79, None, None, mcse=0.01), flag(0.9, None, None, 0.01)
    ('prior-sensitive', 'borderline', None)
    """
    psense_known = prior is not None and likelihood is not None
    strong_prior = psense_known and prior >= PSENSE_THRESHOLD  # type: ignore[operator]
    weak_likelihood = psense_known and likelihood < PSENSE_THRESHOLD  # type: ignore[operator]
    margin = BORDERLINE_Z * mcse
    if contraction_value < CONTRACTION_DOMINATED or (strong_prior and weak_likelihood):
        return FLAG_DOMINATED
    if contraction_value < CONTRACTION_SENSITIVE - margin or strong_prior:
        return FLAG_SENSITIVE
    if contraction_value < CONTRACTION_SENSITIVE + margin:
        return FLAG_BORDERLINE
    return None


def _finite(da: xr.DataArray) -> float | None:
    value = float(da)
    return value if np.isfinite(value) else None


def _entry(
    c: float, mcse: float, sens: xr.Dataset | None, name: str, sel: dict[str, str]
) -> dict[str, Any]:
    prior = likelihood = None
    if sens is not None:
        prior = _finite(sens[name].sel({"component": "prior", **sel}))
        likelihood = _finite(sens[name].sel({"component": "likelihood", **sel}))
    return {
        "contraction": c,
        "contraction_mcse": mcse,
        "prior_sensitivity": prior,
        "likelihood_sensitivity": likelihood,
        "flag": flag(c, prior, likelihood, mcse),
    }


def assess(tree: xr.DataTree, spec: ModelSpec | None = None) -> dict[str, Any]:
    """Contraction, power-scaling sensitivity and flag of every exponent (JSON-ready):
    ``population[axis]`` and ``settings[setting][axis]``, each ``{contraction,
    prior_sensitivity, likelihood_sensitivity, flag}`` (sensitivities ``None`` when the fit
    lacks the log densities), with the rule and the prior it was measured against.

    Kept in the fit's attributes (``names.ATTR_IDENTIFICATION``) with a digest of the draws, log
    densities and spec it was computed from: a fit saved after fitting carries it, and reading
    it then needs neither ArviZ nor the power-scaling computation."""
    from bayesscale.data.fitfile import cached, digest, fit_spec

    spec = fit_spec(tree) if spec is None else spec
    parts: list[xr.Dataset | str] = [tree["posterior"].to_dataset(), spec.text]
    for group in ("log_prior", "sample_stats"):
        if group in tree.children:
            parts.append(tree[group].to_dataset())
    parts.append(str(tree.attrs.get(names.ATTR_PREVIEW, 0)))
    parts.append(
        f"{RULE} {CONTRACTION_DOMINATED} {CONTRACTION_SENSITIVE} {PSENSE_THRESHOLD} {PSENSE_ALPHAS} "
        f"{BORDERLINE_Z}"
    )
    return cached(tree, names.ATTR_IDENTIFICATION, digest(*parts), lambda: _assess(tree, spec))


def _assess(tree: xr.DataTree, spec: ModelSpec) -> dict[str, Any]:
    pop_c, set_c = contraction(tree, spec)
    pop_se, set_se = contraction_mcse(tree, spec)
    sens = sensitivity(tree, [names.ALPHA_POP, names.ALPHA])
    axes = [str(a) for a in pop_c[names.AXIS_DIM].values]
    settings = [str(s) for s in set_c[names.SETTING_DIM].values]
    pop_sd, setting_sd = prior_log_sd(spec, len(settings))
    population = {}
    for a in axes:
        at = {names.AXIS_DIM: a}
        population[a] = _entry(
            float(pop_c.sel(at)), float(pop_se.sel(at)), sens, names.ALPHA_POP, at
        )
    per_setting: dict[str, dict[str, Any]] = {}
    for s in settings:
        per_setting[s] = {}
        for a in axes:
            at = {names.SETTING_DIM: s, names.AXIS_DIM: a}
            per_setting[s][a] = _entry(
                float(set_c.sel(at)), float(set_se.sel(at)), sens, names.ALPHA, at
            )
    size = size_contraction(tree, spec)
    return {
        "rule": RULE,
        "thresholds": {
            "contraction_dominated": CONTRACTION_DOMINATED,
            "contraction_sensitive": CONTRACTION_SENSITIVE,
            "psense": PSENSE_THRESHOLD,
            "psense_alphas": list(PSENSE_ALPHAS),
        },
        "psense": sens is not None,
        "psense_skipped": psense_skipped(tree),
        "exponent_prior_scale": spec.exponent_prior_scale,
        "prior_log_sd": {
            "population": dict(zip(axes, pop_sd.tolist(), strict=True)),
            "setting": dict(zip(axes, setting_sd.tolist(), strict=True)),
        },
        "population": population,
        "settings": per_setting,
        **({} if size is None else {"size": _entry(*size, None, names.ALPHA_SIZE, {})}),
    }
