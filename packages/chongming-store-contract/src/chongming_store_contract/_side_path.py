"""Contract cases: the high-frequency side path (`touch`, `touch_many`), which never bumps the
version."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import partial

from chongming_core import UNSET, Progress, TaskStatus, TouchUpdate
from chongming_store_contract._base import ContractBase
from chongming_store_contract._builders import next_version
from chongming_store_contract._checks import expect, expect_equal

__all__ = ["SidePathContract"]

_S = TaskStatus


class SidePathContract(ContractBase):
    """`touch` and `touch_many`."""

    def test_touch_progress_keeps_the_version_and_every_other_field(self) -> None:
        snapshot, chain = self.stored("t1", _S.RUNNING)
        progress = Progress(done=120, total=500, unit="rows", message="第 3 批")
        expect_equal(self.store.touch("t1", progress=progress), True, "touch() of a known task")
        expect_equal(
            self.store.get("t1"), snapshot.evolve(progress=progress), "snapshot after touch()"
        )
        expect_equal(self.store.history("t1"), list(chain), "history after touch()")

    def test_touch_changes_only_the_given_field(self) -> None:
        snapshot, _ = self.stored("t1", _S.RUNNING)
        until = self.clock.now() + timedelta(seconds=30)
        beat = self.clock.now() + timedelta(seconds=2)
        touch = partial(self.store.touch, "t1")
        cases: list[tuple[str, Callable[[], bool], dict[str, object]]] = [
            ("heartbeat_at", partial(touch, heartbeat_at=beat), {"last_heartbeat_at": beat}),
            ("lease_owner", partial(touch, lease_owner="node-1"), {"lease_owner": "node-1"}),
            ("lease_until", partial(touch, lease_until=until), {"lease_until": until}),
            ("pid", partial(touch, pid=31337), {"pid": 31337}),
            ("progress", partial(touch, progress=Progress(1.5)), {"progress": Progress(1.5)}),
        ]
        expected = snapshot
        for field, call, changes in cases:
            expect_equal(call(), True, f"touch({field}=...)")
            expected = expected.evolve(**changes)
            expect_equal(self.store.get("t1"), expected, f"snapshot after touch({field}=...)")
        expect_equal(
            expected.status_version, snapshot.status_version, "status_version after five touches"
        )

    def test_touch_with_nothing_to_change_returns_true_and_changes_nothing(self) -> None:
        snapshot, _ = self.stored("t1", _S.RUNNING)
        expect_equal(self.store.touch("t1"), True, "touch() without fields of a known task")
        expect_equal(self.store.get("t1"), snapshot, "snapshot after an empty touch()")

    def test_touch_of_an_unknown_task_returns_false_and_creates_nothing(self) -> None:
        result = self.store.touch("ghost", progress=Progress(done=1), pid=7)
        expect_equal(result, False, "touch() of an unknown task")
        expect_equal(self.store.get("ghost"), None, "get() after touching an unknown task")
        expect_equal(self.store.query(), [], "query() after touching an unknown task")

    def test_touch_does_not_conflict_with_a_later_save(self) -> None:
        snapshot, _ = self.stored("t1", _S.RUNNING)
        self.store.touch("t1", progress=Progress(done=5, total=10), heartbeat_at=self.clock.now())
        nxt, more = next_version(snapshot, clock=self.clock)
        self.store.save(nxt, expect_version=snapshot.status_version, transitions=more)
        expect_equal(self.store.get("t1"), nxt, "snapshot saved after a touch()")

    def test_touch_many_applies_set_fields_clears_none_and_keeps_unset(self) -> None:
        until = self.clock.now() + timedelta(seconds=60)
        a, _ = self.stored("a", _S.RUNNING)
        b, _ = self.stored("b", _S.RUNNING)
        self.store.touch("a", lease_owner="node-1", lease_until=until, pid=11)
        self.store.touch("b", lease_owner="node-1", lease_until=until, pid=22)
        beat = self.clock.now() + timedelta(seconds=1)
        applied = self.store.touch_many(
            [
                TouchUpdate("a", progress=Progress(done=3), heartbeat_at=beat),
                TouchUpdate("ghost", pid=5),
                TouchUpdate("b", lease_owner=None, lease_until=None, pid=None),
            ]
        )
        expect_equal(applied, 2, "touch_many() count (the unknown task is skipped)")
        expect_equal(
            self.store.get("a"),
            a.evolve(
                progress=Progress(done=3),
                last_heartbeat_at=beat,
                lease_owner="node-1",
                lease_until=until,
                pid=11,
            ),
            "a after touch_many() (UNSET fields kept)",
        )
        expect_equal(
            self.store.get("b"),
            b.evolve(lease_owner=None, lease_until=None, pid=None),
            "b after touch_many() (None clears)",
        )
        expect_equal(self.store.get("ghost"), None, "unknown task after touch_many()")

    def test_touch_many_clears_progress_and_heartbeat(self) -> None:
        snapshot, _ = self.stored("t1", _S.RUNNING)
        self.store.touch("t1", progress=Progress(done=1), heartbeat_at=self.clock.now())
        applied = self.store.touch_many([TouchUpdate("t1", progress=None, heartbeat_at=None)])
        expect_equal(applied, 1, "touch_many() count")
        expect_equal(self.store.get("t1"), snapshot, "snapshot after clearing progress/heartbeat")

    def test_touch_many_with_only_unset_fields_changes_nothing(self) -> None:
        snapshot, _ = self.stored("t1", _S.RUNNING)
        update = TouchUpdate("t1")
        expect(update.pid is UNSET, "TouchUpdate fields default to UNSET")
        expect_equal(self.store.touch_many([update]), 1, "touch_many() count")
        expect_equal(self.store.get("t1"), snapshot, "snapshot after an all-UNSET update")

    def test_touch_many_of_nothing_returns_zero(self) -> None:
        expect_equal(self.store.touch_many([]), 0, "touch_many([])")

    def test_touch_many_keeps_the_version_and_history(self) -> None:
        snapshot, chain = self.stored("t1", _S.RUNNING)
        self.store.touch_many([TouchUpdate("t1", pid=9), TouchUpdate("t1", progress=Progress(2))])
        stored = self.store.get("t1")
        expect_equal(
            stored, snapshot.evolve(pid=9, progress=Progress(2)), "snapshot after touch_many()"
        )
        expect_equal(self.store.history("t1"), list(chain), "history after touch_many()")

    def test_a_fenced_touch_applies_at_its_version_only(self) -> None:
        snapshot, _ = self.stored("t1", _S.RUNNING)
        until = self.clock.now() + timedelta(seconds=30)
        held = snapshot.status_version
        applied = self.store.touch_many(
            [TouchUpdate("t1", lease_owner="node-1", lease_until=until, held_version=held)]
        )
        expect_equal(applied, 1, "touch_many() of an update fenced to the stored version")
        renewed = snapshot.evolve(lease_owner="node-1", lease_until=until)
        expect_equal(self.store.get("t1"), renewed, "snapshot after the fenced touch")
        nxt, more = next_version(renewed, clock=self.clock)
        self.store.save(nxt, expect_version=held, transitions=more)
        later = until + timedelta(seconds=30)
        stale = TouchUpdate(
            "t1", lease_owner="node-2", lease_until=later, pid=99, held_version=held
        )
        expect_equal(self.store.touch_many([stale]), 0, "touch_many() fenced to an old version")
        expect_equal(self.store.get("t1"), nxt, "snapshot after a touch fenced to an old version")

    def test_fenced_and_unfenced_touches_in_one_call(self) -> None:
        a, _ = self.stored("a", _S.RUNNING)
        b, _ = self.stored("b", _S.RUNNING)
        c, _ = self.stored("c", _S.RUNNING)
        applied = self.store.touch_many(
            [
                TouchUpdate("a", pid=1, held_version=a.status_version),
                TouchUpdate("b", pid=2, held_version=b.status_version + 1),
                TouchUpdate("c", pid=3),
                TouchUpdate("ghost", pid=4, held_version=0),
            ]
        )
        expect_equal(applied, 2, "touch_many() count: a (at its version) and c (unfenced)")
        expect_equal(self.store.get("a"), a.evolve(pid=1), "a after touch_many()")
        expect_equal(self.store.get("b"), b, "b after an update fenced to a version it is not at")
        expect_equal(self.store.get("c"), c.evolve(pid=3), "c after touch_many()")
