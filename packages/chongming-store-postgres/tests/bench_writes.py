"""Transitions per second: single `save` calls against `save_many` batches (not a test).

Usage: ``python bench_writes.py DSN [TASKS] [ROUNDS]``

Creates a scratch schema, pre-builds every snapshot (so only the store is timed),
writes ``TASKS * ROUNDS`` transitions one `save` at a time and again in
`save_many` batches of 100, prints both rates, and drops the schema.
"""

from __future__ import annotations

import sys
import time
import uuid

import psycopg
from psycopg import sql

from chongming_core import SnapshotWrite, TaskStatus
from chongming_store_contract import BuiltTask, build_task, next_version
from chongming_store_postgres import PostgresTaskStore

BATCH = 100


def chains(
    prefix: str, tasks: int, rounds: int
) -> tuple[list[BuiltTask], list[list[SnapshotWrite]]]:
    """The initial tasks and, per round, one save of each of them."""
    first = [build_task(f"{prefix}-{i}", TaskStatus.RUNNING) for i in range(tasks)]
    current = [b.snapshot for b in first]
    rounds_of_writes: list[list[SnapshotWrite]] = []
    for _ in range(rounds):
        writes = []
        for i, snapshot in enumerate(current):
            built = next_version(snapshot)
            writes.append(SnapshotWrite(built.snapshot, snapshot.status_version, built.transitions))
            current[i] = built.snapshot
        rounds_of_writes.append(writes)
    return first, rounds_of_writes


def main(argv: list[str]) -> None:
    dsn = argv[0]
    tasks = int(argv[1]) if len(argv) > 1 else 200
    rounds = int(argv[2]) if len(argv) > 2 else 10
    schema = f"chongming_bench_{uuid.uuid4().hex}"
    store = PostgresTaskStore(dsn, schema=schema)
    try:
        for mode in ("save", "save_many"):
            first, rounds_of_writes = chains(mode, tasks, rounds)
            store.save_many([SnapshotWrite(b.snapshot, None, b.transitions) for b in first])
            started = time.perf_counter()
            for writes in rounds_of_writes:
                if mode == "save":
                    for w in writes:
                        assert w.expect_version is not None
                        store.save(
                            w.snapshot, expect_version=w.expect_version, transitions=w.transitions
                        )
                else:
                    for start in range(0, len(writes), BATCH):
                        assert store.save_many(writes[start : start + BATCH]) == []
            elapsed = time.perf_counter() - started
            count = tasks * rounds
            print(f"{mode:>9}: {count} transitions in {elapsed:.2f} s = {count / elapsed:,.0f}/s")
    finally:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main(sys.argv[1:])
