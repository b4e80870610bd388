"""The detail screen: one task's snapshot, health, failure and whole trajectory."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar, cast

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from chongming_core import TaskSnapshot, Transition
from chongming_tui._data import PendingAction
from chongming_tui._format import (
    assess,
    attempt_text,
    format_age,
    format_time,
    literal,
    progress_cell,
    status_text,
)
from chongming_tui.components.header import DashboardHeader
from chongming_tui.components.status_line import StatusLine

if TYPE_CHECKING:
    from chongming_tui._app import DashboardApp

__all__ = ["TaskDetailScreen", "detail_fields"]

_WARN = "bold yellow"


def _when(moment: datetime | None, now: datetime) -> Text:
    if moment is None:
        return Text("-", style="dim")
    text = Text(format_time(moment))
    text.append(f"  ({format_age((now - moment).total_seconds())} ago)", style="dim")
    return text


def detail_fields(
    snapshot: TaskSnapshot,
    now: datetime,
    *,
    idle_threshold: float,
    pending: PendingAction | None = None,
    waiting: str | None = None,
) -> RenderableType:
    """The snapshot as a two-column grid, with warnings on a stale heartbeat or a dead lease."""
    s = snapshot
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    status = status_text(s.status)
    status.append(f"  version {s.status_version}", style="dim")
    if s.paused_in_place:
        status.append("  (paused in place: holds its slot)", style="dim")
    grid.add_row("status", status)
    if waiting is not None:
        grid.add_row("waiting", literal(waiting, _WARN))
    if pending is not None:
        grid.add_row("action", Text(f"{pending.action} requested, not confirmed yet", _WARN))
    grid.add_row("name", literal(s.name))
    grid.add_row("label", _or_dash(s.label))
    if s.description:
        grid.add_row("description", literal(s.description))
    grid.add_row("attempt", attempt_text(s))
    grid.add_row("tags", _or_dash(", ".join(sorted(s.tags))))
    grid.add_row("priority", str(s.priority))
    bucket = "-" if s.bucket is None else str(s.bucket)
    if s.bucket_key:
        bucket += f"  (key {s.bucket_key})"
    grid.add_row("bucket", literal(bucket))
    if s.pipeline_id:
        grid.add_row("pipeline", literal(f"{s.pipeline_id}  node {s.node_id or '-'}"))
    executor = f"{s.executor or '-'}  pid {s.pid if s.pid is not None else '-'}"
    grid.add_row("executor", literal(executor))
    grid.add_row("created", _when(s.created_at, now))
    grid.add_row("started", _when(s.started_at, now))
    grid.add_row("finished", _when(s.finished_at, now))
    grid.add_row("updated", _when(s.updated_at, now))
    if s.retry_at is not None:
        grid.add_row("retry at", _when(s.retry_at, now))
    elapsed = s.elapsed(now)
    grid.add_row("elapsed", "-" if elapsed is None else format_age(elapsed))
    paused = s.paused_for(now)
    if paused:
        pause = Text(format_age(paused))
        if s.paused_since is not None:
            pause.append(f"  paused in place since {format_time(s.paused_since)}", style="dim")
        grid.add_row("paused", pause)
    progress = progress_cell(s.progress, bar_width=20)
    if s.progress is not None and s.progress.message:
        progress.append_text(literal(f"  {s.progress.message}", "italic"))
    grid.add_row("progress", progress)
    health = assess(s, now, idle_threshold)
    beat = _when(s.last_heartbeat_at, now)
    if health.heartbeat_stale:
        beat.append(f"  no heartbeat for longer than {format_age(idle_threshold)}", style=_WARN)
        beat.stylize(_WARN, 0, len(beat))
    grid.add_row("heartbeat", beat)
    grid.add_row("lease", _lease(s, health.lease_left, health.lease_expired))
    if health.lease_expired and s.lease_until is not None:
        gone = Text(format_time(s.lease_until), style=_WARN)
        gone.append(
            f"  ({format_age(-(health.lease_left or 0.0))} ago): elapsed and paused count "
            "up to then, at most (the holder may have stopped before)",
            style="dim",
        )
        grid.add_row("lease ran out", gone)
    grid.add_row("failure", _failure(s))
    for record in s.attempts:
        line = Text(f"#{record.number} ")
        line.append_text(status_text(record.status))
        line.append(f"  {format_time(record.started_at)} → {format_time(record.ended_at)}")
        if record.failure is not None:
            failure = f"  {record.failure.kind.value}: {record.failure.message}"
            line.append_text(literal(failure, "red"))
        grid.add_row("attempts" if record.number == s.attempts[0].number else "", line)
    return grid


def _or_dash(text: str | None) -> Text:
    return literal(text) if text else Text("-", style="dim")


def _lease(s: TaskSnapshot, left: float | None, expired: bool) -> Text:
    if s.lease_owner is None and s.lease_until is None:
        return Text("-", style="dim")
    text = literal(f"{s.lease_owner or '-'} until {format_time(s.lease_until)}")
    if left is None:
        return text
    if expired:
        text.append(
            f"  EXPIRED {format_age(-left)} ago: nobody renews it, a candidate for reconcile",
            style=_WARN,
        )
        text.stylize(_WARN, 0, len(text))
    elif not s.is_terminal:
        text.append(f"  (expires in {format_age(left)})", style="dim")
    return text


def _failure(s: TaskSnapshot) -> RenderableType:
    failure = s.failure
    if failure is None:
        return Text("-", style="dim")
    text = Text()
    text.append(failure.kind.value, style="bold red")
    text.append("  retryable" if failure.retryable else "  not retryable", style="dim")
    if failure.exception_type:
        text.append_text(literal(f"  {failure.exception_type}", "dim"))
    text.append("\n")
    text.append_text(literal(failure.message))
    return text


class TaskDetailScreen(Screen[None]):
    """One task in full; refreshed with the overview, controlled with the same keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back", tooltip="back to the overview"),
        Binding("s", "app.stop_task", "stop", tooltip="stop: a reason, then a confirmation"),
        Binding("p", "app.pause_task", "pause", tooltip="pause this task"),
        Binding("r", "app.resume_task", "resume", tooltip="resume this task"),
    ]

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
        self._versions: set[int] = set()

    @property
    def dashboard(self) -> DashboardApp:
        """The app, typed."""
        return cast("DashboardApp", self.app)

    def compose(self) -> ComposeResult:
        """Header, title, fields, history, status line, footer."""
        yield DashboardHeader(id="header")
        with VerticalScroll(id="detail-body"):
            yield Static(literal(f"task {self.task_id}", "bold"), id="detail-title")
            yield Static(Text("loading…", style="dim"), id="detail-fields")
            yield Static(Text("history", style="bold"), id="history-title")
            yield DataTable[str | Text](id="history", cursor_type="row", zebra_stripes=True)
        yield StatusLine(id="status-line")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        """Create the history columns."""
        table = self.query_one("#history", DataTable)
        for key, label in (
            ("version", "VER"),
            ("from", "FROM"),
            ("to", "TO"),
            ("trigger", "TRIGGER"),
            ("actor", "ACTOR"),
            ("reason", "REASON"),
            ("at", "AT"),
        ):
            table.add_column(label, key=key)
        latest = self.dashboard.latest
        if latest is not None and latest.detail_id == self.task_id and latest.now is not None:
            self.show(
                latest.detail,
                latest.history,
                latest.now,
                self.dashboard.pending.get(self.task_id),
            )

    def show(
        self,
        snapshot: TaskSnapshot | None,
        history: Sequence[Transition],
        now: datetime,
        pending: PendingAction | None,
    ) -> None:
        """Apply the latest snapshot and history (new transitions are appended)."""
        tables = self.query("#history")
        if not tables or not tables.first(DataTable).columns:
            return  # not mounted yet (on_mount shows the latest data) or being torn down
        title = self.query_one("#detail-title", Static)
        fields = self.query_one("#detail-fields", Static)
        if snapshot is None:
            title.update(literal(f"task {self.task_id}", "bold"))
            fields.update(Text("this task is not in the store", style="bold red"))
            return
        heading = literal(f"task {snapshot.task_id}", "bold")
        heading.append_text(literal(f"  {snapshot.display_name}  "))
        heading.append_text(status_text(snapshot.status))
        title.update(heading)
        latest = self.dashboard.latest
        waiting = None if latest is None else latest.waiting.get(snapshot.task_id)
        fields.update(
            detail_fields(
                snapshot,
                now,
                idle_threshold=self.dashboard.idle_threshold,
                pending=pending,
                waiting=waiting,
            )
        )
        table = self.query_one("#history", DataTable)
        for t in history:
            if t.status_version in self._versions:
                continue
            self._versions.add(t.status_version)
            table.add_row(
                str(t.status_version),
                status_text(t.from_status),
                status_text(t.to_status),
                literal(t.trigger),
                literal(t.actor),
                _or_dash(t.reason),
                format_time(t.at),
                key=str(t.status_version),
            )
        self.query_one("#history-title", Static).update(
            Text(f"history ({len(history)} transitions)", style="bold")
        )
