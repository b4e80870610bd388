"""Contract cases: durable work — claims, their room and fences, worker rows, wake-ups.

A store that does not support durable work (``supports_durable_work`` False) passes
each case by refusing every durable method with the one-line `ConfigurationError`.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any

from chongming_core import (
    ClaimRequest,
    ClaimStart,
    ConcurrencyConflict,
    ConfigurationError,
    Failure,
    SnapshotWrite,
    StartPlan,
    StateMachine,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    WorkerRecord,
)
from chongming_core.backend import holds_fleet_slot
from chongming_store_contract._base import ContractBase
from chongming_store_contract._builders import BuiltTask, advance
from chongming_store_contract._checks import expect, expect_equal, present, raises
from chongming_store_contract._concurrency import run_concurrently
from chongming_store_contract._fidelity import expect_same_snapshot

__all__ = ["DurableWorkContract"]

_S = TaskStatus
_LEASE = timedelta(seconds=30)
_ARGS = {"args": ["a.csv", [1, 2.5, None]], "kwargs": {"表": "行", "deep": {"k": [True]}}}


def _start(m: StateMachine) -> None:
    m.mark_starting(executor="thread")


def _run(m: StateMachine) -> None:
    m.mark_running(pid=4242)


def _succeed(m: StateMachine) -> None:
    m.mark_succeeded(outcome=None)


class DurableWorkContract(ContractBase):
    """Claims (order, filters, room, fleet limits, leases, fences), worker rows, wake-ups."""

    #: Claimers in the concurrent case; a backend with a small connection budget may lower it.
    durable_claimers: int = 8

    # ------------------------------------------------------------------ helpers
    def durable(self) -> bool:
        """Whether the store supports durable work; when not, check it says so and why."""
        if self.store.supports_durable_work:
            return True
        now = self.clock.now()
        calls: list[Any] = [
            lambda: self.store.claim_tasks(self.request("w")),
            lambda: self.store.release_claim("t", "w", 1),
            self.store.workers,
            lambda: self.store.served_names(now),
            lambda: self.store.renew_worker("w", last_seen=now, lease_until=now),
            lambda: self.store.remove_worker("w"),
            lambda: self.store.wait_for_work(0),
            lambda: self.store.wait_for_change("t", 0),
        ]
        for call in calls:
            with raises(ConfigurationError, "a durable method of a store without durable work"):
                call()
        return False

    def enqueue(
        self,
        task_id: str,
        *,
        name: str = "job",
        store: TaskStore | None = None,
        **kwargs: Any,
    ) -> TaskSnapshot:
        """Create a durable ``queued`` task (one fake second after the previous one)."""
        kwargs.setdefault("arguments", {"args": [task_id], "kwargs": {}})
        built = self.task(task_id, _S.QUEUED, name=name, durable=True, **kwargs)
        (store or self.store).create(built.snapshot, built.transitions)
        return built.snapshot

    def request(self, owner: str, **changes: Any) -> ClaimRequest:
        """A claim by `owner` of ``job`` tasks in any bucket, now, with room for ten."""
        now = changes.pop("now", self.clock.now())
        values: dict[str, Any] = {
            "owner": owner,
            "names": frozenset({"job"}),
            "buckets": None,
            "limit": 10,
            "now": now,
            "lease_until": now + _LEASE,
        }
        values.update(changes)
        return ClaimRequest(**values)

    def claim_ids(self, owner: str, **changes: Any) -> list[str]:
        """The ids `owner` claims with `request(owner, **changes)`, in claim order."""
        return [s.task_id for s in self.store.claim_tasks(self.request(owner, **changes))]

    def worker(self, owner: str, **changes: Any) -> WorkerRecord:
        now = self.clock.now()
        values: dict[str, Any] = {
            "owner": owner,
            "host": "host-a",
            "pid": 4242,
            "buckets": (3, 1),
            "names": ("job", "etl.同步"),
            "capacity": {"max_parallel": 4, "limits": {"gpu": 1}},
            "started_at": now,
            "last_seen": now,
            "lease_until": now + _LEASE,
        }
        values.update(changes)
        return WorkerRecord(**values)

    def move(
        self, snapshot: TaskSnapshot, *steps: Any, store: TaskStore | None = None
    ) -> BuiltTask:
        """Apply `steps` to `snapshot` and save the result under its version."""
        built = advance(snapshot, *steps, clock=self.clock)
        (store or self.store).save(
            built.snapshot, expect_version=snapshot.status_version, transitions=built.transitions
        )
        return built

    # ------------------------------------------------------------------ round trip
    def test_durable_task_round_trips(self) -> None:
        run_at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=8)))
        built = self.task("d1", _S.QUEUED, durable=True, arguments=_ARGS, run_at=run_at)
        self.store.create(built.snapshot, built.transitions)
        stored = present(self.store.get("d1"), "the durable task")
        expect_same_snapshot(stored, built.snapshot, "get() of a durable task")
        expect_equal((stored.durable, stored.arguments, stored.run_at), (True, _ARGS, run_at), "")
        found = self.store.query(TaskQuery(task_ids=frozenset({"d1"})))
        expect_same_snapshot(found[0], built.snapshot, "query() of a durable task")
        plain = self.stored("p1", _S.QUEUED).snapshot
        again = present(self.store.get("p1"), "a task that is not durable")
        expect_equal((again.durable, again.arguments, again.run_at), (False, None, None), "")
        expect_same_snapshot(again, plain, "get() of a task that is not durable")

    # ------------------------------------------------------------------ claims
    def test_claim_takes_highest_priority_then_oldest(self) -> None:
        if not self.durable():
            return
        for task_id, priority in (("a", 0), ("b", 5), ("c", 5), ("d", -1), ("e", 0)):
            self.enqueue(task_id, priority=priority)
        expect_equal(self.claim_ids("w1", limit=3), ["b", "c", "a"], "first claim")
        expect_equal(self.claim_ids("w2"), ["e", "d"], "second claim")
        expect_equal(self.claim_ids("w3"), [], "a third claim")

    def test_claim_sets_the_lease_and_keeps_status_and_version(self) -> None:
        if not self.durable():
            return
        queued = self.enqueue("a", tags=frozenset({"io"}), bucket=7)
        request = self.request("w1")
        claimed = self.store.claim_tasks(request)
        expect_equal(len(claimed), 1, "tasks claimed")
        expected = queued.evolve(lease_owner="w1", lease_until=request.lease_until)
        expect_same_snapshot(claimed[0], expected, "the claimed snapshot")
        expect_same_snapshot(self.store.get("a"), expected, "the stored snapshot after a claim")
        expect_equal(len(self.store.history("a")), queued.status_version, "history after a claim")
        started = self.move(claimed[0], _start)  # the claimant moves on under that version
        expect_equal(present(self.store.get("a"), "a").status, _S.STARTING, "status")
        expect_equal(started.snapshot.lease_owner, "w1", "the claimant's lease owner")

    def starter(self, declined: frozenset[str] = frozenset()) -> Any:
        """A `ClaimRequest.start` that starts what it is given (as a worker's state machine
        does), except the ids in `declined`; it keeps what it made in ``made``."""
        made: dict[str, Any] = {}

        def start(leased: TaskSnapshot) -> SnapshotWrite | None:
            if leased.task_id in declined:
                return None
            machine = StateMachine(leased, clock=self.clock)
            transition = machine.mark_starting(executor="thread", actor=leased.lease_owner or "w")
            made[leased.task_id] = (machine.snapshot, transition)
            return SnapshotWrite(machine.snapshot, leased.status_version, (transition,))

        start.made = made  # type: ignore[attr-defined]
        return start

    def test_a_claim_that_starts_writes_the_start_with_the_lease(self) -> None:
        """With ``start``, the claim writes what it returns in the claim's transaction:
        the task is ``starting`` at the next version, leased, with its transition in the
        history; a task it declines is neither leased nor started."""
        if not self.durable():
            return
        self.enqueue("a", priority=1)
        self.enqueue("b")
        self.enqueue("c")
        start = self.starter(declined=frozenset({"b"}))
        request = self.request("w1", start=start)
        claimed = self.store.claim_tasks(request)
        expect_equal([s.task_id for s in claimed], ["a", "c"], "tasks claimed and started")
        for got in claimed:
            snapshot, transition = start.made[got.task_id]
            expect_same_snapshot(got, snapshot, f"the claimed snapshot of {got.task_id}")
            stored = present(self.store.get(got.task_id), got.task_id)
            expect_same_snapshot(stored, snapshot, f"the stored snapshot of {got.task_id}")
            expect_equal(
                (stored.status, stored.lease_owner, stored.lease_until),
                (_S.STARTING, "w1", request.lease_until),
                "a started task's status and lease",
            )
            expect_equal(self.store.history(got.task_id)[-1], transition, "the start's record")
        untouched = present(self.store.get("b"), "b")
        expect_equal(
            (untouched.status, untouched.lease_owner, untouched.status_version),
            (_S.QUEUED, None, 1),
            "a task the start declined",
        )
        expect_equal(self.claim_ids("w2"), ["b"], "the declined task is claimable")
        expect_equal(self.claim_ids("w3", start=self.starter()), [], "started tasks, again")

    def test_a_claim_start_writes_what_claim_start_write_makes(self) -> None:
        """A `ClaimStart` is applied as `ClaimStart.write` makes it, however the store
        writes it (PostgreSQL in SQL): the next attempt, the plan's retry budget (at least
        that attempt) and description, the name's default tags for a task stored with
        none, the executor, the attempt's fields cleared, the lease, and one transition;
        a task of a name without a plan is neither leased nor started."""
        if not self.durable():
            return
        first = self.enqueue("c")
        (leased,) = self.store.claim_tasks(self.request("w0", limit=1))
        expect_equal(leased.task_id, "c", "the task to run and fail first")
        failed = self.move(
            leased,
            _start,
            _run,
            lambda m: m.mark_failed(failure=Failure.from_exception(ValueError("x"))),
            lambda m: m.retry(actor="web", reason="again"),
        ).snapshot
        expect_equal((failed.status, failed.attempt), (_S.QUEUED, 1), "a task queued again")
        self.enqueue("a", tags=frozenset({"io"}), priority=2)
        self.enqueue("b", priority=1)
        self.enqueue("d", name="other")
        start = ClaimStart(executor="process", plans={"job": StartPlan(3, "载入 rows")})
        request = self.request(
            "w1",
            names=frozenset({"job", "other"}),
            start=start,
            default_tags={"job": frozenset({"gpu", "b-tag"})},
        )
        found = {  # as claimed: leased, and the default tags for a task stored without any
            s.task_id: s.evolve(
                lease_owner="w1",
                lease_until=request.lease_until,
                tags=s.tags or frozenset({"gpu", "b-tag"}),
            )
            for s in (present(self.store.get(i), i) for i in ("a", "b", "c"))
        }
        claimed = self.store.claim_tasks(request)
        expect_equal([s.task_id for s in claimed], ["a", "b", "c"], "tasks claimed and started")
        for got in claimed:
            write = present(start.write(found[got.task_id], request.now), got.task_id)
            expect_same_snapshot(got, write.snapshot, f"the started snapshot of {got.task_id}")
            stored = present(self.store.get(got.task_id), got.task_id)
            expect_same_snapshot(stored, write.snapshot, f"the stored start of {got.task_id}")
            history = self.store.history(got.task_id)
            expect_equal(history[-1], write.transitions[0], "the start's transition")
            expect_equal(history[-1], ClaimStart.transition_of(got), "transition_of")
        c = claimed[2]
        expect_equal(
            (c.attempt, c.max_attempts, c.failure, c.finished_at, c.executor, c.description),
            (2, 3, None, None, "process", "载入 rows"),
            "a task started for its second attempt",
        )
        expect_equal(first.attempt, 0, "the first enqueue had no attempt")
        untouched = present(self.store.get("d"), "d")
        expect_equal(
            (untouched.status, untouched.lease_owner, untouched.status_version),
            (_S.QUEUED, None, 1),
            "a task of a name without a plan",
        )

    def test_a_claim_whose_start_fails_claims_nothing(self) -> None:
        if not self.durable():
            return
        self.enqueue("a")
        self.enqueue("b")

        def wrong(leased: TaskSnapshot) -> SnapshotWrite:
            return SnapshotWrite(leased, leased.status_version + 1)  # not fenced by its version

        with raises(ConfigurationError, "a start that returns a write under another version"):
            self.store.claim_tasks(self.request("w1", start=wrong))
        for task_id in ("a", "b"):
            stored = present(self.store.get(task_id), task_id)
            expect_equal(
                (stored.status, stored.lease_owner), (_S.QUEUED, None), f"{task_id} after it"
            )
        expect_equal(self.claim_ids("w2"), ["a", "b"], "both are claimable")

    def test_claim_waits_for_run_at(self) -> None:
        if not self.durable():
            return
        later = self.clock.now() + timedelta(seconds=60)
        self.enqueue("later", run_at=later.astimezone(timezone(timedelta(hours=-5))))
        self.enqueue("now", run_at=self.clock.now())
        claimed = self.store.claim_tasks(self.request("w1"))
        expect_equal([s.task_id for s in claimed], ["now"], "claimed before run_at")
        self.move(claimed[0], _start)
        expect_equal(self.claim_ids("w1", now=later - timedelta(microseconds=1)), [], "just before")
        expect_equal(self.claim_ids("w1", now=later), ["later"], "claimed at run_at")

    def test_claim_takes_only_the_names_served(self) -> None:
        if not self.durable():
            return
        self.enqueue("a", name="etl.load")
        self.enqueue("b", name="etl.同步")
        self.enqueue("c", name="report")
        expect_equal(self.claim_ids("w1", names=frozenset()), [], "claimed with no names")
        expect_equal(self.claim_ids("w1", names=frozenset({"etl"})), [], "claimed by a prefix")
        got = self.claim_ids("w1", names=frozenset({"etl.同步", "report"}))
        expect_equal(got, ["b", "c"], "claimed by name")

    def test_claim_takes_only_owned_buckets(self) -> None:
        if not self.durable():
            return
        self.enqueue("a", bucket=1)
        self.enqueue("b", bucket=2)
        self.enqueue("c")
        self.enqueue("d", bucket=3)
        expect_equal(self.claim_ids("w1", buckets=frozenset({2, 3})), ["b", "d"], "owned buckets")
        expect_equal(self.claim_ids("w1", buckets=frozenset()), [], "no bucket owned")
        expect_equal(self.claim_ids("w2", buckets=None), ["a", "c"], "every bucket")

    def test_claimed_task_is_claimable_again_only_after_its_lease(self) -> None:
        if not self.durable():
            return
        self.enqueue("a")
        first = self.request("w1")
        expect_equal(self.claim_ids("w1"), ["a"], "first claim")
        expect_equal(self.claim_ids("w2"), [], "a second claimer during the lease")
        expect_equal(self.claim_ids("w1"), [], "the holder claiming again during its lease")
        just_before = first.lease_until - timedelta(microseconds=1)
        expect_equal(self.claim_ids("w2", now=just_before), [], "a claim just before the end")
        taken = self.store.claim_tasks(self.request("w2", now=first.lease_until))
        expect_equal([s.lease_owner for s in taken], ["w2"], "a claim once the lease ended")

    def test_claim_is_fenced_by_the_version(self) -> None:
        if not self.durable():
            return
        self.enqueue("a")
        claimed = self.store.claim_tasks(self.request("w1"))[0]
        current = present(self.store.get("a"), "a")
        self.move(current, lambda m: m.mark_cancelled(reason="withdrawn"))
        with raises(ConcurrencyConflict, "the claimant's save after another writer's"):
            self.move(claimed, _start)
        expect_equal(present(self.store.get("a"), "a").status, _S.CANCELLED, "status")
        expect(not self.store.release_claim("a", "w1", claimed.status_version), "stale release")
        later = self.request("w2", now=claimed.lease_until or self.clock.now())
        expect_equal(self.store.claim_tasks(later), [], "a claim of a cancelled task")

    def test_two_claimants_of_one_task_start_it_once(self) -> None:
        if not self.durable():
            return
        self.enqueue("a")
        first = self.store.claim_tasks(self.request("w1"))[0]
        after = present(first.lease_until, "lease")
        second = self.store.claim_tasks(self.request("w2", now=after))[0]  # w1 was too slow
        self.move(second, _start)
        with raises(ConcurrencyConflict, "the slow claimant's save"):
            self.move(first, _start)
        expect_equal(present(self.store.get("a"), "a").lease_owner, "w2", "the holder")

    def test_claim_limit(self) -> None:
        if not self.durable():
            return
        for n in range(4):
            self.enqueue(f"t{n}")
        expect_equal(self.claim_ids("w1", limit=0), [], "claimed with limit 0")
        expect_equal(self.claim_ids("w1", limit=3), ["t0", "t1", "t2"], "claimed with limit 3")
        expect_equal(self.claim_ids("w1", limit=3), ["t3"], "the rest")

    def test_claim_respects_tag_room(self) -> None:
        if not self.durable():
            return
        self.enqueue("g1", tags=frozenset({"gpu"}))
        self.enqueue("g2", tags=frozenset({"gpu"}))
        self.enqueue("both", tags=frozenset({"gpu", "io"}))
        self.enqueue("io", tags=frozenset({"io"}))
        self.enqueue("c1", tags=frozenset({"cpu"}))
        self.enqueue("plain")
        got = self.claim_ids("w1", tag_room={"gpu": 1, "io": 0})
        expect_equal(got, ["g1", "c1", "plain"], "claimed with room for one gpu and no io")
        expect_equal(self.claim_ids("w1", tag_room={"gpu": 2, "io": 1}), ["g2", "both"], "then")

    def test_claim_respects_bucket_room(self) -> None:
        if not self.durable():
            return
        for task_id, bucket in (("a", 1), ("b", 1), ("c", 2), ("d", 1), ("e", 2), ("f", None)):
            self.enqueue(task_id, bucket=bucket)
        got = self.claim_ids("w1", bucket_room=1)
        expect_equal(got, ["a", "c", "f"], "claimed with room for one task per bucket")
        expect_equal(self.claim_ids("w1", bucket_room=2), ["b", "d", "e"], "then two a bucket")

    def test_fleet_limits_count_the_whole_store(self) -> None:
        if not self.durable():
            return
        gpu = frozenset({"gpu"})
        running = self.task("r", _S.RUNNING, durable=True, tags=gpu)
        self.store.create(*running)
        self.store.create(*self.task("plain", _S.RUNNING, tags=gpu))  # not durable: not counted
        paused = self.task("p", _S.PAUSED, durable=True, tags=gpu)  # paused in place: counted
        self.store.create(*paused)
        expect(holds_fleet_slot(paused.snapshot, self.clock.now()), "paused in place holds")
        for n in range(4):
            self.enqueue(f"g{n}", tags=gpu)
        self.enqueue("free")
        other = self.other_handle()
        got = self.claim_ids("w1", fleet_limits={"gpu": 3})
        expect_equal(got, ["g0", "free"], "claimed with 2 of 3 gpu slots taken")
        later = self.request("w2", fleet_limits={"gpu": 3})
        expect_equal(other.claim_tasks(later), [], "a claim by another handle, the fleet full")
        expect_equal(self.claim_ids("w2", fleet_limits={"gpu": 4}), ["g1"], "with a higher limit")
        done = present(self.store.get("r"), "r")
        self.move(done, _succeed)
        expect_equal(self.claim_ids("w3", fleet_limits={"gpu": 3}), [], "one slot freed, 3 held")
        expired = self.request("w3", fleet_limits={"gpu": 3}, now=later.lease_until)
        got = [s.task_id for s in self.store.claim_tasks(expired)]
        expect_equal(got, ["g0", "g1", "free"], "claims under expired leases hold no slot")

    def test_a_claim_gives_an_untagged_task_the_claimants_tags(self) -> None:
        """A task enqueued with no tags holds the claimant's registered tags of its name:
        they count against the fleet limit, and the claim writes them into the task, so
        every other claimant counts it from then on."""
        if not self.durable():
            return
        self.enqueue("a")
        self.enqueue("b")
        self.enqueue("c", tags=frozenset({"cpu"}))  # tagged at enqueue: its tags stand
        gpu = {"job": frozenset({"gpu"})}
        (first,) = self.store.claim_tasks(
            self.request("w1", default_tags=gpu, fleet_limits={"gpu": 1}, limit=1)
        )
        expect_equal((first.task_id, first.tags), ("a", frozenset({"gpu"})), "claimed, tagged")
        stored = present(self.store.get("a"), "a")
        expect_equal(stored.tags, frozenset({"gpu"}), "the claim wrote the tags")
        expect_equal(
            [s.task_id for s in self.store.query(TaskQuery(tag="gpu"))], ["a"], "found by tag"
        )
        other = self.other_handle()
        got = other.claim_tasks(self.request("w2", default_tags=gpu, fleet_limits={"gpu": 1}))
        expect_equal(
            [(s.task_id, s.tags) for s in got],
            [("c", frozenset({"cpu"}))],
            "the fleet is full for gpu; a task enqueued with tags keeps them",
        )

    def test_release_claim_gives_the_task_back(self) -> None:
        if not self.durable():
            return
        self.enqueue("a")
        claimed = self.store.claim_tasks(self.request("w1"))[0]
        version = claimed.status_version
        expect(not self.store.release_claim("a", "w2", version), "a release by another owner")
        expect(not self.store.release_claim("a", "w1", version + 1), "a release at another version")
        expect(not self.store.release_claim("missing", "w1", version), "a release of no task")
        expect(self.store.release_claim("a", "w1", version), "the holder's release")
        stored = present(self.store.get("a"), "a")
        expect_equal((stored.lease_owner, stored.lease_until), (None, None), "lease after release")
        expect_equal(stored.status_version, version, "version after release")
        expect(not self.store.release_claim("a", "w1", version), "a second release")
        expect_equal(self.claim_ids("w2"), ["a"], "claimed again after the release")

    def test_tasks_that_are_not_durable_or_not_queued_are_never_claimed(self) -> None:
        if not self.durable():
            return
        self.stored("plain", _S.QUEUED)
        self.store.create(*self.task("running", _S.RUNNING, durable=True))
        self.store.create(*self.task("pending", _S.PENDING, durable=True))
        self.store.create(*self.task("retry", _S.RETRY_WAIT, durable=True))
        self.store.create(*self.task("done", _S.SUCCEEDED, durable=True))
        expect_equal(self.claim_ids("w1"), [], "claimed")

    def test_claim_request_refuses_bad_input(self) -> None:
        now = self.clock.now()
        bad: dict[str, Any]
        for bad in (
            {"owner": 7},
            {"limit": -1},
            {"lease_until": now},
            {"now": datetime(2026, 1, 1)},
            {"tag_room": {"gpu": -1}},
            {"fleet_limits": {"": 1}},
            {"bucket_room": True},
            {"names": "job"},
        ):
            owner: Any = bad.pop("owner", "w")
            with raises(ConfigurationError, f"ClaimRequest with {bad!r}"):
                self.request(owner, **bad)

    # ------------------------------------------------------------------ workers
    def test_worker_rows_register_renew_list_and_remove(self) -> None:
        if not self.durable():
            return
        b = self.worker("node-b", buckets=None, names=("report",))
        a = self.worker("node-a")
        self.store.register_worker(b)
        self.store.register_worker(a)
        expect_equal(self.store.workers(), [a, b], "workers, ordered by owner")
        expect_equal(a.buckets, (1, 3), "buckets are kept sorted")
        expect_equal(self.other_handle().workers(), [a, b], "workers seen by another handle")
        replaced = self.worker("node-a", host="host-c", pid=7, names=("job",))
        self.store.register_worker(replaced)
        expect_equal(self.store.workers(), [replaced, b], "workers after registering again")
        self.clock.advance(10)
        seen = self.clock.now()
        renewed = self.store.renew_worker("node-a", last_seen=seen, lease_until=seen + _LEASE)
        expect(renewed, "renew_worker() of a registered worker")
        expect(not self.store.renew_worker("node-z", last_seen=seen, lease_until=seen), "unknown")
        first = self.store.workers()[0]
        expect_equal((first.last_seen, first.lease_until), (seen, seen + _LEASE), "renewed row")
        expect_equal(self.store.served_names(seen), frozenset({"job", "report"}), "served names")
        after_b = b.lease_until + timedelta(seconds=1)
        expect(not b.is_live(after_b) and first.is_live(after_b), "is_live()")
        expect_equal(self.store.served_names(after_b), frozenset({"job"}), "names of live workers")
        expect_equal(len(self.store.workers()), 2, "expired workers are still listed")
        expect(self.store.remove_worker("node-b"), "remove_worker() of a registered worker")
        expect(not self.store.remove_worker("node-b"), "a second remove_worker()")
        expect_equal([w.owner for w in self.store.workers()], ["node-a"], "workers after removal")

    def test_worker_record_refuses_bad_input(self) -> None:
        for bad in (
            {"host": None},
            {"pid": -1},
            {"buckets": (1, -2)},
            {"names": "job"},
            {"capacity": {"limits": {1, 2}}},
            {"lease_until": datetime(2026, 1, 1)},
        ):
            with raises(ConfigurationError, f"WorkerRecord with {bad!r}"):
                self.worker("w", **bad)

    # ------------------------------------------------------------------ wake-ups
    def test_wait_for_work_wakes_on_an_enqueue(self) -> None:
        if not self.durable():
            return
        self.store.wait_for_work(0)  # starts listening; forgets earlier wake-ups
        expect(not self.store.wait_for_work(0.05), "a wait with nothing enqueued")
        self.stored("plain", _S.QUEUED)  # not durable: wakes nobody
        self.enqueue("a", store=self.other_handle())
        started = time.monotonic()
        expect(self.store.wait_for_work(10), "a wait after an enqueue by another handle")
        expect(time.monotonic() - started < 5, "the wait returned at once")

    def test_wake_work_waiters_cuts_a_wait_short(self) -> None:
        if not self.durable():
            return
        self.store.wait_for_work(0)  # starts listening; forgets earlier wake-ups
        woken: list[bool] = []
        waiter = threading.Thread(
            target=lambda: woken.append(self.store.wait_for_work(60)), daemon=True
        )
        started = time.monotonic()
        waiter.start()
        self.store.wake_work_waiters()  # during the wait, or before it: True either way
        waiter.join(30)
        expect_equal(woken, [True], "wait_for_work() after wake_work_waiters()")
        expect(time.monotonic() - started < 20, "the wait returned before its timeout")
        expect(not self.store.wait_for_work(0.05), "a wait after the wake-up was taken")

    def test_wait_for_change_wakes_on_a_terminal_save(self) -> None:
        if not self.durable():
            return
        queued = self.enqueue("a")
        expect(not self.store.wait_for_change("a", 0.05), "a wait with the task unfinished")
        woken: list[bool] = []
        waiter = threading.Thread(
            target=lambda: woken.append(self.store.wait_for_change("a", 20)), daemon=True
        )
        waiter.start()
        claimed = self.store.claim_tasks(self.request("w1"))[0]
        running = self.move(claimed, _start, _run, store=self.other_handle()).snapshot
        self.move(running, _succeed, store=self.other_handle())
        waiter.join(30)
        expect_equal(woken, [True], "wait_for_change() across a terminal save")
        expect(self.store.wait_for_change("a", 5), "a wait on a task already finished")
        expect_equal(queued.status, _S.QUEUED, "the enqueued task")

    # ------------------------------------------------------------------ concurrency
    def test_concurrent_claims_take_each_task_once_within_fleet_limits(self) -> None:
        if not self.durable():
            return
        handles = [self.store, self.other_handle(), self.other_handle()]
        total, limit, gpu = 40, 3, frozenset({"gpu"})
        for n in range(total):
            self.enqueue(f"t{n:02d}", tags=gpu if n % 2 else frozenset(), priority=n % 3)
        now = self.clock.now()
        worst: list[int] = []
        lock = threading.Lock()

        def active_gpu(store: TaskStore) -> int:
            found = store.query(TaskQuery(tag="gpu"))
            return sum(1 for s in found if holds_fleet_slot(s, now))

        def drain(i: int) -> list[str]:
            store = handles[i % len(handles)]
            mine: list[str] = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                got = store.claim_tasks(
                    self.request(f"w{i}", now=now, limit=2, fleet_limits={"gpu": limit})
                )
                seen = active_gpu(store)
                with lock:
                    worst.append(seen)
                for claimed in got:
                    mine.append(claimed.task_id)
                    running = self.move(claimed, _start, _run, store=store).snapshot
                    self.move(running, _succeed, store=store)
                if not got and not store.query(TaskQuery(statuses=frozenset({_S.QUEUED}))):
                    return mine
            raise AssertionError(f"w{i} still found queued tasks after 60 s of claims")

        claimed = run_concurrently([partial(drain, i) for i in range(self.durable_claimers)])
        every = [t for mine in claimed for t in mine]
        expect_equal(len(every), len(set(every)), "tasks claimed by two claimers")
        expect_equal(sorted(every), [f"t{n:02d}" for n in range(total)], "tasks claimed")
        expect(max(worst) <= limit, f"gpu tasks holding a fleet slot at once: {max(worst)}")
        done = self.store.status_counts()
        expect_equal(done, {_S.SUCCEEDED: total}, "statuses after the drain")
