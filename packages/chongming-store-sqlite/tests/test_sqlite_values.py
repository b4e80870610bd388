"""Values SQLite must keep exactly: NUL bytes, any script, offsets, microseconds, and the
queries that compare them (checked against `InMemoryTaskStore`, the reference)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from chongming_core import (
    UNSET,
    Command,
    ConfigurationError,
    Failure,
    FailureKind,
    InMemoryTaskStore,
    Progress,
    SnapshotWrite,
    StoreError,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    TouchUpdate,
    Transition,
)
from chongming_store_contract import BASE_TIME, build_task, next_version
from chongming_store_sqlite import SqliteTaskStore

NUL = "\x00"
PLUS_8 = timezone(timedelta(hours=8))
MINUS_3_30 = timezone(-timedelta(hours=3, minutes=30))


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqliteTaskStore]:
    path = str(tmp_path / "tasks.db") if request.param == "file" else ":memory:"
    with SqliteTaskStore(path) as s:
        yield s


def snapshot(task_id: str, **fields: object) -> TaskSnapshot:
    base = TaskSnapshot(task_id=task_id, name="job", created_at=BASE_TIME, updated_at=BASE_TIME)
    return base.evolve(**fields)


def test_text_with_nul_bytes_round_trips_everywhere(store: SqliteTaskStore) -> None:
    task_id = f"a{NUL}b"
    original = snapshot(
        task_id,
        name=f"etl{NUL}nightly",
        label=f"报表{NUL}日结",
        description=f"line{NUL}\n\t\x01 end",
        tags=frozenset({f"io{NUL}", "x"}),
        pipeline_id=f"p{NUL}",
        lease_owner=f"node{NUL}a",
        lease_until=BASE_TIME,
        progress=Progress(done=1, total=2, unit=f"r{NUL}ws", message=f"m{NUL}"),
        failure=Failure.of(FailureKind.EXCEPTION, f"boom{NUL}", traceback=f"tb{NUL}"),
        outcome={f"k{NUL}": [f"v{NUL}", 1.5, None, True]},
    )
    moved = Transition(
        task_id,
        TaskStatus.PENDING,
        TaskStatus.QUEUED,
        f"t{NUL}",
        f"a{NUL}",
        f"r{NUL}",
        1,
        BASE_TIME,
    )
    store.create(original, [moved])
    found = store.get(task_id)
    assert found == original
    assert found is not None
    assert found.failure is not None
    assert found.failure.traceback == f"tb{NUL}"
    assert store.history(task_id) == [moved]
    assert store.query(TaskQuery(tag=f"io{NUL}")) == [original]
    assert store.query(TaskQuery(tag="io")) == []
    assert store.query(TaskQuery(name_prefix=f"etl{NUL}")) == [original]
    assert store.query(TaskQuery(name_prefix=f"etl{NUL}x")) == []
    assert store.query(TaskQuery(search=f"{NUL}日")) == [original]
    assert store.query(TaskQuery(task_ids=frozenset({task_id}))) == [original]
    assert store.query(TaskQuery(task_ids=frozenset({"a"}))) == []
    assert store.query(TaskQuery(lease_owner=f"node{NUL}a")) == [original]
    assert store.query(TaskQuery(pipeline_id=f"p{NUL}")) == [original]
    command = Command(f"c{NUL}", task_id, "stop", f"ops{NUL}", BASE_TIME, reason=f"why{NUL}")
    store.submit_command(command)
    assert store.commands(task_id=task_id) == [command]
    claimed = store.claim_commands(f"me{NUL}", now=BASE_TIME, lease_seconds=5, task_ids=[task_id])
    assert [c.command_id for c in claimed] == [f"c{NUL}"]
    assert store.complete_command(f"c{NUL}", owner=f"me{NUL}", now=BASE_TIME, result=f"ok{NUL}")
    assert store.commands()[0].result == f"ok{NUL}"


def test_instants_keep_their_offset_and_microseconds(store: SqliteTaskStore) -> None:
    at = datetime(2026, 3, 1, 23, 59, 59, 999999, tzinfo=PLUS_8)
    original = snapshot(
        "t1",
        created_at=at,
        updated_at=at.astimezone(MINUS_3_30),
        started_at=datetime(1, 1, 2, tzinfo=UTC),
        finished_at=datetime(9999, 12, 30, 0, 0, 0, 1, tzinfo=UTC),
        status=TaskStatus.SUCCEEDED,
        last_heartbeat_at=at,
        lease_until=at,
    )
    store.create(original)
    found = store.get("t1")
    assert found == original
    assert found is not None
    for field in ("created_at", "updated_at", "started_at", "finished_at", "last_heartbeat_at"):
        value = getattr(found, field)
        assert value.utcoffset() == getattr(original, field).utcoffset(), field
        assert value.microsecond == getattr(original, field).microsecond, field


def test_lease_comparisons_use_the_instant_not_the_text(store: SqliteTaskStore) -> None:
    # 10:00+08:00 is 02:00Z: as text it sorts after "03:00+00:00", as an instant before.
    store.create(
        snapshot("east", lease_owner="a", lease_until=datetime(2026, 1, 1, 10, tzinfo=PLUS_8))
    )
    store.create(
        snapshot("west", lease_owner="b", lease_until=datetime(2026, 1, 1, 1, tzinfo=MINUS_3_30))
    )
    store.create(snapshot("free"))
    cut = datetime(2026, 1, 1, 3, tzinfo=UTC)
    found = {s.task_id for s in store.query(TaskQuery(lease_expired_before=cut))}
    assert found == {"east", "free"}  # west ends at 04:30Z
    exact = datetime(2026, 1, 1, 2, tzinfo=UTC)  # equal to east's lease end: not before it
    assert {s.task_id for s in store.query(TaskQuery(lease_expired_before=exact))} == {"free"}
    store.touch("west", lease_until=datetime(2026, 1, 1, 2, 59, 59, 999999, tzinfo=UTC))
    found = {s.task_id for s in store.query(TaskQuery(lease_expired_before=cut))}
    assert found == {"east", "west", "free"}


def test_name_prefix_is_literal_and_exact(store: SqliteTaskStore) -> None:
    names = ["a%b", "a_b", "aXb", "A%b", "a", "a\U0010ffff", "a\U0010ffffz", "b", "ab"]
    for i, name in enumerate(names):
        store.create(snapshot(f"t{i}", name=name))

    def names_for(prefix: str) -> list[str]:
        return [s.name for s in store.query(TaskQuery(name_prefix=prefix))]

    assert names_for("a%") == ["a%b"]
    assert names_for("a_") == ["a_b"]
    assert names_for("a\U0010ffff") == ["a\U0010ffff", "a\U0010ffffz"]
    assert names_for("") == names
    assert names_for("a") == [n for n in names if n.startswith("a")]


def test_search_folds_case_like_python(store: SqliteTaskStore) -> None:
    store.create(snapshot("t1", name="Straße", label="ÉCOLE"))
    store.create(snapshot("t2", name="plain"))
    assert [s.task_id for s in store.query(TaskQuery(search="STRASSE"))] == ["t1"]
    assert [s.task_id for s in store.query(TaskQuery(search="école"))] == ["t1"]
    assert [s.task_id for s in store.query(TaskQuery(search="T"))] == ["t1", "t2"]


def test_save_many_applies_creates_and_saves_of_one_task_in_order(store: SqliteTaskStore) -> None:
    first = build_task("t1", TaskStatus.RUNNING, tags={"a"})
    second = next_version(first.snapshot)
    retagged = second.snapshot.evolve(tags=frozenset({"b"}))
    third = next_version(retagged)
    conflicts = store.save_many(
        [
            SnapshotWrite(first.snapshot, None, first.transitions),
            SnapshotWrite(retagged, first.snapshot.status_version, second.transitions),
            SnapshotWrite(first.snapshot, None, ()),  # a second create of the same id
            SnapshotWrite(third.snapshot, retagged.status_version, third.transitions),
            SnapshotWrite(third.snapshot, retagged.status_version, ()),  # stale now
            SnapshotWrite(snapshot("ghost"), 3, ()),  # never created
        ]
    )
    assert [(c.task_id, c.expected, c.actual) for c in conflicts] == [
        ("t1", None, third.snapshot.status_version - 1),
        ("t1", retagged.status_version, third.snapshot.status_version),
        ("ghost", 3, None),
    ]
    assert store.get("t1") == third.snapshot
    history = [*first.transitions, *second.transitions, *third.transitions]
    assert store.history("t1") == history
    assert store.query(TaskQuery(tag="a")) == []
    assert store.query(TaskQuery(tag="b")) == [third.snapshot]
    assert store.get("ghost") is None


def test_touch_many_keeps_the_order_of_updates(store: SqliteTaskStore) -> None:
    store.create(snapshot("t1", pid=1, lease_owner="x", lease_until=BASE_TIME))
    p1, p2 = Progress(done=1), Progress(done=2, total=5)
    applied = store.touch_many(
        [
            TouchUpdate("t1", progress=p1),
            TouchUpdate("t1", progress=p2, pid=7),
            TouchUpdate("missing", pid=3),
            TouchUpdate("t1", lease_owner=None, lease_until=None),
            TouchUpdate("t1"),
        ]
    )
    assert applied == 4
    found = store.get("t1")
    assert found is not None
    assert (found.progress, found.pid, found.lease_owner, found.lease_until) == (p2, 7, None, None)
    assert found.status_version == 0
    assert store.query(TaskQuery(lease_expired_before=BASE_TIME)) == [found]
    assert store.touch("t1") is True
    assert store.touch("missing") is False
    assert UNSET is not None


def test_values_that_cannot_be_stored_are_refused_whole(store: SqliteTaskStore) -> None:
    with pytest.raises(StoreError, match="cannot store task 'bad'") as caught:
        store.create(snapshot("bad", outcome={"when": object()}))
    assert isinstance(caught.value.__cause__, TypeError)
    with pytest.raises(StoreError, match="timezone-aware"):
        store.create(snapshot("naive", finished_at=datetime(2026, 1, 1)))
    good = snapshot("good")
    with pytest.raises(StoreError):
        store.save_many(
            [SnapshotWrite(good, None, ()), SnapshotWrite(snapshot("x", outcome={1j}), None, ())]
        )
    assert store.get("good") is None, "a batch with an unstorable item writes nothing"
    with pytest.raises(StoreError, match="lone surrogate"):
        store.create(snapshot("s", name="bad \udc80 text"))
    assert store.query() == []


def test_naive_datetimes_in_arguments_are_configuration_errors(store: SqliteTaskStore) -> None:
    store.create(snapshot("t1"))
    naive = datetime(2026, 1, 1)
    with pytest.raises(ConfigurationError, match="heartbeat_at"):
        store.touch("t1", heartbeat_at=naive)
    with pytest.raises(ConfigurationError, match="now"):
        store.claim_commands("me", now=naive, lease_seconds=1)
    with pytest.raises(ConfigurationError, match="finished_before"):
        store.archive(finished_before=naive, path="unused.jsonl")


def test_memory_store_is_shared_by_threads_and_private_to_its_object() -> None:
    import threading

    with SqliteTaskStore(":memory:") as one, SqliteTaskStore(":memory:") as two:
        thread = threading.Thread(target=lambda: one.create(snapshot("t1")))
        thread.start()
        thread.join(timeout=10)
        assert one.get("t1") is not None
        assert two.get("t1") is None


# ---------------------------------------------------------------------- against the reference
def _population(rng: random.Random) -> list[TaskSnapshot]:
    statuses = list(TaskStatus)
    found = []
    for i in range(700):
        status = rng.choice(statuses)
        lease = BASE_TIME + timedelta(seconds=rng.randint(-50, 50)) if rng.random() < 0.5 else None
        found.append(
            snapshot(
                f"task-{rng.randint(0, 10**6)}-{i}",
                name=rng.choice(["etl", "etl.load", "sync", "Sync", "报表"]),
                label=rng.choice([None, "Nightly", "夜间"]),
                status=status,
                tags=frozenset(rng.sample(["io", "cpu", "db"], rng.randint(0, 2))),
                bucket=rng.choice([None, 0, 1, 2, 63]),
                pipeline_id=rng.choice([None, "p1", "p2"]),
                lease_owner=rng.choice([None, "a", "b"]) if lease else None,
                lease_until=lease,
                finished_at=BASE_TIME if status.is_terminal else None,
            )
        )
    return found


def _random_query(rng: random.Random, ids: list[str]) -> TaskQuery:
    def maybe(value: object) -> object:
        return value if rng.random() < 0.3 else None

    statuses = frozenset(rng.sample(list(TaskStatus), rng.randint(0, 5)))
    return TaskQuery(
        statuses=maybe(statuses),  # type: ignore[arg-type]
        name_prefix=maybe(rng.choice(["etl", "etl.", "S", "报"])),  # type: ignore[arg-type]
        tag=maybe(rng.choice(["io", "cpu", "none"])),  # type: ignore[arg-type]
        bucket=maybe(rng.choice([0, 1, 63])),  # type: ignore[arg-type]
        buckets=maybe(frozenset(rng.sample([0, 1, 2, 63], 2))),  # type: ignore[arg-type]
        task_ids=maybe(frozenset(rng.sample(ids, rng.randint(0, 650)))),  # type: ignore[arg-type]
        lease_owner=maybe(rng.choice(["a", "b"])),  # type: ignore[arg-type]
        lease_expired_before=maybe(BASE_TIME + timedelta(seconds=rng.randint(-60, 60))),  # type: ignore[arg-type]
        pipeline_id=maybe(rng.choice(["p1", "p2"])),  # type: ignore[arg-type]
        search=maybe(rng.choice(["NIGHT", "task-1", "夜", "sync"])),  # type: ignore[arg-type]
        limit=rng.choice([None, 0, 5, 50]),
        offset=rng.choice([0, 0, 3, 40]),
        newest_first=rng.random() < 0.5,
    )


def test_queries_agree_with_the_reference_store() -> None:
    rng = random.Random(20260101)
    population = _population(rng)
    reference: TaskStore = InMemoryTaskStore()
    with SqliteTaskStore(":memory:") as store:
        for s in population:
            reference.create(s)
            store.create(s)
        ids = [s.task_id for s in population]
        answered = 0
        for _ in range(300):
            q = _random_query(rng, ids)
            expected = reference.query(q)
            answered += bool(expected)
            assert store.query(q) == expected, q
            assert store.status_counts(q) == reference.status_counts(q), q
            assert store.bucket_counts(q) == reference.bucket_counts(q), q
        assert answered > 50, "the random queries must mostly find something"


def test_numbers_sqlite_cannot_hold_are_store_errors(store: SqliteTaskStore) -> None:
    with pytest.raises(StoreError, match="64-bit") as caught:
        store.create(snapshot("big", bucket=2**64))
    assert isinstance(caught.value.__cause__, OverflowError)
    assert store.get("big") is None


@pytest.mark.parametrize("lease", [-1, "5", None, True])
def test_invalid_lease_seconds_are_refused(store: SqliteTaskStore, lease: object) -> None:
    with pytest.raises(ConfigurationError, match="lease_seconds"):
        store.claim_commands("me", now=BASE_TIME, lease_seconds=lease)  # type: ignore[arg-type]


def lowered_length_limit(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    """Open every connection of the next stores with ``SQLITE_LIMIT_LENGTH`` = `limit`."""
    import sqlite3

    from chongming_store_sqlite._opening import connect as opened

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = opened(*args, **kwargs)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)
        return conn

    monkeypatch.setattr("chongming_store_sqlite._store.connect", connect)


def test_an_outcome_beyond_the_row_length_limit_is_refused_before_sqlite_is_asked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """SQLite refuses a row value longer than SQLITE_LIMIT_LENGTH ("string or blob too big"):
    the store's check says so first, leaving room for the rest of the row."""
    lowered_length_limit(monkeypatch, 3 << 20)
    with SqliteTaskStore(str(tmp_path / "tasks.db")) as store:
        fits = "x" * (1 << 20)
        assert store.stored_outcome(fits) == fits
        too_big = {"blob": "x" * (5 << 20)}
        with pytest.raises(ValueError, match=r"more than the 2,097,152 bytes this SQLite store"):
            store.stored_outcome(too_big)
        snapshot, chain = build_task("t1", TaskStatus.SUCCEEDED)
        with pytest.raises(StoreError, match="cannot store task 't1': the result is 5,242,"):
            store.create(snapshot.evolve(outcome=too_big), chain)
        assert store.get("t1") is None
        store.create(snapshot.evolve(outcome=fits), chain)
        found = store.get("t1")
        assert found is not None
        assert found.outcome == fits


def test_the_writes_refuse_what_the_store_s_own_check_refuses(tmp_path: Path) -> None:
    """A subclass with a stricter `stored_outcome` is held to it by every write."""

    class Strict(SqliteTaskStore):
        def stored_outcome(self, value: Any) -> Any:
            if value == "forbidden":
                raise ValueError("the result is the forbidden word")
            return super().stored_outcome(value)

    with Strict(str(tmp_path / "tasks.db")) as store:
        snapshot, chain = build_task("t1", TaskStatus.SUCCEEDED)
        with pytest.raises(StoreError, match="the result is the forbidden word"):
            store.save_many([SnapshotWrite(snapshot.evolve(outcome="forbidden"), None, chain)])
        assert store.get("t1") is None
