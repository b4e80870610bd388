"""A store call that never returns (a PostgreSQL server that stopped answering, with
the TCP connection still up) must not hold the keys, nor quitting."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from chongming_core import FakeClock, TaskQuery, TaskStatus
from chongming_runtime.testing import Closer
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp
from chongming_tui.testing import drive, wait_for


class HangingStore(SqliteTaskStore):
    """Counts per status hang, once `hang` is set, until `release` is set (bounded)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hang = threading.Event()
        self.hanging = threading.Event()
        self.release = threading.Event()
        self.returned = threading.Event()

    def status_counts(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        if self.hang.is_set():
            self.hanging.set()
            self.release.wait(timeout=10)
            self.returned.set()
        return super().status_counts(query)


def test_quit_does_not_wait_for_a_store_call_that_hangs(
    tmp_path: Path, make_app: Callable[..., DashboardApp], closer: Closer
) -> None:
    store = closer.add(HangingStore(tmp_path / "tasks.db"))
    controller = closer.controller(store=store, owner="console-1", clock=FakeClock())
    app = make_app(controller)

    async def scenario(pilot: Pilot[int]) -> None:
        store.hang.set()
        await pilot.press("g")
        await wait_for(pilot, store.hanging.is_set, "the refresh to hang in the store")
        await pilot.press("1")  # the keys still answer: the view changes at once
        assert app.task_filter.group.value == "active"
        await pilot.press("q")

    try:
        drive(app, scenario)
        assert not store.returned.is_set(), "quitting waited for the hung store call"
    finally:
        store.release.set()
        controller.close(timeout=10, close_store=True)
