"""A worker process for the cross-process tests (run as a script, never collected).

Usage: ``python sqlite_worker.py MODE DB_PATH GO_FILE WORKER_NAME [ARGS...]``

The worker creates ``GO_FILE.WORKER_NAME.ready``, waits for GO_FILE to exist (the
parent creates it once every worker is ready, so they all start at once), does its
part, and prints one JSON object on stdout: what it did, and every error that
reached it as text. It never lets an exception escape silently: an unexpected
one is reported in ``errors`` and the exit code is 1.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from typing import Any

from chongming_core import ConcurrencyConflict, FakeClock, StateMachine, StoreError, TaskStatus
from chongming_runtime.testing import wait_until
from chongming_store_contract import BASE_TIME, build_versions
from chongming_store_sqlite import SqliteTaskStore

_GO_TIMEOUT = 30.0


def _wait_for(go_file: str, name: str) -> None:
    with open(f"{go_file}.{name}.ready", "w"):
        pass  # tells the parent this worker is loaded and waiting
    wait_until(lambda: os.path.exists(go_file), f"{go_file} to appear", timeout=_GO_TIMEOUT)


def compare_and_set(store: SqliteTaskStore, name: str, task_id: str, final: int) -> dict[str, Any]:
    """Race the other workers to move `task_id` one version at a time up to `final`."""
    won: list[int] = []
    conflicts = 0
    clock = FakeClock(BASE_TIME)
    while True:
        current = store.get(task_id)
        assert current is not None
        if current.status_version >= final:
            break
        machine = StateMachine(current, clock=clock)
        if machine.status is TaskStatus.RUNNING:
            machine.mark_pausing(actor=name, reason="race")
        else:
            machine.abort_pause(actor=name, reason="race")
        try:
            store.save(
                machine.snapshot,
                expect_version=current.status_version,
                transitions=machine.transitions,
            )
        except ConcurrencyConflict:
            conflicts += 1
            continue
        won.append(machine.version)
    return {"won": won, "conflicts": conflicts}


def claim(store: SqliteTaskStore, name: str, phase: str) -> dict[str, Any]:
    """Claim commands until none is left, at the fake time of `phase`."""
    held = BASE_TIME + timedelta(seconds=30)
    now = BASE_TIME if phase == "first" else BASE_TIME + timedelta(seconds=61)
    early: list[str] = []
    if phase == "again":
        # Every lease of the first round (or of a faster worker now) still holds at +30 s.
        early = [c.command_id for c in store.claim_commands(name, now=held, lease_seconds=60)]
    claimed: list[str] = []
    completed: list[str] = []
    while True:
        batch = store.claim_commands(name, now=now, lease_seconds=60, limit=7)
        if not batch:
            break
        for command in batch:
            claimed.append(command.command_id)
            if phase == "again" and store.complete_command(
                command.command_id, owner=name, now=now, result="applied"
            ):
                completed.append(command.command_id)
    return {"claimed": claimed, "early": early, "completed": completed}


def append(store: SqliteTaskStore, name: str, tasks: int, versions: int) -> dict[str, Any]:
    """Append every task's whole history, in pieces, racing the other workers."""
    offset = int(name.removeprefix("w"))
    histories = [build_versions(f"t{i}", versions).transitions for i in range(tasks)]
    calls = 0
    for start in range(0, versions, 3):
        for i in range(tasks):
            task = histories[(i + offset) % tasks]
            store.append(task[start : start + 3 + offset])  # overlapping pieces
            calls += 1
    return {"calls": calls}


def group_commit(store: SqliteTaskStore, name: str, tasks: int, steps: int) -> dict[str, Any]:
    """Drive this worker's own tasks with `save_many` batches while the others do too."""
    from chongming_core import SnapshotWrite

    clock = FakeClock(BASE_TIME)
    machines = [
        StateMachine.create(f"{name}-{i}", "job", clock=clock, max_attempts=3) for i in range(tasks)
    ]
    conflicts = store.save_many([SnapshotWrite(m.snapshot, None, m.transitions) for m in machines])
    seen = [len(m.transitions) for m in machines]
    for _ in range(steps):
        writes = []
        for index, m in enumerate(machines):
            before = m.version
            if m.status is TaskStatus.PENDING:
                m.mark_queued()
            elif m.status is TaskStatus.QUEUED:
                m.mark_starting(executor="thread")
            elif m.status is TaskStatus.STARTING:
                m.mark_running(pid=os.getpid())
            elif m.status is TaskStatus.RUNNING:
                m.mark_pausing(actor=name)
            else:
                m.abort_pause(actor=name)
            new = m.transitions[seen[index] :]
            seen[index] = len(m.transitions)
            writes.append(SnapshotWrite(m.snapshot, before, new))
        conflicts.extend(store.save_many(writes))
    return {"conflicts": len(conflicts), "final": [m.version for m in machines]}


def main(argv: list[str]) -> int:
    mode, db, go_file, name, *args = argv
    errors: list[str] = []
    result: dict[str, Any] = {}
    try:
        _wait_for(go_file, name)
        store = SqliteTaskStore(db, busy_timeout=10.0)
        try:
            if mode == "cas":
                result = compare_and_set(store, name, args[0], int(args[1]))
            elif mode == "claim":
                result = claim(store, name, args[0])
            elif mode == "append":
                result = append(store, name, int(args[0]), int(args[1]))
            elif mode == "group":
                result = group_commit(store, name, int(args[0]), int(args[1]))
            else:
                raise ValueError(f"unknown mode {mode!r}")
        finally:
            store.close()
    except StoreError as exc:
        errors.append(f"StoreError: {exc}")
    except Exception as exc:
        errors.append(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")
    print(json.dumps({"name": name, "errors": errors, **result}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
