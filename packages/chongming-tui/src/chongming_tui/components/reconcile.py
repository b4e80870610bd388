"""The reconcile view: what ``reconcile(dry_run=True)`` would do for this console's buckets.

The dashboard never reconciles for real: marking tasks ``lost`` is a decision
for ``chongming-task reconcile``. This view only shows the candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from chongming_core import TaskSnapshot
from chongming_runtime import ReconcileReport
from chongming_tui._format import format_age, format_time, literal, status_text, truncated

if TYPE_CHECKING:
    from chongming_tui._app import DashboardApp

__all__ = ["ReconcileScreen"]

#: Rows shown per table (the counts are always complete).
MAX_ROWS = 200
#: Unreadable rows named in the title.
MAX_NAMED = 5


class ReconcileScreen(Screen[None]):
    """Runs the dry run in a worker thread and shows lost and adoptable candidates."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back", tooltip="back to the overview"),
        Binding("g", "run", "run again", tooltip="run the dry run again"),
    ]

    @property
    def dashboard(self) -> DashboardApp:
        """The app, typed."""
        return cast("DashboardApp", self.app)

    def compose(self) -> ComposeResult:
        """Title, two tables, footer."""
        with VerticalScroll():
            yield Static(id="reconcile-title")
            yield Static(id="lost-title")
            yield DataTable[str | Text](id="lost", cursor_type="row")
            yield Static(id="adoptable-title")
            yield DataTable[str | Text](id="adoptable", cursor_type="row")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        """Columns, then the first run."""
        for table in self.query(DataTable):
            for label in ("TASK_ID", "NAME", "STATUS", "LEASE OWNER", "LEASE EXPIRED", "BUCKET"):
                table.add_column(label, key=label)
        self.action_run()

    def action_run(self) -> None:
        """Ask the controller for a dry run (off the UI thread)."""
        self.query_one("#reconcile-title", Static).update(
            Text(
                f"reconcile (dry run) for buckets {self.dashboard.buckets_label}: running…",
                style="bold",
            )
        )
        self.dashboard.run_reconcile(self)

    def show(self, report: ReconcileReport, now: datetime) -> None:
        """Fill both tables."""
        if not self.is_mounted:
            return  # closed before the dry run finished
        title = Text(
            f"reconcile (dry run) for buckets {self.dashboard.buckets_label}: ", style="bold"
        )
        ended = (
            f"{len(report.cancelled)} pipeline node(s) whose pipeline's supervisor is gone would "
            "be cancelled, "
            if report.cancelled
            else ""
        )
        if report.requeued:
            ended += (
                f"{len(report.requeued)} durable task(s) waiting to retry whose worker is gone "
                "would be queued again, "
            )
        title.append(
            f"{len(report.lost)} would be marked lost, {ended}{len(report.adoptable)} "
            f"adoptable; nothing was changed (to apply: {self.dashboard.reconcile_command})",
        )
        if report.unreadable:  # not judged: named, so no crashed task hides behind one
            shown = ", ".join(row.task_id for row in report.unreadable[:MAX_NAMED])
            more = len(report.unreadable) - MAX_NAMED
            title.append_text(
                literal(
                    f"\n{len(report.unreadable)} stored row(s) cannot be read and would not be "
                    f"judged: {shown}{f' and {more} more' if more > 0 else ''}",
                    "bold red",
                )
            )
        self.query_one("#reconcile-title", Static).update(title)
        self.query_one("#lost-title", Static).update(
            Text(
                f"would be marked lost: lease expired while holding resources ({len(report.lost)})",
                style="bold red",
            )
        )
        self.query_one("#adoptable-title", Static).update(
            Text(
                f"adoptable: lease expired, holding nothing ({len(report.adoptable)})",
                style="bold",
            )
        )
        self._fill(self.query_one("#lost", DataTable), report.lost, now)
        self._fill(self.query_one("#adoptable", DataTable), report.adoptable, now)

    def show_error(self, error: BaseException) -> None:
        """Say that the dry run failed."""
        if not self.is_mounted:
            return
        self.query_one("#reconcile-title", Static).update(
            literal(f"reconcile (dry run) failed: {error}", "bold red")
        )

    @staticmethod
    def _fill(
        table: DataTable[str | Text], snapshots: Sequence[TaskSnapshot], now: datetime
    ) -> None:
        table.clear()
        for s in snapshots[:MAX_ROWS]:
            until = s.lease_until
            expired = (
                "never leased"
                if until is None
                else f"{format_time(until)} ({format_age((now - until).total_seconds())} ago)"
            )
            table.add_row(
                literal(s.task_id),
                truncated(s.display_name, 20),
                status_text(s.status),
                literal(s.lease_owner or "-"),
                expired,
                "-" if s.bucket is None else str(s.bucket),
            )
        if len(snapshots) > MAX_ROWS:
            table.add_row(f"… {len(snapshots) - MAX_ROWS} more", "", "", "", "", "")
