"""Pause and resume commands applied in one poll batch (D61): in order, with the right end.

The holder's poller thread is stopped after the submit, and each batch is claimed
by one `poll_once()`: every command of the batch is in the store before the
poll, so they are claimed and applied together, in the order they were issued.
Each case runs on every executor that can pause, with a body that counts a step
every millisecond in a file, so the test sees whether it advances.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest

from chongming_core import FakeClock, InMemoryTaskStore, TaskStatus
from chongming_runtime import Controller, TaskRun
from chongming_runtime.executors._base import Executor
from chongming_runtime.persistence._commands import new_command
from chongming_runtime.testing import wait_until
from pause_helpers import (
    EXECUTORS,
    TESTS,
    Steps,
    body_and_executor,
    moves,
    still_for,
)

S = TaskStatus
WINDOW = 10.0  # the pause window of every command: long, so that only a checkpoint ends it
HELD = 0.05


@pytest.fixture(scope="module")
def tasks() -> Iterator[ModuleType]:
    """The task module, importable by name in this process and in spawned children."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(TESTS))
        import runtime_proc_tasks

        yield runtime_proc_tasks


class Holder:
    """A controller holding one counting task, its poller stopped: `batch()` polls once."""

    def __init__(self, controller: Controller, run: TaskRun, steps: Steps) -> None:
        self.controller = controller
        self.run = run
        self.steps = steps
        self.clock = FakeClock()  # only stamps the command rows

    def batch(self, *actions: str) -> list[str | None]:
        """Issue `actions` as command rows, apply them in one poll; their results in order."""
        store = self.controller.store
        issued = [
            new_command(
                task_id=self.run.task_id, action=action, issued_by="console", clock=self.clock
            )
            for action in actions
        ]
        for command in issued:
            store.submit_command(command)
        assert self.controller._poller.poll_once() == len(issued)
        results = {c.command_id: c.result for c in store.commands(task_id=self.run.task_id)}
        return [results[c.command_id] for c in issued]

    def settled(self) -> TaskStatus:
        """The status once no pause is under way (a pause ends by its body or its window)."""
        wait_until(
            lambda: self.run.status is not S.PAUSING, "the pause to settle", timeout=WINDOW + 20
        )
        return self.run.status


@pytest.fixture(params=EXECUTORS, ids=[e[0] for e in EXECUTORS])
def holder(
    request: pytest.FixtureRequest,
    tasks: ModuleType,
    tmp_path: Path,
    make_controller: Callable[..., Controller],
) -> Iterator[Holder]:
    asynchronous: bool = request.param[1]
    make: Callable[[], Executor] = request.param[2]
    body, executor = body_and_executor(tasks, asynchronous, make)
    controller = make_controller(
        store=InMemoryTaskStore(), owner="holder", pause_timeout=WINDOW, graceful_stop=10
    )
    controller.register("count", body)
    steps = Steps(tmp_path / "steps")
    run = controller.submit("count", str(steps), executor=executor)
    controller._poller.stop()  # from now on, only the test polls
    # the body steps in a child process before its parent hears that it began: until then
    # the run is honestly still `starting`, and a pause asked then is held for the start
    wait_until(
        lambda: steps.count() > 0 and run.status is S.RUNNING,
        "the body's first step, seen running",
        timeout=30,
    )
    try:
        yield Holder(controller, run, steps)
    finally:
        controller.close(reason="test over", timeout=30)


def _held(holder: Holder) -> None:
    assert holder.settled() is S.PAUSED
    assert still_for(holder.steps, HELD), "paused, but the body advances"


def _free(holder: Holder) -> None:
    assert holder.settled() is S.RUNNING
    assert moves(holder.steps), "running, but the body does not advance"


def test_a_pause_then_a_resume_in_one_batch_leave_it_running(holder: Holder) -> None:
    assert holder.batch("pause", "resume") == ["applied: pause requested", "applied"]
    _free(holder)
    statuses = [t.to_status for t in holder.run.transitions]
    assert statuses[-1] is S.RUNNING
    assert S.PAUSING in statuses


def test_a_resume_then_a_pause_in_one_batch_leave_it_paused(holder: Holder) -> None:
    assert holder.run.pause(timeout=WINDOW) is True
    assert holder.batch("resume", "pause") == ["applied", "applied: pause requested"]
    _held(holder)
    assert "runtime:pause_aborted" not in [t.trigger for t in holder.run.transitions]
    assert holder.batch("resume") == ["applied"]
    _free(holder)


def test_pause_resume_pause_in_one_batch_leave_it_paused(holder: Holder) -> None:
    assert holder.batch("pause", "resume", "pause") == [
        "applied: pause requested",
        "applied",
        "applied: pause requested",
    ]
    _held(holder)
    assert holder.batch("resume", "pause", "resume") == [
        "applied",
        "applied: pause requested",
        "applied",
    ]
    _free(holder)


def test_a_pause_then_a_stop_in_one_batch_stop_it(holder: Holder) -> None:
    assert holder.batch("pause", "stop") == ["applied: pause requested", "applied"]
    outcome = holder.run.wait(30)
    assert outcome.status is S.STOPPED
    assert [t.to_status for t in holder.run.transitions][-2:] == [S.STOPPING, S.STOPPED]
    assert holder.batch("pause", "resume") == [
        "ignored: task is stopped",
        "ignored: task is stopped",
    ]


def test_a_resume_sent_right_behind_a_pause_from_another_process_is_not_lost(
    holder: Holder,
) -> None:
    """The task still shows running while the pause is on its way: the resume goes behind
    it instead of being refused, and the holder applies both, in order."""
    console = Controller(store=holder.controller.store, owner="console")
    try:
        task_id = holder.run.task_id
        assert holder.controller.flush()  # its row as another process sees it
        assert console.pause(task_id) is False  # sent; no receipt across processes
        assert holder.run.status is S.RUNNING  # the holder has not polled yet
        assert console.resume(task_id) is True  # accepted for the holder (R14)
        actions = [c.action for c in holder.controller.store.commands(task_id=task_id)]
        assert actions == ["pause", "resume"]
        assert holder.controller._poller.poll_once() == 2
        _free(holder)
        assert S.PAUSING in [t.to_status for t in holder.run.transitions]
        # with no pause on its way, a running task still has nothing to resume
        assert console.resume(task_id) is False
    finally:
        console.close()


def test_a_command_behind_one_another_node_holds_for_a_moment_waits_for_it(
    holder: Holder,
) -> None:
    """Another node claims the pause first (it does not hold the task, so it gives it back):
    the holder, meanwhile claiming the resume alone, leaves it for after the pause
    instead of applying it to a task still running and ignoring it."""
    store = holder.controller.store
    task_id = holder.run.task_id
    pause, resume = (
        new_command(task_id=task_id, action=action, issued_by="console", clock=holder.clock)
        for action in ("pause", "resume")
    )
    store.submit_command(pause)
    # node-b claims as if the holder's lease had run out (a store offers no one else the
    # commands of a task held under a live lease; a clock far ahead, or a store that does
    # not filter them, still can): it holds the pause until long after the holder's now
    later = holder.controller.clock.now() + timedelta(hours=1)
    [taken] = store.claim_commands("node-b", now=later, lease_seconds=30, limit=1)
    assert taken.command_id == pause.command_id
    store.submit_command(resume)
    assert holder.controller._poller.poll_once() == 0  # the resume waits for the pause
    open_ids = [c.command_id for c in store.commands(task_id=task_id, include_complete=False)]
    assert open_ids == [pause.command_id, resume.command_id]
    assert holder.run.status is S.RUNNING
    assert store.release_command(pause.command_id, owner="node-b")  # node-b gives it back
    assert holder.controller._poller.poll_once() == 2  # both, in the order they were issued
    results = {c.command_id: c.result for c in store.commands(task_id=task_id)}
    assert [results[pause.command_id], results[resume.command_id]] == [
        "applied: pause requested",
        "applied",
    ]
    _free(holder)
