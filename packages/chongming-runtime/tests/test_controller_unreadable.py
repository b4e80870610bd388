"""A damaged row in the store hides no other task from the controller's queries.

The store names the rows it could not decode (`Listing.unreadable`,
`Counts.unreadable`); the controller passes them on, also when it answers part of a
listing from the runs it holds itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from chongming_core import (
    FakeClock,
    InMemoryTaskStore,
    StateMachine,
    StoreError,
    TaskStatus,
    unreadable_in,
)
from chongming_runtime.controller._controller import Controller

S = TaskStatus


def _store_with_a_damaged_row() -> InMemoryTaskStore:
    """`done` (succeeded), `victim` (damaged: its status is none), `waiting` (queued)."""
    store = InMemoryTaskStore()
    clock = FakeClock()
    for task_id, steps in (
        ("done", ["mark_queued", "mark_starting", "mark_running", "mark_succeeded"]),
        ("victim", ["mark_queued"]),
        ("waiting", ["mark_queued"]),
    ):
        machine = StateMachine.create(task_id, "job", clock=clock)
        for step in steps:
            getattr(machine, step)()
        store.create(machine.snapshot, machine.transitions)
    victim = store.get("victim")
    assert victim is not None
    store._tasks["victim"] = {**victim.to_dict(), "status": "zombie"}  # type: ignore[assignment]
    return store


@pytest.fixture
def controller(make_controller: Callable[..., Controller]) -> Controller:
    return make_controller(store=_store_with_a_damaged_row(), owner="console", graceful_stop=2.0)


def test_queries_name_the_damaged_row_and_answer_for_every_other_task(
    controller: Controller,
) -> None:
    listed = controller.list_tasks()
    assert [s.task_id for s in listed] == ["done", "waiting"]
    assert [(r.task_id, r.problem) for r in unreadable_in(listed)] == [
        ("victim", "status 'zombie' is not a status")
    ]
    stats = controller.stats()
    assert (stats.succeeded, stats.queued, stats.total) == (1, 1, 2)
    assert [r.task_id for r in stats.unreadable] == ["victim"]
    assert [r.task_id for r in unreadable_in(controller.bucket_counts())] == ["victim"]
    with pytest.raises(StoreError, match="task 'victim' cannot be read") as caught:
        controller.get("victim")
    assert caught.value.task_id == "victim"
    assert [t.to_status for t in controller.history("done")][-1] is S.SUCCEEDED


def test_a_listing_answered_partly_from_runs_held_here_keeps_the_damaged_row_named(
    controller: Controller,
) -> None:
    release = threading.Event()

    def hold(ctx: Any) -> None:
        while not release.wait(0.01):
            ctx.checkpoint()

    controller.register("hold", hold)
    run = controller.submit("hold", task_id="held")
    try:
        deadline = threading.Event()
        for _ in range(1000):
            if run.status is S.RUNNING:
                break
            deadline.wait(0.01)
        listed = controller.list_tasks()
        assert [s.task_id for s in listed] == ["done", "waiting", "held"]
        assert listed[-1].status is S.RUNNING  # the live snapshot of the run held here
        assert [r.task_id for r in unreadable_in(listed)] == ["victim"]
    finally:
        release.set()
        run.wait(timeout=10)
