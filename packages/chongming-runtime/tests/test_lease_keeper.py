"""`Lease` and `LeaseKeeper` alone, on a fake clock: the lease a node stamps, the touch
timer's touches and renewals, its holders, and the seam for a lease taken elsewhere
(guide §8.10; R18; D26, D42, D65, D85)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

import pytest

from chongming_core import FakeClock, Progress, StateMachine, TaskStatus, TouchUpdate
from chongming_runtime.controller._lease_keeper import (
    Lease,
    LeaseKeeper,
    TouchedRun,
    default_touch_interval,
)

S = TaskStatus
TTL = 30.0


class FakeRun:
    """A run the touch timer reads (a `TouchedRun`)."""

    def __init__(self, task_id: str, status: TaskStatus) -> None:
        self.task_id = task_id
        self.status = status
        self.snapshot = StateMachine.create(task_id, "t").snapshot.evolve(
            progress=Progress(done=1, total=2)
        )


class Sink:
    """Records what the keeper writes (a `TouchSink`)."""

    def __init__(self) -> None:
        self.touches: list[TouchUpdate] = []
        self.flushes = 0
        self.notes: list[tuple[str, str]] = []

    def touch(self, update: TouchUpdate) -> None:
        self.touches.append(update)

    def renew_leases(self, task_ids: Iterable[str], owner: str, until: datetime) -> None:
        self.touches.extend(TouchUpdate(t, lease_owner=owner, lease_until=until) for t in task_ids)

    def request_flush(self) -> None:
        self.flushes += 1

    def note(self, operation: str, error: str, task_ids: tuple[str, ...] = ()) -> None:
        self.notes.append((operation, error))

    def take(self) -> dict[str, TouchUpdate]:
        taken = {t.task_id: t for t in self.touches}
        self.touches.clear()
        return taken


class Holder:
    """Keeps tasks under the lease besides the runs (a `LeaseHolder`)."""

    def __init__(self) -> None:
        self.renewals: list[datetime] = []

    def renew(self, until: datetime) -> None:
        self.renewals.append(until)


def _keeper(
    clock: FakeClock, runs: Sequence[TouchedRun], sink: Sink, interval: float = 1.0
) -> LeaseKeeper:
    return LeaseKeeper(
        Lease("node-1", clock, TTL), clock=clock, interval=interval, writer=sink, runs=lambda: runs
    )


def test_the_default_touch_interval_follows_a_short_lease() -> None:
    assert default_touch_interval(30.0) == 1.0  # R18
    assert default_touch_interval(1.5) == 0.5  # renewed three times per lease (D85)


def test_a_stamp_copies_a_snapshot_only_when_its_lease_is_not_the_current_one() -> None:
    clock = FakeClock()
    lease = Lease("node-1", clock, TTL)
    assert lease.until == clock.now() + timedelta(seconds=TTL)
    carried = StateMachine.create("t1", "t").snapshot.evolve(
        lease_owner="node-1", lease_until=lease.until
    )
    assert lease.stamp(carried) is carried  # carried from its submission (D42)
    clock.advance(11)
    due = lease.due  # a third of the lease has passed
    lease.renew()
    assert (due, lease.due) == (True, False)
    stamped = lease.stamp(carried)
    assert stamped.lease_until == clock.now() + timedelta(seconds=TTL)
    assert stamped.lease_owner == "node-1"
    machine = StateMachine(carried, clock=clock)
    machine.mark_stopped(actor="node-1")
    ended = lease.stamp(machine.snapshot)
    assert ended.lease_until is None  # a finished task holds no lease
    assert ended.lease_owner == "node-1"  # but says who held it


def test_start_renews_the_lease_and_ticks_touch_the_active_runs() -> None:
    clock = FakeClock()
    sink = Sink()
    running, paused, queued = (
        FakeRun("running", S.RUNNING),
        FakeRun("paused", S.PAUSED),
        FakeRun("queued", S.QUEUED),
    )
    keeper = _keeper(clock, [running, paused, queued, FakeRun("ended", S.SUCCEEDED)], sink)
    clock.advance(100)  # idle since its construction: the lease it holds is stale
    keeper.start()
    assert keeper.ticking
    assert keeper.lease.until == clock.now() + timedelta(seconds=TTL)
    clock.advance(1)
    touched = sink.take()
    assert set(touched) == {"running", "paused"}  # progress and heartbeats of active runs
    assert touched["running"].progress == Progress(done=1, total=2)
    assert "lease_until" not in touched["running"].fields()  # not due yet
    assert sink.flushes == 1


def test_every_third_of_the_lease_every_unfinished_run_and_holder_is_renewed() -> None:
    clock = FakeClock()
    sink = Sink()
    holder = Holder()
    keeper = _keeper(clock, [FakeRun("running", S.RUNNING), FakeRun("queued", S.QUEUED)], sink)
    keeper.add_holder(holder)
    keeper.start()
    clock.advance(9)
    assert holder.renewals == []
    sink.take()
    clock.advance(1)  # ten seconds: a third of the thirty-second lease
    touched = sink.take()
    until = clock.now() + timedelta(seconds=TTL)
    assert {t: u.fields().get("lease_until") for t, u in touched.items()} == {
        "running": until,
        "queued": until,
    }
    assert touched["queued"].fields()["lease_owner"] == "node-1"
    assert holder.renewals == [until]


def test_a_tick_that_renews_nothing_reads_only_the_runs_holding_a_slot() -> None:
    """A controller may hold thousands of queued runs: a tick that renews nothing asks
    only for the runs holding a slot; every third of the lease it asks for them all."""
    clock = FakeClock()
    sink = Sink()
    running, queued = FakeRun("running", S.RUNNING), FakeRun("queued", S.QUEUED)
    asked: list[str] = []

    def every_run() -> list[TouchedRun]:
        asked.append("all")
        return [running, queued]

    def executing() -> list[TouchedRun]:
        asked.append("executing")
        return [running]

    keeper = LeaseKeeper(
        Lease("node-1", clock, TTL),
        clock=clock,
        interval=1.0,
        writer=sink,
        runs=every_run,
        executing=executing,
    )
    keeper.start()
    for _ in range(10):
        clock.advance(1)
    assert asked == ["executing"] * 9 + ["all"]  # the tenth second renews the lease
    renewed = {t: u.fields().get("lease_until") for t, u in sink.take().items()}
    assert renewed == {t: clock.now() + timedelta(seconds=TTL) for t in ("running", "queued")}


def test_a_tick_that_raises_is_recorded_and_the_next_one_runs() -> None:
    clock = FakeClock()
    sink = Sink()
    asked: list[int] = []

    def runs() -> list[TouchedRun]:
        asked.append(1)
        if len(asked) == 1:
            raise RuntimeError("a store bug")
        return [FakeRun("running", S.RUNNING)]

    keeper = LeaseKeeper(Lease("n", clock, TTL), clock=clock, interval=1.0, writer=sink, runs=runs)
    keeper.start()
    clock.advance(1)
    clock.advance(1)
    assert len(asked) == 2
    assert sink.notes == [("the touch timer", "RuntimeError: a store bug")]  # D65
    assert [t.task_id for t in sink.touches] == ["running"]


def test_after_stop_nothing_ticks_and_start_arms_nothing() -> None:
    clock = FakeClock()
    sink = Sink()
    keeper = _keeper(clock, [FakeRun("running", S.RUNNING)], sink)
    keeper.start()
    keeper.stop()
    assert clock.pending_timers == 0
    clock.advance(5)
    assert sink.touches == []
    other = _keeper(clock, [], sink)
    other.stop()
    other.start()
    assert not other.ticking
    assert clock.pending_timers == 0


def test_whoever_learns_a_lease_was_taken_tells_every_callback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keeper = _keeper(FakeClock(), [], Sink())
    told: list[tuple[str, str | None]] = []

    def broken(task_id: str, holder: str | None) -> None:
        raise RuntimeError("a callback bug")

    keeper.on_taken(broken)
    keeper.on_taken(lambda task_id, holder: told.append((task_id, holder)))
    keeper.lease_taken("t1", "node-2")
    keeper.lease_taken("t2", None)
    assert told == [("t1", "node-2"), ("t2", None)]  # a failing callback holds none back
    assert "could not tell that the lease of 't1' was taken" in caplog.text
