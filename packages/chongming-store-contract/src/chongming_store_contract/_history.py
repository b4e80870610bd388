"""Contract cases: the append-only, idempotent audit trail."""

from __future__ import annotations

import dataclasses

from chongming_core import StateMachine, TaskStatus, Transition
from chongming_store_contract._base import ContractBase
from chongming_store_contract._builders import advance, build_versions
from chongming_store_contract._checks import expect_equal

__all__ = ["HistoryContract"]

_S = TaskStatus


class HistoryContract(ContractBase):
    """`append` and `history`."""

    def test_history_of_an_unknown_task_is_empty(self) -> None:
        expect_equal(self.store.history("no-such-task"), [], "history() of an unknown id")

    def test_append_adds_transitions_in_version_order(self) -> None:
        _, chain = build_versions("t1", 6, clock=self.clock)
        self.store.create(self.task("t1").snapshot)
        self.store.append(chain[:2])
        self.store.append(chain[2:])
        expect_equal(self.store.history("t1"), list(chain), "history after two appends")

    def test_history_is_ordered_by_version_not_by_arrival(self) -> None:
        snapshot, chain = build_versions("t1", 5, clock=self.clock)
        self.store.create(snapshot)
        self.store.append([chain[3], chain[0]])
        self.store.append([chain[4], chain[2], chain[1]])
        expect_equal(self.store.history("t1"), list(chain), "history after out-of-order appends")

    def test_append_is_idempotent_on_task_and_version(self) -> None:
        _, chain = self.stored("t1", _S.RUNNING)
        self.store.append(chain)
        self.store.append(chain[1:])
        self.store.append([chain[0], chain[0]])
        expect_equal(self.store.history("t1"), list(chain), "history after repeated appends")

    def test_a_repeated_version_keeps_the_first_record(self) -> None:
        _, chain = self.stored("t1", _S.RUNNING)
        impostor = dataclasses.replace(chain[1], actor="impostor", reason="second writer")
        self.store.append([impostor])
        expect_equal(
            self.store.history("t1")[1], chain[1], "stored record at version 2 after a repeat"
        )
        expect_equal(len(self.store.history("t1")), 3, "history length after a repeat")

    def test_append_handles_several_tasks_in_one_call(self) -> None:
        a, a_chain = build_versions("a", 3, clock=self.clock)
        b, b_chain = build_versions("b", 4, clock=self.clock)
        self.store.create(a)
        self.store.create(b)
        mixed = [b_chain[0], a_chain[0], b_chain[1], a_chain[1], a_chain[2], *b_chain[2:]]
        self.store.append(mixed)
        expect_equal(self.store.history("a"), list(a_chain), "history of a")
        expect_equal(self.store.history("b"), list(b_chain), "history of b")

    def test_append_accepts_any_iterable(self) -> None:
        snapshot, chain = build_versions("t1", 4, clock=self.clock)
        self.store.create(snapshot)
        self.store.append(record for record in chain)
        self.store.append([])
        self.store.append(())
        expect_equal(self.store.history("t1"), list(chain), "history after a generator append")

    def test_append_does_not_touch_the_snapshot(self) -> None:
        snapshot, chain = build_versions("t1", 4, clock=self.clock)
        self.store.create(snapshot)
        self.store.append(chain)
        expect_equal(self.store.get("t1"), snapshot, "snapshot after append()")

    def test_transitions_repeated_in_save_are_not_duplicated(self) -> None:
        first, created = self.stored("t1", _S.QUEUED)
        second, more = advance(first, StateMachine.mark_starting, clock=self.clock)
        self.store.save(second, expect_version=1, transitions=[*created, *more])
        expect_equal(
            self.store.history("t1"), [*created, *more], "history after save() re-sent version 1"
        )

    def test_history_keeps_every_transition_field(self) -> None:
        snapshot, _ = self.task("t1", _S.QUEUED)
        record = Transition(
            task_id="t1",
            from_status=_S.PENDING,
            to_status=_S.QUEUED,
            trigger="control:force",
            actor="运维 ops@host-b",
            reason="manual: 'quoted' \"twice\" -- not SQL",
            status_version=1,
            at=self.clock.now(),
        )
        self.store.create(snapshot, [record])
        stored = self.store.history("t1")
        expect_equal(stored, [record], "history() with every field set")
        expect_equal(stored[0].to_dict(), record.to_dict(), "to_dict() of the stored record")
