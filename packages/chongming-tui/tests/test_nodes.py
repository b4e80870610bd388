"""The dashboard and durable work: the nodes view lists the worker rows, and the detail
of a durable queued task says why it waits (the runtime's reason, or one it is given)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from chongming_core import TaskSnapshot, TaskStatus, WorkerRecord
from chongming_runtime import Controller
from chongming_runtime.testing import Closer
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp
from chongming_tui.components.nodes import NodesScreen, capacity_text
from chongming_tui.testing import drive, screen_text, wait_for


def _row(owner: str, now: datetime, *, live: bool) -> WorkerRecord:
    until = now + timedelta(seconds=30) if live else now - timedelta(seconds=5)
    return WorkerRecord(
        owner=owner,
        host="节点-host",
        pid=4242,
        buckets=None if live else (0, 1, 2, 3),
        names=("resize", "报表"),
        capacity={"max_parallel": 4, "limits": {}, "fleet_limits": {"gpu": 2}},
        started_at=now - timedelta(minutes=5),
        last_seen=now - timedelta(seconds=2),
        lease_until=until,
    )


def _reason(
    snapshot: TaskSnapshot, *, now: datetime, served: Any, workers: Any, fleet_held: Any
) -> str | None:
    """A stand-in for the console's `waiting_reason` (the dashboard only shows it)."""
    if snapshot.durable and snapshot.name not in served:
        return f"no worker serves {snapshot.name!r}"
    return None


def test_capacity_text() -> None:
    assert capacity_text({"max_parallel": 4, "limits": {"db": 2}, "fleet_limits": {"gpu": 1}}) == (
        "max_parallel=4 db=2 fleet:gpu=1"
    )
    assert capacity_text({}) == "-"


def _console(tmp_path: Path, closer: Closer) -> Controller:
    """A console's controller on a store with a live and an expired worker row, and a
    durable task ``orphan-1`` whose name neither serves (both closed by `closer`)."""
    store = closer.add(SqliteTaskStore(tmp_path / "t.db"))
    controller = closer.controller(store=store, owner="console-1")
    now = controller.clock.now()
    store.register_worker(_row("worker-a", now, live=True))
    store.register_worker(_row("worker-b", now, live=False))
    controller.enqueue("orphan", 1, task_id="orphan-1")
    return controller


def test_the_nodes_view_and_the_waiting_reason(tmp_path: Path, closer: Closer) -> None:
    controller = _console(tmp_path, closer)
    task_id = "orphan-1"
    now = controller.clock.now()
    controller.store.create(  # a task worker-a runs: the view counts it active there
        TaskSnapshot(
            task_id="held-1", name="resize", status=TaskStatus.RUNNING, status_version=2,
            attempt=1, durable=True, created_at=now, updated_at=now, started_at=now,
            lease_owner="worker-a", lease_until=now + timedelta(seconds=30),
        )
    )  # fmt: skip
    app = DashboardApp(
        controller,
        store_label="t.db",
        refresh_interval=None,
        cursor_blink=False,
        waiting_reason=_reason,
    )

    async def scenario(pilot: Pilot[int]) -> None:
        assert app.latest is not None
        assert app.latest.waiting == {task_id: "no worker serves 'orphan'"}
        assert app.latest.active == {"worker-a": 1, "worker-b": 0}
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, NodesScreen), "the nodes view")
        await pilot.pause(0.05)
        text = "\n".join(screen_text(app))
        assert "workers: 1 live, 1 expired" in text
        assert "ACTIVE" in text
        for shown in ("worker-a", "worker-b", "节点-host", "resize, 报表", "max_parallel=4",
                      "fleet:gpu=2", "[0, 1, ..., 3]", "expired", "live"):  # fmt: skip
            assert shown in text, shown
        await pilot.press("escape")
        app.open_detail(task_id)
        await wait_for(
            pilot,
            lambda: any("no worker serves 'orphan'" in line for line in screen_text(app)),
            "the waiting reason in the detail",
        )

    drive(app, scenario)


def test_an_80_column_terminal_shows_which_workers_are_live_and_the_runtime_reason(
    tmp_path: Path, closer: Closer
) -> None:
    controller = _console(tmp_path, closer)
    task_id = "orphan-1"
    # no waiting_reason given: the runtime's own says why the task waits
    app = DashboardApp(controller, store_label="t.db", refresh_interval=None,
                       cursor_blink=False)  # fmt: skip

    async def scenario(pilot: Pilot[int]) -> None:
        assert app.latest is not None
        assert app.latest.waiting == {task_id: "no worker serves 'orphan'"}
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, NodesScreen), "the nodes view")
        await pilot.pause(0.05)
        rows = {line.split()[0]: line for line in screen_text(app) if "worker-" in line}
        assert "live" in rows["worker-a"].split(), rows
        assert "expired" in rows["worker-b"].split(), rows
        assert all("ago" in line for line in rows.values()), rows

    drive(app, scenario, size=(80, 24))


def test_the_dashboard_says_a_full_fleet_limit_holds_a_task_back(
    tmp_path: Path, closer: Closer
) -> None:
    store = closer.add(SqliteTaskStore(tmp_path / "t.db"))
    controller = closer.controller(store=store, owner="console-1")
    now = controller.clock.now()
    row = _row("worker-a", now, live=True)
    store.register_worker(
        WorkerRecord(
            owner=row.owner, host=row.host, pid=row.pid, buckets=None, names=("render",),
            capacity={"fleet_limits": {"gpu": 1}}, started_at=row.started_at,
            last_seen=row.last_seen, lease_until=row.lease_until,
        )
    )  # fmt: skip
    holding = controller.enqueue("render", 1, tags=["gpu"], task_id="gpu-1")
    waiting = controller.enqueue("render", 2, tags=["gpu"], task_id="gpu-2")
    queued = store.get(holding)
    assert queued is not None
    store.save(
        queued.evolve(status=TaskStatus.RUNNING, status_version=queued.status_version + 1,
                      started_at=now, lease_owner="worker-a",
                      lease_until=now + timedelta(seconds=30)),
        expect_version=queued.status_version,
    )  # fmt: skip
    app = DashboardApp(controller, store_label="t.db", refresh_interval=None,
                       cursor_blink=False)  # fmt: skip

    async def scenario(pilot: Pilot[int]) -> None:
        assert app.latest is not None
        assert app.latest.waiting == {waiting: "fleet limit 'gpu' is full (1 of 1 held)"}

    drive(app, scenario, size=(80, 24))
