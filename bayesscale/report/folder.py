"""A report directory that is written whole or not at all, and never over a different report.

A report is built in a hidden sibling directory and renamed into place at the end, so an
interrupted run leaves no half-written report. ``DIR/report.json`` (the manifest) records
what the report was made from: the SHA-256 of every input file, the options, the version.
Writing into ``DIR`` is allowed when it does not exist or is empty; when it holds a report
made from the same inputs and options (nothing to do); or, with ``force``, when it holds any
other report. A directory that holds something else is never touched.

Example
-------
>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> state = prepare(root / "out", {"data": "ab12"}, force=False)
>>> state.up_to_date
False
>>> with building(root / "out", {"data": "ab12"}, force=False) as tmp:
...     _ = (tmp / "report.md").write_text("# report")
>>> prepare(root / "out", {"data": "ab12"}, force=False).up_to_date
True
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from bayesscale._version import __version__
from bayesscale.atomic import default_mode, naming_target, track, untrack

MANIFEST: Final = "report.json"
MANIFEST_KIND: Final = "bayesscale-report"


class ReportDirError(ValueError):
    """The output directory cannot take this report (it holds something else)."""


@dataclass(frozen=True)
class DirState:
    """What :func:`prepare` found: ``up_to_date`` when ``DIR`` already holds this report."""

    path: Path
    up_to_date: bool


def read_manifest(path: Path) -> dict[str, Any] | None:
    """``DIR/report.json`` as a dict, or ``None`` when ``DIR`` holds no bayesscale report."""
    file = path / MANIFEST
    if not file.is_file():
        return None
    try:
        data = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("kind") == MANIFEST_KIND else None


def prepare(path: Path, fingerprint: Mapping[str, Any], force: bool) -> DirState:
    """Decide whether a report with ``fingerprint`` may be written to ``path`` (see module)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ReportDirError(f"{path} exists and is not a directory")
    if not path.exists() or not any(path.iterdir()):
        return DirState(path, up_to_date=False)
    manifest = read_manifest(path)
    if manifest is None:
        raise ReportDirError(
            f"{path} is not empty and holds no bayesscale report ({MANIFEST} missing); "
            "refusing to write into it: choose another --out"
        )
    if manifest.get("fingerprint") == dict(fingerprint):
        return DirState(path, up_to_date=True)
    if not force:
        changed = sorted(
            k
            for k in set(manifest.get("fingerprint", {})) | set(fingerprint)
            if manifest.get("fingerprint", {}).get(k) != fingerprint.get(k)
        )
        raise ReportDirError(
            f"{path} holds a different report (made {manifest.get('created', '?')} by bayesscale "
            f"{manifest.get('version', '?')}; differs in: {', '.join(changed)}); choose another "
            "--out, or pass --force to replace it"
        )
    return DirState(path, up_to_date=False)


@contextmanager
def building(path: Path, fingerprint: Mapping[str, Any], force: bool) -> Iterator[Path]:
    """Yield a fresh hidden directory beside ``path``; on success write the manifest and swap
    it into place (an old report, allowed by :func:`prepare`, is removed only after the swap);
    on failure remove it, leaving ``path`` as it was."""
    path = Path(path)
    prepare(path, fingerprint, force)
    path.parent.mkdir(parents=True, exist_ok=True)
    with naming_target(path):
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.partial-", dir=path.parent))
    tmp.chmod(default_mode(directory=True))  # mkdtemp gives 0o700
    track(tmp)
    try:
        yield tmp
        files = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
        manifest = {
            "kind": MANIFEST_KIND,
            "version": __version__,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "fingerprint": dict(fingerprint),
            "files": files,
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        old = None
        if path.exists():
            old = path.parent / f".{path.name}.old-{os.getpid()}"
            path.rename(old)
        tmp.rename(path)
        untrack(tmp, path)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        untrack(tmp)
        raise
