"""A one-line progress bar on stderr: redrawn in place on a terminal, a line per tenth in a log."""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, enabled: bool = True, stream=None):
        self.total, self.n, self.text = max(1, total), 0, ""
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self._tenth, self._drawn = -1, 0.0

    def label(self, text: str) -> None:
        self.text = text
        self._draw()

    def step(self) -> None:
        self.n += 1
        self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        frac = self.n / self.total
        if self.tty:
            now = time.perf_counter()
            if now - self._drawn < 0.05 and self.n < self.total:
                return
            self._drawn = now
            bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
            self.stream.write(f"\r[{bar}] {self.n}/{self.total} {self.text[:60]:60s}")
            self.stream.flush()
        elif int(frac * 10) > self._tenth:
            self._tenth = int(frac * 10)
            self.stream.write(f"  {self._tenth * 10:3d}% ({self.n}/{self.total}) {self.text}\n")
            self.stream.flush()

    def done(self) -> None:
        if self.tty:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()
