"""render_table: the guide's columns, '-' for never-run tasks, CJK aligned by display width."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chongming_core import Failure, FailureKind, Progress, TaskSnapshot, TaskStatus
from chongming_runtime._table import (
    display_width,
    format_elapsed,
    name_cell,
    printable,
    render_table,
    truncate,
)

NOW = datetime(2026, 10, 2, 12, 0, tzinfo=UTC)


def _snap(task_id: str, label: str, status: TaskStatus, **changes: object) -> TaskSnapshot:
    return TaskSnapshot(task_id=task_id, name="transform", label=label, status=status).evolve(
        **changes
    )


def test_guide_rows_align_by_display_width() -> None:
    started = NOW - timedelta(seconds=0.4)
    rows = [
        _snap("t0", "转换-1", TaskStatus.RUNNING, attempt=1, started_at=started),
        _snap("t1", "转换-2", TaskStatus.RUNNING, attempt=1, started_at=started),
        _snap("t2", "转换-3", TaskStatus.QUEUED),
        _snap("t3", "转换-4", TaskStatus.QUEUED),
    ]
    lines = render_table(rows, now=NOW).splitlines()
    assert lines[0].split() == [
        "TASK_ID", "NAME", "STATUS", "ATTEMPT", "ELAPSED", "PROGRESS", "BUCKET", "FAILURE",
    ]  # fmt: skip
    # the label, and the registered name it hides (what --name-prefix matches, D87)
    assert lines[2].split() == [
        "t0", "转换-1", "(transform)", "running", "1/1", "0.4s", "-", "-", "-"
    ]  # fmt: skip
    assert lines[4].split() == ["t2", "转换-3", "(transform)", "queued", "0/1", "-", "-", "-", "-"]
    # every column starts at the same display cell on every line
    status_cells = {display_width(line[: line.index(word)]) for line, word in zip(
        lines[2:], ["running", "running", "queued", "queued"], strict=True
    )}  # fmt: skip
    header_cell = display_width(lines[0][: lines[0].index("STATUS")])
    assert status_cells == {header_cell}
    assert {display_width(line) for line in lines[1:2]} == {display_width(lines[1])}


def test_label_wins_over_name_and_failure_kind_and_progress_are_shown() -> None:
    snap = TaskSnapshot(
        task_id="x",
        name="extract",
        status=TaskStatus.FAILED,
        attempt=3,
        max_attempts=3,
        bucket=42,
        progress=Progress(120, total=500, unit="rows"),
        failure=Failure.of(FailureKind.TIMEOUT_IDLE, "silent for 60s"),
        started_at=NOW - timedelta(minutes=3, seconds=5),
        finished_at=NOW,
    )
    row = render_table([snap], now=NOW).splitlines()[2].split()
    assert row == [
        "x",
        "extract",
        "failed",
        "3/3",
        "3m05s",
        "120/500",
        "rows",
        "42",
        "timeout_idle",
    ]


def test_display_width_and_truncation() -> None:
    assert display_width("abc") == 3
    assert display_width("转换-1") == 6
    assert display_width("e\u0301") == 1  # combining accent takes no cell
    assert display_width("发布窗口") == 8
    cut = truncate("发布窗口发布窗口", 7)
    assert display_width(cut) <= 7
    assert cut.endswith("…")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.42, "0.4s"), (59.9, "59.9s"), (185, "3m05s"), (7620, "2h07m")],
)
def test_format_elapsed(seconds: float | None, text: str) -> None:
    assert format_elapsed(seconds) == text


def test_unknown_column_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown columns"):
        render_table([], columns=["TASK_ID", "OWNER"])


def test_stored_text_is_shown_escaped_never_as_control_characters() -> None:
    """A label, id or progress message came from the submitter: an escape sequence would
    drive the terminal and a line break would forge a row."""
    snap = _snap(
        "t\n0", "evil\x1b]0;pwned\x07\u009b2J", TaskStatus.RUNNING, attempt=1, started_at=NOW
    )
    lines = render_table([snap], now=NOW).splitlines()
    assert len(lines) == 3  # header, rule, one row
    row = lines[2]
    assert row.isprintable()
    assert row.split()[:4] == ["t\\n0", "evil\\x1b]0;pwned\\x07\\x9b2J", "(transform)", "running"]


def test_a_narrow_encoding_escapes_before_the_columns_are_measured() -> None:
    """On an ASCII-only stream a label is printed as escapes: the columns are laid out
    for what is printed, not for the characters it stands for."""
    rows = [
        _snap("任务-1", "转换😀", TaskStatus.RUNNING, attempt=1, started_at=NOW),
        _snap("t-2", "plain", TaskStatus.QUEUED, progress=Progress(1, unit="行")),
    ]
    lines = render_table(rows, now=NOW, encoding="ascii").splitlines()
    assert all(line.isascii() for line in lines)
    assert lines[2].split()[:2] == ["\\u4efb\\u52a1-1", "\\u8f6c\\u6362\\U0001f600"]
    assert "1 \\u884c" in lines[3]
    starts = {line.index(word) for line, word in zip(lines[2:], ["running", "queued"], strict=True)}
    assert starts == {lines[0].index("STATUS")}
    # a cut name ends with what the stream can hold
    long = _snap("t-3", "转换" * 30, TaskStatus.QUEUED)
    cut = render_table([long], now=NOW, encoding="ascii", max_name_width=20).splitlines()[2]
    assert cut.split()[1].endswith("...")
    assert len(cut.split()[1]) <= 20
    assert truncate("abcdef", 4, "ascii") == "a..."
    assert truncate("abcdef", 4, "utf-8") == "abc…"
    assert printable("é", "latin-1") == "é"
    assert printable("é\n", "ascii") == "\\xe9\\n"


def test_a_label_never_hides_the_registered_name() -> None:
    """NAME shows the label (R11) and, where it differs, the registered name that
    ``ps --name-prefix`` and the dashboard's name filter match (D87)."""
    labelled = TaskSnapshot(task_id="t", name="transform", label="转换-1")
    assert name_cell(labelled) == "转换-1 (transform)"
    assert name_cell(labelled.evolve(label=None)) == "transform"
    assert name_cell(labelled.evolve(label="transform")) == "transform"
    # cut to a width, the label gives way and the name stays whole
    long = labelled.evolve(label="每日汇总报表-第三批次-租户A")
    cut = name_cell(long, 24)
    assert display_width(cut) <= 24
    assert cut.endswith("… (transform)")
    # too narrow for both: one cut, marked
    tiny = name_cell(long, 8)
    assert display_width(tiny) <= 8
    assert tiny.endswith("…")
    table = render_table([long], now=NOW, max_name_width=24)
    assert "… (transform)" in table.splitlines()[2]
