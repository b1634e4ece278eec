"""Model specifications: TOML files that declare the law's terms, priors and pooling.

A spec names the axes (and the observation columns they come from), the outcome
(success counts or a continuous loss), which optional terms are on, and the prior
of every parameter. ``load_spec`` validates it and names the file and key of any
mistake. The default spec, ``models/agentic_rl.toml``, serves the paper's axes;
``models/chinchilla.toml`` serves (N, D) with a loss outcome.

Example
-------
>>> spec = parse_spec('''
... [model]
... name = "tiny"
... [outcome]
... kind = "loss"
... [[axes]]
... name = "N"
... column = "params"
... ''', source="<inline>")
>>> [a.name for a in spec.axes]
['N']
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bayesscale import _bundled, names
from bayesscale.core.forms import DEFAULT_STACK, FORM_NAMES
from bayesscale.core.forms import POWER as POWER_FORM
from bayesscale.tomlfile import non_finite, read_toml, type_name

# The bundled specs (the repository's models/, shipped inside the package: bayesscale._bundled)
SPEC_DIR = _bundled.root() / "models"
DEFAULT_SPEC = "agentic_rl"

OUTCOME_KINDS = ("success", "loss")
# [outcome] seed_noise: how runs of one cell scatter (law.likelihood): beta-binomial, or that
# with a share of runs whose count is uniform on 0..n (a run that collapsed)
BETA_BINOMIAL, CONTAMINATED = "beta_binomial", "contaminated"
SEED_NOISE_KINDS = (BETA_BINOMIAL, CONTAMINATED)
# The report's prior-sensitivity refit widens every exponent prior this many times
# (with_exponent_prior_scale; `bayesscale report --sensitivity-scale`).
SENSITIVITY_SCALE = 2.0
INTERACTION_UNITS = ("raw",)


class SpecError(ValueError):
    """A model specification is malformed; the message names the file and key."""


@dataclass(frozen=True)
class LogNormalPrior:
    """A positive quantity's prior, ``log x ~ Normal(log median, log_sd)``."""

    median: float
    log_sd: float


# The prior of a spread (a group-level standard deviation): a number is the scale of a
# HalfNormal, a LogNormalPrior keeps the spread away from zero (SpecReader.spread_prior).
SpreadPrior = float | LogNormalPrior


@dataclass(frozen=True)
class Axis:
    """One data axis of the law.

    ``column`` holds the size; with ``divide_by`` the size is ``column / divide_by``
    (the structures-per-world axis is ``n_envs / n_worlds``). ``form`` is the term's shape in
    size, one of ``bayesscale.core.forms.FORM_NAMES`` (default ``"power"``); ``form_named``
    says whether the spec wrote it (a spec that names no form is fitted as a stack of
    :data:`bayesscale.core.forms.DEFAULT_STACK`, :func:`forms_to_fit`).
    """

    name: str
    column: str
    label: str
    exponent: LogNormalPrior
    exponent_spread: float
    divide_by: str | None = None
    form: str = POWER_FORM
    form_named: bool = False


def axis_form(reader: SpecReader) -> str:
    """An axis's ``form`` key: one of the law forms (:mod:`bayesscale.core.forms`)."""
    value = reader.get("form", str, POWER_FORM)
    if value not in FORM_NAMES:
        raise reader._fail("form", f"must be one of {list(FORM_NAMES)}, got {value!r}")
    return str(value)


@dataclass(frozen=True)
class SizeTerm:
    """``E (N/N_ref)^(-alpha_N)``; floors pooled within ``groups`` of settings.

    ``slope`` is the prior of ``E alpha_N`` (the term's log-log slope at ``N_ref``).
    """

    column: str
    groups: tuple[str, ...]
    exponent: LogNormalPrior
    slope: LogNormalPrior


@dataclass(frozen=True)
class Interaction:
    """``-gamma (D_a D_b)^(-beta)`` with ``gamma = u * L_inf``, ``u ~ Beta``: keeps ``L > 0``."""

    axes: tuple[str, str]
    units: str
    exponent: LogNormalPrior
    weight_beta: tuple[float, float]


@dataclass(frozen=True)
class DenseReward:
    """Dense-reward rows multiply the sizes on ``axis`` by ``m ~ LogNormal``."""

    axis: str
    multiplier: LogNormalPrior


@dataclass(frozen=True)
class ModelSpec:
    """A validated model specification. ``text`` is the TOML it came from.

    ``exponent_prior_scale`` (``[priors] exponent_scale``, default 1) has already been applied:
    every exponent prior width below (each axis's ``exponent.log_sd`` and ``exponent_spread``,
    and ``exponent_group_spread``) is the declared width times the scale.
    """

    name: str
    description: str
    outcome: str
    setting_keys: tuple[str, ...]
    axes: tuple[Axis, ...]
    level: LogNormalPrior
    level_spread: float
    floor_softness: float
    slope: LogNormalPrior
    slope_spread: float
    exponent_groups: tuple[str, ...] = ()
    exponent_group_spread: float = 0.2
    size: SizeTerm | None = None
    interaction: Interaction | None = None
    dense_reward: DenseReward | None = None
    concentration: LogNormalPrior = LogNormalPrior(200.0, 1.0)
    # > 0: a concentration per setting, log phi_s ~ Normal(log phi, sigma), sigma ~
    # HalfNormal(concentration_spread); 0: one concentration shared by the settings
    concentration_spread: float = 0.0
    seed_noise: str = BETA_BINOMIAL
    log_loss_sigma: float = 0.05
    student_nu: float = 4.0
    exponent_prior_scale: float = 1.0
    text: str = field(default="", repr=False, compare=False)
    source: str = field(default="", repr=False, compare=False)

    @property
    def other_forms(self) -> dict[str, str]:
        """The axes whose term is not a power law, with their form (``{}`` for a power law on
        every axis)."""
        return {a.name: a.form for a in self.axes if a.form != POWER_FORM}

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name:
                return a
        raise KeyError(f"spec {self.name!r} has no axis {name!r}; its axes: {self.axis_names}")

    def required_columns(self) -> tuple[str, ...]:
        """Observation columns this spec reads."""
        cols: list[str] = list(self.setting_keys)
        for a in self.axes:
            cols.append(a.column)
            if a.divide_by:
                cols.append(a.divide_by)
        if self.size is not None:
            cols.append(self.size.column)
            cols.extend(self.size.groups)
        cols.extend(self.exponent_groups)
        if self.dense_reward is not None:
            cols.append(names.REWARD)
        if self.outcome == "success":
            cols += [names.SUCCESSES, names.TRIALS, names.SEED]
        else:
            cols.append(names.LOSS)
        return tuple(dict.fromkeys(cols))


# --- parsing -----------------------------------------------------------------------


class SpecReader:
    """Pulls typed values out of a TOML table and names ``file: key`` on failure."""

    def __init__(self, table: dict[str, Any], where: str, source: str) -> None:
        self.table, self.where, self.source = table, where, source
        self.used: set[str] = set()

    def _fail(self, key: str, what: str) -> SpecError:
        return SpecError(f"{self.source}: [{self.where}] {key}: {what}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        self.used.add(key)
        if key not in self.table:
            if default is ...:
                raise self._fail(key, "is required")
            return default
        value = self.table[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self._fail(key, f"must be {type_name(kind)}, got {value!r}")
        if non_finite(value):
            raise self._fail(key, f"must be a finite number, got {value!r}")
        return value

    def positive(self, key: str, default: Any = ...) -> float:
        value = self.get(key, float, default)
        if value <= 0:
            raise self._fail(key, f"must be > 0, got {value!r}")
        return float(value)

    def prior(self, key: str, default: LogNormalPrior | None = None) -> LogNormalPrior:
        self.used.add(key)
        if key not in self.table:
            if default is None:
                raise self._fail(key, "is required (a table with median and log_sd)")
            return default
        sub = self.sub(key)
        prior = LogNormalPrior(sub.positive("median"), sub.positive("log_sd"))
        sub.finish()
        return prior

    def spread_prior(self, key: str, default: LogNormalPrior) -> SpreadPrior:
        """A spread's prior: a number is a HalfNormal's scale; a table ``{ median, log_sd }``
        a LogNormal, which keeps the spread away from zero; left out, ``default``."""
        if key not in self.table or isinstance(self.table[key], dict):
            return self.prior(key, default)
        return self.positive(key)

    def strings(self, key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = self.get(key, list, list(default))
        if not all(isinstance(v, str) for v in value):
            raise self._fail(key, f"must be a list of strings, got {value!r}")
        return tuple(value)

    def sub(self, key: str) -> SpecReader:
        """The reader of the sub-table ``key`` (required)."""
        value = self.get(key, dict)
        return SpecReader(value, f"{self.where}.{key}" if self.where else key, self.source)

    def optional(self, key: str) -> SpecReader:
        """The reader of the sub-table ``key``, or of an empty table when the spec has none
        (every key then takes its default). Either way ``key`` is a known key here."""
        if key in self.table:
            return self.sub(key)
        self.used.add(key)
        return SpecReader({}, f"{self.where}.{key}" if self.where else key, self.source)

    def section(self, key: str) -> SpecReader | None:
        """The reader of the sub-table ``key`` if the spec has it, else ``None`` (a part of the
        model the spec leaves out); either way ``key`` is a known key here."""
        self.used.add(key)
        return self.sub(key) if key in self.table else None

    def finish(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            raise SpecError(
                f"{self.source}: [{self.where}] unknown key(s) {unknown}; "
                f"known here: {sorted(self.used)}"
            )


def open_spec(text: str, source: str) -> tuple[SpecReader, str, str]:
    """Parse TOML text and read its ``[model]`` table (name, description), which every
    bayesscale spec has. Returns a reader over the whole table, the name, the description."""
    raw = read_toml(text, source, SpecError)
    top = SpecReader(raw, "", source)
    model = top.sub("model")
    name = model.get("name", str)
    description = model.get("description", str, "")
    model.finish()
    return top, name, description


def parse_spec(text: str, source: str = "<string>") -> ModelSpec:
    """Parse and validate spec TOML text; ``source`` names it in error messages."""
    top, name, description = open_spec(text, source)

    likelihood = _parse_outcome(top, source)
    outcome = likelihood["outcome"]

    settings = top.optional("settings")
    setting_keys = settings.strings("keys")
    settings.finish()

    axes = _parse_axes(top, source)
    axis_names = [a.name for a in axes]

    level_r = top.optional("level")
    level = level_r.prior("prior", LogNormalPrior(1.0, 1.0))
    level_spread = level_r.positive("spread", 0.5)
    floor_softness = level_r.positive("floor_softness", 0.02)
    level_r.finish()

    slope_r = top.optional("slope")
    slope = slope_r.prior("prior", LogNormalPrior(0.03, 1.5))
    slope_spread = slope_r.positive("spread", 1.0)
    slope_r.finish()

    pool = top.optional("pooling")
    exponent_groups = pool.strings("exponent_groups")
    exponent_group_spread = pool.positive("group_spread", 0.2)
    pool.finish()
    for g in exponent_groups:
        if g not in setting_keys:
            raise SpecError(
                f"{source}: [pooling] exponent_groups: {g!r} is not a setting key {setting_keys}"
            )

    size = _parse_size(top, setting_keys, source)
    interaction = _parse_interaction(top, axis_names, source)
    dense = _parse_dense_reward(top, axis_names, source)

    pr = top.optional("priors")
    prior_scale = pr.positive("exponent_scale", 1.0)
    pr.finish()
    top.finish()
    if prior_scale != 1.0:
        axes = [
            replace(
                a,
                exponent=LogNormalPrior(a.exponent.median, a.exponent.log_sd * prior_scale),
                exponent_spread=a.exponent_spread * prior_scale,
            )
            for a in axes
        ]
        exponent_group_spread *= prior_scale

    if outcome == "success" and not setting_keys:
        raise SpecError(f"{source}: [settings] keys: a success-count spec needs setting keys")

    return ModelSpec(
        **likelihood,
        name=name,
        description=description,
        setting_keys=setting_keys,
        axes=tuple(axes),
        level=level,
        level_spread=level_spread,
        floor_softness=floor_softness,
        slope=slope,
        slope_spread=slope_spread,
        exponent_groups=exponent_groups,
        exponent_group_spread=exponent_group_spread,
        size=size,
        interaction=interaction,
        dense_reward=dense,
        exponent_prior_scale=prior_scale,
        text=text,
        source=source,
    )


def _parse_outcome(top: SpecReader, source: str) -> dict[str, Any]:
    """The ``[outcome]`` table: the outcome's kind and its likelihood's settings, as
    :class:`ModelSpec`'s keyword fields (``outcome``, ``concentration``,
    ``concentration_spread``, ``seed_noise``, ``log_loss_sigma``, ``student_nu``)."""
    outcome_r = top.sub("outcome")
    outcome = outcome_r.get("kind", str)
    if outcome not in OUTCOME_KINDS:
        raise SpecError(
            f"{source}: [outcome] kind: must be one of {OUTCOME_KINDS}, got {outcome!r}"
        )
    concentration = outcome_r.prior("concentration", LogNormalPrior(200.0, 1.0))
    concentration_spread = float(outcome_r.get("concentration_spread", float, 0.0))
    if concentration_spread < 0:
        raise SpecError(
            f"{source}: [outcome] concentration_spread: must be a number >= 0 (0: one "
            f"concentration shared by the settings), got {concentration_spread!r}"
        )
    if concentration_spread > 0 and outcome != "success":
        raise SpecError(
            f"{source}: [outcome] concentration_spread: the concentration is the success "
            f"counts' beta-binomial's; a {outcome!r} outcome has none"
        )
    seed_noise = outcome_r.get("seed_noise", str, BETA_BINOMIAL)
    if seed_noise not in SEED_NOISE_KINDS:
        raise SpecError(
            f"{source}: [outcome] seed_noise: must be one of {SEED_NOISE_KINDS}, got {seed_noise!r}"
        )
    if seed_noise != BETA_BINOMIAL and outcome != "success":
        raise SpecError(
            f"{source}: [outcome] seed_noise: {seed_noise!r} is a success-count likelihood; a "
            f"{outcome!r} outcome has a Student-t likelihood (student_nu sets its tails)"
        )
    log_loss_sigma = outcome_r.positive("log_loss_sigma", 0.05)
    student_nu = outcome_r.positive("student_nu", 4.0)
    outcome_r.finish()
    return {
        "outcome": outcome,
        "concentration": concentration,
        "concentration_spread": concentration_spread,
        "seed_noise": seed_noise,
        "log_loss_sigma": log_loss_sigma,
        "student_nu": student_nu,
    }


def _parse_axes(top: SpecReader, source: str) -> list[Axis]:
    """The ``[[axes]]`` entries: at least one, distinct names."""
    axes_raw = top.get("axes", list)
    if not axes_raw:
        raise SpecError(f"{source}: [[axes]] needs at least one axis")
    axes = []
    for i, table in enumerate(axes_raw):
        if not isinstance(table, dict):
            raise SpecError(f"{source}: [[axes]] entry {i + 1} must be a table")
        r = SpecReader(table, f"axes #{i + 1}", source)
        axis_name = r.get("name", str)
        axes.append(
            Axis(
                name=axis_name,
                column=r.get("column", str),
                label=r.get("label", str, axis_name),
                exponent=r.prior("exponent", LogNormalPrior(0.25, 0.75)),
                exponent_spread=r.positive("exponent_spread", 0.3),
                divide_by=r.get("divide_by", str, None),
                form=axis_form(r),
                form_named="form" in r.table,
            )
        )
        r.finish()
    axis_names = [a.name for a in axes]
    if len(set(axis_names)) != len(axis_names):
        raise SpecError(f"{source}: [[axes]] names must be distinct, got {axis_names}")
    return axes


def _parse_size(top: SpecReader, setting_keys: Sequence[str], source: str) -> SizeTerm | None:
    """The ``[size]`` term, its groups among the setting keys; ``None`` without it."""
    size = None
    if (s := top.section("size")) is not None:
        size = SizeTerm(
            column=s.get("column", str),
            groups=s.strings("groups"),
            exponent=s.prior("exponent", LogNormalPrior(0.3, 0.5)),
            slope=s.prior("slope", LogNormalPrior(0.03, 1.0)),
        )
        s.finish()
        bad = [g for g in size.groups if g not in setting_keys]
        if bad:
            raise SpecError(f"{source}: [size] groups: {bad} are not setting keys {setting_keys}")
    return size


def _parse_interaction(
    top: SpecReader, axis_names: Sequence[str], source: str
) -> Interaction | None:
    """The ``[interaction]`` term of two axes; ``None`` without it."""
    interaction = None
    if (it := top.section("interaction")) is not None:
        pair = it.strings("axes")
        units = it.get("units", str)
        if units not in INTERACTION_UNITS:
            raise SpecError(
                f"{source}: [interaction] units: only {INTERACTION_UNITS} is supported, got "
                f"{units!r}. With raw counts D >= 1 the term is bounded by gamma, which the "
                "prior keeps below the floor so that 0 < p < 1; reference-normalised units "
                "are unbounded below the reference scale (PAPER.md section 6)."
            )
        if len(pair) != 2 or any(p not in axis_names for p in pair):
            raise SpecError(f"{source}: [interaction] axes: two of {axis_names}, got {list(pair)}")
        weight = it.get("weight_beta", list, [2.0, 8.0])
        if len(weight) != 2 or not all(isinstance(w, int | float) and w > 0 for w in weight):
            raise SpecError(
                f"{source}: [interaction] weight_beta: two positive numbers, got {weight}"
            )
        interaction = Interaction(
            axes=(pair[0], pair[1]),
            units=units,
            exponent=it.prior("exponent", LogNormalPrior(0.2, 0.5)),
            weight_beta=(float(weight[0]), float(weight[1])),
        )
        it.finish()
    return interaction


def _parse_dense_reward(
    top: SpecReader, axis_names: Sequence[str], source: str
) -> DenseReward | None:
    """The ``[dense_reward]`` multiplier of one axis; ``None`` without it."""
    dense = None
    if (d := top.section("dense_reward")) is not None:
        dense = DenseReward(axis=d.get("axis", str), multiplier=d.prior("multiplier"))
        d.finish()
        if dense.axis not in axis_names:
            raise SpecError(
                f"{source}: [dense_reward] axis: {dense.axis!r} is not one of {axis_names}"
            )
    return dense


_PRIORS_HEADER = re.compile(r"^[ \t]*\[priors\][ \t]*(#.*)?$", re.MULTILINE)
_SCALE_LINE = re.compile(r"^([ \t]*exponent_scale[ \t]*=[ \t]*)[^\n#]*", re.MULTILINE)


def with_exponent_prior_scale(spec: ModelSpec, factor: float) -> ModelSpec:
    """``spec`` with every exponent prior ``factor`` times wider (``--prior-scale``).

    ``factor`` multiplies the spec's ``[priors] exponent_scale`` (1 when absent), which
    multiplies each axis's ``exponent.log_sd`` (the width of the population exponent's
    lognormal prior; its median is unchanged), each ``exponent_spread`` (the half-normal scale
    of the per-setting deviations of log alpha) and ``[pooling] group_spread``. The prior
    variance of every log exponent is ``factor**2`` times larger. The returned spec's ``text``
    carries the new key, so a fit made with it records the prior it used.

    >>> wide = with_exponent_prior_scale(load_spec(), 2.0)
    >>> wide.exponent_prior_scale, wide.axes[0].exponent.log_sd
    (2.0, 1.5)
    """
    if not (factor > 0 and factor < float("inf")):
        raise SpecError(f"the exponent prior scale must be a positive number, got {factor!r}")
    if factor == 1.0:
        return spec
    scale = spec.exponent_prior_scale * factor
    raw = tomllib.loads(spec.text)
    line = f"exponent_scale = {scale!r}"
    if "priors" not in raw:
        text = spec.text.rstrip("\n") + f"\n\n[priors]\n{line}\n"
    elif not _PRIORS_HEADER.search(spec.text):
        raise SpecError(
            f"{spec.source}: [priors] is not written as a table header; write it as "
            "`[priors]` with `exponent_scale = ...` to combine it with a prior scale"
        )
    elif "exponent_scale" in raw["priors"]:
        text = _SCALE_LINE.sub(lambda m: m.group(1) + repr(scale), spec.text, count=1)
    else:
        text = _PRIORS_HEADER.sub(lambda m: m.group(0) + "\n" + line, spec.text, count=1)
    scaled = parse_spec(text, source=spec.source)
    if abs(scaled.exponent_prior_scale - scale) > 1e-12 * scale:
        raise SpecError(f"{spec.source}: could not set [priors] exponent_scale = {scale!r}")
    return scaled


_AXES_HEADER = re.compile(r"^[ \t]*\[\[axes\]\][ \t]*(#.*)?$", re.MULTILINE)


def forms_to_fit(
    spec: ModelSpec, forms: Sequence[str] | None = None, preview: bool = False
) -> tuple[ModelSpec, tuple[str, ...]]:
    """What a fit of ``spec`` fits: the spec to fit, and the forms to stack (none: one fit).

    Two or more ``forms`` are stacked; one form is fitted alone on every axis
    (:func:`with_form`: ``forms=["power"]`` is the power law's single fit). Without ``forms``
    a spec that names some axis's form is fitted as written, and a spec that names none (the
    bundled ones, and any written before forms existed) is the stack of
    :data:`~bayesscale.core.forms.DEFAULT_STACK`, except for a ``preview``: a Laplace
    approximation in seconds, for iterating on a spec, fits the spec's own law (stacking
    weighs the forms by PSIS-LOO and out-of-scale refits, which a preview's draws cannot
    carry).

    >>> forms_to_fit(load_spec())[1]
    ('power', 'offset_power')
    >>> forms_to_fit(load_spec(), ["power"])[1]
    ()
    """
    if forms is not None:
        chosen = tuple(forms)
        if len(chosen) == 1:
            return with_form(spec, chosen[0]), ()
        return spec, chosen
    if preview or any(a.form_named for a in spec.axes):
        return spec, ()
    return spec, DEFAULT_STACK


def with_form(spec: ModelSpec, form: str) -> ModelSpec:
    """``spec`` with every axis given the law form ``form`` (:mod:`bayesscale.core.forms`):
    ``form = "..."`` written under each ``[[axes]]`` header, so a fit made with it records the
    form. A spec whose axes already name their forms is refused (compare forms from a spec
    that leaves them to the comparison).

    >>> [a.form for a in with_form(load_spec(), "offset_power").axes]
    ['offset_power', 'offset_power', 'offset_power']
    """
    if form == POWER_FORM and all(a.form == POWER_FORM for a in spec.axes):
        return spec
    raw = tomllib.loads(spec.text)
    named = [a.get("name", "?") for a in raw.get("axes", []) if "form" in a]
    if named:
        raise SpecError(
            f"{spec.source}: [[axes]] {named} name their form; to compare forms, leave the "
            "form out of the spec"
        )
    headers = len(_AXES_HEADER.findall(spec.text))
    if headers != len(spec.axes):
        raise SpecError(
            f"{spec.source}: the axes are not all written as `[[axes]]` table headers; write "
            "them so to compare forms"
        )
    text = _AXES_HEADER.sub(lambda m: m.group(0) + f'\nform = "{form}"', spec.text)
    return parse_spec(text, source=f"{spec.source} ({form} on every axis)")


_TABLE_HEADER = re.compile(r"^[ \t]*\[", re.MULTILINE)


def with_axes(spec: ModelSpec, keep: Sequence[str]) -> ModelSpec:
    """``spec`` with only the axes named in ``keep`` (their ``[[axes]]`` tables kept, the
    others' removed from its text): the law of one axis's own sweep, where the other axes hold
    one value each and their terms are part of the level. A term of a removed axis (the
    interaction, dense reward) is refused.

    >>> with_axes(load_spec(), ["env"]).axis_names
    ('env',)
    """
    unknown = [a for a in keep if a not in spec.axis_names]
    if unknown or not keep:
        raise SpecError(f"{spec.source}: keep axes of {list(spec.axis_names)}, got {list(keep)}")
    dropped = [a for a in spec.axis_names if a not in keep]
    if spec.interaction is not None and set(spec.interaction.axes) & set(dropped):
        raise SpecError(f"{spec.source}: the [interaction] uses the axes {dropped} left out")
    if spec.dense_reward is not None and spec.dense_reward.axis in dropped:
        raise SpecError(f"{spec.source}: [dense_reward] acts on the axis left out")
    starts = [m.start() for m in _AXES_HEADER.finditer(spec.text)]
    if len(starts) != len(spec.axes):
        raise SpecError(
            f"{spec.source}: the axes are not all written as `[[axes]]` table headers; write "
            "them so to fit one axis alone"
        )
    text, last = "", 0
    for start, axis in zip(starts, spec.axes, strict=True):
        body_start = (
            spec.text.index("\n", start) + 1 if "\n" in spec.text[start:] else len(spec.text)
        )
        following = _TABLE_HEADER.search(spec.text, body_start)
        end = following.start() if following else len(spec.text)
        text += spec.text[last:start]
        if axis.name in keep:
            text += spec.text[start:end]
        last = end
    text += spec.text[last:]
    out = parse_spec(text, source=f"{spec.source} (axes {', '.join(keep)} alone)")
    if out.axis_names != tuple(a for a in spec.axis_names if a in keep):
        raise SpecError(f"{spec.source}: could not keep the axes {list(keep)} alone")
    return out


def load_spec(path_or_name: str | Path | None = None) -> ModelSpec:
    """Load a spec from a file path, or by name from the bundled ``models/`` folder.

    >>> load_spec().name
    'agentic-rl'
    """
    if path_or_name is None:
        path_or_name = DEFAULT_SPEC
    path = Path(path_or_name)
    if not path.exists():
        bundled = SPEC_DIR / f"{path_or_name}.toml"
        if bundled.exists():
            path = bundled
        else:
            known = sorted(p.stem for p in SPEC_DIR.glob("*.toml"))
            if not known:
                raise SpecError(
                    f"{path_or_name}: no such spec file, and this installation of bayesscale "
                    f"has no bundled specs ({SPEC_DIR} is empty or missing; reinstall it)"
                )
            raise SpecError(unknown_spec_text(str(path_or_name), known))
    text = path.read_text()
    other = other_kind_text(text, str(path))
    if other is not None:
        raise SpecError(other)
    return parse_spec(text, source=str(path))


# what each other kind of TOML file in models/ is for: (a top-level table it has, what, command)
OTHER_KINDS = (
    ("prices", "a unit-prices file", "bayesscale recipe --prices FILE (and next --prices)"),
    ("kappa0", "a pricing spec", "bayesscale price --spec FILE (and report --pricing-spec)"),
)


def unknown_spec_text(name: str, known: Sequence[str]) -> str:
    """The error for a spec that is neither a file nor a bundled name: the bundled names, and
    the nearest one (``agentic-rl`` for ``agentic_rl``).

    >>> unknown_spec_text("agentic-rl", ["agentic_rl", "chinchilla"])  # doctest: +ELLIPSIS
    "agentic-rl: no such spec file, and no bundled spec of that name: did you mean 'agentic_rl'? ..."
    """

    def norm(s: str) -> str:
        return s.lower().replace("-", "_").removesuffix(".toml")

    close = [k for k in known if norm(k) == norm(Path(name).name)]
    close = close or difflib.get_close_matches(norm(Path(name).name), list(known), n=1)
    hint = f": did you mean {close[0]!r}?" if close else ""
    return (
        f"{name}: no such spec file, and no bundled spec of that name{hint} (bundled: "
        f"{', '.join(known)}; or give a path to a .toml file)"
    )


def other_kind_text(text: str, source: str) -> str | None:
    """The error for a TOML file that is another kind of file than a law spec (a prices file,
    a pricing spec), naming what it is and which command takes it; ``None`` otherwise.

    >>> other_kind_text("prices = {env = 4.1}", "prices.toml")  # doctest: +ELLIPSIS
    'prices.toml is a unit-prices file, not a law spec: ...'
    """
    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None  # parse_spec says where the TOML is broken
    if "model" in tables and "axes" in tables:
        return None
    for key, what, command in OTHER_KINDS:
        if key in tables:
            return (
                f"{source} is {what}, not a law spec: it goes to {command}; a law spec "
                "(bayesscale fit --spec) has [model] and [[axes]], e.g. the bundled agentic_rl"
            )
    return None
