"""Contract cases: a stored row that cannot be decoded is named, never raised by a listing.

A store's rows are data: another program, another version or a hand at a SQL prompt
may write a status no chongming knows, a time that does not parse, JSON of the wrong
shape. Such a row must not blind every reader: a listing returns every other row
and names the damaged one (`Listing.unreadable`, `Counts.unreadable`); `get` of it
raises `StoreError` saying what is wrong.

The cases need rows no store method writes, so each backend plants them itself,
bypassing its own checks (`plant_unreadable_task`, `plant_unreadable_transition`):
with raw SQL for a database, by writing a stored document into the dictionaries for
`InMemoryTaskStore` (done here, so a store built on it needs nothing).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from chongming_core import (
    InMemoryTaskStore,
    SnapshotWrite,
    StoreError,
    TaskQuery,
    TaskStatus,
    UnreadableRow,
    unreadable_in,
)
from chongming_store_contract._base import ContractBase
from chongming_store_contract._builders import advance, build_versions
from chongming_store_contract._checks import expect, expect_equal, present, raises

__all__ = [
    "TASK_DEFECTS",
    "TRANSITION_DEFECTS",
    "UnreadableContract",
    "damage_memory_task",
    "damage_memory_transition",
]

_S = TaskStatus

#: What the cases write into a task's stored record: (field, JSON value). Every backend
#: must be able to plant the first one; the others where its schema can hold them.
TASK_DEFECTS: tuple[tuple[str, Any], ...] = (
    ("status", "zombie"),
    ("failure", {"kind": "zombie", "message": "boom", "retryable": True}),
    ("attempts", "oops"),
    ("progress", {"done": "half"}),
    ("started_at", "yesterday"),
    ("tags", "abc"),
    ("status_version", "seven"),
)

#: What the cases write into one stored transition: (field, JSON value), as above.
TRANSITION_DEFECTS: tuple[tuple[str, Any], ...] = (
    ("to_status", "zombie"),
    ("at", "noon"),
)


def damage_memory_task(store: InMemoryTaskStore, task_id: str, field: str, value: Any) -> bool:
    """Overwrite `field` of task `task_id` kept by `store` with `value` (a JSON value), as a
    damaged row: the hook `plant_unreadable_task` of a backend that keeps its tasks in an
    `InMemoryTaskStore` (a wrapper, say). Returns True."""
    document = store._tasks[task_id].to_dict()
    document[field] = value
    store._tasks[task_id] = document  # type: ignore[assignment]
    return True


def damage_memory_transition(
    store: InMemoryTaskStore, task_id: str, status_version: int, field: str, value: Any
) -> bool:
    """`damage_memory_task` for transition `status_version` of `task_id`: the hook
    `plant_unreadable_transition` of such a backend. Returns True."""
    history = store._history[task_id]
    document = history[status_version].to_dict()
    document[field] = value
    history[status_version] = document  # type: ignore[assignment]
    return True


class UnreadableContract(ContractBase):
    """Rows that cannot be decoded, in `query`, `get`, the counts, `history` and `archive`."""

    # ------------------------------------------------------------------ hooks
    def plant_unreadable_task(self, task_id: str, field: str, value: Any) -> bool:
        """Overwrite the stored `field` of task `task_id` with `value` (a JSON value),
        bypassing every check of the store, as another program would.

        A backend keeping a field in two places (a column and a document) writes both.
        Returns False when the backend's schema cannot hold such a value at all (a typed
        column): the case is then not asked of it. Backends other than
        `InMemoryTaskStore` override this.
        """
        if isinstance(self.store, InMemoryTaskStore):
            return damage_memory_task(self.store, task_id, field, value)
        raise NotImplementedError(
            f"{type(self).__name__} must override plant_unreadable_task() to write a value "
            "of the wrong shape into a stored task (raw SQL, say), bypassing the store"
        )

    def plant_unreadable_transition(
        self, task_id: str, status_version: int, field: str, value: Any
    ) -> bool:
        """Overwrite the stored `field` of transition `status_version` of `task_id` with
        `value`, as `plant_unreadable_task` does for a task."""
        if isinstance(self.store, InMemoryTaskStore):
            return damage_memory_transition(self.store, task_id, status_version, field, value)
        raise NotImplementedError(
            f"{type(self).__name__} must override plant_unreadable_transition() to write a "
            "value of the wrong shape into a stored transition (raw SQL, say)"
        )

    # ------------------------------------------------------------------ helpers
    def _plant_every_defect(self, prefix: str) -> tuple[dict[str, str], list[str]]:
        """A running task per `TASK_DEFECTS` entry: the damaged ones (id -> field), and
        those the backend's schema could not damage (they stay readable), in order."""
        planted: dict[str, str] = {}
        intact: list[str] = []
        for index, (field, value) in enumerate(TASK_DEFECTS):
            task_id = f"{prefix}-{index}"
            self.stored(task_id, _S.RUNNING)
            if self.plant_unreadable_task(task_id, field, value):
                planted[task_id] = field
            else:
                expect(index > 0, f"every backend must be able to plant a bad {field!r}")
                intact.append(task_id)
        return planted, intact

    def _named(self, result: object, what: str) -> dict[str, UnreadableRow]:
        rows = unreadable_in(result)
        expect(
            isinstance(result, list | dict) and len(rows) == len({r.task_id for r in rows}),
            f"{what}: each unreadable row is named once, found {rows!r}",
        )
        return {row.task_id: row for row in rows}

    # ------------------------------------------------------------------ query
    def test_query_lists_every_other_task_and_names_the_rows_it_cannot_read(self) -> None:
        self.stored("first", _S.SUCCEEDED)
        planted, intact = self._plant_every_defect("bad")
        self.stored("last", _S.QUEUED)
        readable = ["first", *intact, "last"]
        found = self.store.query()
        expect_equal([s.task_id for s in found], readable, "query(): the readable tasks")
        named = self._named(found, "query()")
        expect_equal(sorted(named), sorted(planted), "query(): the rows named unreadable")
        for task_id, field in planted.items():
            row = named[task_id]
            expect(
                field in row.problem and task_id in row.message and row.part is None,
                f"the problem of {task_id} names the damaged field {field!r}: {row!r}",
            )
        newest = self.store.query(_query(newest_first=True))
        expect_equal([s.task_id for s in newest], readable[::-1], "query(newest_first)")
        expect_equal(sorted(self._named(newest, "newest first")), sorted(planted), "newest")

    def test_an_unreadable_row_keeps_its_place_for_limit_and_offset(self) -> None:
        self.stored("a", _S.SUCCEEDED)
        self.stored("bad", _S.RUNNING)
        self.stored("c", _S.QUEUED)
        expect(self.plant_unreadable_task("bad", "status", "zombie"), "planting a bad status")
        first_two = self.store.query(_query(limit=2))
        expect_equal([s.task_id for s in first_two], ["a"], "query(limit=2)")
        expect_equal(list(self._named(first_two, "limit=2")), ["bad"], "named in limit=2")
        second = self.store.query(_query(offset=1, limit=1))
        expect_equal(list(second), [], "query(offset=1, limit=1): only the damaged row")
        expect_equal(list(self._named(second, "offset=1")), ["bad"], "named at offset 1")
        last = self.store.query(_query(offset=2))
        expect_equal([s.task_id for s in last], ["c"], "query(offset=2)")
        expect_equal(unreadable_in(last), (), "query(offset=2) meets no damaged row")

    def test_a_query_by_id_names_an_unreadable_row_it_selects(self) -> None:
        self.stored("a", _S.SUCCEEDED)
        self.stored("bad", _S.RUNNING)
        expect(self.plant_unreadable_task("bad", "status", "zombie"), "planting a bad status")
        both = self.store.query(_query(task_ids=frozenset({"a", "bad"})))
        expect_equal([s.task_id for s in both], ["a"], "query(task_ids={a, bad})")
        expect_equal(list(self._named(both, "by id")), ["bad"], "named in query(task_ids)")
        alone = self.store.query(_query(task_ids=frozenset({"a"})))
        expect_equal(unreadable_in(alone), (), "query(task_ids={a}) meets no damaged row")
        queued = self.store.query(_query(statuses=frozenset({_S.SUCCEEDED})))
        expect_equal([s.task_id for s in queued], ["a"], "query(statuses={succeeded})")

    # ------------------------------------------------------------------ get
    def test_get_of_a_row_that_cannot_be_read_raises_store_error_naming_it(self) -> None:
        self.stored("good", _S.QUEUED)
        planted, _ = self._plant_every_defect("bad")
        for task_id, field in planted.items():
            with raises(StoreError, f"get() of {task_id}, whose {field} is damaged") as caught:
                self.store.get(task_id)
            error = caught.value
            expect(
                error.task_id == task_id and task_id in str(error) and field in str(error),
                f"the StoreError names the task and the field {field!r}: {error!r}",
            )
        expect_equal(present(self.store.get("good"), "good").status, _S.QUEUED, "get(good)")

    # ------------------------------------------------------------------ counts
    def test_counts_skip_a_row_whose_status_cannot_be_read_and_name_it(self) -> None:
        self.stored("a", _S.SUCCEEDED, bucket=3)
        self.stored("bad", _S.RUNNING, bucket=3)
        self.stored("c", _S.QUEUED, bucket=5)
        expect(self.plant_unreadable_task("bad", "status", "zombie"), "planting a bad status")
        counts = self.store.status_counts()
        expect_equal(dict(counts), {_S.SUCCEEDED: 1, _S.QUEUED: 1}, "status_counts()")
        expect_equal(list(self._named(counts, "status_counts()")), ["bad"], "named by counts")
        buckets = self.store.bucket_counts()
        readable = {3: 1, 5: 1}
        expect(
            dict(buckets) in ({3: 2, 5: 1}, readable),
            f"bucket_counts(): the readable tasks are counted, found {dict(buckets)!r}",
        )
        if dict(buckets) == readable:
            expect_equal(list(self._named(buckets, "bucket_counts()")), ["bad"], "buckets")

    def test_counts_of_the_other_tasks_are_exact_beside_damaged_rows(self) -> None:
        self.stored("a", _S.SUCCEEDED)
        planted, intact = self._plant_every_defect("bad")
        self.stored("c", _S.QUEUED)
        counts = self.store.status_counts()
        named = self._named(counts, "status_counts()")
        expect(set(named) <= set(planted), f"only damaged rows are named, found {named!r}")
        expect(
            set(counts) <= {_S.SUCCEEDED, _S.QUEUED, _S.RUNNING},
            f"status_counts() counts the statuses stored, found {dict(counts)!r}",
        )
        expect_equal(counts.get(_S.SUCCEEDED), 1, "succeeded tasks")
        expect_equal(counts.get(_S.QUEUED), 1, "queued tasks")
        expect_equal(
            counts.get(_S.RUNNING, 0) + len(named),
            len(planted) + len(intact),
            "running tasks: each damaged one counted under its status or named, once",
        )

    # ------------------------------------------------------------------ history
    def test_history_lists_every_other_transition_and_names_the_one_it_cannot_read(
        self,
    ) -> None:
        for index, (field, value) in enumerate(TRANSITION_DEFECTS):
            task_id = f"t{index}"
            snapshot, chain = build_versions(task_id, 4, clock=self.clock)
            self.store.create(snapshot, chain)
            if not self.plant_unreadable_transition(task_id, 2, field, value):
                expect(index > 0, f"every backend must be able to plant a bad {field!r}")
                continue
            found = self.store.history(task_id)
            expect_equal(
                [t.status_version for t in found], [1, 3, 4], f"history of {task_id} ({field})"
            )
            named = self._named(found, f"history({task_id!r})")
            row = present(named.get(task_id), f"the damaged transition of {task_id}")
            expect(
                field in row.problem and row.part is not None and "2" in row.part,
                f"the damaged transition is named by its version and field: {row!r}",
            )
        _, chain = self.stored("other", _S.RUNNING)
        intact = self.store.history("other")
        expect_equal(intact, list(chain), "history of an intact task")
        expect_equal(unreadable_in(intact), (), "history of an intact task names nothing")

    # ------------------------------------------------------------------ writes and housekeeping
    def test_writes_of_the_other_tasks_go_on_beside_a_damaged_row(self) -> None:
        good, _ = self.stored("good", _S.RUNNING)
        also, _ = self.stored("also", _S.QUEUED)
        self.stored("bad", _S.RUNNING)
        expect(self.plant_unreadable_task("bad", "status", "zombie"), "planting a bad status")
        nxt, more = advance(good, lambda m: m.mark_succeeded(outcome=1), clock=self.clock)
        self.store.save(nxt, expect_version=good.status_version, transitions=more)
        started, steps = advance(also, lambda m: m.mark_starting(), clock=self.clock)
        new, first = self.task("new", _S.QUEUED)
        conflicts = self.store.save_many(
            [SnapshotWrite(started, also.status_version, steps), SnapshotWrite(new, None, first)]
        )
        expect_equal(conflicts, [], "save_many() of intact tasks beside a damaged row")
        expect(self.store.touch("good", heartbeat_at=self.clock.now()), "touch(good)")
        found = {s.task_id: s.status for s in self.store.query()}
        expect_equal(
            found,
            {"good": _S.SUCCEEDED, "also": _S.STARTING, "new": _S.QUEUED},
            "the intact tasks after the writes",
        )

    def test_archive_leaves_a_transition_it_cannot_read_in_the_store(self) -> None:
        snapshot, chain = self.stored("t", _S.SUCCEEDED)
        last = chain[-1].status_version
        expect(
            self.plant_unreadable_transition("t", 2, "to_status", "zombie"),
            "planting a bad to_status",
        )
        path = self.scratch_dir() / "archive.jsonl"
        finished = present(snapshot.finished_at, "finished_at")
        moved = self.store.archive(finished_before=finished + timedelta(seconds=1), path=path)
        expect_equal(moved, last - 2, "transitions moved: all but the last and the damaged one")
        kept = self.store.history("t")
        expect_equal([t.status_version for t in kept], [last], "history left after archive")
        expect_equal(list(self._named(kept, "history after archive")), ["t"], "damaged one kept")


def _query(**kwargs: Any) -> TaskQuery:
    return TaskQuery(**kwargs)
