"""chongming-tui: the live terminal dashboard (``chongming-task dashboard``).

The dashboard reads through a `Controller`'s query side and controls through
its control side, so it never bypasses an invariant: a stop of a task held by
another process becomes a command row, exactly as from the CLI.

Example::

    from chongming_runtime import Controller
    from chongming_store_sqlite import SqliteTaskStore
    from chongming_tui import run_dashboard

    run_dashboard(controller=Controller(store=SqliteTaskStore("tasks.db")),
                  store_label="tasks.db")
"""

from __future__ import annotations

from chongming_tui._app import DashboardApp as DashboardApp
from chongming_tui._run import run_dashboard as run_dashboard

__version__ = "0.1.0"

__all__ = ["DashboardApp", "run_dashboard"]
