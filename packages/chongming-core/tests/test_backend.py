"""`chongming_core.backend`: the public parts every store backend shares."""

from __future__ import annotations

import inspect
import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

import chongming_core
from chongming_core import (
    ConcurrencyConflict,
    ConfigurationError,
    FakeClock,
    InMemoryTaskStore,
    StateMachine,
    TaskSnapshot,
    Transition,
    backend,
)
from chongming_core.backend import (
    COMMAND_COLUMNS,
    Undecodable,
    format_time,
    parse_time,
    read_command_row,
    validate_keep_terminal,
    version_conflict,
    write_jsonl,
)

_CONSTANTS = {"COMMAND_COLUMNS", "MAX_DEPTH", "MAX_INT_DIGITS"}
_AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_all_is_sorted_without_duplicates_and_importable() -> None:
    names = backend.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(backend, name), f"chongming_core.backend.__all__ lists missing {name!r}"


@pytest.mark.parametrize("name", sorted(set(backend.__all__) - _CONSTANTS))
def test_every_part_is_documented(name: str) -> None:
    assert inspect.getdoc(getattr(backend, name)), f"chongming_core.backend.{name} has no docstring"


@pytest.mark.parametrize("name", backend.__all__)
def test_the_module_docstring_lists_every_part(name: str) -> None:
    # the docstring is the module's table of contents for a backend author
    assert f"`{name}`" in (backend.__doc__ or "")


def test_no_part_is_private_to_the_module_that_defines_it() -> None:
    for name in backend.__all__:
        assert not name.startswith("_")


def test_names_shared_with_the_top_level_are_the_same_objects() -> None:
    for name in set(backend.__all__) & set(chongming_core.__all__):
        assert getattr(backend, name) is getattr(chongming_core, name), name


# ------------------------------------------------------------------ conflicts
def test_a_create_of_an_existing_task_says_ids_are_never_reused() -> None:
    conflict = version_conflict("t1", expected=None, actual=4)
    assert isinstance(conflict, ConcurrencyConflict)
    assert str(conflict) == (
        "task 't1' already exists; task ids are never reused, submit under a new id"
    )
    assert (conflict.task_id, conflict.expected, conflict.actual) == ("t1", None, 4)


def test_a_save_of_a_missing_task_says_it_does_not_exist() -> None:
    conflict = version_conflict("t1", expected=2, actual=None)
    assert str(conflict) == (
        "task 't1' does not exist in the store (it was never created or has been pruned)"
    )
    assert (conflict.expected, conflict.actual) == (2, None)


def test_a_stale_save_names_both_versions_and_the_way_out() -> None:
    conflict = version_conflict("t1", expected=3, actual=4)
    assert str(conflict) == (
        "task 't1' is at version 4, not 3: another writer changed it; reload and retry"
    )


def test_a_save_over_an_unreadable_row_says_why_it_is_not_replaced() -> None:
    conflict = version_conflict("t1", expected=3, actual=None, unreadable="status 'x' is bad")
    assert str(conflict) == (
        "task 't1' cannot be read: status 'x' is bad; it cannot be compared with version 3 "
        "and is not replaced"
    )
    assert (conflict.expected, conflict.actual) == (3, None)


def _snapshot(task_id: str) -> tuple[TaskSnapshot, tuple[Transition, ...]]:
    machine = StateMachine.create(task_id, "job", clock=FakeClock())
    return machine.snapshot, machine.transitions


def test_the_in_memory_store_words_its_conflicts_as_version_conflict() -> None:
    store = InMemoryTaskStore()
    snapshot, transitions = _snapshot("t1")
    store.create(snapshot, transitions)
    with pytest.raises(ConcurrencyConflict) as created:
        store.create(snapshot, transitions)
    assert str(created.value) == str(version_conflict("t1", expected=None, actual=None))
    with pytest.raises(ConcurrencyConflict) as stale:
        store.save(snapshot, expect_version=snapshot.status_version + 5)
    shared = version_conflict(
        "t1", expected=snapshot.status_version + 5, actual=snapshot.status_version
    )
    assert str(stale.value) == str(shared)


def test_the_in_memory_store_refuses_to_replace_an_unreadable_entry() -> None:
    store = InMemoryTaskStore()
    snapshot, transitions = _snapshot("t1")
    store.create(snapshot, transitions)
    store._tasks["t1"] = {"status": "zombie"}  # type: ignore[assignment]  # a damaged entry
    with pytest.raises(ConcurrencyConflict, match="is not replaced") as caught:
        store.save(snapshot, expect_version=snapshot.status_version)
    assert str(caught.value).startswith("task 't1' cannot be read: ")
    assert (caught.value.expected, caught.value.actual) == (snapshot.status_version, None)


# ------------------------------------------------------------------ command rows
def _row(**changes: object) -> list[object]:
    values: dict[str, object] = {
        "command_id": "c1",
        "task_id": "t1",
        "action": "stop",
        "issued_by": "ops",
        "issued_at": _AT.isoformat(),
        "reason": None,
        "bucket": 3,
        "claimed_by": None,
        "lease_until": None,
        "completed_at": None,
        "result": None,
    }
    values.update(changes)
    return [values[name] for name in COMMAND_COLUMNS]


def test_a_command_row_reads_in_column_order() -> None:
    command = read_command_row(_row())
    assert command.problem is None
    assert (command.command_id, command.task_id, command.action) == ("c1", "t1", "stop")
    assert (command.issued_at, command.bucket) == (_AT, 3)


def test_a_command_row_may_carry_a_backend_s_own_columns_after_the_shared_ones() -> None:
    assert read_command_row([*_row(), 1_767_268_800_000_000]) == read_command_row(_row())


def test_replaced_values_win_over_the_row() -> None:
    command = read_command_row(_row(), claimed_by="node-a", lease_until=_AT)
    assert (command.claimed_by, command.lease_until) == ("node-a", _AT)


def test_a_bad_value_makes_a_command_with_a_problem_not_an_exception() -> None:
    command = read_command_row(_row(issued_at=Undecodable("a time", "'infinity'")))
    assert command.problem == "issued_at is a time that cannot be decoded ('infinity')"


def test_a_row_shorter_than_the_columns_is_a_backend_bug() -> None:
    with pytest.raises(ValueError, match="needs the 11 values of COMMAND_COLUMNS, got 10"):
        read_command_row(_row()[:-1])


# ------------------------------------------------------------------ archive, prune, times
def test_write_jsonl_appends_one_line_per_transition_to_an_owner_only_file(
    tmp_path: Path,
) -> None:
    transition = StateMachine.create("t1", "job", clock=FakeClock()).mark_queued()
    path = tmp_path / "archive.jsonl"
    write_jsonl(path, [transition])
    write_jsonl(path, [transition])
    write_jsonl(path, [])
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [Transition.from_dict(json.loads(line)) for line in lines] == [transition] * 2
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


@pytest.mark.parametrize("bad", [-1, True, 1.5, "3", None])
def test_validate_keep_terminal_refuses_what_is_no_count(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="keep_terminal must be an integer >= 0"):
        validate_keep_terminal(bad)


def test_validate_keep_terminal_returns_a_count() -> None:
    assert validate_keep_terminal(0) == 0
    assert validate_keep_terminal(7) == 7


def test_times_round_trip_with_their_offset() -> None:
    moment = datetime.fromisoformat("2026-01-01T12:00:00.000001+08:00")
    text = format_time(moment)
    assert text == "2026-01-01T12:00:00.000001+08:00"
    assert parse_time(text) == moment
    assert parse_time(text).utcoffset() == moment.utcoffset()  # type: ignore[union-attr]
    assert format_time(None) is None
    assert parse_time(None) is None
    with pytest.raises(ValueError, match="naive datetime"):
        format_time(datetime(2026, 1, 1))


def test_one_instant_in_two_zones_keeps_each_its_own_text() -> None:
    """`format_time` remembers texts by the datetime object, never by equality: equal
    instants written in different zones are different texts, asked in any order and
    again."""
    east = datetime.fromisoformat("2026-01-01T08:00:00+08:00")
    utc = datetime.fromisoformat("2026-01-01T00:00:00+00:00")
    assert east == utc
    for _ in range(2):
        assert format_time(east) == "2026-01-01T08:00:00+08:00"
        assert format_time(utc) == "2026-01-01T00:00:00+00:00"
    with pytest.raises(ValueError, match="naive datetime"):
        format_time(datetime(2026, 1, 1))  # a naive time is refused however often asked
    with pytest.raises(ValueError, match="naive datetime"):
        format_time(datetime(2026, 1, 1))
