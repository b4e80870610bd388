"""`RunDeadlines` on its own: the start timeout, an attempt's timeouts and its graceful window
(§6, R1, R2, D55), driven by a `FakeClock` against a run that only records what it is asked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from chongming_core import (
    Failure,
    FailureKind,
    FakeClock,
    RetryPolicy,
    TaskStatus,
    Timeout,
)
from chongming_runtime.executors._attempt import Attempt
from chongming_runtime.run._deadlines import RunDeadlines
from chongming_runtime.run._setup import RunSetup
from run_helpers import Carrier, machine_at, new_attempt

S = TaskStatus
K = FailureKind


def _body(ctx: object) -> None:
    """The body the fakes' setup names (never called)."""


class TimedFake:
    """A run as `RunDeadlines` sees it (`TimedRun`): settings, state, and a log of its acts."""

    def __init__(
        self, timeout: Timeout, status: TaskStatus = S.RUNNING, *, retry_due: bool = False
    ) -> None:
        self.clock = FakeClock()
        self._setup = RunSetup.make(
            _body, clock=self.clock, timeout=timeout, graceful_stop=5.0,
            retry=RetryPolicy(max_attempts=3),
        )  # fmt: skip
        self._monotonic = self.clock.monotonic
        self._lock = threading.Lock()
        self._machine = machine_at(status, self.clock)
        self._attempt: Attempt | None = None
        self.retry_due = retry_due  # what ending an attempt answers
        self.ended: list[tuple[Attempt | None, str, Failure | None]] = []
        self.woken = 0
        self.told = 0
        self.kicked = 0

    def _end_attempt(
        self, attempt: Attempt | None, why: str, *, start_timeout: Failure | None = None
    ) -> bool:
        assert self._lock.locked()
        self.ended.append((attempt, why, start_timeout))
        if attempt is not None:
            attempt.closed = True
        return self.retry_due

    def _wake_held(self) -> None:
        assert self._lock.locked()
        self.woken += 1

    def _deliver(self) -> None:
        assert not self._lock.locked()
        self.told += 1

    def _deliver_then_kick(self, retry_due: bool) -> None:
        self._deliver()
        self.kicked += retry_due

    def running(self) -> Attempt:
        """The attempt under way, its body begun now."""
        attempt = self._attempt = new_attempt(self._monotonic)
        attempt.started = True
        attempt.context.last_beat = self._monotonic()
        return attempt


def kind(attempt: Attempt) -> FailureKind | None:
    """The timeout that asked the attempt to stop, read afresh (the type checker narrows)."""
    return attempt.timeout_kind


def ends_at(run: TimedFake, seconds: float) -> None:
    """Advance the clock `seconds`: the run ends an attempt then, and not a moment before."""
    passes_at(run, seconds, lambda: bool(run.ended))


def passes_at(run: TimedFake, seconds: float, passed: Callable[[], bool]) -> None:
    """Advance the clock `seconds`: `passed` turns true then, and not a moment before."""
    run.clock.advance(seconds - 0.1)
    assert not passed()
    run.clock.advance(0.1)
    assert passed()


def open_window(deadlines: RunDeadlines, run: TimedFake, attempt: Attempt) -> None:
    with run._lock:
        deadlines.keep_graceful_window(attempt)


def arm_start(deadlines: RunDeadlines, run: TimedFake) -> None:
    with run._lock:
        deadlines.arm_start()


def timed(timeout: Timeout) -> tuple[TimedFake, RunDeadlines, Attempt]:
    """A running attempt with `timeout`'s deadlines armed now: its run, deadlines, attempt."""
    run = TimedFake(timeout)
    deadlines = RunDeadlines(run)
    attempt = run.running()
    arm(deadlines, run, attempt)
    return run, deadlines, attempt


def queued(limit: float, *, retry_due: bool = False) -> tuple[TimedFake, RunDeadlines]:
    """A queued run with a start timeout of `limit` seconds, armed now."""
    run = TimedFake(Timeout(start=limit), S.QUEUED, retry_due=retry_due)
    deadlines = RunDeadlines(run)
    arm_start(deadlines, run)
    return run, deadlines


def arm(deadlines: RunDeadlines, run: TimedFake, attempt: Attempt) -> None:
    with run._lock:
        deadlines.arm(attempt, run._setup.monotonic())


# ---------------------------------------------------------------- the start timeout (R1)
def test_a_start_timeout_ends_a_queued_task_at_its_limit() -> None:
    run, _ = queued(5)
    ends_at(run, 5)
    ((attempt, why, failure),) = run.ended
    assert attempt is None  # no attempt was under way
    assert why == "start timeout of 5s expired before the task started"
    assert failure is not None
    assert failure.kind is K.TIMEOUT_START
    assert failure.message == why
    assert failure.retryable is True  # the policy judges it
    assert (run.told, run.kicked) == (1, 0)


def test_a_start_timeout_after_which_a_retry_is_due_starts_it() -> None:
    run, _ = queued(5, retry_due=True)
    run.clock.advance(5)
    assert (len(run.ended), run.told, run.kicked) == (1, 1, 1)


def test_a_pipeline_node_counts_its_start_timeout_from_the_pipelines_submission() -> None:
    run = TimedFake(Timeout(start=5), S.QUEUED)
    deadlines = RunDeadlines(run)
    deadlines.start_origin = run._setup.monotonic()
    run.clock.advance(3)  # blocked behind its upstream nodes
    arm_start(deadlines, run)
    ends_at(run, 2)
    assert len(run.ended) == 1


def test_a_task_paused_before_start_keeps_what_is_left_of_its_start_timeout() -> None:
    run, deadlines = queued(10)
    timers = run.clock.pending_timers
    run.clock.advance(4)
    with run._lock:
        deadlines.suspend_start()
    assert run.clock.pending_timers == timers - 1  # a paused task holds no timer
    run.clock.advance(100)
    assert run.ended == []
    with run._lock:
        deadlines.resume_start()
    ends_at(run, 6)
    assert len(run.ended) == 1


def test_a_body_that_began_ends_the_start_timeout_for_good() -> None:
    run, deadlines = queued(5)
    with run._lock:
        deadlines.end_start()
        deadlines.resume_start()
        deadlines.arm_start()  # a later attempt has no start timeout
    run.clock.advance(100)
    assert run.ended == []
    assert run.clock.pending_timers == 0


@pytest.mark.parametrize("ends", [True, False], ids=["a-child-process", "a-thread"])
def test_a_start_timeout_while_starting_stops_the_attempt_and_ends_its_carrier(
    ends: bool,
) -> None:
    run = TimedFake(Timeout(start=5), S.STARTING)
    deadlines = RunDeadlines(run)
    attempt = run._attempt = new_attempt(run._setup.monotonic)
    carrier = Carrier(ends=ends)
    attempt.handle = carrier
    arm_start(deadlines, run)
    run.clock.advance(5)
    message = "start timeout of 5s expired before the task started"
    assert attempt.control.stop_requested
    assert attempt.control.stop_reason == message
    ((ended, why, failure),) = run.ended
    assert (ended, why) == (attempt, message)
    assert failure is not None
    assert failure.kind is K.TIMEOUT_START
    assert carrier.forced == 1
    assert attempt.forced is ends  # a child's exit will be reported as ended by force


def test_a_start_timeout_does_nothing_to_a_task_that_runs() -> None:
    run = TimedFake(Timeout(start=5), S.RUNNING)
    run.running()
    arm_start(RunDeadlines(run), run)
    run.clock.advance(5)
    assert (run.ended, run.told) == ([], 0)


# ---------------------------------------------------------------- an attempt's timeouts (R2)
def test_the_per_attempt_timeout_asks_the_body_to_stop_and_opens_its_graceful_window() -> None:
    run, _, attempt = timed(Timeout(per_attempt=10))
    passes_at(run, 10, lambda: kind(attempt) is not None)
    assert kind(attempt) is K.TIMEOUT_ATTEMPT
    assert attempt.timeout_message == "per-attempt timeout of 10s expired"
    assert attempt.control.stop_requested  # R2: a stop request, no `stopping`
    assert run._machine.status is S.RUNNING
    assert (run.woken, run.told, run.ended) == (1, 1, [])
    ends_at(run, 5)  # the body did not unwind within its window
    assert run.ended == [(attempt, "the graceful window passed", None)]


def test_a_pause_keeps_what_is_left_of_the_per_attempt_budget() -> None:
    run, deadlines, attempt = timed(Timeout(per_attempt=10))
    run.clock.advance(4)
    with run._lock:
        deadlines.suspend(attempt)
    assert attempt.per_attempt_remaining == 6
    run.clock.advance(100)  # paused time does not count
    assert kind(attempt) is None
    arm(deadlines, run, attempt)  # resumed
    passes_at(run, 6, lambda: kind(attempt) is not None)
    assert kind(attempt) is K.TIMEOUT_ATTEMPT


def test_the_idle_timeout_counts_from_the_latest_beat() -> None:
    run, _, attempt = timed(Timeout(idle=3))
    run.clock.advance(2)
    attempt.context.last_beat = run._setup.monotonic()  # a checkpoint
    run.clock.advance(1)
    assert kind(attempt) is None  # re-armed for the new deadline
    passes_at(run, 2, lambda: kind(attempt) is not None)
    assert kind(attempt) is K.TIMEOUT_IDLE
    assert attempt.timeout_message == "idle timeout: no checkpoint() or heartbeat for 3s"


def test_a_timeout_leaves_an_attempt_that_is_no_longer_the_runs_alone() -> None:
    run, _, attempt = timed(Timeout(per_attempt=1, idle=1))
    run.running()  # the next attempt replaced it (its timers were not cancelled)
    run.clock.advance(10)
    assert kind(attempt) is None
    assert not attempt.control.stop_requested
    assert run.told == 0


def test_a_timeout_leaves_a_paused_body_alone() -> None:
    run, _, attempt = timed(Timeout(per_attempt=1))
    run._machine = machine_at(S.PAUSED, run.clock)
    run.clock.advance(10)
    assert kind(attempt) is None


def test_a_run_without_timeouts_arms_no_timer() -> None:
    run = TimedFake(Timeout(), S.QUEUED)
    deadlines = RunDeadlines(run)
    arm_start(deadlines, run)
    arm(deadlines, run, run.running())
    assert run.clock.pending_timers == 0


# ---------------------------------------------------------------- the graceful window (R9, D55)
def test_a_graceful_window_is_one_per_attempt() -> None:
    run = TimedFake(Timeout())
    deadlines = RunDeadlines(run)
    attempt = run.running()
    open_window(deadlines, run, attempt)
    run.clock.advance(3)
    with run._lock:
        deadlines.keep_graceful_window(attempt)  # a second request does not extend it
    assert run.clock.pending_timers == 1
    run.clock.advance(2)
    assert run.ended == [(attempt, "the graceful window passed", None)]


@pytest.mark.parametrize("ends", [True, False], ids=["a-child-process", "a-thread"])
def test_the_window_ends_a_carrier_by_force_when_it_can(ends: bool) -> None:
    run = TimedFake(Timeout(), retry_due=True)
    deadlines = RunDeadlines(run)
    attempt = run.running()
    carrier = Carrier(ends=ends)
    attempt.handle = carrier
    open_window(deadlines, run, attempt)
    run.clock.advance(5)
    assert carrier.forced == 1
    assert attempt.forced is ends
    # a child's exit, still to come, ends its attempt; a thread's attempt ends now
    assert run.ended == ([] if ends else [(attempt, "the graceful window passed", None)])
    assert (run.told, run.kicked) == ((0, 0) if ends else (1, 1))


def test_a_window_that_passes_after_its_attempt_ended_does_nothing() -> None:
    run = TimedFake(Timeout())
    deadlines = RunDeadlines(run)
    attempt = run.running()
    open_window(deadlines, run, attempt)
    attempt.closed = True  # its body unwound meanwhile
    run.clock.advance(5)
    assert (run.ended, run.told) == ([], 0)
