"""The contract fails for stores that break it (a suite that cannot fail proves nothing)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

import pytest

from chongming_core import (
    Command,
    InMemoryTaskStore,
    StoreError,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    Transition,
    unreadable_in,
)
from chongming_store_contract import StoreContract


class _IgnoresVersions(InMemoryTaskStore):
    def save(
        self,
        snapshot: TaskSnapshot,
        *,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        current = self.get(snapshot.task_id)
        super().save(
            snapshot,
            expect_version=expect_version if current is None else current.status_version,
            transitions=transitions,
        )


class _DuplicatesHistory(InMemoryTaskStore):
    def __init__(self) -> None:
        super().__init__()
        self._extra: list[Transition] = []

    def append(self, transitions: Iterable[Transition]) -> None:
        records = list(transitions)
        known = {(t.task_id, t.status_version) for t in records if self.history(t.task_id)}
        self._extra.extend(t for t in records if (t.task_id, t.status_version) in known)
        super().append(records)

    def history(self, task_id: str) -> list[Transition]:
        return super().history(task_id) + [t for t in self._extra if t.task_id == task_id]


class _SortsById(InMemoryTaskStore):
    def query(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        return sorted(super().query(query), key=lambda s: s.task_id)


class _IgnoresLeases(InMemoryTaskStore):
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
        for cmd in self.commands(include_complete=False):
            self.release_command(cmd.command_id, owner=cmd.claimed_by or "")
        return super().claim_commands(
            owner, now=now, lease_seconds=lease_seconds, limit=limit, task_ids=task_ids,
            buckets=buckets,
        )  # fmt: skip


class _TouchBumpsVersion(InMemoryTaskStore):
    def touch(self, task_id: str, **fields: Any) -> bool:
        found = super().touch(task_id, **fields)
        current = self.get(task_id)
        if current is not None:
            self._tasks[task_id] = current.evolve(status_version=current.status_version + 1)
        return found


class _DropsUtcOffsets(InMemoryTaskStore):
    """Compares leases as naive wall-clock text, like a careless text column."""

    def query(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        if query is None or query.lease_expired_before is None:
            return super().query(query)
        cutoff = query.lease_expired_before.replace(tzinfo=None).isoformat()
        rest = super().query(TaskQuery(task_ids=query.task_ids))
        return [
            s
            for s in rest
            if s.lease_until is None or s.lease_until.replace(tzinfo=None).isoformat() < cutoff
        ]


class _LosesEmptyStrings(InMemoryTaskStore):
    def get(self, task_id: str) -> TaskSnapshot | None:
        found = super().get(task_id)
        return None if found is None else found.evolve(label=found.label or None)


class _ForgetsToClose(InMemoryTaskStore):
    def history(self, task_id: str) -> list[Transition]:
        self._closed = False
        return super().history(task_id)


class _CreateOverwrites(InMemoryTaskStore):
    """Never refuses a create: every racing creator "wins"."""

    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        with self._lock:
            self._tasks.pop(snapshot.task_id, None)
            self._order.pop(snapshot.task_id, None)
            super().create(snapshot, transitions)


class _HidesMalformedCommands(InMemoryTaskStore):
    """Leases a row it cannot read but never hands it out: nobody ever settles it."""

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
        claimed = super().claim_commands(
            owner, now=now, lease_seconds=lease_seconds, limit=limit, task_ids=task_ids,
            buckets=buckets,
        )  # fmt: skip
        return [c for c in claimed if c.problem is None]


class _HidesUnreadableRows(InMemoryTaskStore):
    """Leaves damaged rows out of a listing without naming them."""

    def query(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        return list(super().query(query))

    def history(self, task_id: str) -> list[Transition]:
        return list(super().history(task_id))


class _GetHidesUnreadableRow(InMemoryTaskStore):
    """Answers "no such task" for a task whose row it cannot read."""

    def get(self, task_id: str) -> TaskSnapshot | None:
        try:
            return super().get(task_id)
        except StoreError:
            return None


class _CountsUnreadableAsAnything(InMemoryTaskStore):
    """Counts a row it cannot read under the first status."""

    def status_counts(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        counts = super().status_counts(query)
        found = dict(counts)
        for _ in unreadable_in(counts):
            found[TaskStatus.PENDING] = found.get(TaskStatus.PENDING, 0) + 1
        return found


_CASES = [
    (_IgnoresVersions, "test_save_stale_version_conflicts_and_writes_nothing"),
    (_DuplicatesHistory, "test_append_is_idempotent_on_task_and_version"),
    (_SortsById, "test_query_returns_every_task_in_creation_order"),
    (_IgnoresLeases, "test_a_leased_command_is_not_handed_out_twice"),
    (_IgnoresLeases, "test_concurrent_claims_never_hand_a_command_to_two_claimers"),
    (_TouchBumpsVersion, "test_touch_progress_keeps_the_version_and_every_other_field"),
    (_DropsUtcOffsets, "test_query_lease_expired_before_compares_instants_across_offsets"),
    (_LosesEmptyStrings, "test_empty_strings_and_zero_values_stay_distinct_from_none"),
    (_ForgetsToClose, "test_every_call_after_close_raises_store_error"),
    (_CreateOverwrites, "test_concurrent_creates_of_one_id_have_one_winner"),
    (_HidesMalformedCommands, "test_a_malformed_command_row_is_handed_out_with_its_problem"),
    (_HidesUnreadableRows, "test_query_lists_every_other_task_and_names_the_rows_it_cannot_read"),
    (_HidesUnreadableRows, "test_an_unreadable_row_keeps_its_place_for_limit_and_offset"),
    (
        _HidesUnreadableRows,
        "test_history_lists_every_other_transition_and_names_the_one_it_cannot_read",
    ),
    (_GetHidesUnreadableRow, "test_get_of_a_row_that_cannot_be_read_raises_store_error_naming_it"),
    (_CountsUnreadableAsAnything, "test_counts_skip_a_row_whose_status_cannot_be_read_and_name_it"),
]


@pytest.mark.parametrize(("store_type", "case"), _CASES, ids=[c for _, c in _CASES])
def test_the_contract_fails_a_broken_store(store_type: type[TaskStore], case: str) -> None:
    contract = type("_Broken", (StoreContract,), {"make_store": lambda self: store_type()})
    instance = contract()
    instance.setup_method(None)
    try:
        with pytest.raises(AssertionError):
            getattr(instance, case)()
    finally:
        instance.teardown_method(None)


def test_the_same_cases_pass_for_the_reference_store() -> None:
    contract = type("_Good", (StoreContract,), {"make_store": lambda self: InMemoryTaskStore()})
    for case in sorted({c for _, c in _CASES}):
        instance = contract()
        instance.setup_method(None)
        try:
            getattr(instance, case)()
        finally:
            instance.teardown_method(None)
