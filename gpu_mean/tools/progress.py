"""The progress bar of conformance and demo: tqdm's (on stderr; redrawn in place on a terminal, a
widget in a notebook through tqdm.auto, nothing in a log or a pipe: tqdm's ``disable=None``), behind
the three calls the runner makes: ``label``, ``step``, ``done``."""
from __future__ import annotations

import contextlib
import sys

from tqdm.auto import tqdm


class Progress:
    def __init__(self, total: int, enabled: bool = True, stream=None):
        self.bar = tqdm(total=max(1, total), disable=None if enabled else True, file=stream or sys.stderr,
                        unit="case", leave=False, dynamic_ncols=True, mininterval=0.1)

    def label(self, text: str) -> None:
        self.bar.set_description_str(text[:60], refresh=False)

    def step(self) -> None:
        self.bar.update(1)

    def done(self) -> None:
        self.bar.close()


@contextlib.contextmanager
def progress_bar(total: int, enabled: bool = True, stream=None):
    bar = Progress(total, enabled, stream)
    try:
        yield bar
    finally:
        bar.done()
