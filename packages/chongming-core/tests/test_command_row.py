"""`read_command`: a stored command row read whatever its columns hold (design D64)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from chongming_core import Command, InMemoryTaskStore, Undecodable, read_command
from chongming_core._command_row import checked_command

ISSUED = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _row(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "command_id": "c1",
        "task_id": "t1",
        "action": "stop",
        "issued_by": "ops",
        "issued_at": ISSUED.isoformat(),
        "reason": "发布窗口",
        "bucket": 3,
        "claimed_by": None,
        "lease_until": None,
        "completed_at": None,
        "result": None,
    }
    row.update(changes)
    return row


def test_a_well_formed_row_reads_whole() -> None:
    command = read_command(_row(lease_until=ISSUED + timedelta(seconds=30), claimed_by="n"))
    assert command == Command(
        "c1", "t1", "stop", "ops", ISSUED, reason="发布窗口", bucket=3, claimed_by="n",
        lease_until=ISSUED + timedelta(seconds=30),
    )  # fmt: skip
    assert command.problem is None


def test_times_come_as_text_or_datetimes_with_their_offset() -> None:
    tokyo = ISSUED.astimezone(timezone(timedelta(hours=9)))
    assert read_command(_row(issued_at=tokyo)).issued_at == tokyo
    assert read_command(_row(issued_at=tokyo.isoformat())).issued_at == tokyo


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [
        ("issued_at", "not a time", "issued_at is 'not a time', not an ISO-8601 time"),
        ("issued_at", "2026-03-01T12:00:00", "a time without a UTC offset"),
        ("issued_at", datetime(2026, 3, 1), "a time without a UTC offset"),
        ("issued_at", 1_700_000_000, "issued_at is an integer (1700000000), not a time"),
        ("issued_at", None, "issued_at is missing"),
        ("issued_at", Undecodable("a time", "'infinity'"), "a time that cannot be decoded"),
        ("task_id", b"\xff\x00", "task_id is a blob (b'\\xff\\x00'), not text"),
        ("action", Undecodable("text", "b'\\xff'"), "action is text that cannot be decoded"),
        ("issued_by", 7, "issued_by is an integer (7), not text"),
        ("command_id", None, "command_id is missing"),
        ("reason", 1.5, "reason is a number (1.5), not text"),
        ("bucket", "seven", "bucket is text ('seven'), not an integer"),
        ("bucket", True, "bucket is a boolean (True), not an integer"),
        ("lease_until", "soon", "lease_until is 'soon'"),
        ("completed_at", b"x", "completed_at is a blob"),
        ("result", b"x", "result is a blob"),
    ],
)
def test_a_bad_column_is_named_with_what_it_holds(column: str, value: object, said: str) -> None:
    command = read_command(_row(**{column: value}))
    assert command.problem is not None
    assert said in command.problem
    assert command.problem.count(";") == 0  # only that column is named


def test_a_bad_column_keeps_the_rest_and_a_rendering_of_itself() -> None:
    command = read_command(_row(task_id=b"\xfft", issued_at="yesterday", bucket="x"))
    assert command.task_id == "b'\\xfft'"  # quoted by the poller's log and result
    assert command.issued_at is None
    assert command.bucket is None
    assert (command.command_id, command.action, command.reason) == ("c1", "stop", "发布窗口")
    assert command.problem is not None
    assert [part.split()[0] for part in command.problem.split("; ")] == [
        "task_id", "issued_at", "bucket",
    ]  # fmt: skip


def test_a_huge_value_is_quoted_short_and_control_characters_escaped() -> None:
    command = read_command(_row(issued_at="\x1b[2J" + "x" * 10_000))
    assert command.problem is not None
    assert len(command.problem) < 200
    assert "\x1b" not in command.problem
    assert "\\x1b[2J" in command.problem


def test_checked_command_keeps_a_well_formed_object_itself() -> None:
    good = read_command(_row())
    assert checked_command(good) is good
    bad = dataclasses.replace(good, issued_at="garbage")  # type: ignore[arg-type]
    checked = checked_command(bad)
    assert checked.problem is not None
    assert "issued_at" in checked.problem


def test_the_memory_store_settles_a_row_it_cannot_name_in_the_claim() -> None:
    store = InMemoryTaskStore()
    good = read_command(_row(command_id="good"))
    store.submit_command(dataclasses.replace(good, command_id=b"id"))  # type: ignore[arg-type]
    store.submit_command(good)
    now = ISSUED + timedelta(seconds=1)
    first, second = store.claim_commands("n", now=now, lease_seconds=5)
    assert first.is_complete
    assert first.result == "rejected: command_id is a blob (b'id'), not text"
    assert second.command_id == "good"
    assert second.problem is None
    later = store.claim_commands("n", now=now + timedelta(hours=1), lease_seconds=5)
    assert [c.command_id for c in later] == ["good"]  # the settled row is never handed out again
