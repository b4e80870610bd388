"""Pure formatting: status styles, progress cells, health warnings, CJK widths."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from chongming_core import TERMINAL_STATUSES, Progress, TaskSnapshot, TaskStatus
from chongming_runtime import display_width
from chongming_tui._format import (
    STATUS_STYLES,
    assess,
    format_age,
    format_time,
    progress_cell,
    status_text,
    task_cells,
    truncated,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_every_status_has_a_style_and_the_terminal_ones_are_distinct() -> None:
    assert set(STATUS_STYLES) == set(TaskStatus)
    terminal = [STATUS_STYLES[s] for s in TERMINAL_STATUSES]
    assert len(set(terminal)) == 6
    assert status_text(TaskStatus.LOST).spans[0].style == "bold white on red"


def test_progress_cell_draws_a_bar_only_with_a_total() -> None:
    with_total = progress_cell(Progress(120, 500, "rows"), bar_width=10)
    assert with_total.plain == "━" * 10 + " 120/500 rows"
    assert progress_cell(Progress(7, None, "batch")).plain == "7 batch"
    assert progress_cell(None).plain == "-"


def test_truncation_counts_display_cells_for_cjk() -> None:
    cell = truncated("转换-1-一个很长的名字", 8)
    assert display_width(cell.plain) <= 8
    assert cell.plain.endswith("…")
    assert truncated("转换-1", 8).plain == "转换-1"


def test_ages_and_times_read_well() -> None:
    assert format_age(0.4) == "0.4s"
    assert format_age(185) == "3m05s"
    assert format_age(-12) == "in 12.0s"
    assert format_time(datetime(2026, 1, 1, 0, 0, 5, 250_000, tzinfo=UTC)) == (
        "2026-01-01 00:00:05.250 +00:00"
    )
    assert format_time(None) == "-"


def _running(**changes: object) -> TaskSnapshot:
    base = TaskSnapshot(
        task_id="t1",
        name="transform",
        label="转换-1",
        status=TaskStatus.RUNNING,
        attempt=1,
        max_attempts=3,
        started_at=NOW - timedelta(seconds=75),
    )
    return base.evolve(**changes)


def test_a_stale_heartbeat_and_an_expired_lease_warn() -> None:
    healthy = _running(last_heartbeat_at=NOW - timedelta(seconds=5),
                       lease_until=NOW + timedelta(seconds=10), lease_owner="w1")  # fmt: skip
    health = assess(healthy, NOW, idle_threshold=60)
    assert not health.warning
    assert health.heartbeat_age == 5
    assert health.lease_left == 10

    sick = _running(last_heartbeat_at=NOW - timedelta(seconds=90),
                    lease_until=NOW - timedelta(seconds=3), lease_owner="w1")  # fmt: skip
    health = assess(sick, NOW, idle_threshold=60)
    assert health.heartbeat_stale
    assert health.lease_expired


def test_finished_and_waiting_tasks_never_warn_about_heartbeats() -> None:
    old = NOW - timedelta(hours=1)
    done = _running(status=TaskStatus.SUCCEEDED, last_heartbeat_at=old, lease_until=old)
    assert not assess(done, NOW, idle_threshold=60).warning
    queued = _running(status=TaskStatus.QUEUED, last_heartbeat_at=old)
    assert not assess(queued, NOW, idle_threshold=60).heartbeat_stale


def test_row_cells_follow_the_table_columns() -> None:
    snap = _running(progress=Progress(120, 500, "rows"), bucket=3, lease_owner="worker-1",
                    lease_until=NOW - timedelta(seconds=1))  # fmt: skip
    cells = task_cells(snap, NOW, idle_threshold=60, name_width=16, lease_width=20)
    plain = [c if isinstance(c, str) else c.plain for c in cells]
    assert plain[0] == "t1"
    assert plain[1] == "转换-1"
    assert plain[2] == "running"
    assert plain[3] == "1/3"
    assert plain[4] == "1m14s"  # up to its lease's end (1 s ago): nobody vouches after it
    assert plain[5].endswith("120/500 rows")
    assert plain[6] == "3"
    assert plain[7] == "worker-1 (expired)"
    assert plain[8] == "-"
    never_ran = TaskSnapshot(task_id="q", name="n", status=TaskStatus.QUEUED)
    assert task_cells(never_ran, NOW, idle_threshold=60, name_width=16, lease_width=20)[4] == "-"
