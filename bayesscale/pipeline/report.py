"""``bayesscale report``: fit, price, allocate, check, and write it all up for a paper.

One call runs the package's whole analysis on a dataset and writes ``DIR``:

* ``report.md`` with every figure and table, the convergence diagnostics and the provenance;
* ``fits/law.nc`` (and ``fits/pricing.nc``): the posteriors as DataTree netCDF;
* ``fits/law_wider_prior.nc``: the law refitted with exponent priors ``sensitivity_scale``
  times wider (default 2; ``None`` skips it), for the prior-sensitivity section (the recipe and
  the ordering under both priors, side by side; :mod:`bayesscale.law.sensitivity`);
* ``figures/*.png`` (provenance in their metadata), ``tables/*.md`` and ``tables/*.tex``;
* ``recipe.json``, ``heldout.csv``: the recipe summary and the held-out check per row;
* ``report.json``: the manifest (input SHA-256s, options, version; see
  :mod:`bayesscale.report.folder`, which also guarantees the directory is written whole or not at
  all and never over a different report).

Saved fits can be reused (``law_fit=`` / ``pricing_fit=`` / ``sensitivity_fit=``); they must
have been made from the same data (their ``data_sha256`` attribute is checked), and the
sensitivity fit with the wider prior (its ``exponent_prior_scale`` attribute is checked).

Example
-------
>>> options = ReportOptions(observations=Path("data/reference/observations.csv"))
>>> build_report(options, Path("out/report"))  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import xarray as xr

from bayesscale import names
from bayesscale._version import __version__
from bayesscale.core.forms import POWER
from bayesscale.core.prices import default_prices, load_prices
from bayesscale.data.fitfile import DiagnosticsRefusedError, FitFileError, load_fit
from bayesscale.data.observations import Table, load_observations, read_table, validate
from bayesscale.data.spec import (
    ModelSpec,
    forms_to_fit,
    load_spec,
    with_exponent_prior_scale,
    with_form,
)
from bayesscale.law.mixed_draws import mixture_weights
from bayesscale.pipeline.report_options import ReportOptions
from bayesscale.pipeline.report_recipe import recipe_section
from bayesscale.pipeline.report_sections import (
    SENSITIVITY_FIT,
    heldout_section,
    law_section,
    pricing_section,
    sensitivity_section,
)
from bayesscale.recipe.notes import forms_note
from bayesscale.report.folder import building, prepare
from bayesscale.report.markdown import Sections
from bayesscale.sampling.config import FitConfig

if TYPE_CHECKING:
    from bayesscale.fits.law import LawFit

REPORT_FILE = "report.md"


def _sha256(path: Path | None) -> str | None:
    return None if path is None else hashlib.sha256(Path(path).read_bytes()).hexdigest()


def fingerprint(options: ReportOptions) -> dict[str, Any]:
    """Everything the report depends on: file contents (SHA-256), specs, options, version."""
    config = options.config
    pc = options.pricing_config
    return {
        "bayesscale": __version__,
        "observations": _sha256(options.observations),
        "pricing": _sha256(options.pricing),
        "heldout": _sha256(options.heldout),
        "spec": hashlib.sha256(load_spec(options.spec).text.encode()).hexdigest(),
        "pricing_spec": _pricing_spec_sha256(options),
        "prices": _sha256(options.prices),
        "law_fit": _sha256(options.law_fit),
        "pricing_fit": _sha256(options.pricing_fit),
        "sensitivity_fit": _sha256(options.sensitivity_fit),
        "sensitivity_scale": options.sensitivity_scale,
        "budgets": list(options.budgets),
        "prob": options.prob,
        "config": [
            config.sampler,
            config.chains,
            config.draws,
            config.tune,
            config.seed,
            config.ess_target,
            config.max_draws,
            config.accept,
            config.preview,
        ],
        "pricing_config": [pc.sampler, pc.chains, pc.draws, pc.tune, pc.seed],
        # the transition the package's sampler runs: "bayesscale" ran NUTS before stop 29 and
        # MAMS since, under the same name, so a report made before has no key and is redone
        "kernels": [config.kernel, pc.kernel],
        "max_recipe_draws": options.max_recipe_draws,
        "within_data": options.within_data,
        "warn_beyond": options.warn_beyond,
        # only when set, so that reports written before these options keep their fingerprint
        **({"new_groups": options.new_groups} if options.new_groups else {}),
        **({"out_of_scale": True} if options.out_of_scale else {}),
        **({"forms": list(options.forms)} if options.forms else {}),
    }


def _pricing_spec_sha256(options: ReportOptions) -> str | None:
    if options.pricing is None:
        return None
    from bayesscale.pricing.spec import load_pricing_spec

    return hashlib.sha256(load_pricing_spec(options.pricing_spec).text.encode()).hexdigest()


class _Progress:
    """Numbered steps on stderr with the elapsed time."""

    def __init__(self, total: int, stream: Any = None) -> None:
        self.total, self.step, self.start = total, 0, time.perf_counter()
        self.stream = stream if stream is not None else sys.stderr

    def __call__(self, what: str) -> None:
        self.step += 1
        self.total = max(self.total, self.step)  # a step the count did not foresee
        elapsed = time.perf_counter() - self.start
        print(f"[{self.step}/{self.total} {elapsed:6.1f} s] {what}", file=self.stream, flush=True)


def _sampling(config: FitConfig) -> str:
    return f"({config.describe()})"


def _sample_law(
    table: Any, spec: Any, config: FitConfig, forms: tuple[str, ...] | None = None
) -> xr.DataTree:
    """Sample the law, or the stack of ``forms`` (PyMC and JAX are loaded here: only when a
    fit is made, after every input was read and checked)."""
    from bayesscale.law.inference import fit

    if forms:
        from bayesscale.fits.law import LawFit

        return LawFit.stacked(table, spec, forms, config)[0].tree
    return fit(table, spec, config)


def _fit_or_reuse(
    saved: Path | None,
    kind: str,
    table: Any,
    make: Callable[[], xr.DataTree],
    doing: str,
    step: Callable[[str], None],
) -> xr.DataTree:
    """Load the ``saved`` fit (it must be of ``table``'s data: same SHA-256), or sample one."""
    if saved is None:
        step(doing)
        return make()
    step(f"reusing the {kind} {saved}")
    tree = load_fit(saved, kind=kind)
    found = tree.attrs.get(names.ATTR_DATA_HASH)
    if found != table.sha256:
        raise FitFileError(
            f"{saved}: this {kind} was made from other data (sha256 {str(found)[:12]}...) than "
            f"{table.source} (sha256 {table.sha256[:12]}...); refit, or pass the matching data"
        )
    return tree


def build_report(
    options: ReportOptions, out: Path, force: bool = False, stream: Any = None
) -> Path:
    """Run the analysis and write the report directory ``out`` (see the module docstring).
    Returns the path of ``report.md``. When ``out`` already holds this exact report, nothing
    is recomputed."""
    out = Path(out)
    print_ = _Progress(_step_count(options), stream)
    fp = fingerprint(options)
    if prepare(out, fp, force).up_to_date:
        print(f"{out} already holds this report (same inputs and options)", file=print_.stream)
        return out / REPORT_FILE
    with building(out, fp, force) as tmp:
        for sub in ("fits", "figures", "tables"):
            (tmp / sub).mkdir()
        _run(options, tmp, print_)
    print(f"wrote {out / REPORT_FILE}", file=print_.stream)
    return out / REPORT_FILE


def _out_of_scale(
    options: ReportOptions, law: LawFit, table: Any, spec: Any, step: Callable[[str], None]
) -> LawFit:
    """The law with its out-of-scale check: the one its fit stores, else made now."""
    if law.out_of_scale is not None:
        step("the out-of-scale check the fit stores")
        return law
    step(f"checking out of scale: one refit per axis {_sampling(options.config)}")
    return law.checked_out_of_scale(table, spec, options.config, options.prob)


def _step_count(options: ReportOptions) -> int:
    """Fit, exponents, recipe, writing; pricing, the held-out check and the wider-prior refit
    when asked."""
    return (
        4
        + options.out_of_scale
        + (options.pricing is not None)
        + (options.heldout is not None)
        + (options.sensitivity_scale is not None)
    )


def _run(options: ReportOptions, tmp: Path, step: Callable[[str], None]) -> None:
    """Read and check every input, then the sections in order: the law, pricing, the recipe,
    prior sensitivity, the held-out check; then ``report.md``."""
    from bayesscale.fits.law import LawFit
    from bayesscale.fits.pricing import PricingFit
    from bayesscale.report.figures import provenance

    inputs = _read_inputs(options)
    spec, table = inputs.spec, inputs.table
    md = Sections()
    md.add(
        "# bayesscale report",
        "",
        f"Made by bayesscale {__version__} from `{table.source}` "
        f"({len(table.frame)} runs, sha256 `{table.sha256[:16]}…`) with the model "
        f"`{spec.name}`.",
    )
    law = LawFit(
        _fit_or_reuse(
            options.law_fit,
            names.KIND_LAW_FIT,
            table,
            lambda: _sample_law(table, spec, options.config, inputs.forms),
            (
                f"fitting {spec.name!r} to {len(table.frame)} runs "
                + (f"as a stack of the forms {list(inputs.forms)} " if inputs.forms else "")
                + _sampling(options.config)
            ),
            step,
        ),
        table=table,
    )
    _check_reused_stack(options, law)
    _verdict(md, "law fit", law.diagnostics, options.strict)
    if options.out_of_scale:
        law = _out_of_scale(options, law, table, spec, step)
    heldout = _check_heldout(options, law) if options.heldout is not None else None
    step("exponents: tables and figures")
    summary = law_section(options, law, tmp, md)
    pricing = None
    if inputs.pricing is not None:
        pricing = PricingFit(_fit_pricing(options, inputs.pricing, step))
        _verdict(md, "pricing fit", pricing.diagnostics, options.strict)
        pricing_section(options, pricing, inputs.pricing[1], inputs.pricing[2], tmp, md)
    step(f"the recipe at {len(options.budgets)} budgets")
    prov = provenance(law.tree) if pricing is None else provenance(law.tree, pricing.tree)
    prices = load_prices(str(options.prices)) if options.prices else default_prices()
    frame = None if heldout is None else heldout[1]
    note = forms_note({"law_forms": mixture_weights(law.tree)})
    result = recipe_section(options, tmp, law, pricing, prices, prov, md, frame, note)
    if inputs.wide_spec is not None:
        # a stack: the wider-prior refit is of the power law alone, and compared with it
        base = _power_member(law) if law.forms is not None else None
        wide_spec = inputs.wide_spec
        wide = LawFit(
            _fit_or_reuse(
                options.sensitivity_fit,
                names.KIND_LAW_FIT,
                table,
                lambda: _sample_law(table, wide_spec, options.config),
                f"refitting with exponent priors {options.sensitivity_scale:g}x as wide "
                + _sampling(options.config),
                step,
            ),
            table=table,
        )
        wide.save(tmp / "fits" / SENSITIVITY_FIT)
        if base is not None:
            summary = base.summary(prob=options.prob)
        sensitivity_section(options, tmp, summary, result.ds, wide, pricing, prices, md, base)
    if heldout is not None:
        step(f"held-out check on {options.heldout}")
        heldout_section(options, heldout, tmp, law, md)
    step("writing report.md")
    md.add(*_files_text(pricing is not None, inputs.wide_spec is not None))
    (tmp / REPORT_FILE).write_text(md.text())


def _power_member(law: LawFit) -> LawFit:
    """Of a stacked law, the power law's own fit: what the wider-prior refit is compared
    with (the refit is of one form)."""
    forms = law.forms or {}
    if POWER not in forms:
        raise ReportError(
            f"the law stacks the forms {list(forms)} without the power law, and the prior's "
            "sensitivity refits the power law: stack it with the power law (--forms power,...) "
            "or leave the sensitivity out (--sensitivity-scale 0)"
        )
    return forms[POWER]


@dataclass(frozen=True)
class _Inputs:
    """The report's inputs, read and validated before anything slow runs."""

    spec: ModelSpec
    table: Table
    wide_spec: ModelSpec | None
    pricing: tuple[Any, Any, list[str]] | None
    forms: tuple[str, ...]  # the forms the law stacks (none: one fit of ``spec``)


def _read_inputs(options: ReportOptions) -> _Inputs:
    """Every input read and validated before anything slow runs, so bad input fails fast."""
    if len(set(options.budgets)) < 2:
        raise ReportError(
            f"a report needs at least 2 budgets (its allocation figure is a fan over budgets), "
            f"got {list(options.budgets)}; `bayesscale recipe` answers for one budget"
        )
    spec, forms = forms_to_fit(load_spec(options.spec), options.forms, options.config.preview)
    if forms:
        _check_forms(forms, spec, options.sensitivity_scale is not None)
    table = load_observations(options.observations, spec)
    wide_spec = None
    if options.sensitivity_fit is not None and options.sensitivity_scale is None:
        raise ValueError(
            f"{options.sensitivity_fit}: a sensitivity fit is reused only with a sensitivity "
            "scale (--sensitivity-scale K > 0, the K it was fitted with)"
        )
    if options.sensitivity_scale is not None:
        wide_spec = with_exponent_prior_scale(spec, options.sensitivity_scale)
        if options.sensitivity_fit is not None:  # a reused fit must have the wider prior
            saved = load_fit(options.sensitivity_fit)
            _check_prior_scale(options.sensitivity_fit, saved, wide_spec.exponent_prior_scale)
    priced = _load_pricing(options)
    if options.heldout is not None:  # checked again against the fit once there is one
        frame, _ = read_table(options.heldout)
        validate(frame, spec, str(options.heldout), for_fitting=False)
    return _Inputs(spec, table, wide_spec, priced, forms)


def _check_reused_stack(options: ReportOptions, law: LawFit) -> None:
    """``--forms`` with ``--fit``: the reused fit must be a stack of those forms, or of one
    form that form's own fit."""
    if not options.forms or options.law_fit is None:
        return
    if law.forms is not None and set(law.forms) == set(options.forms):
        return
    if law.forms is None and {a.form for a in law.spec.axes} == set(options.forms):
        return
    found = (
        f"a stack of {list(law.forms)}"
        if law.forms is not None
        else f"one fit with the axes' forms {sorted({a.form for a in law.spec.axes})}"
    )
    raise ReportError(
        f"--forms {','.join(options.forms)}: the reused fit {options.law_fit} is {found}; "
        "reuse a fit of those forms (`bayesscale fit --forms`), or leave out --fit"
    )


def _check_forms(forms: tuple[str, ...], spec: ModelSpec, sensitivity: bool) -> None:
    """A report's stack, checked before anything is sampled: the power law among its forms
    where the prior's sensitivity is asked (its refit is the power law's), and each form one
    the spec lets the stack put on every axis (:func:`bayesscale.data.spec.with_form` refuses
    a spec that names its axes' forms)."""
    if sensitivity and POWER not in forms:
        raise ReportError(
            f"--forms {','.join(forms)}: the prior's sensitivity refits the power law, so the "
            "stack needs it among its forms (--forms power,...), or leave the sensitivity out "
            "(--sensitivity-scale 0)"
        )
    for name in forms:
        with_form(spec, name)


def _fit_pricing(
    options: ReportOptions, priced: tuple[Any, Any, list[str]], step: Callable[[str], None]
) -> xr.DataTree:
    """The pricing fit, sampled or reused."""
    from bayesscale.pricing.fit import fit_pricing, pricing_config

    spec, table, _ = priced
    return _fit_or_reuse(
        options.pricing_fit,
        names.KIND_PRICING_FIT,
        table,
        lambda: fit_pricing(table, spec, options.pricing_config),
        f"pricing {len(table.methods)} synthetic-data method(s) from {len(table.frame)} runs "
        + _sampling(pricing_config(options.pricing_config)),  # what fit_pricing samples with
        step,
    )


def _files_text(pricing: bool, wide: bool) -> tuple[str, ...]:
    """The report's last section: what else the folder holds."""
    return (
        "## Files",
        "",
        "* `fits/law.nc`"
        + (", `fits/pricing.nc`" if pricing else "")
        + (f", `fits/{SENSITIVITY_FIT}`" if wide else "")
        + ": posteriors (ArviZ DataTree, netCDF; `bayesscale.data.fitfile.load_fit`)",
        "* `figures/`: PNG, with the data's file name and SHA-256, the spec, sampler and seed "
        "in their metadata (`bayesscale.report.figures.read_provenance`)",
        "* `tables/`: every table as Markdown and as LaTeX (booktabs)",
        "* `report.json`: what this report was made from",
    )


def _verdict(md: Sections, what: str, d: Any, strict: bool) -> None:
    """A failed or preview fit: refused with ``strict``, else flagged under the title (and on
    standard error)."""
    headline = d.headline()
    if headline is None:
        return
    if strict:
        raise DiagnosticsRefusedError(f"{what}: {headline} (--strict: no report written)")
    md.warn(f"{what}: {headline}")
    print(f"bayesscale report: warning: {what}: {headline}", file=sys.stderr)


class ReportError(ValueError):
    """The report cannot be written as asked (e.g. ``strict`` and a failed fit)."""


def _load_pricing(options: ReportOptions) -> tuple[Any, Any, list[str]] | None:
    """The pricing spec, the validated pricing table and the warnings it raised."""
    if options.pricing is None:
        return None
    from bayesscale.pricing.spec import PricingWarning, load_pricing_spec
    from bayesscale.pricing.table import load_pricing

    spec = load_pricing_spec(options.pricing_spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PricingWarning)
        table = load_pricing(options.pricing, spec)
    return spec, table, [str(w.message) for w in caught]


def _check_prior_scale(saved: Path | None, tree: xr.DataTree, expected: float) -> None:
    found = float(tree.attrs.get(names.ATTR_PRIOR_SCALE, 1.0))
    if abs(found - expected) > 1e-9 * expected:
        raise FitFileError(
            f"{saved}: this fit's exponent priors are {found:g}x the declared width, the "
            f"sensitivity section needs {expected:g}x; refit with `bayesscale fit --prior-scale "
            f"{expected:g}`, or pass the matching --sensitivity-scale"
        )


def _check_heldout(options: ReportOptions, law: LawFit) -> tuple[Any, pd.DataFrame]:
    """The validated held-out table and its posterior-predictive check (fast: no sampling)."""
    from bayesscale.checks.heldout import load_heldout

    assert options.heldout is not None
    table = load_heldout(options.heldout, law.tree)
    frame, _ = law.check_result(table, options.prob, new_groups=options.new_groups)
    return table, frame
