"""Against a live worker: a second Controller on the same SQLite file runs a real task.

The dashboard's controller holds nothing; its pause, resume and stop travel as
command rows, the worker's poller applies them, and the dashboard reports each
one as confirmed only once it sees the new status in the store.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from chongming_core import TaskStatus
from chongming_runtime import Controller
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp
from chongming_tui.components.stop_dialog import StopDialog
from chongming_tui.components.task_table import TaskTable
from chongming_tui.testing import drive, wait_for

S = TaskStatus


def crunch(ctx: Any, rows: int) -> None:
    """Runs until stopped, reporting progress at every checkpoint."""
    done = 0
    while True:
        ctx.checkpoint()
        done = (done + 1) % rows
        ctx.progress(done, total=rows, unit="rows")
        threading.Event().wait(0.005)


@pytest.fixture
def shared_file(tmp_path: Path) -> Path:
    return tmp_path / "shared.db"


@pytest.fixture
def worker(shared_file: Path) -> Iterator[Controller]:
    controller = Controller(
        store=SqliteTaskStore(shared_file),
        owner="worker-1",
        poll_interval=0.02,
        touch_interval=0.05,
        graceful_stop=2.0,
    )
    controller.register("crunch", crunch)
    yield controller
    controller.close(timeout=10, close_store=True)


@pytest.fixture
def console(shared_file: Path, worker: Controller) -> Iterator[Controller]:
    controller = Controller(store=SqliteTaskStore(shared_file), owner="console-1")
    yield controller
    controller.close(timeout=10, close_store=True)


def _status(app: DashboardApp, task_id: str) -> TaskStatus | None:
    latest = app.latest
    if latest is None:
        return None
    return next((s.status for s in latest.tasks if s.task_id == task_id), None)


def test_pause_resume_and_stop_reach_a_task_running_elsewhere(
    worker: Controller, console: Controller
) -> None:
    worker.submit("crunch", 1000, task_id="job-1", label="转换-1")
    app = DashboardApp(console, store_label="shared.db", refresh_interval=0.05, cursor_blink=False)

    async def scenario(pilot: Pilot[int]) -> None:
        await wait_for(pilot, lambda: _status(app, "job-1") is S.RUNNING, "job-1 running")
        table = app.overview.query_one(TaskTable)
        assert table.selected_task_id == "job-1"

        await pilot.press("p")
        confirmed = "pause of job-1 confirmed: the task is paused"
        await wait_for(pilot, lambda: confirmed in app.said, "the confirmation")
        # first the honest "requested", then — once paused was seen — "confirmed"
        requested = "pause of job-1 requested (command sent to its holder), not confirmed"
        assert list(app.said).index(requested) < list(app.said).index(confirmed)
        assert _status(app, "job-1") is S.PAUSED

        await pilot.press("r")
        confirmed = "resume of job-1 confirmed: the task is running"
        await wait_for(pilot, lambda: confirmed in app.said, "the resume")
        assert _status(app, "job-1") is S.RUNNING

        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, StopDialog), "the stop dialog")
        app.screen.query_one(Input).value = "发布窗口"  # typing is covered in test_actions
        await pilot.press("enter", "y")
        await wait_for(pilot, lambda: _status(app, "job-1") is S.STOPPED, "job-1 stopped")
        confirmed = "stop of job-1 confirmed: the task is stopped"
        await wait_for(pilot, lambda: confirmed in app.said, "the confirmation")
        assert "stop of job-1 requested (command sent to its holder), not confirmed yet" in (
            app.said
        )

    drive(app, scenario)
    outcome = worker.wait("job-1", timeout=10)
    assert outcome.status is S.STOPPED
    actions = [(c.action, c.result) for c in console.store.commands(task_id="job-1")]
    assert [a for a, _ in actions] == ["pause", "resume", "stop"]
    assert all(result is not None and result.startswith("applied") for _, result in actions)
    history = console.history("job-1")
    assert any(t.reason == "发布窗口" for t in history)
    assert [t.to_status for t in history][-2:] == [S.STOPPING, S.STOPPED]
