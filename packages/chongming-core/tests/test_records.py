"""Immutable records (guide §1.2, §3.3, §5.2, §8.13): snapshots, transitions, progress, failures."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from chongming_core import (
    AttemptRecord,
    Failure,
    FailureKind,
    FakeClock,
    Progress,
    StateMachine,
    TaskSnapshot,
    TaskStatus,
    Transition,
)

T0 = datetime(2026, 10, 2, 8, 30, tzinfo=UTC)
EAST8 = timezone(timedelta(hours=8))


def _full_snapshot() -> TaskSnapshot:
    """A snapshot in which every field differs from its default."""
    failure = Failure.of(
        FailureKind.TIMEOUT_ATTEMPT,
        "per_attempt timeout of 60s",
        exception_type="TimeoutError",
        traceback="Traceback (most recent call last): ...",
    )
    return TaskSnapshot(
        task_id="job-1",
        name="抽取",
        status=TaskStatus.RETRY_WAIT,
        status_version=7,
        attempt=2,
        max_attempts=5,
        label="转换-1",
        description="reads rows",
        tags=frozenset({"io", "网络"}),
        priority=10,
        bucket=42,
        bucket_key="tenant-B",
        pipeline_id="nightly-etl",
        node_id="shard1",
        progress=Progress(done=120, total=500, unit="rows", message="分区 3"),
        last_heartbeat_at=T0 + timedelta(seconds=5),
        failure=failure,
        outcome={"rows": [1, 2, 3], "path": "s3://bucket/x.parquet", "ok": True, "n": None},
        created_at=T0,
        updated_at=T0 + timedelta(seconds=9),
        started_at=(T0 + timedelta(seconds=1)).astimezone(EAST8),
        finished_at=T0 + timedelta(seconds=8, microseconds=123456),
        retry_at=T0 + timedelta(seconds=30),
        lease_owner="node-a:123",
        lease_until=T0 + timedelta(seconds=40),
        executor="process",
        pid=4242,
        paused_in_place=True,
        attempts=(
            AttemptRecord(
                number=1,
                started_at=T0 + timedelta(seconds=1),
                ended_at=T0 + timedelta(seconds=2),
                status=TaskStatus.RETRY_WAIT,
                failure=failure,
                paused_seconds=0.25,
            ),
            AttemptRecord(number=2, started_at=T0, ended_at=None, status=TaskStatus.RUNNING),
        ),
        paused_seconds=1.5,
        durable=True,
        arguments={"args": ["a.csv", [1, 2.5]], "kwargs": {"表": "行", "limit": None}},
        run_at=T0 + timedelta(minutes=5),
    )


def test_every_field_of_the_full_snapshot_differs_from_its_default() -> None:
    snap = _full_snapshot()
    minimal = TaskSnapshot(task_id="x", name="y")
    for field in dataclasses.fields(TaskSnapshot):
        assert getattr(snap, field.name) != getattr(minimal, field.name), field.name


def test_snapshot_round_trips_through_a_dict_for_every_field() -> None:
    snap = _full_snapshot()
    data = snap.to_dict()
    assert set(data) == {f.name for f in dataclasses.fields(TaskSnapshot)}
    # it really is JSON: stores write exactly this
    restored = TaskSnapshot.from_dict(json.loads(json.dumps(data, ensure_ascii=False)))
    for field in dataclasses.fields(TaskSnapshot):
        assert getattr(restored, field.name) == getattr(snap, field.name), field.name
    assert restored == snap
    assert restored.failure is not None
    assert restored.failure.traceback == "Traceback (most recent call last): ..."
    assert restored.started_at is not None
    assert restored.started_at.utcoffset() == timedelta(hours=8)
    assert restored.to_dict() == data


def test_minimal_snapshot_round_trips() -> None:
    snap = TaskSnapshot(task_id="t1", name="n")
    assert TaskSnapshot.from_dict(snap.to_dict()) == snap
    assert snap.status is TaskStatus.PENDING
    assert snap.status_version == 0
    assert (snap.attempt, snap.max_attempts) == (0, 1)


def test_snapshot_refuses_naive_times() -> None:
    snap = TaskSnapshot(task_id="t1", name="n", created_at=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        snap.to_dict()


def test_snapshot_is_immutable() -> None:
    snap = _full_snapshot()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.status = TaskStatus.RUNNING  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.progress = None  # type: ignore[misc]
    changed = snap.evolve(status=TaskStatus.RUNNING, pid=1)
    assert (changed.status, changed.pid) == (TaskStatus.RUNNING, 1)
    assert (snap.status, snap.pid) == (TaskStatus.RETRY_WAIT, 4242)


def test_evolve_is_dataclasses_replace() -> None:
    snap = _full_snapshot()
    every_field = {f.name: getattr(snap, f.name) for f in dataclasses.fields(TaskSnapshot)}
    assert snap.evolve() == snap
    assert snap.evolve() is not snap
    assert snap.evolve(**every_field) == dataclasses.replace(snap, **every_field)
    for name in every_field:  # each field alone, set to a value no other field holds
        marker = object()
        changed = snap.evolve(**{name: marker})
        assert getattr(changed, name) is marker
        for other in every_field:
            if other != name:
                assert getattr(changed, other) is getattr(snap, other)
    with pytest.raises(TypeError, match="no_such_field"):
        snap.evolve(no_such_field=1)


def test_elapsed() -> None:
    never = TaskSnapshot(task_id="t1", name="n", created_at=T0)
    assert never.elapsed(T0 + timedelta(hours=1)) is None
    running = never.evolve(started_at=T0, status=TaskStatus.RUNNING)
    assert running.elapsed(T0 + timedelta(seconds=2.5)) == 2.5
    finished = running.evolve(finished_at=T0 + timedelta(seconds=4), status=TaskStatus.FAILED)
    assert finished.elapsed(T0 + timedelta(hours=1)) == 4.0
    # a clock that reads earlier than started_at never yields a negative duration
    assert running.elapsed(T0 - timedelta(seconds=1)) == 0.0


def test_elapsed_of_tasks_waiting_to_start_or_retry() -> None:
    after_retry = TaskSnapshot(task_id="t1", name="n", status=TaskStatus.QUEUED, started_at=T0)
    assert after_retry.elapsed(T0 + timedelta(hours=1)) is None  # no attempt under way
    paused_early = after_retry.evolve(status=TaskStatus.PAUSED, paused_in_place=False)
    assert paused_early.elapsed(T0 + timedelta(hours=1)) is None
    paused_in_place = after_retry.evolve(status=TaskStatus.PAUSED, paused_in_place=True)
    assert paused_in_place.elapsed(T0 + timedelta(seconds=3)) == 3.0
    last = AttemptRecord(1, T0, T0 + timedelta(seconds=2), TaskStatus.RETRY_WAIT)
    waiting = after_retry.evolve(status=TaskStatus.RETRY_WAIT, attempts=(last,))
    assert waiting.elapsed(T0 + timedelta(hours=1)) == 2.0  # the last attempt's duration


def _running_for(task_id: str, seconds: float, clock: FakeClock) -> StateMachine:
    """A machine whose first attempt has run `seconds` (still running)."""
    machine = StateMachine.create(task_id, "n", max_attempts=3, clock=clock)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    clock.advance(seconds)
    return machine


def test_elapsed_of_a_task_that_ended_while_waiting_is_its_last_attempt() -> None:
    """Stopped while waiting to retry, or after a retry() before it ran again: the time it
    then waited is not time it ran."""
    clock = FakeClock()
    waited = _running_for("t1", 2, clock)
    waited.mark_retry_wait(Failure.of(FailureKind.EXCEPTION, "boom"), retry_at=clock.now())
    clock.advance(100)
    waited.mark_stopped(reason="not worth it")
    assert waited.snapshot.elapsed(clock.now()) == 2.0
    retried = _running_for("t2", 5, clock)
    retried.mark_failed(Failure.of(FailureKind.EXCEPTION, "boom"))
    clock.advance(1000)
    retried.retry(actor="ops")
    retried.mark_stopped(reason="changed my mind")
    assert retried.snapshot.elapsed(clock.now()) == 5.0
    ran = _running_for("t3", 3, clock)
    ran.mark_succeeded(outcome=1)
    assert ran.snapshot.elapsed(clock.now() + timedelta(hours=1)) == 3.0


def test_display_name_and_is_terminal() -> None:
    snap = TaskSnapshot(task_id="t1", name="transform")
    assert snap.display_name == "transform"
    assert snap.evolve(label="转换-1").display_name == "转换-1"
    assert not snap.is_terminal
    assert snap.evolve(status=TaskStatus.LOST).is_terminal


def test_transition_round_trips() -> None:
    record = Transition(
        task_id="t1",
        from_status=TaskStatus.RUNNING,
        to_status=TaskStatus.STOPPING,
        trigger="control:stop",
        actor="ops-console",
        reason="发布窗口",
        status_version=4,
        at=T0,
    )
    data = record.to_dict()
    assert data["from_status"] == "running"
    assert data["to_status"] == "stopping"
    assert Transition.from_dict(json.loads(json.dumps(data))) == record
    no_reason = dataclasses.replace(record, reason=None)
    assert Transition.from_dict(no_reason.to_dict()) == no_reason
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.actor = "someone else"  # type: ignore[misc]


def test_attempt_record_round_trips() -> None:
    for record in _full_snapshot().attempts:
        assert AttemptRecord.from_dict(record.to_dict()) == record


# ---------------------------------------------------------------- Progress
@pytest.mark.parametrize(
    ("progress", "text"),
    [
        (Progress(done=120, total=500, unit="rows"), "120/500 rows"),
        (Progress(done=7, unit="batch"), "7 batch"),
        (Progress(done=3), "3"),
        (Progress(done=2.5, total=10.0), "2.5/10"),
        (Progress(done=1.0, total=3, unit="分区"), "1/3 分区"),
    ],
)
def test_progress_render(progress: Progress, text: str) -> None:
    assert progress.render() == text


@pytest.mark.parametrize(
    ("progress", "fraction"),
    [
        (Progress(done=120, total=500), 0.24),
        (Progress(done=0, total=5), 0.0),
        (Progress(done=9, total=3), 1.0),
        (Progress(done=-1, total=3), 0.0),
        (Progress(done=5), None),
        (Progress(done=5, total=0), None),
    ],
)
def test_progress_fraction(progress: Progress, fraction: float | None) -> None:
    assert progress.fraction == fraction


def test_progress_round_trips() -> None:
    progress = Progress(done=3, total=4, unit="files", message="第 3 个")
    assert Progress.from_dict(json.loads(json.dumps(progress.to_dict()))) == progress


# ---------------------------------------------------------------- Failure
def test_failure_kinds_of_the_guide() -> None:
    assert {k.value for k in FailureKind} == {
        "exception",
        "nonzero_exit",
        "timeout_start",
        "timeout_attempt",
        "timeout_idle",
        "cancelled",
        "lost",
        "dependency_failed",
        "condition_false",
        "result_invalid",
    }


@pytest.mark.parametrize(
    ("kind", "retryable"),
    [
        (FailureKind.CANCELLED, False),
        (FailureKind.TIMEOUT_START, True),
        (FailureKind.TIMEOUT_ATTEMPT, True),
        (FailureKind.TIMEOUT_IDLE, True),
        (FailureKind.LOST, True),
        (FailureKind.EXCEPTION, True),
        (FailureKind.NONZERO_EXIT, True),
        (FailureKind.RESULT_INVALID, False),
        (FailureKind.DEPENDENCY_FAILED, False),
        (FailureKind.CONDITION_FALSE, False),
    ],
)
def test_failure_of_defaults_retryable_per_kind(kind: FailureKind, retryable: bool) -> None:
    failure = Failure.of(kind, "what happened")
    assert failure.retryable is retryable
    assert kind.default_retryable is retryable
    assert (failure.kind, failure.message) == (kind, "what happened")
    assert Failure.of(kind, "x", retryable=not retryable).retryable is (not retryable)


def test_timeout_kinds() -> None:
    assert {k for k in FailureKind if k.is_timeout} == {
        FailureKind.TIMEOUT_START,
        FailureKind.TIMEOUT_ATTEMPT,
        FailureKind.TIMEOUT_IDLE,
    }


class _AppError(RuntimeError):
    pass


def test_failure_from_exception() -> None:
    try:
        raise _AppError("连接被重置")
    except _AppError as exc:
        failure = Failure.from_exception(exc)
    assert failure.kind is FailureKind.EXCEPTION
    assert failure.retryable is True
    assert failure.message == "_AppError: 连接被重置"
    assert failure.exception_type == f"{__name__}._AppError"
    assert failure.traceback is not None
    assert "连接被重置" in failure.traceback
    assert "test_failure_from_exception" in failure.traceback


def test_failure_from_a_builtin_exception_without_message() -> None:
    failure = Failure.from_exception(KeyError(), retryable=False)
    assert (failure.message, failure.exception_type, failure.retryable) == (
        "KeyError",
        "KeyError",
        False,
    )
    timeout = Failure.from_exception(TimeoutError("slow"), kind=FailureKind.TIMEOUT_ATTEMPT)
    assert (timeout.kind, timeout.message) == (FailureKind.TIMEOUT_ATTEMPT, "TimeoutError: slow")


def test_failure_round_trips() -> None:
    failure = Failure.of(
        FailureKind.NONZERO_EXIT, "exit code 3", exception_type="X", traceback="tb"
    )
    restored = Failure.from_dict(json.loads(json.dumps(failure.to_dict())))
    assert restored == failure
    assert restored.traceback == "tb"


def test_new_transition_is_the_frozen_dataclass_built_directly() -> None:
    import pickle

    from chongming_core._records import new_transition

    at = datetime(2026, 1, 1, tzinfo=UTC)
    args = ("t1", TaskStatus.QUEUED, TaskStatus.STARTING, "launch", "me", None, 2, at)
    made = new_transition(*args)
    plain = Transition(*args)
    assert type(made) is Transition
    assert made == plain
    assert hash(made) == hash(plain)
    assert pickle.loads(pickle.dumps(made)) == plain
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.actor = "someone else"  # type: ignore[misc]


def test_elapsed_of_a_running_task_stops_where_its_lease_ended() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    running = TaskSnapshot(
        task_id="t", name="n", status=TaskStatus.RUNNING, attempt=1, started_at=start,
        lease_owner="node-a", lease_until=start + timedelta(seconds=30),
    )  # fmt: skip
    hour_later = start + timedelta(hours=1)
    # its holder died: the store still says running, but nobody vouched for it after 30 s
    assert running.elapsed(hour_later) == 30.0
    assert running.elapsed(start + timedelta(seconds=10)) == 10.0  # lease still running
    renewed = running.evolve(lease_until=hour_later + timedelta(seconds=30))
    assert renewed.elapsed(hour_later) == 3600.0
    unleased = running.evolve(lease_owner=None, lease_until=None)
    assert unleased.elapsed(hour_later) == 3600.0


def _pause_in_place(machine: StateMachine) -> None:
    machine.mark_pausing()
    machine.mark_paused()
    assert machine.snapshot.paused_in_place


def test_elapsed_is_running_time_a_pause_in_place_is_counted_apart() -> None:
    """ELAPSED is running time (D88): it stands still while the body is suspended at a
    checkpoint, and every pause of the attempt is counted in `paused_for` instead."""
    clock = FakeClock()
    machine = _running_for("t", 10, clock)
    _pause_in_place(machine)
    paused_at = clock.now()
    clock.advance(30)
    snap = machine.snapshot
    assert snap.paused_since == paused_at
    assert snap.elapsed(clock.now()) == 10.0  # not 40
    assert snap.paused_for(clock.now()) == 30.0
    machine.resume()
    assert machine.snapshot.paused_seconds == 30.0
    assert machine.snapshot.paused_since is None
    clock.advance(5)
    _pause_in_place(machine)  # a second pause of the same attempt
    clock.advance(20)
    assert machine.snapshot.elapsed(clock.now()) == 15.0
    assert machine.snapshot.paused_for(clock.now()) == 50.0
    machine.resume()
    clock.advance(1)
    machine.mark_succeeded(outcome=None)
    done = machine.snapshot
    assert done.attempts[-1].paused_seconds == 50.0
    assert done.elapsed(clock.now() + timedelta(hours=1)) == 16.0
    assert done.paused_for(clock.now() + timedelta(hours=1)) == 50.0
    restored = TaskSnapshot.from_dict(json.loads(json.dumps(done.to_dict())))
    assert restored.elapsed(clock.now()) == 16.0
    assert restored.attempts[-1].paused_seconds == 50.0


def test_a_pause_is_counted_for_its_attempt_only() -> None:
    clock = FakeClock()
    machine = _running_for("t", 2, clock)
    _pause_in_place(machine)
    clock.advance(30)
    machine.resume()
    machine.mark_retry_wait(Failure.of(FailureKind.EXCEPTION, "boom"), retry_at=clock.now())
    waiting = machine.snapshot
    assert (waiting.elapsed(clock.now()), waiting.paused_for(clock.now())) == (2.0, 30.0)
    machine.mark_starting()
    machine.mark_running()
    clock.advance(4)
    second = machine.snapshot
    assert second.paused_seconds == 0.0
    assert (second.elapsed(clock.now()), second.paused_for(clock.now())) == (4.0, 0.0)


def test_a_stop_of_a_task_paused_in_place_counts_the_pause_it_ends() -> None:
    """R3: paused -> running -> stopping -> stopped; the pause ends at the first step."""
    clock = FakeClock()
    machine = _running_for("t", 3, clock)
    _pause_in_place(machine)
    clock.advance(60)
    machine.mark_running(trigger="runtime:stop", reason="stop requested")
    machine.mark_stopping(reason="ops")
    clock.advance(1)
    machine.mark_stopped(reason="ops")
    stopped = machine.snapshot
    assert stopped.attempts[-1].paused_seconds == 60.0
    assert stopped.elapsed(clock.now()) == 4.0


def test_a_task_paused_in_place_whose_holder_died_ends_its_attempt_where_it_stood() -> None:
    """Forced lost from paused (reconcile): its attempt ended too, and the record keeps it;
    without one, elapsed counted until the moment it was found (hours later)."""
    clock = FakeClock()
    machine = _running_for("t", 5, clock)
    _pause_in_place(machine)
    clock.advance(7200)
    failure = Failure.of(FailureKind.LOST, "holder gone")
    machine.force_transition(TaskStatus.LOST, actor="reconcile", reason="gone", failure=failure)
    lost = machine.snapshot
    assert [a.status for a in lost.attempts] == [TaskStatus.LOST]
    assert lost.attempts[-1].paused_seconds == 7200.0
    assert lost.elapsed(clock.now()) == 5.0


def test_paused_time_of_a_task_whose_holder_stopped_renewing_stops_at_its_lease() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    paused = TaskSnapshot(
        task_id="t", name="n", status=TaskStatus.PAUSED, paused_in_place=True, attempt=1,
        started_at=start, updated_at=start + timedelta(seconds=10), paused_seconds=2.0,
        lease_owner="node-a", lease_until=start + timedelta(seconds=40),
    )  # fmt: skip
    hour_later = start + timedelta(hours=1)
    assert paused.elapsed(hour_later) == 8.0  # 10 s from start, 2 s of an earlier pause
    assert paused.paused_for(hour_later) == 32.0  # 2 + 30 s vouched for by the lease
    assert paused.paused_for(start + timedelta(seconds=20)) == 12.0


def test_records_written_before_paused_seconds_existed_read_no_pause() -> None:
    data = _full_snapshot().to_dict()
    del data["paused_seconds"]
    for attempt in data["attempts"]:
        del attempt["paused_seconds"]
    old = TaskSnapshot.from_dict(data)
    assert old.paused_seconds == 0.0
    assert [a.paused_seconds for a in old.attempts] == [0.0, 0.0]
