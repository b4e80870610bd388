"""Contract cases: creating, saving and reading snapshots (optimistic ``status_version``)."""

from __future__ import annotations

from chongming_core import (
    ConcurrencyConflict,
    SnapshotWrite,
    StateMachine,
    TaskStatus,
)
from chongming_core.backend import version_conflict
from chongming_store_contract._base import ContractBase
from chongming_store_contract._builders import advance, next_version
from chongming_store_contract._checks import expect, expect_equal, raises

__all__ = ["SnapshotsContract"]

_S = TaskStatus


def expect_worded(conflict: ConcurrencyConflict) -> None:
    """`conflict` says what every store says in its place (`version_conflict`): a caller
    reads the same advice whichever backend refused the write."""
    shared = version_conflict(
        conflict.task_id or "", expected=conflict.expected, actual=conflict.actual
    )
    expect_equal(str(conflict), str(shared), "ConcurrencyConflict message")


class SnapshotsContract(ContractBase):
    """`create`, `save`, `save_many` and `get`."""

    # ------------------------------------------------------------------ create / get
    def test_get_unknown_task_returns_none(self) -> None:
        expect_equal(self.store.get("no-such-task"), None, "get() of an unknown id")

    def test_create_then_get_returns_the_same_snapshot(self) -> None:
        snapshot, _ = self.stored("t1", _S.QUEUED, label="nightly", tags={"io"})
        expect_equal(self.store.get("t1"), snapshot, "get() after create()")

    def test_create_stores_its_transitions_atomically(self) -> None:
        snapshot, transitions = self.stored("t1", _S.RUNNING)
        expect_equal(len(transitions), 3, "transitions built for a running task")
        expect_equal(self.store.history("t1"), list(transitions), "history() after create()")
        expect_equal(self.store.get("t1"), snapshot, "get() after create()")

    def test_create_without_transitions_has_empty_history(self) -> None:
        self.stored("t1")
        expect_equal(self.store.history("t1"), [], "history() of a task created at version 0")

    def test_create_duplicate_id_raises_conflict_and_keeps_the_original(self) -> None:
        original, transitions = self.stored("t1", _S.QUEUED)
        impostor, impostor_transitions = self.task("t1", _S.RUNNING, name="other")
        with raises(ConcurrencyConflict, "creating an id that already exists") as caught:
            self.store.create(impostor, impostor_transitions)
        expect_equal(caught.value.task_id, "t1", "ConcurrencyConflict.task_id")
        expect_equal(self.store.get("t1"), original, "snapshot after a refused create")
        expect_worded(caught.value)
        expect_equal(self.store.history("t1"), list(transitions), "history after a refused create")

    def test_create_duplicate_of_terminal_task_is_refused(self) -> None:
        original, _ = self.stored("t1", _S.SUCCEEDED)
        with raises(ConcurrencyConflict, "reusing the id of a finished task"):
            self.store.create(*self.task("t1"))
        expect_equal(self.store.get("t1"), original, "finished task after a refused create")

    def test_tasks_are_independent(self) -> None:
        a, _ = self.stored("a", _S.QUEUED)
        b, _ = self.stored("b", _S.FAILED)
        expect_equal(self.store.get("a"), a, "task a")
        expect_equal(self.store.get("b"), b, "task b")
        expect_equal(self.store.history("a")[-1].to_status, _S.QUEUED, "a's last transition")
        expect_equal(self.store.history("b")[-1].to_status, _S.FAILED, "b's last transition")

    # ------------------------------------------------------------------ save
    def test_save_with_expected_version_replaces_and_appends(self) -> None:
        first, created = self.stored("t1", _S.QUEUED)
        second, more = advance(first, StateMachine.mark_starting, clock=self.clock)
        self.store.save(second, expect_version=first.status_version, transitions=more)
        expect_equal(self.store.get("t1"), second, "snapshot after save()")
        expect_equal(
            self.store.history("t1"), [*created, *more], "history after save() with transitions"
        )

    def test_save_without_transitions_replaces_only_the_snapshot(self) -> None:
        first, created = self.stored("t1", _S.RUNNING)
        second, _ = next_version(first, clock=self.clock)
        self.store.save(second, expect_version=first.status_version)
        expect_equal(self.store.get("t1"), second, "snapshot after save()")
        expect_equal(self.store.history("t1"), list(created), "history after a bare save()")

    def test_save_a_chain_of_versions(self) -> None:
        current, history = self.stored("t1", _S.RUNNING)
        expected_history = list(history)
        for _ in range(6):
            nxt, more = next_version(current, clock=self.clock)
            self.store.save(nxt, expect_version=current.status_version, transitions=more)
            expected_history.extend(more)
            current = nxt
        expect_equal(self.store.get("t1"), current, "snapshot after six saves")
        expect_equal(current.status_version, 9, "version after six saves on version 3")
        expect_equal(self.store.history("t1"), expected_history, "history after six saves")

    def test_save_stale_version_conflicts_and_writes_nothing(self) -> None:
        first, created = self.stored("t1", _S.RUNNING)
        second, more = next_version(first, clock=self.clock)
        self.store.save(second, expect_version=3, transitions=more)
        stale, stale_more = advance(first, StateMachine.mark_stopping, clock=self.clock)
        with raises(ConcurrencyConflict, "saving on top of version 3 when 4 is stored") as caught:
            self.store.save(stale, expect_version=3, transitions=stale_more)
        expect_equal(caught.value.expected, 3, "ConcurrencyConflict.expected")
        expect_equal(caught.value.actual, 4, "ConcurrencyConflict.actual")
        expect_equal(caught.value.task_id, "t1", "ConcurrencyConflict.task_id")
        expect_equal(self.store.get("t1"), second, "snapshot after a refused save")
        expect_worded(caught.value)
        expect_equal(self.store.history("t1"), [*created, *more], "history after a refused save")

    def test_save_with_a_future_version_conflicts(self) -> None:
        first, _ = self.stored("t1", _S.RUNNING)
        nxt, more = next_version(first, clock=self.clock)
        with raises(ConcurrencyConflict, "expect_version ahead of the stored one") as caught:
            self.store.save(nxt, expect_version=7, transitions=more)
        expect_equal(caught.value.expected, 7, "ConcurrencyConflict.expected")
        expect_equal(caught.value.actual, 3, "ConcurrencyConflict.actual")
        expect_equal(self.store.get("t1"), first, "snapshot after a refused save")
        expect_worded(caught.value)

    def test_save_unknown_task_conflicts_with_actual_none(self) -> None:
        ghost, transitions = self.task("ghost", _S.QUEUED)
        with raises(ConcurrencyConflict, "saving a task that was never created") as caught:
            self.store.save(ghost, expect_version=0, transitions=transitions)
        expect_equal(caught.value.actual, None, "ConcurrencyConflict.actual for an unknown task")
        expect_equal(caught.value.expected, 0, "ConcurrencyConflict.expected")
        expect_worded(caught.value)
        expect_equal(self.store.get("ghost"), None, "get() after a refused save")
        expect_equal(self.store.history("ghost"), [], "history() after a refused save")

    # ------------------------------------------------------------------ save_many
    def test_save_many_empty_returns_no_conflicts(self) -> None:
        expect_equal(self.store.save_many([]), [], "save_many([])")

    def test_save_many_applies_creates_and_saves_with_transitions(self) -> None:
        a, a_created = self.stored("a", _S.QUEUED)
        a2, a_more = advance(a, StateMachine.mark_starting, clock=self.clock)
        b, b_created = self.task("b", _S.BLOCKED)
        conflicts = self.store.save_many(
            [
                SnapshotWrite(a2, expect_version=1, transitions=a_more),
                SnapshotWrite(b, expect_version=None, transitions=b_created),
            ]
        )
        expect_equal(conflicts, [], "conflicts of a clean save_many()")
        expect_equal(self.store.get("a"), a2, "saved item")
        expect_equal(self.store.get("b"), b, "created item")
        expect_equal(self.store.history("a"), [*a_created, *a_more], "history of the saved item")
        expect_equal(self.store.history("b"), list(b_created), "history of the created item")

    def test_save_many_reports_conflicts_in_order_and_applies_the_rest(self) -> None:
        a, _ = self.stored("a", _S.RUNNING)
        b, b_created = self.stored("b", _S.RUNNING)
        c, _ = self.stored("c", _S.RUNNING)
        a2, a_more = next_version(a, clock=self.clock)
        b2, b_more = next_version(b, clock=self.clock)
        c2, c_more = next_version(c, clock=self.clock)
        dup, dup_created = self.task("c", _S.QUEUED)
        ghost, _ = self.task("ghost", _S.QUEUED)
        new, new_created = self.task("new", _S.QUEUED)
        conflicts = self.store.save_many(
            [
                SnapshotWrite(a2, expect_version=3, transitions=a_more),
                SnapshotWrite(b2, expect_version=2, transitions=b_more),  # stale
                SnapshotWrite(dup, expect_version=None, transitions=dup_created),  # exists
                SnapshotWrite(c2, expect_version=3, transitions=c_more),
                SnapshotWrite(ghost, expect_version=1),  # unknown
                SnapshotWrite(new, expect_version=None, transitions=new_created),
            ]
        )
        found = [(c.task_id, c.expected, c.actual) for c in conflicts]
        expect_equal(
            found,
            [("b", 2, 3), ("c", None, 3), ("ghost", 1, None)],
            "conflicts of save_many() as (task_id, expected, actual), in order",
        )
        expect(
            all(isinstance(c, ConcurrencyConflict) for c in conflicts),
            f"save_many() must return ConcurrencyConflict objects, found {conflicts!r}",
        )
        for conflict in conflicts:
            expect_worded(conflict)
        expect_equal(self.store.get("a"), a2, "applied item a")
        expect_equal(self.store.get("b"), b, "conflicting item b (unchanged)")
        expect_equal(self.store.history("b"), list(b_created), "history of conflicting item b")
        expect_equal(self.store.get("c"), c2, "applied item c (the duplicate create lost)")
        expect_equal(self.store.get("ghost"), None, "unknown item (not created by a save)")
        expect_equal(self.store.get("new"), new, "created item")
        expect_equal(self.store.history("new"), list(new_created), "history of the created item")

    def test_save_many_checks_items_in_order_against_earlier_items(self) -> None:
        built, created = self.task("t1", _S.RUNNING)
        v4, more4 = next_version(built, clock=self.clock)
        v5, more5 = next_version(v4, clock=self.clock)
        rival, rival_more = advance(v4, StateMachine.mark_stopping, clock=self.clock)
        conflicts = self.store.save_many(
            [
                SnapshotWrite(built, expect_version=None, transitions=created),
                SnapshotWrite(v4, expect_version=3, transitions=more4),
                SnapshotWrite(v5, expect_version=4, transitions=more5),
                SnapshotWrite(rival, expect_version=4, transitions=rival_more),  # now stale
            ]
        )
        expect_equal(
            [(c.task_id, c.expected, c.actual) for c in conflicts],
            [("t1", 4, 5)],
            "conflicts when a later item builds on an earlier one in the same batch",
        )
        expect_equal(self.store.get("t1"), v5, "snapshot after the batch")
        expect_equal(
            self.store.history("t1"), [*created, *more4, *more5], "history after the batch"
        )
