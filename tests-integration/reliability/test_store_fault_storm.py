"""A storm of controls over a store that fails now and then, sometimes after it wrote.

Each seed runs the control storm of `test_control_storm` (two driver threads,
three slots, a one-unit resource, quick, looping, fail-once and stubborn bodies)
over a store — a SQLite file or the in-memory store, by seed — whose
``save_many``, ``touch_many`` and ``create`` fail a random fraction of their
calls during random periods, raising the store's own `StoreError`: half of
them before writing, half after applying the write (a commit whose answer was
lost, as the PostgreSQL store can meet). At the end the store is healthy again
and the controller is closed (which flushes).

Asserted, for every seed, besides the control storm's checks (slots, the unit,
bodies inside attempts, legal contiguous terminal trajectories, confirmed
pauses, lost only for stubborn bodies; §8.7, §8.9, D27, D34, D44):

* no task failed because the store failed: none ends ``failed`` but by its
  body's exception, no failure names the store;
* ``persist_failures`` holds at most 20 entries, is not empty when a fault was
  injected, and each names a fault that really happened (never a conflict:
  there is no other writer, so a lost answer must not read as one);
* once the store is healthy and the controller flushed, the store holds every
  task with exactly its run's final status, version and trajectory;
* ``wait()`` never returned before the task's terminal write was tried, or
  named in ``persist_failures`` as failed.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from chongming_core import (
    ConcurrencyConflict,
    ConcurrencyPolicy,
    InMemoryTaskStore,
    SnapshotWrite,
    StoreError,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    TouchUpdate,
    Transition,
)
from chongming_runtime import Controller, TaskOutcome
from chongming_store_sqlite import SqliteTaskStore
from reliability.reliability_support import TALLY, seeds
from reliability.storm_support import (
    CURRENT,
    GRACEFUL,
    SLOTS,
    WAIT,
    Bodies,
    ControlDriver,
    control_violations,
    run_drivers,
    wind_down,
)

S = TaskStatus
MARK = "injected store fault"


class Faults:
    """Fails a fraction (`rate`) of the writes of the store it is mixed into; remembers every
    write it was asked for and every fault it raised."""

    def _init_faults(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.rate = 0.0
        self.faults_lock = threading.Lock()
        self.raised: list[str] = []
        self.calls = 0
        self.tried: set[tuple[str, int]] = set()  # (task id, version) of every snapshot write
        self.inside = threading.local()

    def _fault(self, what: str) -> tuple[bool, StoreError | None]:
        """Whether to fail this call, and whether after applying it."""
        with self.faults_lock:
            self.calls += 1
            if self.rng.random() >= self.rate:
                return False, None
            after = self.rng.random() < 0.5
            text = f"{MARK} #{len(self.raised)} in {what} ({'after' if after else 'before'} it)"
            self.raised.append(text)
        return after, StoreError(text)

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        with self.faults_lock:
            self.tried.update((w.snapshot.task_id, w.snapshot.status_version) for w in writes)
        after, error = self._fault("save_many")
        if error is not None and not after:
            raise error
        self.inside.on = True
        try:
            conflicts: list[ConcurrencyConflict] = super().save_many(writes)  # type: ignore[misc]
        finally:
            self.inside.on = False
        if error is not None:
            raise error
        return conflicts

    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        if getattr(self.inside, "on", False):  # a part of save_many: faulted there
            super().create(snapshot, transitions)  # type: ignore[misc]
            return
        with self.faults_lock:
            self.tried.add((snapshot.task_id, snapshot.status_version))
        after, error = self._fault("create")
        if error is not None and not after:
            raise error
        super().create(snapshot, transitions)  # type: ignore[misc]
        if error is not None:
            raise error

    def touch_many(self, updates: Sequence[TouchUpdate]) -> int:
        after, error = self._fault("touch_many")
        if error is not None and not after:
            raise error
        count: int = super().touch_many(updates)  # type: ignore[misc]
        if error is not None:
            raise error
        return count


class FaultySqlite(Faults, SqliteTaskStore):
    def __init__(self, path: Path, seed: int) -> None:
        super().__init__(path)
        self._init_faults(seed)


class FaultyMemory(Faults, InMemoryTaskStore):
    def __init__(self, seed: int) -> None:
        super().__init__()
        self._init_faults(seed)


class StoreDriver(ControlDriver):
    """The control storm's driver, waiting more often, checking what each wait returned."""

    WEIGHTS: ClassVar[dict[str, float]] = {**ControlDriver.WEIGHTS, "wait": 3}

    def __init__(self, *args: object, store: Faults, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.store = store
        self.untold: list[str] = []

    def waited(self, task_id: str, outcome: TaskOutcome) -> None:
        run = self.controller.run(task_id)
        assert run is not None
        version = run.snapshot.status_version
        with self.store.faults_lock:
            tried = (task_id, version) in self.store.tried
        if tried:
            return
        named = any(task_id in f.task_ids for f in self.controller.persist_failures)
        if not named and run.snapshot.status is outcome.status:
            self.untold.append(
                f"{task_id}: wait() returned {outcome.status.value} (v{version}) before its "
                "terminal write was tried, and no failure names it"
            )


def _faulty_periods(store: Faults, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        store.rate = rng.choice([0.0, 0.0, 0.3, 0.7, 1.0])
        stop.wait(rng.uniform(0.01, 0.1))
    store.rate = 0.0


def _storm(tmp_path: Path, seed: int) -> list[str]:
    # odd seeds: the in-memory store, whose durable writes the recording thread makes itself
    store: Faults = (
        FaultyMemory(seed) if seed % 2 else FaultySqlite(tmp_path / f"faulty-{seed}.db", seed)
    )
    assert isinstance(store, TaskStore)
    bodies = Bodies()
    controller = Controller(
        store=store,
        concurrency=ConcurrencyPolicy(max_parallel=SLOTS, limits={"gpu": 1}),
        graceful_stop=GRACEFUL,
        pause_timeout=0.05,
        touch_interval=0.02,
        lease_ttl=0.5,
    )
    CURRENT[:] = [controller]
    controller.register("work", bodies.body)
    tasks: list[str] = []
    lock = threading.Lock()
    drivers = [StoreDriver(controller, seed * 10 + i, tasks, lock, store=store) for i in range(2)]
    stop = threading.Event()
    faults = threading.Thread(target=_faulty_periods, args=(store, stop, seed), name="faults")
    try:
        faults.start()
        found = run_drivers(drivers)
        stop.set()
        faults.join(5)
        found.extend(wind_down(controller, bodies.executing_count))
        for driver in drivers:
            found.extend(driver.errors)
            found.extend(driver.untold)
        found.extend(control_violations(controller, store, bodies, drivers))
        found.extend(_fault_violations(controller, store))
    finally:
        stop.set()
        try:
            controller.close(timeout=WAIT)  # a no-op unless the storm raised before its close
        finally:
            CURRENT.clear()
            store.close()
    TALLY.add(
        fault_storm_tasks=len(tasks),
        fault_storm_faults=len(store.raised),
        fault_storm_calls=store.calls,
    )
    return found


def _fault_violations(controller: Controller, store: Faults) -> list[str]:
    found: list[str] = []
    failures = controller.persist_failures
    if len(failures) > 20:
        found.append(f"persist_failures holds {len(failures)} entries (at most 20)")
    if store.raised and not failures:
        found.append(f"{len(store.raised)} faults were injected, persist_failures is empty")
    raised = set(store.raised)
    for failure in failures:
        if not any(text in failure.error for text in raised):
            found.append(f"persist_failures names no injected fault: {failure}")
    for run in controller.runs():
        snap = run.snapshot
        # a fail-once body retried by hand after a stop fails its last attempt: legal
        if snap.status is S.FAILED and (
            snap.failure is None or "ValueError" not in snap.failure.message
        ):
            found.append(f"{run.task_id}: failed ({snap.failure})")
        for ended in [snap.failure, *(a.failure for a in snap.attempts)]:
            if ended is not None and ("store" in ended.message.lower() or MARK in ended.message):
                found.append(f"{run.task_id}: a failure names the store: {ended.message}")
    return found


@pytest.mark.parametrize("seed", seeds(ci=6, soak_count=200))
def test_a_storm_over_a_failing_store_loses_and_duplicates_nothing(
    tmp_path: Path, seed: int
) -> None:
    found = _storm(tmp_path, seed)
    assert not found, "\n".join(found[:40])
