"""CommandPoller: claim, apply, complete; release what is not held; never lose a command."""

from __future__ import annotations

import threading

from chongming_core import Command, FakeClock, InMemoryTaskStore
from chongming_runtime.persistence._commands import NOT_HELD, CommandPoller, new_command


def _issue(store: InMemoryTaskStore, clock: FakeClock, task_id: str, action: str = "stop",
           bucket: int | None = None) -> Command:  # fmt: skip
    command = new_command(
        task_id=task_id, action=action, issued_by="ops", clock=clock, reason="发布窗口",
        bucket=bucket,
    )  # fmt: skip
    store.submit_command(command)
    return command


def test_held_commands_are_completed_and_others_released() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    mine = _issue(store, clock, "mine")
    theirs = _issue(store, clock, "theirs")
    seen: list[Command] = []

    def handler(command: Command) -> str | None:
        seen.append(command)
        return "applied" if command.task_id == "mine" else NOT_HELD

    poller = CommandPoller(store, owner="node-a", handler=handler, clock=clock)
    assert poller.poll_once() == 1
    assert [c.command_id for c in seen] == [mine.command_id, theirs.command_id]
    assert seen[0].reason == "发布窗口"
    done = {c.command_id: c for c in store.commands()}
    assert done[mine.command_id].result == "applied"
    assert done[mine.command_id].is_complete
    assert not done[theirs.command_id].is_complete
    # released at once: the real holder claims it without waiting for a lease to expire
    other = store.claim_commands("node-b", now=clock.now(), lease_seconds=30)
    assert [c.command_id for c in other] == [theirs.command_id]


def test_a_failing_handler_rejects_the_command_and_the_channel_goes_on() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    bad = _issue(store, clock, "t1", action="explode")
    good = _issue(store, clock, "t2")

    def handler(command: Command) -> str | None:
        if command.action == "explode":
            raise ValueError("unknown action 'explode'")
        return "applied"

    poller = CommandPoller(store, owner="node-a", handler=handler, clock=clock)
    assert poller.poll_once() == 2
    results = {c.command_id: c.result for c in store.commands()}
    assert results[bad.command_id] == "rejected: ValueError: unknown action 'explode'"
    assert results[good.command_id] == "applied"


def test_bucket_filter() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    _issue(store, clock, "in", bucket=3)
    _issue(store, clock, "out", bucket=40)
    handled: list[str] = []

    def handler(command: Command) -> str:
        handled.append(command.task_id)
        return "applied"

    poller = CommandPoller(store, owner="node-a", handler=handler, clock=clock, buckets=range(16))
    poller.poll_once()
    assert handled == ["in"]


def test_background_thread_applies_commands_promptly() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    applied = threading.Event()

    def handler(command: Command) -> str:
        applied.set()
        return "applied"

    poller = CommandPoller(store, owner="node-a", handler=handler, clock=clock, interval=0.01)
    poller.start()
    assert poller.running
    _issue(store, clock, "t1")
    poller.wake()
    assert applied.wait(timeout=10)
    poller.stop()
    assert not poller.running
