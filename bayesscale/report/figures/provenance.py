"""Data provenance of figures, and saving them atomically with it.

Every figure records what it was drawn from: for each input (a law or pricing fit, an
observation or pricing table) the data file's name and SHA-256, the model spec's name, the
sampler and its seed, and the bayesscale version that made the fit; plus the version that drew
the figure. In a PNG these are text chunks (one per field, and the whole record as JSON under
``provenance``); in a PDF the document's Subject (one readable line) and Keywords (the JSON);
in an SVG its Description (the JSON).

Plot functions attach the provenance of their inputs to the figure they return, so saving is

>>> fig = plot_law(fit, table, "env")  # doctest: +SKIP
>>> save_figure(fig, "law_env.png")  # doctest: +SKIP
>>> read_provenance("law_env.png").sources[0].data_sha256  # doctest: +SKIP
'3f2a...'

``save_figure`` writes a temporary file in the target folder and renames it over the target
(never a half-written figure) and refuses to replace an existing file unless
``overwrite=True``.
"""

from __future__ import annotations

import json
import tomllib
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import xarray as xr
from matplotlib.figure import Figure
from PIL import Image

from bayesscale import names
from bayesscale._version import __version__
from bayesscale.atomic import write_atomically
from bayesscale.report.figures.style import FigureError

PROVENANCE_KEY: Final = "provenance"  # PNG text chunk holding the whole record as JSON
VERSION_KEY: Final = "bayesscale_version"  # PNG text chunk: the version that drew the figure
FORMATS: Final = (".png", ".pdf", ".svg")
FIELDS: Final = ("data_file", "data_sha256", "spec", "sampler", "seed", "fit_version")
FOOTER_SIZE: Final = 5.0
DEFAULT_DPI: Final = 200.0
_ATTACHED: weakref.WeakKeyDictionary[Figure, Provenance] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Source:
    """One input of a figure: ``kind`` is ``law_fit``, ``pricing_fit`` or ``table``."""

    kind: str
    data_path: str
    data_sha256: str
    spec: str = ""
    sampler: str = ""
    seed: int | None = None
    fit_version: str = ""

    @property
    def data_file(self) -> str:
        """The data file's name without its folder."""
        return Path(self.data_path).name


@dataclass(frozen=True)
class Provenance:
    """What a figure was drawn from, and the bayesscale version that drew it."""

    sources: tuple[Source, ...]
    version: str = field(default=__version__)

    def __post_init__(self) -> None:
        if not self.sources:
            raise FigureError("a provenance needs at least one source")

    def to_json(self) -> str:
        return json.dumps(
            {"version": self.version, "sources": [asdict(s) for s in self.sources]},
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Provenance:
        raw = json.loads(text)
        return cls(tuple(Source(**s) for s in raw["sources"]), version=str(raw["version"]))

    def footer(self) -> str:
        """One line: ``data observations.csv (sha256 1a2b3c4d5e6f), spec agentic-rl, numpyro seed 11; ...``."""
        parts = []
        for s in self.sources:
            text = f"{s.kind}: {s.data_file} (sha256 {s.data_sha256[:12]})"
            if s.spec:
                text += f", spec {s.spec}"
            if s.seed is not None:
                text += f", {s.sampler or 'sampler'} seed {s.seed}"
            parts.append(text)
        return "; ".join(parts) + f"; bayesscale {self.version}"

    def png_text(self) -> dict[str, str]:
        """The PNG text chunks: one per field (``law_fit.data_sha256``, ...), the JSON record
        under ``provenance`` and the drawing version under ``bayesscale_version``."""
        out = {
            VERSION_KEY: self.version,
            PROVENANCE_KEY: self.to_json(),
            "Description": self.footer(),
        }
        kinds = [s.kind for s in self.sources]
        for i, s in enumerate(self.sources):
            prefix = s.kind if kinds.count(s.kind) == 1 else f"{s.kind}{i}"
            for name in FIELDS:
                value = getattr(s, name)
                out[f"{prefix}.{name}"] = "" if value is None else str(value)
        return out

    def merged(self, other: Provenance) -> Provenance:
        """Both provenances' sources (duplicates once)."""
        return Provenance(tuple(dict.fromkeys((*self.sources, *other.sources))), self.version)


def _spec_name(text: str) -> str:
    try:
        return str(tomllib.loads(text)["model"]["name"])
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise FigureError(f"the fit's {names.ATTR_SPEC!r} attribute is not a spec: {exc}") from exc


def source_of(item: Any) -> Source:
    """The :class:`Source` of a fit (an ``xarray.DataTree`` saved by bayesscale) or of a table
    with ``source`` and ``sha256`` (``observations.Table``, ``pricing.PricingTable``)."""
    if isinstance(item, xr.DataTree):
        attrs = item.attrs
        needed = (names.ATTR_KIND, names.ATTR_DATA_SOURCE, names.ATTR_DATA_HASH, names.ATTR_SPEC)
        missing = [a for a in needed if not attrs.get(a)]
        if missing:
            raise FigureError(
                f"the fit lacks the provenance attribute(s) {missing} (a fit made by "
                "bayesscale.law.inference.fit or fit_pricing has them); pass provenance= explicitly"
            )
        seed = attrs.get(names.ATTR_SEED)
        return Source(
            kind=str(attrs[names.ATTR_KIND]),
            data_path=str(attrs[names.ATTR_DATA_SOURCE]),
            data_sha256=str(attrs[names.ATTR_DATA_HASH]),
            spec=_spec_name(str(attrs[names.ATTR_SPEC])),
            sampler=str(attrs.get(names.ATTR_SAMPLER, "")),
            seed=None if seed is None else int(seed),
            fit_version=str(attrs.get(names.ATTR_VERSION, "")),
        )
    source, digest = getattr(item, "source", None), getattr(item, "sha256", None)
    if isinstance(source, str) and isinstance(digest, str):
        return Source(kind="table", data_path=source, data_sha256=digest)
    raise FigureError(
        f"cannot take provenance from a {type(item).__name__}: pass a fit (DataTree) or a "
        "table with .source and .sha256"
    )


def provenance(*inputs: Any) -> Provenance:
    """The provenance of a figure drawn from ``inputs`` (fits and tables, in that order).

    >>> provenance(law_fit, heldout_table).footer()  # doctest: +SKIP
    'law_fit: observations.csv (sha256 ...), spec agentic-rl, numpyro seed 11; table: ...'
    """
    return Provenance(tuple(dict.fromkeys(source_of(i) for i in inputs)))


def attach_provenance(fig: Figure, prov: Provenance) -> Figure:
    """Remember ``prov`` as ``fig``'s provenance (what :func:`~bayesscale.report.figures.provenance.save_figure` writes by default)."""
    _ATTACHED[fig] = prov
    return fig


def figure_provenance(fig: Figure) -> Provenance | None:
    """The provenance attached to ``fig`` by the plot function that drew it, if any."""
    return _ATTACHED.get(fig)


def save_figure(
    fig: Figure,
    path: str | Path,
    provenance: Provenance | None = None,
    overwrite: bool = False,
    footer: bool = False,
    dpi: float | None = None,
) -> Path:
    """Save ``fig`` as PNG, PDF or SVG (by the suffix) with its provenance in the file's
    metadata; atomic (temporary file, then rename); refuses to replace an existing file
    unless ``overwrite``. ``provenance`` defaults to the one the plot function attached.
    ``footer`` also prints the provenance in small grey type under the figure. ``dpi``
    (default 200) sets a PNG's resolution."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise FigureError(f"{path}: unknown figure format {path.suffix!r}; use one of {FORMATS}")
    prov = provenance if provenance is not None else figure_provenance(fig)
    if prov is None:
        raise FigureError(
            f"{path}: the figure carries no provenance; pass provenance=provenance(fit, ...)"
        )
    if path.exists() and not overwrite:  # before drawing a footer on the figure
        raise FileExistsError(
            f"{path} exists; pass overwrite=True (on the command line --force) to replace it"
        )
    if suffix == ".png":
        metadata: dict[str, Any] = prov.png_text()
    elif suffix == ".pdf":
        metadata = {
            "Subject": prov.footer(),
            "Keywords": prov.to_json(),
            "Creator": f"bayesscale {prov.version}",
        }
    else:
        metadata = {"Description": prov.to_json(), "Creator": f"bayesscale {prov.version}"}
    text = None
    if footer:
        text = fig.text(
            0.0, 0.0, prov.footer(), fontsize=FOOTER_SIZE, color="0.45", ha="left", va="top"
        )
    try:
        return write_atomically(
            path,
            lambda tmp: fig.savefig(
                tmp,
                format=suffix[1:],
                metadata=metadata,
                dpi=dpi if dpi is not None else DEFAULT_DPI,
                bbox_inches="tight" if footer else None,
            ),
            overwrite,
            suffix=suffix,
        )
    finally:
        if text is not None:
            text.remove()


def read_png_text(path: str | Path) -> dict[str, str]:
    """All text chunks of a PNG file."""
    with Image.open(path) as image:
        if image.format != "PNG":
            raise FigureError(f"{path}: not a PNG file ({image.format})")
        image.load()
        return {str(k): str(v) for k, v in image.text.items()}  # type: ignore[attr-defined]


def read_provenance(path: str | Path) -> Provenance:
    """The provenance :func:`~bayesscale.report.figures.provenance.save_figure` wrote into a PNG."""
    chunks = read_png_text(path)
    if PROVENANCE_KEY not in chunks:
        raise FigureError(f"{path}: no bayesscale provenance in this PNG")
    return Provenance.from_json(chunks[PROVENANCE_KEY])
