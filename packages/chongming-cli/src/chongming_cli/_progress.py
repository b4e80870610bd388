"""Live progress of ``run``: a redrawn bar on a terminal, sparse plain lines elsewhere.

On a terminal the bar is redrawn at most ten times a second. When the output is
a file or a CI log, a plain line is written only when the progress changed and
at most once every `plain_interval` seconds, so logs stay readable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from chongming_cli._encoding import stream_encoding
from chongming_core import Progress, TaskSnapshot
from chongming_runtime import display_width, printable

__all__ = ["ProgressReporter", "progress_bar"]

_BAR_WIDTH = 24


def progress_bar(progress: Progress, width: int = _BAR_WIDTH) -> str:
    """``[#########...............]  37% 370/1000 rows`` or ``145 batch`` without a total."""
    text = progress.render()
    fraction = progress.fraction
    if fraction is not None:
        filled = round(fraction * width)
        text = f"[{'#' * filled}{'.' * (width - filled)}] {fraction:4.0%} {text}"
    if progress.message:
        text = f"{text}  {progress.message}"
    return text


class ProgressReporter:
    """Shows a running task's progress on `stream` (stderr) without flooding it.

    Args:
        stream: where to write.
        tty: redraw one line in place (a terminal) instead of writing plain lines.
        plain_interval: the least seconds between two plain lines.
        monotonic: the clock (injected by tests).
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        tty: bool,
        plain_interval: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._tty = tty
        self._interval = 0.1 if tty else plain_interval
        self._monotonic = monotonic
        self._last_at: float | None = None
        self._last_shown: Progress | None = None
        self._drawn = 0

    def update(self, snapshot: TaskSnapshot) -> bool:
        """Show `snapshot`'s progress if it changed and enough time passed; True if shown."""
        progress = snapshot.progress
        if progress is None or progress == self._last_shown:
            return False
        now = self._monotonic()
        if self._last_at is not None and now - self._last_at < self._interval:
            return False
        self._last_at = now
        self._last_shown = progress
        # the unit and message are the task's text: escaped (controls, and what the
        # stream cannot hold) before the line is measured, in display cells
        text = printable(progress_bar(progress), stream_encoding(self._stream))
        if self._tty:
            width = display_width(text)
            padding = " " * max(0, self._drawn - width)
            self._stream.write(f"\r{text}{padding}")
            self._drawn = width
        else:
            self._stream.write(f"progress: {text} ({snapshot.status.value})\n")
        self._stream.flush()
        return True

    def finish(self) -> None:
        """End the bar's line so that what follows starts on a fresh line."""
        if self._tty and self._drawn:
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = 0
