"""`run_dashboard`: the entry point the ``chongming-task dashboard`` command calls."""

from __future__ import annotations

from chongming_runtime import Controller
from chongming_runtime import waiting_reason as runtime_waiting_reason
from chongming_tui._app import DashboardApp
from chongming_tui._data import WaitingReason

__all__ = ["run_dashboard"]


def run_dashboard(
    *,
    controller: Controller,
    store_label: str,
    refresh_interval: float | None = 1.0,
    row_limit: int = 200,
    idle_threshold: float = 60.0,
    reconcile_command: str = "chongming-task reconcile",
    waiting_reason: WaitingReason | None = runtime_waiting_reason,
) -> int:
    """Run the dashboard in this terminal until the operator quits; returns the exit code (0).

    Args:
        controller: the console's controller (its store, owner and buckets).
        store_label: the store as shown in the header: a path, or a DSN already redacted
            (never pass a password).
        refresh_interval: seconds between refreshes (None: only on ``g``).
        row_limit: at most this many tasks are fetched per refresh.
        idle_threshold: seconds after which a silent heartbeat is shown as a warning.
        reconcile_command: the console command that applies what the reconcile view shows,
            with the store options the dashboard was opened with, so it works when pasted.
        waiting_reason: says why a durable queued task waits (see `DashboardApp`).
    """
    app = DashboardApp(
        controller,
        store_label=store_label,
        refresh_interval=refresh_interval,
        row_limit=row_limit,
        idle_threshold=idle_threshold,
        reconcile_command=reconcile_command,
        waiting_reason=waiting_reason,
    )
    result = app.run()
    return result if isinstance(result, int) else (app.return_code or 0)
