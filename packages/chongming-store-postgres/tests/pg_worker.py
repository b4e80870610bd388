"""A worker process for the cross-process tests (run as a script, never collected).

Usage: ``python pg_worker.py MODE DSN SCHEMA GO_FILE WORKER_NAME [ARGS...]``

The worker creates ``GO_FILE.ready-NAME``, waits for GO_FILE to exist (the test
creates it once every worker is ready, so they all start at once), does its
part on its own `PostgresTaskStore`, and prints one JSON object on stdout: what
it did, and every unexpected error as text (exit code 1 then).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import sys
import time
from datetime import timedelta
from typing import Any

from chongming_core import (
    ClaimRequest,
    ConcurrencyConflict,
    FakeClock,
    StateMachine,
    TaskQuery,
    TaskStatus,
)
from chongming_core.backend import holds_fleet_slot
from chongming_runtime.testing import wait_until
from chongming_store_contract import BASE_TIME, build_task, build_versions, next_version
from chongming_store_postgres import PostgresTaskStore

_GO_TIMEOUT = 30.0


def _wait_for(go_file: str, name: str) -> None:
    open(f"{go_file}.ready-{name}", "w").close()  # imported and about to wait
    wait_until(
        lambda: os.path.exists(go_file), f"{go_file} to appear", timeout=_GO_TIMEOUT, interval=0.005
    )


def cas(store: PostgresTaskStore, name: str, task_id: str, final: int) -> dict[str, Any]:
    """Race the other workers to create the task, then to write every version up to
    `final`; report whether this worker created it and the versions it won."""
    try:
        store.create(*build_task(task_id, TaskStatus.RUNNING, label=name))
        created = True
    except ConcurrencyConflict:
        created = False
    won: list[int] = []
    lost = 0
    while True:
        current = store.get(task_id)
        assert current is not None
        if current.status_version >= final:
            return {"created": created, "won": won, "lost": lost}
        built = next_version(current)
        mine = built.snapshot.evolve(label=name)
        records = [dataclasses.replace(t, actor=name) for t in built.transitions]
        try:
            store.save(mine, expect_version=current.status_version, transitions=records)
        except ConcurrencyConflict as conflict:
            if conflict.actual is None or conflict.actual <= current.status_version:
                raise AssertionError(f"a conflict that saw no newer version: {conflict}") from None
            lost += 1
        else:
            won.append(mine.status_version)


def _barrier(go_file: str, phase: int, name: str, parties: int) -> None:
    """Wait until `parties` workers have finished `phase` (a barrier made of files)."""
    open(f"{go_file}.done-{phase}-{name}", "w").close()
    prefix = f"{os.path.basename(go_file)}.done-{phase}-"
    directory = os.path.dirname(go_file)
    wait_until(
        lambda: sum(f.startswith(prefix) for f in os.listdir(directory)) >= parties,
        f"the other workers to finish phase {phase}",
        timeout=_GO_TIMEOUT,
        interval=0.005,
    )


def claim(
    store: PostgresTaskStore, name: str, go_file: str, parties: int, times: str
) -> dict[str, Any]:
    """In phases (all workers finish one before any starts the next), claim with an
    explicit ``now`` of each of `times` (seconds after BASE_TIME) until nothing is left."""
    phases: list[list[str]] = []
    for phase, at_seconds in enumerate(float(t) for t in times.split(",")):
        now = BASE_TIME + timedelta(seconds=at_seconds)
        mine: list[str] = []
        for _ in range(1000):
            got = store.claim_commands(name, now=now, lease_seconds=60, limit=3)
            if not got:
                break
            mine.extend(c.command_id for c in got)
        phases.append(mine)
        _barrier(go_file, phase, name, parties)
    return {"claimed": phases}


def append(store: PostgresTaskStore, name: str, task_id: str, versions: int) -> dict[str, Any]:
    """Append overlapping slices of the task's chain in a random order."""
    _, chain = build_versions(task_id, versions)
    order = list(chain)
    random.Random(name).shuffle(order)
    for start in range(0, len(order), 5):
        store.append(order[start : start + 8])
    return {"appended": len(order)}


def durable(store: PostgresTaskStore, name: str, limit: int) -> dict[str, Any]:
    """Claim durable tasks (a fleet limit of `limit` on tag ``gpu``) and run each through
    starting and running to succeeded under its version, until none is left queued; report
    the tasks claimed and the most ``gpu`` tasks seen holding a slot at once."""
    clock = FakeClock(BASE_TIME + timedelta(seconds=1000))
    mine: list[str] = []
    most = 0
    deadline = time.monotonic() + _GO_TIMEOUT * 2
    while time.monotonic() < deadline:
        now = clock.now()
        request = ClaimRequest(
            owner=name,
            names=frozenset({"job"}),
            buckets=None,
            limit=2,
            now=now,
            lease_until=now + timedelta(seconds=300),
            fleet_limits={"gpu": limit},
        )
        got = store.claim_tasks(request)
        held = [s for s in store.query(TaskQuery(tag="gpu")) if holds_fleet_slot(s, now)]
        most = max(most, len(held))
        for claimed in got:
            mine.append(claimed.task_id)
            machine = StateMachine(claimed, clock=clock)
            machine.mark_starting(executor="process")
            machine.mark_running(pid=os.getpid())
            started = machine.snapshot
            store.save(
                started, expect_version=claimed.status_version, transitions=machine.transitions
            )
            finished = StateMachine(started, clock=clock)
            finished.mark_succeeded(outcome=name)
            store.save(
                finished.snapshot,
                expect_version=started.status_version,
                transitions=finished.transitions,
            )
        if not got and not store.query(TaskQuery(statuses=frozenset({TaskStatus.QUEUED}))):
            return {"claimed": mine, "most_gpu": most}
    raise TimeoutError("tasks were still queued after the deadline")


def main(argv: list[str]) -> int:
    mode, dsn, schema, go_file, name, *args = argv
    report: dict[str, Any] = {"worker": name, "errors": []}
    try:
        _wait_for(go_file, name)
        with PostgresTaskStore(dsn, schema=schema, min_size=1, max_size=2) as store:
            assert isinstance(store, PostgresTaskStore)
            if mode == "cas":
                report.update(cas(store, name, args[0], int(args[1])))
            elif mode == "claim":
                report.update(claim(store, name, go_file, int(args[0]), args[1]))
            elif mode == "append":
                report.update(append(store, name, args[0], int(args[1])))
            elif mode == "durable":
                report.update(durable(store, name, int(args[0])))
            else:
                raise ValueError(f"unknown mode {mode!r}")
    except Exception as exc:
        report["errors"].append(f"{type(exc).__name__}: {exc}")
    print(json.dumps(report))
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
