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
import json
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd
import xarray as xr

from bayesscale import __version__, names
from bayesscale.data.extrapolation import WARN_FACTOR
from bayesscale.data.fitfile import (
    Diagnostics,
    FitFileError,
    diagnose,
    fit_spec,
    load_fit,
    save_fit,
)
from bayesscale.data.observations import load_observations, read_table, validate
from bayesscale.data.spec import SENSITIVITY_SCALE, load_spec
from bayesscale.report.folder import building, prepare
from bayesscale.sampling.config import FitConfig

DEFAULT_BUDGETS = (1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6)
REPORT_FILE = "report.md"
MAX_SETTINGS_SHOWN = 4  # settings drawn in the recipe figures (the tables list all)
MAX_ROWS_NAMED = 6  # rows named in a sentence of the report before "and N more"
SENSITIVITY_FIT = "law_wider_prior.nc"


@dataclass(frozen=True)
class ReportOptions:
    """What to analyse and how. Paths are the user's files; ``law_fit``/``pricing_fit``/
    ``sensitivity_fit`` reuse saved fits instead of sampling. ``sensitivity_scale``: the
    exponent priors of the sensitivity refit are this many times wider (``None``: no refit,
    no sensitivity section)."""

    observations: Path
    pricing: Path | None = None
    heldout: Path | None = None
    spec: str | None = None
    pricing_spec: str | None = None
    prices: Path | None = None
    law_fit: Path | None = None
    pricing_fit: Path | None = None
    sensitivity_fit: Path | None = None
    sensitivity_scale: float | None = SENSITIVITY_SCALE
    budgets: tuple[float, ...] = DEFAULT_BUDGETS
    prob: float = 0.9
    config: FitConfig = field(default_factory=FitConfig)
    pricing_config: FitConfig = field(default_factory=FitConfig)  # its accept: the pricing's
    max_recipe_draws: int = 500
    within_data: float | None = None
    warn_beyond: float = WARN_FACTOR
    strict: bool = False
    new_groups: str | None = None  # held-out settings the fit does not know (check's option)


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
        # only when given, so that reports written before the option keep their fingerprint
        **({"new_groups": options.new_groups} if options.new_groups else {}),
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
        elapsed = time.perf_counter() - self.start
        print(f"[{self.step}/{self.total} {elapsed:6.1f} s] {what}", file=self.stream, flush=True)


@dataclass
class _Sections:
    """The report's Markdown, section by section; ``warnings`` go right under the title."""

    parts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, *lines: str) -> None:
        self.parts.append("\n".join(lines).rstrip() + "\n")

    def warn(self, line: str) -> None:
        self.warnings.append(line)

    def text(self) -> str:
        head, rest = self.parts[:1], self.parts[1:]
        flagged = [f"**{w}**\n" for w in self.warnings]
        return "\n".join(head + flagged + rest)


def _sampling(config: FitConfig) -> str:
    return f"({config.describe()})"


def _sample_law(table: Any, spec: Any, config: FitConfig) -> xr.DataTree:
    """Sample the law (PyMC and JAX are loaded here: only when a fit is made, after every
    input was read and checked)."""
    from bayesscale.law.inference import fit

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


def _step_count(options: ReportOptions) -> int:
    """Fit, exponents, recipe, writing; pricing, the held-out check and the wider-prior refit
    when asked."""
    return (
        4
        + (options.pricing is not None)
        + (options.heldout is not None)
        + (options.sensitivity_scale is not None)
    )


def _run(options: ReportOptions, tmp: Path, step: Callable[[str], None]) -> None:
    from bayesscale.report.figures import (
        plot_exponents,
        plot_law,
        provenance,
        save_figure,
    )

    # Every input is read and validated before anything slow runs, so bad input fails fast.
    if len(set(options.budgets)) < 2:
        raise ReportError(
            f"a report needs at least 2 budgets (its allocation figure is a fan over budgets), "
            f"got {list(options.budgets)}; `bayesscale recipe` answers for one budget"
        )
    spec = load_spec(options.spec)
    table = load_observations(options.observations, spec)
    wide_spec = None
    if options.sensitivity_fit is not None and options.sensitivity_scale is None:
        raise ValueError(
            f"{options.sensitivity_fit}: a sensitivity fit is reused only with a sensitivity "
            "scale (--sensitivity-scale K > 0, the K it was fitted with)"
        )
    if options.sensitivity_scale is not None:
        from bayesscale.data.spec import with_exponent_prior_scale

        wide_spec = with_exponent_prior_scale(spec, options.sensitivity_scale)
        if options.sensitivity_fit is not None:  # a reused fit must have the wider prior
            saved = load_fit(options.sensitivity_fit)
            _check_prior_scale(options.sensitivity_fit, saved, wide_spec.exponent_prior_scale)
    priced = _load_pricing(options)
    if options.heldout is not None:  # checked again against the fit once there is one
        frame, _ = read_table(options.heldout)
        validate(frame, spec, str(options.heldout), for_fitting=False)
    md = _Sections()
    md.add(
        "# bayesscale report",
        "",
        f"Made by bayesscale {__version__} from `{table.source}` "
        f"({len(table.frame)} runs, sha256 `{table.sha256[:16]}…`) with the model "
        f"`{spec.name}`.",
    )

    # --- the law ---------------------------------------------------------------------------
    law = _fit_or_reuse(
        options.law_fit,
        names.KIND_LAW_FIT,
        table,
        lambda: _sample_law(table, spec, options.config),
        f"fitting {spec.name!r} to {len(table.frame)} runs {_sampling(options.config)}",
        step,
    )
    law_diag = diagnose(law)
    _verdict(md, "law fit", law_diag, options.strict)
    heldout = _check_heldout(options, law) if options.heldout is not None else None

    step("exponents: tables and figures")
    from bayesscale.law.summary import summarise
    from bayesscale.report.tables import exponent_table, with_verdict

    summary = summarise(law, prob=options.prob)
    save_fit(law, tmp / "fits" / "law.nc")  # with its diagnostics and identification, now known
    md.add("## The law", "", _diagnostics_line("law fit", law_diag, law))
    figures = [("exponents", plot_exponents(law))]
    figures += [(f"law_{a}", plot_law(law, table, a)) for a in spec.axis_names]
    md.add(_exponent_text(summary, options.prob))
    md.add(_identification_text(summary))
    exponents = with_verdict(exponent_table(summary), law_diag.headline())
    md.add(*_tables(tmp, "exponents", [("", exponents)]))
    for name, fig in figures:
        md.add(_figure(tmp, name, fig, save_figure))

    # --- pricing ---------------------------------------------------------------------------
    pricing = None
    verdicts = {"law_fit": law_diag}
    if priced is not None:
        pricing, verdicts["pricing_fit"] = _pricing_section(options, priced, tmp, md, step)

    # --- the recipe ------------------------------------------------------------------------
    step(f"the recipe at {len(options.budgets)} budgets")
    prov = provenance(law) if pricing is None else provenance(law, pricing)
    ds = _recipe_section(options, tmp, law, pricing, verdicts, prov, md, heldout)

    # --- prior sensitivity -------------------------------------------------------------------
    if wide_spec is not None:
        wide = _fit_or_reuse(
            options.sensitivity_fit,
            names.KIND_LAW_FIT,
            table,
            lambda: _sample_law(table, wide_spec, options.config),
            f"refitting with exponent priors {options.sensitivity_scale:g}x as wide "
            + _sampling(options.config),
            step,
        )
        save_fit(wide, tmp / "fits" / SENSITIVITY_FIT)
        _sensitivity_section(options, tmp, summary, ds, wide, pricing, md)

    # --- held-out check --------------------------------------------------------------------
    if heldout is not None:
        step(f"held-out check on {options.heldout}")
        _heldout_section(options, heldout, tmp, law, law_diag, md)

    step("writing report.md")
    md.add(
        "## Files",
        "",
        "* `fits/law.nc`"
        + (", `fits/pricing.nc`" if pricing is not None else "")
        + (f", `fits/{SENSITIVITY_FIT}`" if wide_spec is not None else "")
        + ": posteriors (ArviZ DataTree, netCDF; `bayesscale.data.fitfile.load_fit`)",
        "* `figures/`: PNG, with the data's file name and SHA-256, the spec, sampler and seed "
        "in their metadata (`bayesscale.report.figures.read_provenance`)",
        "* `tables/`: every table as Markdown and as LaTeX (booktabs)",
        "* `report.json`: what this report was made from",
    )
    (tmp / REPORT_FILE).write_text(md.text())


def _verdict(md: _Sections, what: str, d: Any, strict: bool) -> None:
    """A failed or preview fit: refused with ``strict``, else flagged under the title (and on
    standard error)."""
    headline = d.headline()
    if headline is None:
        return
    if strict:
        from bayesscale.data.fitfile import DiagnosticsRefusedError

        raise DiagnosticsRefusedError(f"{what}: {headline} (--strict: no report written)")
    md.warn(f"{what}: {headline}")
    print(f"bayesscale report: warning: {what}: {headline}", file=sys.stderr)


class ReportError(ValueError):
    """The report cannot be written as asked (e.g. ``strict`` and a failed fit)."""


def _diagnostics_line(what: str, d: Any, tree: xr.DataTree) -> str:
    verdict = "converged" if d.ok else f"**{d.headline()}**"
    return (
        f"{what}: {tree.attrs.get(names.ATTR_SAMPLER)}, {tree.attrs.get('chains')} chains x "
        f"{tree.attrs.get('draws')} draws, seed {tree.attrs.get(names.ATTR_SEED)}; max R-hat "
        f"{d.max_rhat:.4f}, min bulk ESS {d.min_ess_bulk:.0f}, divergences {d.divergences}: "
        f"{verdict}."
    )


def _exponent_text(summary: dict[str, Any], prob: float) -> str:
    pop = summary["exponents"]["population"]
    parts = [
        f"{axis} {v['median']:.3f} [{v['lower']:.3f}, {v['upper']:.3f}]" for axis, v in pop.items()
    ]
    text = (
        f"Population exponents (posterior median [{prob:.0%} equal-tailed interval]): "
        + "; ".join(parts)
        + "."
    )
    order = summary.get("ordering")
    if order:
        text += (
            f" Posterior probability of the ordering {' > '.join(order['axes'])}: "
            f"{order['population']:.2f}."
        )
    return text


def _figure(tmp: Path, name: str, fig: Any, save: Callable[..., Path]) -> str:
    import matplotlib.pyplot as plt

    path = save(fig, tmp / "figures" / f"{name}.png")
    plt.close(fig)
    return f"![{name}](figures/{path.name})\n"


def _tables(tmp: Path, name: str, tables: list[tuple[str, Any]]) -> list[str]:
    """Write each table as ``tables/<name>[_<part>].md`` and ``.tex``; return the Markdown."""
    lines: list[str] = []
    for part, tbl in tables:
        stem = name if not part else f"{name}_{part}"
        markdown = tbl.to_markdown()
        (tmp / "tables" / f"{stem}.md").write_text(markdown)
        (tmp / "tables" / f"{stem}.tex").write_text(tbl.to_latex())
        lines += [markdown, ""]
    return lines


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


def _pricing_section(
    options: ReportOptions,
    priced: tuple[Any, Any, list[str]],
    tmp: Path,
    md: _Sections,
    step: Callable[[str], None],
) -> tuple[xr.DataTree, Diagnostics]:
    from bayesscale.pricing.fit import fit_pricing, pricing_config
    from bayesscale.pricing.summary import pricing_diagnostics, summarise_pricing
    from bayesscale.report.figures import plot_collapse, save_figure
    from bayesscale.report.tables import pricing_table, with_verdict

    spec, table, caught = priced
    pricing = _fit_or_reuse(
        options.pricing_fit,
        names.KIND_PRICING_FIT,
        table,
        lambda: fit_pricing(table, spec, options.pricing_config),
        f"pricing {len(table.methods)} synthetic-data method(s) from {len(table.frame)} runs "
        + _sampling(pricing_config(options.pricing_config)),  # what fit_pricing samples with
        step,
    )
    save_fit(pricing, tmp / "fits" / "pricing.nc")
    result = summarise_pricing(pricing, prob=options.prob)
    verdict = pricing_diagnostics(pricing)
    _verdict(md, "pricing fit", verdict, options.strict)
    md.add(
        "## Pricing synthetic data",
        "",
        _diagnostics_line("pricing fit", verdict, pricing),
        "",
        f"Data: `{table.source}` ({len(table.frame)} usable runs, sha256 `{table.sha256[:16]}…`).",
    )
    if caught:
        md.add("Left out of the pricing fit, with the reason:", "")
        md.add(*[f"* {message}" for message in caught])
    md.add(
        *_tables(tmp, "pricing", [("", with_verdict(pricing_table(result), verdict.headline()))])
    )
    md.add(_figure(tmp, "collapse_kappa", plot_collapse(pricing, quantity="kappa"), save_figure))
    fig = plot_collapse(pricing, quantity="success", table=table)
    md.add(_figure(tmp, "collapse_success", fig, save_figure))
    return pricing, verdict


def _recipe_section(
    options: ReportOptions,
    tmp: Path,
    law: xr.DataTree,
    pricing: xr.DataTree | None,
    verdicts: dict[str, Diagnostics],
    prov: Any,
    md: _Sections,
    heldout: tuple[Any, pd.DataFrame] | None = None,
) -> xr.Dataset:
    from bayesscale.checks.heldout import extent_summary
    from bayesscale.core.prices import default_prices, load_prices
    from bayesscale.data.extrapolation import times
    from bayesscale.law.sensitivity import assess
    from bayesscale.recipe.iso_budget import iso_budget
    from bayesscale.recipe.output import exponent_flags, flag_rows, to_json
    from bayesscale.recipe.vouched import (
        headline_json,
        mark_heldout_reach,
        sweep_further_text,
        sweep_targets,
        vouched_recipe,
    )
    from bayesscale.report.figures import plot_allocation, plot_iso_budget, save_figure
    from bayesscale.report.recipe_text import discount_note, price_unit_note
    from bayesscale.report.tables import recipe_table, with_verdict

    prices = load_prices(str(options.prices)) if options.prices else default_prices()
    ds, unbounded = vouched_recipe(
        law,
        list(options.budgets),
        warn_beyond=options.warn_beyond,
        prices=prices,
        pricing=pricing,
        max_draws=options.max_recipe_draws,
        multipliers=False,
        within_data=options.within_data,
    )
    within = options.within_data if unbounded is None else options.warn_beyond
    far = None if unbounded is None else to_json(unbounded, options.prob, options.warn_beyond)
    summary = headline_json(
        to_json(ds, options.prob, options.warn_beyond),
        far,
        options.warn_beyond,
        ds.get(names.BEYOND_DATA),
    )
    summary["fit_diagnostics"] = {k: v.to_dict() for k, v in verdicts.items()}
    reach = None if heldout is None else extent_summary(heldout[1], options.warn_beyond)
    outside_reach = (
        None
        if reach is None
        else mark_heldout_reach(
            cast(list[dict[str, Any]], summary["results"]), reach["largest_over_max"]
        )
    )
    flags = exponent_flags(assess(law, fit_spec(law)))  # kept in the fit by the law section
    flag_rows(summary, flags)
    headline = "; ".join(
        f"{k.replace('_', ' ')}: {v.headline()}" for k, v in verdicts.items() if v.headline()
    )
    _write_json(tmp / "recipe.json", summary)
    settings = [str(s) for s in ds[names.SETTING_DIM].to_numpy()][:MAX_SETTINGS_SHOWN]
    middle = float(options.budgets[len(options.budgets) // 2])
    units = cast(dict[str, str], summary["units"])
    md.add(
        "## The budget recipe",
        "",
        f"Cost: {summary['cost_model']}; unit prices ({summary['currency']}): "
        + ", ".join(f"{a} {p:g}" for a, p in cast(dict[str, float], summary["unit_prices"]).items())
        + f". Discounts: {summary['kappa']}. Units: "
        + "; ".join(f"{a} = {u}" for a, u in units.items())
        + ". "
        + "".join(
            _sentence(n) + " "
            for n in (price_unit_note(summary), discount_note(cast(str, summary.get("kappa"))))
            if n is not None
        )
        + "Each posterior draw's optimal allocation (exact KKT), summarised as posterior median "
        f"[{options.prob:.0%} equal-tailed interval]; the decision is the one allocation that "
        "maximises expected success. Full results: `recipe.json`.",
        "",
        _extent_text(summary if far is None else far, options),
    )
    shown = sorted({options.budgets[0], middle, options.budgets[-1]})
    results = cast(list[dict[str, Any]], summary["results"])
    if unbounded is not None:
        n_far = sum(1 for r in results if r.get("within_data") is False)
        md.add(
            f"**What the data vouch for.** In {n_far} of {len(results)} (setting, budget) rows "
            f"the unbounded optimum lies more than {options.warn_beyond:g}x outside the swept "
            f"range, so the table below is the recipe with every axis bounded at "
            f"{options.warn_beyond:g}x its largest swept value (`bayesscale recipe "
            f"--within-data {options.warn_beyond:g}`), in units bought. It keeps the recipe near "
            "the data; it does not make it checked: how far out the law has been tested is what "
            "the held-out check says. The unbounded recipe follows, labelled as the "
            "extrapolation it is.",
            "",
        )
    table = recipe_table(
        ds,
        budgets=shown,
        settings=settings,
        prob=options.prob,
        warn_factor=options.warn_beyond,
        exponent_flags=flags,
    )
    md.add(*_tables(tmp, "recipe", [("", with_verdict(table, headline or None))]))
    every = recipe_table(
        ds,
        prob=options.prob,
        warn_factor=options.warn_beyond,
        label="tab:recipe-all",
        exponent_flags=flags,
    )
    _tables(tmp, "recipe", [("all", with_verdict(every, headline or None))])
    if reach is not None and outside_reach is not None:
        held = ", ".join(f"{a} {times(f)}" for a, f in reach["largest_over_max"].items())
        md.add(
            f"**What the held-out check covers.** The held-out runs reach, per axis, this many "
            f"times the largest swept value: {held}. {len(results) - len(outside_reach)} of "
            f"{len(results)} rows stay within that reach on every axis"
            + (
                "; beyond it (the law untested there): "
                + "; ".join(outside_reach[:MAX_ROWS_NAMED])
                + (
                    f"; and {len(outside_reach) - MAX_ROWS_NAMED} more"
                    if len(outside_reach) > MAX_ROWS_NAMED
                    else ""
                )
                + " (`within_heldout_reach` in `recipe.json`)."
                if outside_reach
                else "."
            ),
            "",
        )
    md.add(
        f"Shown: {len(settings)} of {ds.sizes[names.SETTING_DIM]} settings at "
        f"{len(shown)} of {len(options.budgets)} budgets; every setting and budget: "
        "`tables/recipe_all.md` (`.tex`).",
        "",
    )
    short = [r for r in results if r["budget_spent"] < 0.99 * r["budget"]]
    if short:
        md.add(
            f"In {len(short)} of {len(results)} rows the bounds leave part of the budget unspent "
            f"(at {short[-1]['budget']:,.0f} {summary['currency']}, "
            f"{short[-1]['budget_spent']:,.0f} is spent): more money buys nothing the data "
            "can vouch for.",
            "",
        )
    fig = plot_allocation(ds, provenance=prov, settings=settings, fit=law)
    md.add(_figure(tmp, "allocation", fig, save_figure))
    if unbounded is not None:
        further = sweep_further_text(
            sweep_targets(
                cast(list[dict[str, Any]], cast(dict[str, Any], far)["results"]),
                options.warn_beyond,
            )
        )
        md.add(
            "### Extrapolation: the unbounded recipe (not vouched for by the data)",
            "",
            "The optimum with no bound but the box's, at the same budgets: `!` marks the axes "
            f"more than {options.warn_beyond:g}x outside the swept range. A power law fitted "
            "over the sweep says little there. Sweep further first, then refit: "
            + (further or "(no axis)")
            + ".",
            "",
        )
        table = recipe_table(
            unbounded,
            budgets=shown,
            settings=settings,
            prob=options.prob,
            warn_factor=options.warn_beyond,
            label="tab:recipe-extrapolation",
            exponent_flags=flags,
        )
        md.add(*_tables(tmp, "recipe_extrapolation", [("", with_verdict(table, headline or None))]))
        fig = plot_allocation(unbounded, provenance=prov, settings=settings, fit=law)
        md.add(
            "The unbounded recipe's allocation (an extrapolation; shaded where it lies beyond "
            "the data):",
            "",
        )
        md.add(_figure(tmp, "allocation_extrapolation", fig, save_figure))
    decision = ds[names.DECISION_SPEND].sel({names.BUDGET_DIM: middle, names.SETTING_DIM: settings})
    iso = iso_budget(
        law,
        middle,
        prices=prices,
        pricing=pricing,
        settings=settings,
        reference_spend=decision.transpose(names.SETTING_DIM, names.AXIS_DIM).to_numpy(),
        max_draws=options.max_recipe_draws,
        within_data=within,
    )
    fig = plot_iso_budget(iso, provenance=prov, settings=settings, recipe=ds, fit=law)
    md.add(
        f"Iso-budget curves at {middle:,.0f} {summary['currency']}: each panel moves one axis's "
        "share of the budget and splits the rest over the other axes as the decision at this "
        "budget splits it (the figure's reference spend), so every curve passes through the "
        "decision.",
        "",
    )
    md.add(_figure(tmp, "iso_budget", fig, save_figure))
    return ds


def _identification_text(summary: dict[str, Any]) -> str:
    """What the data identify: contraction and power-scaling per population exponent, and
    which exponents lean on the prior (:mod:`bayesscale.law.sensitivity`)."""
    from bayesscale.law.sensitivity import MARKERS
    from bayesscale.law.summary import flagged

    ident = summary["identification"]
    parts = []
    for axis, v in summary["exponents"]["population"].items():
        text = f"{axis} {v['contraction']:.2f}"
        if v["prior_sensitivity"] is not None:
            text += f" (power-scaling sensitivity: prior {v['prior_sensitivity']:.3f}"
            text += f", likelihood {v['likelihood_sensitivity']:.3f})"
        if v["flag"]:
            text += f" {MARKERS[v['flag']]} **{v['flag']}**"
        parts.append(text)
    notes = flagged(summary)
    n_settings = sum(1 for n in notes if "(population)" not in n)
    total = len(summary["exponents"]["settings"]) * len(summary["ordering"]["axes"])
    lines = [
        "What the data identify. Contraction of each population exponent (1 - posterior / "
        "prior variance of log α; 1: the data decide it, 0: the prior does): "
        + "; ".join(parts)
        + f". Per setting, {n_settings} of {total} exponents are flagged (marked in the table). "
        f"Rule: {ident['rule']}. A flagged exponent's interval, and the ordering probability "
        "that rests on it, say as much about the prior as about the data"
        + (
            ": the section *Prior sensitivity* refits with wider exponent priors." if notes else "."
        ),
    ]
    return "\n".join(lines)


def _check_prior_scale(saved: Path | None, tree: xr.DataTree, expected: float) -> None:
    found = float(tree.attrs.get(names.ATTR_PRIOR_SCALE, 1.0))
    if abs(found - expected) > 1e-9 * expected:
        raise FitFileError(
            f"{saved}: this fit's exponent priors are {found:g}x the declared width, the "
            f"sensitivity section needs {expected:g}x; refit with `bayesscale fit --prior-scale "
            f"{expected:g}`, or pass the matching --sensitivity-scale"
        )


def _sensitivity_section(
    options: ReportOptions,
    tmp: Path,
    summary: dict[str, Any],
    ds: xr.Dataset,
    wide: xr.DataTree,
    pricing: xr.DataTree | None,
    md: _Sections,
) -> None:
    """The ordering and the recipe under the default and the wider exponent prior."""
    from bayesscale.core.prices import default_prices, load_prices
    from bayesscale.law.summary import summarise
    from bayesscale.recipe.solve import recipe
    from bayesscale.report.tables import Interval, Number, PaperTable

    scale = options.sensitivity_scale
    wide_summary = summarise(wide, prob=options.prob)
    axes = summary["ordering"]["axes"]
    middle = float(options.budgets[len(options.budgets) // 2])
    settings = [str(s) for s in ds[names.SETTING_DIM].to_numpy()][:MAX_SETTINGS_SHOWN]
    prices = load_prices(str(options.prices)) if options.prices else default_prices()
    bound = ds.attrs.get("within_data", "none")  # the headline's bounds, for a like comparison
    wide_ds = recipe(
        wide,
        [middle],
        prices=prices,
        pricing=pricing,
        settings=settings,
        max_draws=options.max_recipe_draws,
        multipliers=False,
        within_data=None if bound == "none" else float(bound),
    )
    rows: list[list[Any]] = []
    for a in axes:
        rows.append(
            [
                f"α {a} (population)",
                Interval.of(summary["exponents"]["population"][a]),
                Interval.of(wide_summary["exponents"]["population"][a]),
            ]
        )
    rows.append(
        [
            "P(" + " > ".join(axes) + ")",
            Number(summary["ordering"]["population"]),
            Number(wide_summary["ordering"]["population"]),
        ]
    )
    breaks = [len(rows)]

    def decision(recipe_ds: xr.Dataset, setting: str) -> str:
        sel = {names.SETTING_DIM: setting, names.BUDGET_DIM: middle}
        spend = recipe_ds[names.DECISION_SPEND].sel(sel)
        shares = " / ".join(
            f"{float(spend.sel({names.AXIS_DIM: a}) / spend.sum()):.2f}" for a in axes
        )
        return f"{shares} (E[p] {float(recipe_ds[names.EXPECTED_SUCCESS].sel(sel)):.3f})"

    for s in settings:
        rows.append([f"{s}: spend {' / '.join(axes)}", decision(ds, s), decision(wide_ds, s)])
    table = PaperTable(
        ["quantity", "default prior", f"exponent priors {scale:g}x as wide"],
        rows,
        caption=(
            f"Prior sensitivity: population exponents (median [{options.prob:.0%} interval]), "
            f"the ordering probability, and the recipe's decision at {middle:,.0f} "
            f"{ds.attrs.get(names.ATTR_CURRENCY, '')} (share of spend per axis and the expected "
            "success E[p] of the decision) under the default exponent priors and under priors "
            f"{scale:g}x as wide (log-sd and spreads)."
        ),
        label="tab:prior-sensitivity",
        breaks=tuple(breaks),
    )
    md.add(
        "## Prior sensitivity",
        "",
        _diagnostics_line(f"wider-prior fit ({scale:g}x)", diagnose(wide), wide),
        "",
        "The law refitted with every exponent prior "
        f"{scale:g}x as wide (`bayesscale fit --prior-scale {scale:g}`: each axis's "
        "`exponent.log_sd` and `exponent_spread`; medians unchanged). A quantity that moves "
        "much was set by the prior. One that barely moves is not thereby identified: a wider "
        "prior with the same median can still pull it toward that median, which the "
        "contraction figures of the law section (and † / ‡) measure. Full fit: "
        f"`fits/{SENSITIVITY_FIT}`.",
    )
    md.add(*_tables(tmp, "prior_sensitivity", [("", table)]))


def _extent_text(summary: dict[str, Any], options: ReportOptions) -> str:
    """How far the recipe lies beyond the data, in words: the worst factor per axis over the
    largest swept value, and how many rows pass the warning factor."""
    from bayesscale.data.extrapolation import times
    from bayesscale.report.recipe_text import EFFECTIVE_UNITS

    rows = [r for r in cast(list[dict[str, Any]], summary["results"]) if r.get("extrapolation")]
    if not rows:
        return (
            "The law fit stores no swept range (an older fit): how far the recipe extrapolates "
            "is not shown. Refit to see it."
        )
    worst: dict[str, float] = {}
    ranges: dict[str, set[tuple[float, float]]] = {}
    for r in rows:
        for axis, e in r["extrapolation"]["axes"].items():
            factor = float(e.get("decision_over_max", e["optimum_over_max"]["median"]))
            worst[axis] = max(worst.get(axis, 0.0), factor)
            ranges.setdefault(axis, set()).add((e["swept_min"], e["swept_max"]))
    parts = []
    for a, found in ranges.items():
        if len(found) == 1:
            ((lo, hi),) = found
            parts.append(f"{a} {lo:,g}-{hi:,g}")
        else:
            parts.append(f"{a} varies by setting")
    swept = "; ".join(parts)
    beyond = sum(1 for r in rows if r["extrapolation"]["beyond"])
    factor = options.warn_beyond
    axes = ", ".join(f"{a} {times(f)}" for a, f in sorted(worst.items(), key=lambda kv: -kv[1]))
    text = (
        f"**How far beyond the data.** Swept ranges: {swept}. Over all settings and budgets the "
        f"decision reaches, per axis, up to this many times the largest swept value, in "
        f"{EFFECTIVE_UNITS}: {axes}. "
        f"{beyond} of {len(rows)} (setting, budget) rows lie more than {factor:g}x outside the "
        "swept range on some axis (the tables' last column names the axes). "
    )
    if beyond:
        text += (
            "A power law fitted over the swept range says little that far beyond it: read those "
            "rows as the law's extrapolation, not as a measured recipe; the out-of-scale "
            "cross-validation in `docs/checks.md` measures how well the law predicts one step "
            "beyond its range."
        )
    return text


def _check_heldout(options: ReportOptions, law: xr.DataTree) -> tuple[Any, pd.DataFrame]:
    """The validated held-out table and its posterior-predictive check (fast: no sampling)."""
    from bayesscale.checks.heldout import check, load_heldout

    assert options.heldout is not None
    table = load_heldout(options.heldout, law)
    return table, check(law, table, prob=options.prob, new_groups=options.new_groups)


def _heldout_section(
    options: ReportOptions,
    heldout: tuple[Any, pd.DataFrame],
    tmp: Path,
    law: xr.DataTree,
    law_diag: Diagnostics,
    md: _Sections,
) -> None:
    from bayesscale.checks.heldout import summary as check_summary
    from bayesscale.report.figures import plot_heldout, provenance, save_figure
    from bayesscale.report.tables import heldout_table, with_verdict

    table, frame = heldout
    _write_csv(tmp / "heldout.csv", frame)
    result = check_summary(frame, options.warn_beyond)
    overall = result["overall"]
    md.add(
        "## Held-out check",
        "",
        f"{overall[names.N_ROWS]} held-out runs of `{table.source}` the fit never saw: "
        f"{options.prob:.0%} posterior-predictive coverage {overall[names.COVERAGE]:.3f} "
        f"(calibrated: about {options.prob:.2f}), mean predictive percentile "
        f"{overall[names.MEAN_PERCENTILE]:.3f} (calibrated: about 0.5), mean absolute error "
        f"{overall[names.MAE]:.4f}. Intervals include seed-to-seed spread. Per row: "
        "`heldout.csv`.",
        "",
        _sentence(result["calibration"]["note"]),
    )
    extent = result["extrapolation"]
    if extent:
        reach = ", ".join(f"{a} {f:.3g}x" for a, f in extent["largest_over_max"].items())
        parts = [
            f"{extent[k][names.N_ROWS]} rows {k} {extent['warn_factor']:g}x of the swept range "
            f"cover at {extent[k][names.COVERAGE]:.3f}"
            for k in ("within", "beyond")
            if extent[k] is not None
        ]
        md.add(
            f"The held-out runs reach, per axis, up to this many times the largest swept value: "
            f"{reach}; {'; '.join(parts)}. The check vouches for the law that far out, not "
            "further.",
            "",
        )
    table_md = with_verdict(heldout_table(frame), law_diag.headline())
    md.add(*_tables(tmp, "heldout", [("", table_md)]))
    fig = plot_heldout(frame, provenance=provenance(law, table), fit=law)
    md.add(_figure(tmp, "heldout", fig, save_figure))


def _sentence(text: str) -> str:
    """``text`` as a sentence: a capital first letter and a full stop."""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")


def _write_csv(path: Path, frame: pd.DataFrame) -> None:
    frame.to_csv(path, index=False)
