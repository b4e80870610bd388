"""Pure formatting: status styles, progress cells, health warnings, CJK widths."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rich.color import ColorSystem, ColorType
from rich.style import Style
from rich.text import Text

from chongming_core import TERMINAL_STATUSES, Progress, TaskSnapshot, TaskStatus
from chongming_runtime import display_width
from chongming_tui._format import (
    STATUS_STYLES,
    assess,
    format_age,
    format_time,
    paused_cell,
    progress_cell,
    shortened,
    status_text,
    task_cells,
    truncated,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_every_status_has_a_style_and_the_terminal_ones_are_distinct() -> None:
    assert set(STATUS_STYLES) == set(TaskStatus)
    terminal = [STATUS_STYLES[s] for s in TERMINAL_STATUSES]
    assert len(set(terminal)) == 6
    assert status_text(TaskStatus.LOST).spans[0].style == STATUS_STYLES[TaskStatus.LOST]


def _colour(style: str, system: ColorSystem) -> tuple[int, int, int] | None:
    colour = Style.parse(style).color
    if colour is None:
        return None
    return tuple(colour.downgrade(system).get_truecolor())  # type: ignore[return-value]


@pytest.mark.parametrize(
    "system", [ColorSystem.TRUECOLOR, ColorSystem.EIGHT_BIT, ColorSystem.STANDARD]
)
def test_terminal_statuses_differ_in_colour_on_truecolor_256_and_16_colour_terminals(
    system: ColorSystem,
) -> None:
    """Textual repaints the sixteen ANSI colours with its theme, and the default theme gave
    red and magenta one colour: failed and stopped looked the same. No status uses an
    ANSI colour, and the six terminal ones keep six colours after a downgrade (to the
    terminal's own sixteen on a 16-colour terminal)."""
    for status, style in STATUS_STYLES.items():
        parsed = Style.parse(style)
        for colour in (parsed.color, parsed.bgcolor):
            assert colour is None or colour.type not in {
                ColorType.STANDARD, ColorType.DEFAULT
            }, f"{status.value} uses an ANSI colour the theme repaints: {style}"  # fmt: skip
    colours = {s: _colour(STATUS_STYLES[s], system) for s in TERMINAL_STATUSES}
    assert None not in colours.values()
    assert len(set(colours.values())) == 6, colours
    assert colours[TaskStatus.FAILED] != colours[TaskStatus.STOPPED]


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
    widths = {"id": 12, "name": 20, "status": 10, "attempt": 7, "elapsed": 7, "paused": 7,
              "progress": 24, "bucket": 6, "lease": 20, "failure": 15}  # fmt: skip
    cells = task_cells(snap, NOW, idle_threshold=60, widths=widths)
    plain = {k: c if isinstance(c, str) else c.plain for k, c in cells.items()}
    assert list(plain) == list(widths)
    assert plain["id"] == "t1"
    assert plain["name"] == "转换-1 (transform)"
    assert plain["status"] == "running"
    assert plain["attempt"] == "1/3"
    assert plain["elapsed"] == "1m14s"  # up to its lease's end (1 s ago): nobody vouches after it
    assert plain["paused"] == "-"
    assert plain["progress"].endswith("120/500 rows")
    assert plain["bucket"] == "3"
    assert plain["lease"] == "worker-1 (expired)"
    assert plain["failure"] == "-"
    never_ran = TaskSnapshot(task_id="q", name="n", status=TaskStatus.QUEUED)
    assert task_cells(never_ran, NOW, idle_threshold=60, widths={"elapsed": 7}) == {"elapsed": "-"}


def test_a_column_narrower_than_its_text_cuts_it_with_an_ellipsis() -> None:
    """Three nodes of one pipeline showed as one id (a fixed width cut their ends off):
    ids are cut in the middle and keep their distinguishing end; other cells show ``…``."""
    ids = [f"nightly-8093c2ab4f:{node}" for node in ("extract", "transform", "load")]
    cut = [shortened(task_id, 14).plain for task_id in ids]
    assert cut == ["nigh…f:extract", "nigh…transform", "nigh…ab4f:load"]
    assert len(set(cut)) == 3
    assert all(display_width(c) <= 14 for c in cut)
    assert shortened("短", 14).plain == "短"
    assert display_width(shortened("每日汇总报表-第三批次-租户A", 9).plain) <= 9
    progress = progress_cell(Progress(1_204_331, 2_000_000, "rows read from s3://lake"), width=20)
    assert display_width(progress.plain) <= 20
    assert progress.plain.endswith("…")
    assert "━" not in progress.plain  # no room for a bar beside the text
    roomy = progress_cell(Progress(40, 100, "%"), width=24)
    assert roomy.plain == "━" * 10 + " 40/100 %"
    snap = _running(label="一个很长很长的中文标签名字")
    name = task_cells(snap, NOW, idle_threshold=60, widths={"name": 20})["name"]
    assert isinstance(name, Text)
    assert name.plain.endswith("… (transform)")  # the label gives way, the name stays
    assert display_width(name.plain) <= 20


def test_the_paused_cell_shows_time_paused_in_place() -> None:
    paused = _running(status=TaskStatus.PAUSED, paused_in_place=True,
                      updated_at=NOW - timedelta(seconds=30), paused_seconds=5.0)  # fmt: skip
    cell = paused_cell(paused, NOW)
    assert cell.plain == "35.0s"
    assert str(cell.style) == STATUS_STYLES[TaskStatus.PAUSED]  # the pause lasts
    resumed = _running(paused_seconds=5.0)
    assert paused_cell(resumed, NOW).plain == "5.0s"
    assert paused_cell(_running(), NOW).plain == "-"
