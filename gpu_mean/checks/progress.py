"""The progress bar of conformance and demo: tqdm's (on stderr; redrawn in place on a terminal, a
widget in a notebook through tqdm.auto, nothing in a log or a pipe: tqdm's ``disable=None``), behind
the three calls the runner makes: ``label``, ``step``, ``done``."""
from __future__ import annotations

import contextlib
import sys

from tqdm.auto import tqdm

from ..backends import diskcache


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

    def write(self, log, text: str) -> None:
        """``log(text)`` with the bar cleared first and redrawn after, so that the line stays whole."""
        with self.bar.external_write_mode():
            log(text)


@contextlib.contextmanager
def progress_bar(total: int, enabled: bool = True, stream=None):
    bar = Progress(total, enabled, stream)
    try:
        yield bar
    finally:
        bar.done()


class CompileNotice:
    """Says ``text`` through ``log`` the first time a kernel is compiled inside a ``watch`` block (a
    program found in the disk cache, or already built in this process, says nothing); once in all."""

    def __init__(self, log, text: str):
        self.log, self.text, self.said = log, text, False

    @contextlib.contextmanager
    def watch(self, bar: Progress | None = None):
        def notice(what: str) -> None:
            if not self.said:
                self.said = True
                bar.write(self.log, self.text) if bar is not None else self.log(self.text)
        with diskcache.on_compile(notice):
            yield


def compile_notice(log, text: str, bar: Progress | None = None):
    """A CompileNotice watching one block."""
    return CompileNotice(log, text).watch(bar)
