"""Live progress: sparse plain lines off a terminal, a redrawn bar on one; colour rules."""

from __future__ import annotations

import io

from chongming_cli._output import Palette
from chongming_cli._progress import ProgressReporter, progress_bar
from chongming_core import Progress, TaskSnapshot, TaskStatus


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _snap(done: float, total: float | None = None) -> TaskSnapshot:
    return TaskSnapshot(
        "t", "n", status=TaskStatus.RUNNING, progress=Progress(done, total=total, unit="rows")
    )


def test_plain_lines_are_rate_limited_and_only_on_change() -> None:
    out, clock = io.StringIO(), _Clock()
    reporter = ProgressReporter(out, tty=False, plain_interval=5.0, monotonic=clock)
    assert reporter.update(_snap(1))
    clock.now = 4.9
    assert not reporter.update(_snap(2))
    clock.now = 5.0
    assert reporter.update(_snap(3))
    clock.now = 20.0
    assert not reporter.update(_snap(3))  # unchanged
    assert not reporter.update(TaskSnapshot("t", "n"))  # no progress at all
    reporter.finish()
    assert out.getvalue() == "progress: 1 rows (running)\nprogress: 3 rows (running)\n"


def test_a_terminal_gets_one_redrawn_line() -> None:
    out, clock = io.StringIO(), _Clock()
    reporter = ProgressReporter(out, tty=True, monotonic=clock)
    reporter.update(_snap(100, 1000))
    clock.now = 0.2
    reporter.update(_snap(5, None))
    reporter.finish()
    text = out.getvalue()
    assert text.count("\r") == 2
    assert text.endswith("\n")
    assert "\n" not in text[:-1]


def test_progress_bar() -> None:
    assert progress_bar(Progress(250, total=1000, unit="rows"), width=8) == (
        "[##......]  25% 250/1000 rows"
    )
    assert progress_bar(Progress(7, unit="batch", message="src")) == "7 batch  src"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_without_no_color() -> None:
    assert Palette(_Tty(), {}).enabled
    assert not Palette(_Tty(), {"NO_COLOR": "1"}).enabled
    assert not Palette(io.StringIO(), {}).enabled
    assert Palette(_Tty(), {}).status(TaskStatus.FAILED) == "\x1b[31mfailed\x1b[0m"
    assert Palette(io.StringIO(), {}).status(TaskStatus.FAILED) == "failed"
