"""Records read back from stored data are checked field by field; damaged rows are named.

`from_dict` is how every store turns its data back into records: a value of the
wrong shape must be refused there, naming the field, not surface later as a
`TypeError` in whoever used the record (or be misread silently).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from chongming_core import (
    AttemptRecord,
    Counts,
    Failure,
    FailureKind,
    FakeClock,
    InMemoryTaskStore,
    Listing,
    Progress,
    StateMachine,
    StoreError,
    TaskSnapshot,
    TaskStatus,
    Transition,
    UnreadableRow,
    decode_row,
    unreadable_in,
)


def _snapshot() -> TaskSnapshot:
    m = StateMachine.create("t1", "job", max_attempts=3, clock=FakeClock(), tags={"a"})
    m.mark_queued()
    m.mark_starting(executor="thread")
    m.mark_running()
    m.mark_retry_wait(Failure.of(FailureKind.EXCEPTION, "boom"), retry_at=m.clock.now())
    return m.snapshot.evolve(progress=Progress(1, 2, "rows"), lease_until=m.clock.now())


def _document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(json.dumps(_snapshot().to_dict()))
    for key, value in changes.items():
        if value is _ABSENT:
            del document[key]
        else:
            document[key] = value
    return document


_ABSENT = object()

SNAPSHOT_DAMAGE = [
    ({"status": "zombie"}, "status 'zombie' is not a status"),
    ({"status": 3}, "status 3 is not a status"),
    ({"status": _ABSENT}, "status is missing"),
    ({"task_id": None}, "task_id must be text, got None"),
    ({"name": 7}, "name must be text, got 7"),
    ({"status_version": "7"}, "status_version must be an integer, got '7'"),
    ({"status_version": True}, "status_version must be an integer, got True"),
    ({"attempt": 1.0}, "attempt must be an integer, got 1.0"),
    ({"max_attempts": None}, "max_attempts must be an integer, got None"),
    ({"label": 5}, "label must be text or null, got 5"),
    ({"tags": "abc"}, "tags must be a list of texts, got 'abc'"),
    ({"tags": ["a", None]}, "tags must be a list of texts"),
    ({"tags": None}, "tags must be a list of texts, got None"),
    ({"bucket": "3"}, "bucket must be an integer or null, got '3'"),
    ({"pid": 1.5}, "pid must be an integer or null"),
    ({"paused_in_place": "no"}, "paused_in_place must be true or false, got 'no'"),
    ({"started_at": "yesterday"}, "started_at 'yesterday' is not an ISO-8601 time"),
    ({"started_at": "2026-01-01T00:00:00"}, "started_at '2026-01-01T00:00:00' has no UTC offset"),
    ({"created_at": 1700000000}, "created_at must be an ISO-8601 time or null, got 1700000000"),
    ({"progress": "half"}, "progress must be a JSON object or null, got 'half'"),
    ({"progress": {"total": 3}}, "progress.done is missing"),
    ({"progress": {"done": "1"}}, "progress.done must be a number, got '1'"),
    ({"progress": {"done": 1, "unit": 5}}, "progress.unit must be text or null, got 5"),
    ({"failure": []}, "failure must be a JSON object or null, got []"),
    ({"failure": {"kind": "zombie"}}, "failure.kind 'zombie' is not a failure kind"),
    ({"failure": {"kind": "lost", "retryable": True}}, "failure.message is missing"),
    (
        {"failure": {"kind": "lost", "message": "m", "retryable": "yes"}},
        "failure.retryable must be true or false",
    ),
    ({"attempts": "oops"}, "attempts must be a list, got 'oops'"),
    ({"attempts": [7]}, "attempts[0] must be a JSON object, got 7"),
    ({"attempts": [{"status": "failed"}]}, "attempts[0].number is missing"),
    ({"attempts": [{"number": 1, "status": "zombie"}]}, "attempts[0].status 'zombie' is not"),
    (
        {"attempts": [{"number": 1, "status": "failed", "ended_at": "noon"}]},
        "attempts[0].ended_at 'noon' is not an ISO-8601 time",
    ),
    (
        {"attempts": [{"number": 1, "status": "failed", "failure": {"kind": "x"}}]},
        "attempts[0].failure.kind 'x' is not a failure kind",
    ),
]


@pytest.mark.parametrize(
    ("changes", "problem"), SNAPSHOT_DAMAGE, ids=[p for _, p in SNAPSHOT_DAMAGE]
)
def test_a_snapshot_of_the_wrong_shape_is_refused_naming_the_field(
    changes: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        TaskSnapshot.from_dict(_document(**changes))


def test_a_document_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ValueError, match=r"the record must be a JSON object, got \[1, 2\]"):
        TaskSnapshot.from_dict([1, 2])  # type: ignore[arg-type]


def test_absent_optional_fields_take_their_defaults() -> None:
    minimal = {"task_id": "t", "name": "job", "status": "queued", "status_version": 1}
    snapshot = TaskSnapshot.from_dict(minimal)
    assert (snapshot.attempt, snapshot.max_attempts, snapshot.priority) == (0, 1, 0)
    assert (snapshot.tags, snapshot.attempts, snapshot.paused_in_place) == (frozenset(), (), False)


def test_every_record_still_round_trips() -> None:
    snapshot = _snapshot()
    assert TaskSnapshot.from_dict(json.loads(json.dumps(snapshot.to_dict()))) == snapshot
    (attempt,) = snapshot.attempts
    assert AttemptRecord.from_dict(attempt.to_dict()) == attempt
    failure = Failure.of(FailureKind.TIMEOUT_IDLE, "quiet", exception_type="X", traceback="tb")
    assert Failure.from_dict(failure.to_dict()) == failure
    assert Progress.from_dict({"done": 1.5, "total": None}) == Progress(1.5)


def test_a_transition_of_the_wrong_shape_is_refused_naming_the_field() -> None:
    m = StateMachine.create("t1", "job", clock=FakeClock())
    record = m.mark_queued()
    assert Transition.from_dict(record.to_dict()) == record
    for field, value, problem in (
        ("to_status", "zombie", "to_status 'zombie' is not a status"),
        ("at", "noon", "at 'noon' is not an ISO-8601 time"),
        ("at", None, "at is missing"),
        ("status_version", "1", "status_version must be an integer, got '1'"),
        ("actor", None, "actor must be text, got None"),
    ):
        with pytest.raises(ValueError, match=re.escape(problem)):
            Transition.from_dict({**record.to_dict(), field: value})


def test_a_long_value_is_cut_in_the_message() -> None:
    with pytest.raises(ValueError, match="is not a status") as caught:
        TaskSnapshot.from_dict(_document(status="z" * 500))
    assert str(caught.value) == "status '" + "z" * 56 + "... is not a status"


# ---------------------------------------------------------------------- results
def test_decode_row_turns_any_failure_of_a_decoder_into_a_named_row() -> None:
    bad = decode_row("t1", lambda: TaskSnapshot.from_dict(_document(status="zombie")))
    assert bad == UnreadableRow("t1", "status 'zombie' is not a status")
    assert bad.message == "task 't1' cannot be read: status 'zombie' is not a status"

    def deep() -> None:
        json.loads("[" * 100_000 + "]" * 100_000)

    assert isinstance(decode_row("t1", deep), UnreadableRow)
    missing: dict[str, int] = {}
    entry = decode_row(7, lambda: missing["x"], part="history entry 3")
    assert isinstance(entry, UnreadableRow)
    assert entry.message.startswith("history entry 3 of task '7' cannot be read: ")
    assert decode_row("t1", lambda: 42) == 42


def test_listing_and_counts_are_a_list_and_a_dict_that_name_the_rows_left_out() -> None:
    row = UnreadableRow("b", "status 'zombie' is not a status")
    listing = Listing.split(["a", row, "c"])
    assert listing == ["a", "c"]
    assert isinstance(listing, list)
    assert listing.unreadable == (row,)
    assert unreadable_in(listing) == (row,)
    assert unreadable_in(["a"]) == ()
    counts = Counts({TaskStatus.QUEUED: 2}, [row])
    assert counts == {TaskStatus.QUEUED: 2}
    assert unreadable_in(counts) == (row,)
    assert unreadable_in({TaskStatus.QUEUED: 2}) == ()
    assert row.to_dict() == {"task_id": "b", "part": None, "problem": row.problem}
    error = row.error("the store")
    assert isinstance(error, StoreError)
    assert error.task_id == "b"
    assert str(error).startswith("the store: task 'b' cannot be read: status 'zombie' is not")


def test_the_reference_store_decodes_an_entry_that_is_not_a_record() -> None:
    store = InMemoryTaskStore()
    snapshot = _snapshot()
    store.create(snapshot)
    store._tasks["t1"] = snapshot.to_dict()  # type: ignore[assignment]  # a stored document
    assert store.get("t1") == snapshot  # a document that is a record reads
    store._tasks["t1"] = _document(status="zombie")  # type: ignore[assignment]
    with pytest.raises(StoreError, match="task 't1' cannot be read: status 'zombie'"):
        store.get("t1")
    assert store.query() == []
    assert [r.task_id for r in unreadable_in(store.query())] == ["t1"]
    assert store.touch("t1", heartbeat_at=snapshot.updated_at) is False  # nothing to touch


def test_numbers_and_texts_of_subclasses_are_what_they_are_but_a_bool_is_no_number() -> None:
    class Ratio(float):
        """A float of another type (as numpy.float64 is)."""

    class Count(int):
        """An int of another type (as an IntEnum is)."""

    progress = Progress.from_dict({"done": Ratio(0.5), "total": Count(2), "unit": "rows"})
    assert (progress.done, progress.total) == (0.5, 2)
    snapshot = TaskSnapshot.from_dict(_document(status=TaskStatus.QUEUED, priority=Count(3)))
    assert (snapshot.status, snapshot.priority) == (TaskStatus.QUEUED, 3)
    with pytest.raises(ValueError, match=re.escape("progress.done must be a number, got True")):
        Progress.from_dict({"done": True})
