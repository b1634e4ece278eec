"""Progress of a fit: one bar in a terminal, a plain line every ~10 s elsewhere.

In a terminal (stderr is a TTY) the bar is redrawn in place::

    fit  [###########.........]  55%  sampling 1100/2000  1,830 it/s  ETA 1 s  0 divergences

In a log file, CI or a notebook (stderr not a TTY) there are no escape codes: one line
when a phase (warm-up, sampling) begins, one every ``interval`` seconds, one at the end.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 20
PLAIN_INTERVAL = 10.0
MIN_FRACTION_FOR_ETA = 0.05


class Progress:
    """Report warm-up and sampling iterations (summed over chains) with divergences."""

    def __init__(
        self,
        label: str = "fit",
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = PLAIN_INTERVAL,
    ) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval
        self.start = time.perf_counter()
        self.last_line = self.start
        self._drawn = False
        self._phase = ""

    def update(self, phase: str, done: int, total: int, overall: float, divergences: int) -> None:
        """``phase`` ('warm-up' or 'sampling') at ``done`` of ``total`` iterations per chain;
        ``overall`` is the fraction of all planned work done."""
        if not self.enabled:
            return
        now = time.perf_counter()
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        # early warm-up is far slower per iteration than the rest: no ETA before 5% is done
        eta = elapsed * (1 - overall) / overall if overall >= MIN_FRACTION_FOR_ETA else float("nan")
        text = (
            f"{phase} {done}/{total}  {rate:,.0f} it/s  ETA {_seconds(eta)}  "
            f"{divergences} divergence{'s' if divergences != 1 else ''}"
        )
        if self.tty:
            filled = round(BAR_WIDTH * min(max(overall, 0.0), 1.0))
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            self.stream.write(f"\r{self.label}  [{bar}] {overall:4.0%}  {text}\x1b[K")
            self.stream.flush()
            self._drawn = True
        elif now - self.last_line >= self.interval or phase != self._phase:
            self.stream.write(f"{self.label}: {overall:.0%}  {text}\n")
            self.stream.flush()
            self.last_line = now
        self._phase = phase

    def note(self, message: str) -> None:
        """A one-line note (on its own line, never inside the bar)."""
        if not self.enabled:
            return
        self._clear()
        self.stream.write(f"{self.label}: {message}\n")
        self.stream.flush()

    def close(self, summary: str) -> None:
        """End the bar with a summary line."""
        if not self.enabled:
            return
        self._clear()
        self.stream.write(f"{self.label}: {summary}\n")
        self.stream.flush()

    def _clear(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\x1b[K")
            self._drawn = False


def _seconds(value: float) -> str:
    if value != value or value == float("inf"):
        return "?"
    if value < 60:
        return f"{value:.0f} s"
    return f"{value // 60:.0f} min {value % 60:02.0f} s"
