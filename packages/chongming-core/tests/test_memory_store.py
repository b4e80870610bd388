"""A few direct thread-safety checks of `InMemoryTaskStore` (the full contract lives in
chongming-store-contract and runs against this store there)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

from chongming_core import (
    Command,
    ConcurrencyConflict,
    FakeClock,
    InMemoryTaskStore,
    Progress,
    StateMachine,
)

THREADS = 8
WAIT = 10.0


def _race(work: Callable[[int], None]) -> None:
    """Run `work(i)` on THREADS threads released together; re-raise the first error."""
    barrier = threading.Barrier(THREADS, timeout=WAIT)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait()
            work(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    if errors:
        raise errors[0]


def test_concurrent_saves_of_one_version_let_exactly_one_win() -> None:
    store = InMemoryTaskStore()
    machine = StateMachine.create("t1", "抽取", clock=FakeClock())
    store.create(machine.snapshot)
    base = machine.snapshot.status_version
    won: list[int] = []
    lost: list[ConcurrencyConflict] = []
    lock = threading.Lock()

    def save(index: int) -> None:
        copy = StateMachine(machine.snapshot, clock=machine.clock)
        record = copy.mark_queued(actor=f"writer-{index}")
        try:
            store.save(copy.snapshot, expect_version=base, transitions=[record])
        except ConcurrencyConflict as conflict:
            with lock:
                lost.append(conflict)
        else:
            with lock:
                won.append(index)

    _race(save)
    assert len(won) == 1
    assert len(lost) == THREADS - 1
    assert all((c.expected, c.actual, c.task_id) == (0, 1, "t1") for c in lost)
    history = store.history("t1")
    assert [(t.status_version, t.actor) for t in history] == [(1, f"writer-{won[0]}")]
    stored = store.get("t1")
    assert stored is not None
    assert stored.status_version == 1


def test_concurrent_claims_hand_each_command_to_one_owner() -> None:
    store = InMemoryTaskStore()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    for index in range(50):
        store.submit_command(
            Command(
                command_id=f"c{index}",
                task_id=f"t{index}",
                action="stop",
                issued_by="ops",
                issued_at=now,
            )
        )
    claimed: dict[int, list[str]] = {}

    def claim(index: int) -> None:
        commands = store.claim_commands(f"node-{index}", now=now, lease_seconds=30, limit=10)
        claimed[index] = [c.command_id for c in commands]

    _race(claim)
    ids = [command_id for ids in claimed.values() for command_id in ids]
    assert len(ids) == len(set(ids)) == 50


def test_touch_from_many_threads_never_changes_the_version() -> None:
    store = InMemoryTaskStore()
    machine = StateMachine.create("t1", "抽取", clock=FakeClock())
    store.create(machine.snapshot)

    def touch(index: int) -> None:
        for step in range(100):
            assert store.touch("t1", progress=Progress(done=step, total=100, unit=f"w{index}"))

    _race(touch)
    stored = store.get("t1")
    assert stored is not None
    assert stored.status_version == 0
    assert stored.progress is not None
    assert stored.progress.done == 99
    assert not store.touch("unknown", progress=Progress(done=1))
