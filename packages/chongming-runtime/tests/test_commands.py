"""CommandPoller: claim, apply, complete; release what is not held; never lose a command."""

from __future__ import annotations

import threading
import time
from typing import Any

from chongming_core import Command, FakeClock, InMemoryTaskStore
from chongming_runtime.persistence._commands import NOT_HELD, CommandPoller, new_command
from chongming_runtime.testing import wait_until


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


class _NotifyingStore(InMemoryTaskStore):
    """An in-memory store that says, like PostgreSQL, when a command is submitted."""

    def __init__(self) -> None:
        super().__init__()
        self.claims = 0
        self.waits: list[float] = []
        self.notified = threading.Event()

    def claim_commands(self, *args: Any, **kwargs: Any) -> list[Command]:
        self.claims += 1
        return super().claim_commands(*args, **kwargs)

    def submit_command(self, command: Command) -> None:
        super().submit_command(command)
        self.notified.set()

    def wait_for_commands(self, timeout: float) -> bool:
        self.waits.append(timeout)
        arrived = self.notified.wait(timeout)
        self.notified.clear()
        return arrived


def test_a_notified_poller_polls_once_a_second_and_still_hears_stop_and_wake() -> None:
    clock = FakeClock()
    store = _NotifyingStore()
    applied = threading.Event()

    def handler(command: Command) -> str:
        applied.set()
        return "applied"

    poller = CommandPoller(store, owner="node-a", handler=handler, clock=clock, interval=0.02)
    poller.start()
    wait_until(lambda: len(store.waits) >= 10, "the poller to wait ten slices")
    # the listening connection is opened before the first claim (a zero wait), then the
    # poller waits in slices of its interval and claims only when told or once a second
    assert store.waits[0] == 0
    assert max(store.waits) <= 0.02
    assert store.claims <= 2
    _issue(store, clock, "t1")  # notified: claimed at once, not at the next fallback poll
    assert applied.wait(timeout=10)
    started = time.monotonic()
    poller.stop()
    assert not poller.running
    assert time.monotonic() - started < 0.5  # a slice, not the fallback poll's second
