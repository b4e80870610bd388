"""13 — write your own store backend and prove it with the contract suite (guide §8.7).

`CountingTaskStore` wraps any other store and counts the writes that reach it —
a pattern for metrics, auditing or fault injection. Whatever a backend does, it
is done when it passes `StoreContract`, the executable specification every
built-in store runs. See docs/store-guide.md for each method's semantics.

Run: python examples/13_custom_store.py   (runs the contract against the backend with pytest)
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from chongming_task import (
    Command,
    ConcurrencyConflict,
    InMemoryTaskStore,
    Progress,
    SnapshotWrite,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    TouchUpdate,
    Transition,
)
from chongming_task.testing.store_contract import (
    StoreContract,
    damage_memory_task,
    damage_memory_transition,
)


class CountingTaskStore(TaskStore):
    """Delegates every call to `inner` and counts writes by method name."""

    def __init__(self, inner: TaskStore) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.writes: Counter[str] = Counter()

    def _count(self, name: str) -> None:
        with self._lock:
            self.writes[name] += 1

    # snapshots
    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        self._count("create")
        self._inner.create(snapshot, transitions)

    def save(
        self, snapshot: TaskSnapshot, *, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        self._count("save")
        self._inner.save(snapshot, expect_version=expect_version, transitions=transitions)

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        self._count("save_many")
        return self._inner.save_many(writes)

    def get(self, task_id: str) -> TaskSnapshot | None:
        return self._inner.get(task_id)

    def query(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        return self._inner.query(query)

    def status_counts(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        return self._inner.status_counts(query)

    def bucket_counts(self, query: TaskQuery | None = None) -> dict[int, int]:
        return self._inner.bucket_counts(query)

    # audit trail
    def append(self, transitions: Iterable[Transition]) -> None:
        self._count("append")
        self._inner.append(transitions)

    def history(self, task_id: str) -> list[Transition]:
        return self._inner.history(task_id)

    # side path
    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
        pid: int | None = None,
    ) -> bool:
        self._count("touch")
        return self._inner.touch(
            task_id,
            progress=progress,
            heartbeat_at=heartbeat_at,
            lease_owner=lease_owner,
            lease_until=lease_until,
            pid=pid,
        )

    def touch_many(self, updates: Sequence[TouchUpdate]) -> int:
        self._count("touch_many")
        return self._inner.touch_many(updates)

    # commands
    def submit_command(self, command: Command) -> None:
        self._count("submit_command")
        self._inner.submit_command(command)

    def claim_commands(
        self,
        owner: str,
        *,
        now: datetime,
        lease_seconds: float,
        limit: int = 100,
        task_ids: Collection[str] | None = None,
        buckets: Collection[int] | None = None,
    ) -> list[Command]:
        self._count("claim_commands")
        return self._inner.claim_commands(
            owner,
            now=now,
            lease_seconds=lease_seconds,
            limit=limit,
            task_ids=task_ids,
            buckets=buckets,
        )

    def complete_command(self, command_id: str, *, owner: str, now: datetime, result: str) -> bool:
        self._count("complete_command")
        return self._inner.complete_command(command_id, owner=owner, now=now, result=result)

    def release_command(self, command_id: str, *, owner: str) -> bool:
        self._count("release_command")
        return self._inner.release_command(command_id, owner=owner)

    def commands(
        self, *, task_id: str | None = None, include_complete: bool = True, limit: int | None = None
    ) -> list[Command]:
        return self._inner.commands(task_id=task_id, include_complete=include_complete, limit=limit)

    # housekeeping
    def prune(self, keep_terminal: int) -> int:
        self._count("prune")
        return self._inner.prune(keep_terminal)

    def archive(self, *, finished_before: datetime, path: str | os.PathLike[str]) -> int:
        self._count("archive")
        return self._inner.archive(finished_before=finished_before, path=path)

    def close(self) -> None:
        self._inner.close()


class TestCountingTaskStore(StoreContract):
    """The whole contract, run against the new backend: `make_store`, and the two hooks
    that plant a damaged row underneath it (as another program would), so the contract
    can check that such a row is named and every other task is read as usual."""

    def make_store(self) -> TaskStore:
        self.inner = InMemoryTaskStore()
        return CountingTaskStore(self.inner)

    def plant_unreadable_task(self, task_id: str, field: str, value: Any) -> bool:
        return damage_memory_task(self.inner, task_id, field, value)

    def plant_unreadable_transition(
        self, task_id: str, status_version: int, field: str, value: Any
    ) -> bool:
        return damage_memory_transition(self.inner, task_id, status_version, field, value)


def main() -> None:
    """Run the contract suite against `CountingTaskStore` and report."""
    import pytest

    code = pytest.main([__file__, "-q", "-p", "no:cacheprovider", "--no-header"])
    print(f"contract suite exit code: {int(code)}")
    assert code == 0, "CountingTaskStore does not meet the store contract"


if __name__ == "__main__":
    main()
