"""`StateMachine`: the only writer of status (guide §1.3, §1.4, §4, §9.2, §9.3, R1-R8)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from chongming_core import (
    TRANSITIONS,
    AttemptRecord,
    AttemptsExhausted,
    ConfigurationError,
    Failure,
    FailureKind,
    FakeClock,
    InvalidTransition,
    StateMachine,
    TaskError,
    TaskStatus,
    Transition,
)

S = TaskStatus
BOOM = Failure.of(FailureKind.EXCEPTION, "ValueError: boom")


def new_machine(clock: FakeClock | None = None, *, max_attempts: int = 3) -> StateMachine:
    return StateMachine.create("t1", "抽取", max_attempts=max_attempts, clock=clock or FakeClock())


# ---------------------------------------------------------------- reaching every situation
EVENTS: dict[str, Callable[[StateMachine], Transition]] = {
    "mark_blocked": lambda m: m.mark_blocked(),
    "mark_queued": lambda m: m.mark_queued(),
    "mark_starting": lambda m: m.mark_starting(executor="thread"),
    "mark_running": lambda m: m.mark_running(),
    "mark_pausing": lambda m: m.mark_pausing(),
    "mark_paused": lambda m: m.mark_paused(),
    "abort_pause": lambda m: m.abort_pause(),
    "resume": lambda m: m.resume(),
    "mark_stopping": lambda m: m.mark_stopping(),
    "mark_stopped": lambda m: m.mark_stopped(),
    "mark_succeeded": lambda m: m.mark_succeeded(outcome={"rows": 1}),
    "mark_failed": lambda m: m.mark_failed(BOOM),
    "mark_retry_wait": lambda m: m.mark_retry_wait(BOOM),
    "mark_cancelled": lambda m: m.mark_cancelled(),
    "mark_skipped": lambda m: m.mark_skipped(),
    "mark_lost": lambda m: m.mark_lost(),
    "retry": lambda m: m.retry(),
    "reset": lambda m: m.reset(confirm=True),
}

_RUN = ("mark_queued", "mark_starting", "mark_running")

#: How to reach each situation; the two kinds of pause are different situations (§4.3).
PATHS: dict[str, tuple[str, ...]] = {
    "pending": (),
    "blocked": ("mark_blocked",),
    "queued": ("mark_queued",),
    "starting": ("mark_queued", "mark_starting"),
    "running": _RUN,
    "pausing": (*_RUN, "mark_pausing"),
    "paused_in_place": (*_RUN, "mark_pausing", "mark_paused"),
    "paused_before_start": ("mark_queued", "mark_paused"),
    "paused_from_retry_wait": (*_RUN, "mark_retry_wait", "mark_paused"),
    "retry_wait": (*_RUN, "mark_retry_wait"),
    "stopping": (*_RUN, "mark_stopping"),
    "succeeded": (*_RUN, "mark_succeeded"),
    "failed": (*_RUN, "mark_failed"),
    "stopped": ("mark_queued", "mark_stopped"),
    "cancelled": ("mark_cancelled",),
    "skipped": ("mark_skipped",),
    "lost": (*_RUN, "mark_lost"),
}

STATUS_OF = {
    "paused_in_place": S.PAUSED,
    "paused_before_start": S.PAUSED,
    "paused_from_retry_wait": S.PAUSED,
}

_PAUSED_NOT_IN_PLACE = ("paused_before_start", "paused_from_retry_wait")
#: where no executor holds the task (an in-place pause still holds it: R3)
_NOT_HELD = (
    "pending",
    "blocked",
    "queued",
    *_PAUSED_NOT_IN_PLACE,
    "retry_wait",
    "succeeded",
    "failed",
    "stopped",
    "cancelled",
    "skipped",
    "lost",
)


Move = tuple[TaskStatus, str]


def _moves(sources: tuple[str, ...], target: TaskStatus, trigger: str) -> dict[str, Move]:
    return dict.fromkeys(sources, (target, trigger))


#: event -> {situation: (resulting status, trigger)}; every other situation is refused.
LEGAL: dict[str, dict[str, Move]] = {
    "mark_blocked": _moves(("pending",), S.BLOCKED, "scheduler:blocked"),
    "mark_queued": {
        **_moves(("pending", "blocked", "retry_wait"), S.QUEUED, "scheduler:queued"),
        **_moves(_PAUSED_NOT_IN_PLACE, S.QUEUED, "control:resume"),
    },
    "mark_starting": _moves(("queued", "retry_wait"), S.STARTING, "scheduler:dispatched"),
    "mark_running": {
        **_moves(("starting", "pausing"), S.RUNNING, "executor:launched"),
        **_moves(("paused_in_place",), S.RUNNING, "control:resume"),
    },
    "mark_pausing": _moves(("starting", "running"), S.PAUSING, "control:pause"),
    "mark_paused": {
        **_moves(("pausing",), S.PAUSED, "runtime:paused"),
        **_moves(("queued", "retry_wait"), S.PAUSED, "control:pause"),
    },
    "abort_pause": _moves(("pausing",), S.RUNNING, "runtime:pause_aborted"),
    "resume": {
        **_moves(("paused_in_place", "pausing"), S.RUNNING, "control:resume"),
        **_moves(_PAUSED_NOT_IN_PLACE, S.QUEUED, "control:resume"),
    },
    "mark_stopping": _moves(("starting", "running", "pausing"), S.STOPPING, "control:stop"),
    "mark_stopped": {
        **_moves(("stopping",), S.STOPPED, "runtime:stopped"),
        **_moves(
            ("pending", "blocked", "queued", "retry_wait", *_PAUSED_NOT_IN_PLACE),
            S.STOPPED,
            "control:stop",
        ),
    },
    "mark_succeeded": _moves(("running", "stopping"), S.SUCCEEDED, "executor:returned"),
    "mark_failed": _moves(
        ("starting", "running", "pausing", "retry_wait", "stopping"), S.FAILED, "executor:failed"
    ),
    "mark_retry_wait": _moves(("starting", "running"), S.RETRY_WAIT, "runtime:retry_scheduled"),
    "mark_cancelled": _moves(
        (
            "pending",
            "blocked",
            "queued",
            "starting",
            "running",
            "pausing",
            "retry_wait",
            *_PAUSED_NOT_IN_PLACE,
        ),
        S.CANCELLED,
        "orchestrator:cancelled",
    ),
    "mark_skipped": _moves(("pending", "blocked", "queued"), S.SKIPPED, "orchestrator:skipped"),
    "mark_lost": _moves(("starting", "running", "pausing", "stopping"), S.LOST, "runtime:lost"),
    "retry": _moves(("failed", "stopped", "cancelled", "lost"), S.QUEUED, "control:retry"),
    "reset": _moves(_NOT_HELD, S.PENDING, "control:reset"),
}


def reach(situation: str, clock: FakeClock | None = None) -> StateMachine:
    machine = new_machine(clock)
    for event in PATHS[situation]:
        EVENTS[event](machine)
    assert machine.status is (STATUS_OF.get(situation) or S(situation))
    return machine


def test_paths_reach_every_status() -> None:
    reached = {reach(situation).status for situation in PATHS}
    assert reached == set(TaskStatus)


@pytest.mark.parametrize("event", list(EVENTS))
@pytest.mark.parametrize("situation", list(PATHS))
def test_every_event_from_every_situation(event: str, situation: str) -> None:
    clock = FakeClock()
    machine = reach(situation, clock)
    before = machine.snapshot
    history = machine.transitions
    clock.advance(1.5)
    expected = LEGAL[event].get(situation)
    if expected is None:
        with pytest.raises(InvalidTransition) as info:
            EVENTS[event](machine)
        assert info.value.current is before.status
        assert info.value.task_id == "t1"
        assert machine.snapshot is before
        assert machine.transitions == history
        return
    target, trigger = expected
    if event not in {"retry", "reset"}:
        assert target in TRANSITIONS[before.status], "an event may only follow the §9.2 table"
    record = EVENTS[event](machine)
    assert (record.from_status, record.to_status, record.trigger) == (
        before.status,
        target,
        trigger,
    )
    assert record.status_version == before.status_version + 1
    assert record.at == clock.now()
    assert record.actor == "system"
    assert machine.status is target
    assert machine.snapshot.status_version == record.status_version
    assert machine.snapshot.updated_at == clock.now()
    assert machine.transitions == (*history, record)


# ---------------------------------------------------------------- §1.3
def test_the_guide_example_of_section_1_3() -> None:
    machine = StateMachine.create("t1", "抽取", max_attempts=3, clock=FakeClock())
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    machine.mark_succeeded(outcome={"rows": 42})
    assert machine.snapshot.outcome == {"rows": 42}

    with pytest.raises(InvalidTransition) as info:
        machine.mark_running()
    message = str(info.value)
    assert "succeeded -> running" in message
    assert "executor:launched" in message
    assert "none (terminal)" in message
    assert "'t1'" in message
    error = info.value
    assert isinstance(error, TaskError)
    assert error.task_id == "t1"
    assert error.current is S.SUCCEEDED
    assert error.target is S.RUNNING
    assert error.action == "executor:launched"
    assert error.allowed == frozenset()
    assert [(t.from_status, t.to_status) for t in machine.transitions] == [
        (S.PENDING, S.QUEUED),
        (S.QUEUED, S.STARTING),
        (S.STARTING, S.RUNNING),
        (S.RUNNING, S.SUCCEEDED),
    ]


def test_invalid_transition_lists_what_is_allowed_now() -> None:
    machine = reach("queued")
    with pytest.raises(InvalidTransition) as info:
        machine.mark_succeeded()
    error = info.value
    assert error.allowed == {S.STARTING, S.PAUSED, S.SKIPPED, S.STOPPED, S.CANCELLED}
    assert error.current is S.QUEUED
    assert error.target is S.SUCCEEDED
    assert error.action == "executor:returned"
    assert "queued -> succeeded" in str(error)
    assert "allowed now: cancelled, paused, skipped, starting, stopped" in str(error)


# ---------------------------------------------------------------- the record of each move
def test_every_transition_carries_who_why_which_version_and_when() -> None:
    clock = FakeClock()
    start = clock.now()
    machine = new_machine(clock)
    assert machine.snapshot.created_at == start
    assert machine.version == 0
    assert machine.transitions == ()

    clock.advance(1)
    machine.mark_queued(actor="scheduler", reason="slot free")
    clock.advance(2)
    machine.mark_starting(executor="thread", actor="node-a")
    clock.advance(3)
    machine.mark_running(pid=4242)
    clock.advance(4)
    machine.mark_stopping(actor="ops", reason="发布窗口")
    clock.advance(5)
    machine.mark_stopped(actor="ops", reason="发布窗口")

    transitions: tuple[Transition, ...] = machine.transitions
    got = [
        (r.task_id, r.from_status, r.to_status, r.actor, r.reason, r.status_version, r.at)
        for r in transitions
    ]
    at = [start + timedelta(seconds=s) for s in (1, 3, 6, 10, 15)]
    assert got == [
        ("t1", S.PENDING, S.QUEUED, "scheduler", "slot free", 1, at[0]),
        ("t1", S.QUEUED, S.STARTING, "node-a", None, 2, at[1]),
        ("t1", S.STARTING, S.RUNNING, "system", None, 3, at[2]),
        ("t1", S.RUNNING, S.STOPPING, "ops", "发布窗口", 4, at[3]),
        ("t1", S.STOPPING, S.STOPPED, "ops", "发布窗口", 5, at[4]),
    ]
    snap = machine.snapshot
    assert snap.created_at == start
    assert snap.started_at == at[1]
    assert snap.finished_at == at[4]
    assert snap.updated_at == at[4]
    assert snap.status_version == 5
    assert snap.executor == "thread"
    assert snap.pid == 4242
    assert snap.elapsed(at[4] + timedelta(hours=1)) == 12.0


def test_failed_and_retry_wait_take_the_failure_message_as_default_reason() -> None:
    machine = reach("running")
    record = machine.mark_retry_wait(BOOM)
    assert record.reason == "ValueError: boom"
    assert machine.snapshot.failure == BOOM
    machine.mark_starting()
    machine.mark_running()
    record = machine.mark_failed(BOOM, reason="giving up")
    assert record.reason == "giving up"


# ---------------------------------------------------------------- guards of §9.3
def test_pause_before_start_resumes_to_queued_and_cannot_be_marked_running() -> None:
    machine = reach("queued")
    machine.mark_paused()
    assert machine.status is S.PAUSED
    assert machine.snapshot.paused_in_place is False
    assert machine.snapshot.started_at is None
    assert not machine.can(S.RUNNING)
    with pytest.raises(InvalidTransition) as info:
        machine.mark_running()
    assert info.value.current is S.PAUSED
    assert info.value.target is S.RUNNING
    assert "started_at" in str(info.value)
    assert S.RUNNING not in info.value.allowed
    assert S.QUEUED in info.value.allowed

    record = machine.resume()
    assert (record.from_status, record.to_status, record.trigger) == (
        S.PAUSED,
        S.QUEUED,
        "control:resume",
    )


def test_pause_in_retry_wait_is_a_pause_before_start_even_with_a_started_at() -> None:
    machine = reach("paused_from_retry_wait")
    assert machine.snapshot.started_at is not None
    assert machine.snapshot.paused_in_place is False
    with pytest.raises(InvalidTransition) as info:
        machine.mark_running()
    assert "resume it to queued" in str(info.value)
    assert machine.resume().to_status is S.QUEUED


def test_in_place_pause_resumes_to_running() -> None:
    machine = reach("running")
    assert machine.can_pause()
    assert machine.mark_pausing().trigger == "control:pause"
    assert machine.mark_paused().trigger == "runtime:paused"
    assert machine.snapshot.paused_in_place is True
    assert machine.can_resume()
    record = machine.resume(actor="ops")
    assert (record.from_status, record.to_status, record.trigger, record.actor) == (
        S.PAUSED,
        S.RUNNING,
        "control:resume",
        "ops",
    )
    assert machine.snapshot.paused_in_place is False


def test_in_place_paused_task_must_go_back_to_running_before_it_stops() -> None:
    """R3: the body is still on the stack; it must unwind through running -> stopping."""
    machine = reach("paused_in_place")
    assert machine.can_stop()
    assert not machine.can(S.STOPPED)
    assert not machine.can(S.CANCELLED)
    assert not machine.can(S.QUEUED)
    for event in (machine.mark_stopped, machine.mark_cancelled, machine.mark_queued):
        with pytest.raises(InvalidTransition) as info:
            event()
        assert info.value.allowed == {S.RUNNING}
        assert "running" in str(info.value)
    assert machine.snapshot.status is S.PAUSED

    record = machine.mark_running(trigger="control:stop", actor="ops", reason="发布窗口")
    assert (record.to_status, record.trigger) == (S.RUNNING, "control:stop")
    machine.mark_stopping(actor="ops", reason="发布窗口")
    machine.mark_stopped(actor="ops", reason="发布窗口")
    assert [t.to_status for t in machine.transitions][-3:] == [S.RUNNING, S.STOPPING, S.STOPPED]
    assert [a.status for a in machine.snapshot.attempts] == [S.STOPPED]


def test_paused_before_start_stops_at_once() -> None:
    machine = reach("paused_before_start")
    record = machine.mark_stopped(reason="不要了")
    assert (record.from_status, record.to_status, record.trigger) == (
        S.PAUSED,
        S.STOPPED,
        "control:stop",
    )
    assert machine.snapshot.attempts == ()


def test_abort_pause_only_from_pausing_and_is_recorded() -> None:
    clock = FakeClock()
    machine = reach("pausing", clock)
    clock.advance(2)
    record = machine.abort_pause(reason="no checkpoint within 2s")
    assert (record.from_status, record.to_status, record.trigger, record.reason) == (
        S.PAUSING,
        S.RUNNING,
        "runtime:pause_aborted",
        "no checkpoint within 2s",
    )
    assert record.at == clock.now()
    assert machine.transitions[-1] is record

    for situation in ("running", "paused_in_place", "paused_before_start", "queued"):
        other = reach(situation)
        before = other.snapshot
        with pytest.raises(InvalidTransition) as info:
            other.abort_pause()
        assert info.value.action == "runtime:pause_aborted"
        assert info.value.target is S.RUNNING
        assert "only valid while pausing" in str(info.value)
        assert other.snapshot is before


def test_mark_starting_raises_attempts_exhausted_when_the_budget_is_spent() -> None:
    machine = new_machine(max_attempts=1)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    machine.mark_failed(BOOM)
    machine.force_transition(S.QUEUED, actor="ops", reason="requeue by hand")
    assert machine.snapshot.attempt == 1
    assert not machine.can(S.STARTING)
    before = machine.snapshot
    history = machine.transitions
    with pytest.raises(AttemptsExhausted) as info:
        machine.mark_starting()
    error = info.value
    assert isinstance(error, TaskError)
    assert not isinstance(error, InvalidTransition)
    assert (error.task_id, error.attempt, error.max_attempts) == ("t1", 1, 1)
    assert "1 of 1 attempts" in str(error)
    assert machine.snapshot is before
    assert machine.transitions == history


def test_attempts_count_up_to_max_attempts() -> None:
    machine = new_machine(max_attempts=2)
    machine.mark_queued()
    machine.mark_starting()
    assert machine.snapshot.attempt == 1
    machine.mark_running()
    machine.mark_retry_wait(BOOM)
    machine.mark_starting()
    assert machine.snapshot.attempt == 2
    machine.mark_running()
    # no attempt is left, so there is nothing to wait for: the attempt must fail
    assert not machine.can(S.RETRY_WAIT)
    with pytest.raises(InvalidTransition) as info:
        machine.mark_retry_wait(BOOM)
    assert "2/2" in str(info.value)
    machine.mark_failed(BOOM)
    assert machine.status is S.FAILED


def test_force_transition_needs_an_actor_and_a_reason() -> None:
    machine = reach("succeeded")
    before = machine.snapshot
    for actor, reason in (("", "why"), ("ops", ""), ("  ", "why"), ("ops", " \t")):
        with pytest.raises(InvalidTransition) as info:
            machine.force_transition(S.RUNNING, actor=actor, reason=reason)
        assert info.value.action == "control:force"
        assert info.value.target is S.RUNNING
        assert "non-empty actor and reason" in str(info.value)
        assert machine.snapshot is before


@pytest.mark.parametrize("target", list(TaskStatus))
def test_force_transition_can_jump_anywhere(target: TaskStatus) -> None:
    clock = FakeClock()
    machine = reach("lost", clock)
    clock.advance(7)
    record = machine.force_transition(target, actor="ops:alice", reason="checked side effects")
    assert (record.from_status, record.to_status, record.trigger) == (
        S.LOST,
        target,
        "control:force",
    )
    assert (record.actor, record.reason, record.at) == (
        "ops:alice",
        "checked side effects",
        clock.now(),
    )
    assert machine.status is target
    assert (machine.snapshot.finished_at is None) is (not target.is_terminal)


# ---------------------------------------------------------------- revival (§1.4)
@pytest.mark.parametrize("situation", ["failed", "stopped", "cancelled", "lost"])
def test_retry_revives_and_keeps_the_attempt_history(situation: str) -> None:
    machine = reach(situation)
    attempts = machine.snapshot.attempts
    assert machine.can_retry()
    record = machine.retry(actor="ops", reason="upstream fixed")
    assert (record.to_status, record.trigger, record.actor) == (S.QUEUED, "control:retry", "ops")
    assert machine.snapshot.attempts == attempts
    assert machine.snapshot.finished_at is None
    machine.mark_starting()
    assert machine.snapshot.attempt == len(attempts) + 1


def test_retry_makes_room_for_one_more_attempt() -> None:
    machine = new_machine(max_attempts=1)
    for _ in range(3):
        if machine.status is S.PENDING:
            machine.mark_queued()
        else:
            machine.retry()
        machine.mark_starting()
        machine.mark_running()
        machine.mark_failed(BOOM)
    snap = machine.snapshot
    assert snap.attempt == 3
    assert snap.max_attempts == 3
    assert [a.number for a in snap.attempts] == [1, 2, 3]
    assert {a.status for a in snap.attempts} == {S.FAILED}


def test_retry_keeps_an_unspent_budget() -> None:
    machine = new_machine(max_attempts=5)
    for event in (*_RUN, "mark_failed", "retry"):
        EVENTS[event](machine)
    assert machine.snapshot.max_attempts == 5


@pytest.mark.parametrize(
    "situation", ["succeeded", "skipped", "running", "queued", "paused_in_place"]
)
def test_retry_is_refused_elsewhere(situation: str) -> None:
    machine = reach(situation)
    assert not machine.can_retry()
    before = machine.snapshot
    with pytest.raises(InvalidTransition) as info:
        machine.retry()
    assert info.value.action == "control:retry"
    assert "failed, stopped, cancelled or lost" in str(info.value)
    assert machine.snapshot is before


def test_reset_needs_confirmation() -> None:
    machine = reach("failed")
    before = machine.snapshot
    with pytest.raises(ConfigurationError) as info:
        machine.reset()
    assert "confirm=True" in str(info.value)
    assert "retry()" in str(info.value)
    with pytest.raises(ConfigurationError):
        machine.reset(confirm="yes")  # type: ignore[arg-type]
    assert machine.snapshot is before


def test_reset_goes_to_pending_and_discards_attempts() -> None:
    machine = new_machine(max_attempts=2)
    for event in (*_RUN, "mark_retry_wait", "mark_starting", "mark_running", "mark_failed"):
        EVENTS[event](machine)
    assert len(machine.snapshot.attempts) == 2
    count = len(machine.transitions)
    record = machine.reset(confirm=True, actor="ops", reason="start over")
    assert (record.from_status, record.to_status, record.trigger) == (
        S.FAILED,
        S.PENDING,
        "control:reset",
    )
    snap = machine.snapshot
    assert (snap.status, snap.attempt, snap.attempts) == (S.PENDING, 0, ())
    assert (snap.failure, snap.outcome, snap.started_at, snap.finished_at) == (
        None,
        None,
        None,
        None,
    )
    # the trajectory itself stays append-only
    assert len(machine.transitions) == count + 1


@pytest.mark.parametrize(
    "situation", ["starting", "running", "pausing", "paused_in_place", "stopping"]
)
def test_reset_is_refused_while_an_executor_holds_the_task(situation: str) -> None:
    machine = reach(situation)
    before = machine.snapshot
    with pytest.raises(InvalidTransition) as info:
        machine.reset(confirm=True)
    assert info.value.action == "control:reset"
    assert "executor still holds" in str(info.value)
    assert machine.snapshot is before


# ---------------------------------------------------------------- pre-checks
CAN_STOP = {"pending", "blocked", "queued", "starting", "running", "pausing", "retry_wait"} | {
    "paused_in_place",
    *_PAUSED_NOT_IN_PLACE,
}
CAN_PAUSE = {"queued", "starting", "running", "retry_wait"}
CAN_RESUME = {"pausing", "paused_in_place", *_PAUSED_NOT_IN_PLACE}
CAN_RETRY = {"failed", "stopped", "cancelled", "lost"}


@pytest.mark.parametrize("situation", list(PATHS))
def test_can_predicates(situation: str) -> None:
    machine = reach(situation)
    assert machine.can_stop() is (situation in CAN_STOP)
    assert machine.can_pause() is (situation in CAN_PAUSE)
    assert machine.can_resume() is (situation in CAN_RESUME)
    assert machine.can_retry() is (situation in CAN_RETRY)


@pytest.mark.parametrize("situation", list(PATHS))
def test_can_agrees_with_the_events(situation: str) -> None:
    """`can(target)` is true exactly when some mark_* event reaches target from here."""
    reachable = {
        target
        for event, moves in LEGAL.items()
        if event not in {"retry", "reset", "resume", "abort_pause"}
        for source, (target, _) in moves.items()
        if source == situation
    }
    machine = reach(situation)
    assert {t for t in TaskStatus if machine.can(t)} == reachable
    assert machine.can("queued") is (S.QUEUED in reachable)  # type: ignore[arg-type]


# ---------------------------------------------------------------- attempts and failures
def test_an_attempt_record_is_appended_when_an_attempt_ends() -> None:
    clock = FakeClock()
    t0 = clock.now()
    machine = new_machine(clock, max_attempts=2)
    machine.mark_queued()
    clock.advance(1)
    machine.mark_starting()
    machine.mark_running()
    machine.mark_pausing()
    machine.mark_paused()
    machine.resume()
    during_pause = machine.snapshot
    assert during_pause.attempts == (), "a pause does not end an attempt"
    clock.advance(2)
    machine.mark_retry_wait(BOOM)
    first = AttemptRecord(
        number=1,
        started_at=t0 + timedelta(seconds=1),
        ended_at=t0 + timedelta(seconds=3),
        status=S.RETRY_WAIT,
        failure=BOOM,
    )
    after_first = machine.snapshot
    assert after_first.attempts == (first,)
    clock.advance(4)
    machine.mark_starting()
    assert machine.snapshot.failure is None
    machine.mark_running()
    clock.advance(8)
    machine.mark_succeeded(outcome=[1, 2])
    second = AttemptRecord(
        number=2,
        started_at=t0 + timedelta(seconds=7),
        ended_at=t0 + timedelta(seconds=15),
        status=S.SUCCEEDED,
        failure=None,
    )
    assert machine.snapshot.attempts == (first, second)
    assert machine.snapshot.outcome == [1, 2]
    assert machine.snapshot.failure is None


def test_mark_stopped_defaults_to_a_cancelled_failure_that_is_not_retryable() -> None:
    machine = reach("stopping")
    machine.mark_stopped(reason="发布窗口")
    failure = machine.snapshot.failure
    assert failure is not None
    assert failure.kind is FailureKind.CANCELLED
    assert failure.retryable is False
    assert "发布窗口" in failure.message
    assert machine.snapshot.attempts[-1].failure == failure


def test_mark_lost_defaults_to_a_lost_failure_that_is_retryable() -> None:
    machine = reach("running")
    machine.mark_lost(reason="thread did not unwind within 5s")
    failure = machine.snapshot.failure
    assert failure is not None
    assert (failure.kind, failure.retryable) == (FailureKind.LOST, True)
    assert failure.message == "thread did not unwind within 5s"
    assert machine.transitions[-1].reason == "thread did not unwind within 5s"


def test_mark_lost_keeps_a_given_failure() -> None:
    machine = reach("stopping")
    given = Failure.of(
        FailureKind.TIMEOUT_ATTEMPT, "per_attempt timeout of 60s; body did not unwind"
    )
    machine.mark_lost(given)
    assert machine.snapshot.failure == given
    assert machine.transitions[-1].reason == given.message


def test_cancelled_and_skipped_record_their_kind() -> None:
    cancelled = reach("queued")
    cancelled.mark_cancelled(reason="sibling failed")
    assert cancelled.snapshot.failure is not None
    assert cancelled.snapshot.failure.kind is FailureKind.CANCELLED
    assert cancelled.snapshot.failure.retryable is False
    skipped = reach("blocked")
    skipped.mark_skipped(
        failure=Failure.of(FailureKind.DEPENDENCY_FAILED, "upstream 'fetch' failed"),
    )
    assert skipped.snapshot.failure is not None
    assert skipped.snapshot.failure.kind is FailureKind.DEPENDENCY_FAILED
    assert reach("skipped").snapshot.failure is not None


def test_start_timeout_before_start_cancels_with_timeout_start() -> None:
    """R1: QUEUED has no edge to FAILED; a start timeout there ends the task cancelled."""
    machine = reach("queued")
    with pytest.raises(InvalidTransition):
        machine.mark_failed(Failure.of(FailureKind.TIMEOUT_START, "not started within 30s"))
    failure = Failure.of(FailureKind.TIMEOUT_START, "not started within 30s")
    machine.mark_cancelled(failure=failure)
    assert machine.snapshot.failure == failure
    assert failure.retryable is True


def test_stop_request_then_the_body_returns_is_a_success() -> None:
    """§4.4: stopping -> succeeded is legal; a stop is a request, not a verdict."""
    machine = reach("stopping")
    record = machine.mark_succeeded(outcome=17)
    assert (record.from_status, record.to_status) == (S.STOPPING, S.SUCCEEDED)
    assert machine.snapshot.outcome == 17
    assert machine.snapshot.failure is None
    assert machine.snapshot.attempts[-1].status is S.SUCCEEDED


def test_a_stop_before_start_is_immediate_and_after_start_is_buffered() -> None:
    for situation in ("pending", "blocked", "queued", "retry_wait", "paused_before_start"):
        machine = reach(situation)
        assert not machine.can(S.STOPPING)
        assert machine.mark_stopped().to_status is S.STOPPED
    for situation in ("starting", "running", "pausing"):
        machine = reach(situation)
        assert not machine.can(S.STOPPED)
        assert machine.mark_stopping().to_status is S.STOPPING


# ---------------------------------------------------------------- create
def test_create_starts_pending_at_version_zero() -> None:
    clock = FakeClock()
    machine = StateMachine.create(
        "job-1",
        "抽取",
        max_attempts=4,
        label="转换-1",
        description="reads rows",
        tags=["io", "db"],
        priority=10,
        bucket=3,
        bucket_key="tenant-A",
        pipeline_id="nightly",
        node_id="fetch",
        clock=clock,
    )
    snap = machine.snapshot
    assert (snap.task_id, snap.name, snap.status, snap.status_version) == (
        "job-1",
        "抽取",
        S.PENDING,
        0,
    )
    assert (snap.attempt, snap.max_attempts, snap.tags) == (0, 4, frozenset({"io", "db"}))
    assert (snap.label, snap.description, snap.priority) == ("转换-1", "reads rows", 10)
    assert (snap.bucket, snap.bucket_key, snap.pipeline_id, snap.node_id) == (
        3,
        "tenant-A",
        "nightly",
        "fetch",
    )
    assert snap.created_at == snap.updated_at == clock.now()
    assert machine.task_id == "job-1"
    assert machine.version == 0
    assert machine.clock is clock


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"task_id": ""}, "task_id must be a non-empty string"),
        ({"task_id": 7}, "task_id must be a non-empty string"),
        ({"name": ""}, "name must be a non-empty string"),
        ({"max_attempts": 0}, "max_attempts must be an integer >= 1"),
        ({"max_attempts": -2}, "max_attempts must be an integer >= 1"),
        ({"max_attempts": True}, "max_attempts must be an integer >= 1"),
        ({"max_attempts": 2.0}, "max_attempts must be an integer >= 1"),
        ({"tags": [1]}, "tags must be"),
        ({"tags": ["io", None]}, "tags must be"),
        ({"tags": "io"}, "single string 'io'"),
    ],
)
def test_create_rejects_bad_input(kwargs: dict[str, object], fragment: str) -> None:
    arguments: dict[str, object] = {"task_id": "t1", "name": "extract", **kwargs}
    task_id = arguments.pop("task_id")
    name = arguments.pop("name")
    with pytest.raises(ConfigurationError) as info:
        StateMachine.create(task_id, name, **arguments)  # type: ignore[arg-type]
    assert fragment in str(info.value)


def test_a_machine_can_be_rehydrated_from_a_snapshot_and_its_history() -> None:
    clock = FakeClock()
    original = reach("running", clock)
    copy = StateMachine(original.snapshot, original.transitions, clock=clock)
    assert copy.snapshot == original.snapshot
    assert copy.transitions == original.transitions
    record = copy.mark_succeeded()
    assert record.status_version == 4
    assert original.status is S.RUNNING


# ---------------------------------------------------------------- leases
@pytest.mark.parametrize(
    "finish",
    [
        lambda m: m.mark_succeeded(outcome=1),
        lambda m: m.mark_failed(BOOM),
        lambda m: m.mark_cancelled(),
        lambda m: m.mark_lost(reason="lease expired"),
    ],
)
def test_a_finished_task_holds_no_lease_but_keeps_who_held_it(
    finish: Callable[[StateMachine], Transition],
) -> None:
    clock = FakeClock()
    until = clock.now() + timedelta(seconds=30)
    machine = StateMachine(
        new_machine(clock).snapshot.evolve(lease_owner="node-a:1", lease_until=until),
        clock=clock,
    )
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    assert machine.snapshot.lease_until is until  # carried while the task is in flight
    finish(machine)
    finished = machine.snapshot
    assert finished.is_terminal
    assert finished.lease_until is None
    assert finished.lease_owner == "node-a:1"


def test_a_task_created_and_queued_in_one_act_is_queued_at_its_creation_time() -> None:
    clock = FakeClock()
    machine = new_machine(clock)
    created = machine.snapshot.created_at
    assert created is not None
    clock.advance(2.0)
    transition = machine.mark_queued(at=created)
    assert transition.at == created
    assert machine.snapshot.updated_at == created
    clock.advance(1.0)
    assert machine.mark_starting(executor="thread").at == created + timedelta(seconds=3)


def test_a_queued_moment_before_the_last_change_or_without_a_zone_is_refused() -> None:
    clock = FakeClock()
    machine = new_machine(clock)
    created = machine.snapshot.created_at
    assert created is not None
    with pytest.raises(ConfigurationError, match="before the task's last change"):
        machine.mark_queued(at=created - timedelta(microseconds=1))
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        machine.mark_queued(at=created.replace(tzinfo=None))
    assert machine.status is S.PENDING  # nothing changed
    assert machine.transitions == ()
