"""What an attempt's end means for its task: one pure decision (guide §4.1, §4.4, §4.5, §5, §6).

`decide` maps an `AttemptEnding` (plain facts: how the body ended, the status,
the stop/cancel requested, the timeout that fired, whether the graceful window
passed and whether the carrier was ended by force, the attempt budget and the
retry policy) to a `Decision`: the next status, its `Failure` and the reason
the transition records. It reads no clock, takes no lock, starts no thread and
writes nothing; the `TaskRun` gathers the facts under its lock, asks, and
enacts the answer (recording the transition, arming the backoff timer, keeping
an abandoned body's slot). The backoff delay is the caller's: it may draw on a
clock and jitter, which a pure decision does not.

The rules (rulings in brackets):

* A value returned counts unless a timeout asked the body to stop; after an
  operator's stop it still counts (``stopping -> succeeded``) [R2, R7]. A value no
  store can keep fails the attempt, kind ``result_invalid``, never retried.
* ``TaskCancelled`` after a stop -> ``stopped`` [R7]; after a cancellation (fail_fast)
  -> ``cancelled``; without either -> ``failed`` (kind ``cancelled``, never retried).
* A process killed after a stop -> ``stopped``, kind ``cancelled``; after a timeout ->
  that timeout's kind; one that died by itself -> ``nonzero_exit`` [R9].
* A timeout's failure carries its kind and whatever the body did next [R2]; a start
  timeout before launch cancels the task, after it fails the attempt [R1].
* A body that did not unwind within its graceful window and may still run -> ``lost``,
  retryable (D54). A window that passed before the body began ends the attempt as if
  the body had unwound at once: after a stop ``stopped`` (kind ``cancelled``, "now
  never will"), otherwise as ``TaskCancelled`` would (D55, D92, D103).
* A failure is retried (``retry_wait``) only when the policy deems it retryable, no
  cancellation is pending, the task is ``starting``/``running`` (never after a stop)
  and the budget has an attempt left (§5).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from chongming_core import (
    Failure,
    FailureKind,
    RetryPolicy,
    TaskExecutionError,
    TaskStatus,
    TaskTimeout,
)
from chongming_runtime.body._command import CommandFailed
from chongming_runtime.executors._attempt import AttemptResult, ResultKind

__all__ = ["AttemptEnding", "Decision", "decide"]

_S = TaskStatus
#: where a start timeout ends the task ``cancelled`` (R1): before any launch, and in
#: ``retry_wait`` after an attempt whose body never began (D91; the run asks only then)
_BEFORE_LAUNCH = frozenset({_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT})
_MAY_RETRY = frozenset({_S.STARTING, _S.RUNNING})
#: how an attempt ends whose body never began when its graceful window passed (D103)
_UNWOUND = AttemptResult.cancelled()


@dataclass(frozen=True, slots=True)
class AttemptEnding:
    """The facts an attempt's end is decided on, gathered by the run under its lock.

    Attributes:
        task_id: the task's id (named in the failures' messages and errors).
        status: the task's status as the attempt ends (after leaving a pause).
        result: how the body ended; None when it did not: its graceful window passed and
            the body, begun, is left running (a body that never began is given as
            cancelled: it ended as if it unwound at once, D55).
        attempt: the number of the attempt that ended.
        max_attempts: the attempt budget.
        policy: the retry policy that judges the failure.
        graceful: the graceful window, in seconds (named in messages).
        stop_reason: the operator's stop reason (meaningful when ``status`` is stopping).
        cancel_reason: the orchestration layer's cancellation (fail_fast), if any.
        timeout_kind: the timeout that asked the body to stop, if any.
        timeout_message: what that timeout said.
        forced: the carrier was ended by force when its graceful window passed.
        began: the attempt's body had begun (a child process ended by force while still
            starting had no body to stop, D90/D92; a window that passed before it began
            leaves no body running, D103).
        value_refused: the ``result_invalid`` failure of a value the store cannot keep.
        start_timeout: the failure of a start timeout that expired before the body began.
    """

    task_id: str
    status: TaskStatus
    result: AttemptResult | None
    attempt: int
    max_attempts: int
    policy: RetryPolicy
    graceful: float = 0.0
    stop_reason: str | None = None
    cancel_reason: str | None = None
    timeout_kind: FailureKind | None = None
    timeout_message: str | None = None
    forced: bool = False
    began: bool = True
    value_refused: Failure | None = None
    start_timeout: Failure | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """The next status of the task and what its transition records.

    Attributes:
        status: succeeded, stopped, cancelled, failed, retry_wait or lost.
        failure: the failure recorded (None for succeeded).
        reason: the reason the transition records (None: the state machine's default).
        keeps_value: the returned value is the task's outcome, once the store accepts it
            (if it refuses, decide again with ``value_refused``).
    """

    status: TaskStatus
    failure: Failure | None = None
    reason: str | None = None
    keeps_value: bool = False

    @property
    def body_may_run(self) -> bool:
        """True when the body was abandoned and may still be running (``lost``)."""
        return self.status is _S.LOST


def decide(ending: AttemptEnding) -> Decision:
    """The next status of the task whose attempt ended as `ending` says. Pure."""
    if ending.start_timeout is not None:
        if ending.status in _BEFORE_LAUNCH:  # R1: no edge to failed before the start
            failure = ending.start_timeout
            return Decision(_S.CANCELLED, failure, reason=failure.message)
        return _retry_or_fail(ending, ending.start_timeout)
    result = ending.result
    stopping = ending.status is _S.STOPPING
    if result is None:  # the graceful window passed
        if ending.began:
            return Decision(_S.LOST, _abandoned(ending))
        if stopping:
            return Decision(_S.STOPPED, _never_begun(ending), reason=ending.stop_reason)
        result = _UNWOUND  # no body began, and none will: as if it unwound at once (D55)
    kind = result.kind
    # a value returned after a timeout asked the body to stop is the timeout's failure
    # (§6, R2); after an operator's stop it is the task's end (stopping -> succeeded)
    if kind is ResultKind.RETURNED and (ending.timeout_kind is None or stopping):
        if ending.value_refused is not None:
            return _retry_or_fail(ending, ending.value_refused)
        return Decision(_S.SUCCEEDED, keeps_value=True)
    if kind is ResultKind.CANCELLED and stopping:
        return Decision(_S.STOPPED, _stopped(ending.stop_reason), reason=ending.stop_reason)
    if kind is ResultKind.CRASHED and stopping:  # killed after a stop request (R9)
        return Decision(_S.STOPPED, _killed_after_stop(ending, result), ending.stop_reason)
    if ending.cancel_reason is not None and kind in {ResultKind.CANCELLED, ResultKind.CRASHED}:
        failure = Failure.of(
            FailureKind.CANCELLED, f"cancelled: {ending.cancel_reason}", retryable=False
        )
        return Decision(_S.CANCELLED, failure, reason=ending.cancel_reason)
    if ending.timeout_kind is not None:
        return _retry_or_fail(ending, _timed_out(ending, ending.timeout_kind, result))
    if kind is ResultKind.CANCELLED:
        failure = Failure.of(
            FailureKind.CANCELLED,
            "the body raised TaskCancelled without a stop request",
            retryable=False,
        )
        return _retry_or_fail(ending, failure)
    if kind is ResultKind.CRASHED:  # the carrier died by itself (R9)
        assert result.failure is not None
        error = TaskExecutionError(result.failure.message, task_id=ending.task_id)
        failure = Failure.of(
            FailureKind.NONZERO_EXIT,
            result.failure.message,
            retryable=ending.policy.should_retry(error),
        )
        return _retry_or_fail(ending, failure)
    return _retry_or_fail(ending, _raised(ending.policy, result))


def _retry_or_fail(ending: AttemptEnding, failure: Failure) -> Decision:
    """Retry if the failure deserves it and budget is left, else fail (§5)."""
    retry = (
        failure.retryable
        and ending.cancel_reason is None
        and ending.status in _MAY_RETRY
        and ending.attempt < ending.max_attempts
    )
    return Decision(_S.RETRY_WAIT if retry else _S.FAILED, failure)


def _stopped(reason: str | None) -> Failure:
    text = f"stopped: {reason}" if reason else "stopped on request"
    return Failure.of(FailureKind.CANCELLED, text, retryable=False)


def _killed_after_stop(ending: AttemptEnding, result: AttemptResult) -> Failure:
    crash = result.failure.message if result.failure else "the carrier ended"
    if not ending.forced:
        how = f"its process ended before the body stopped ({crash})"
    elif ending.began:
        how = (
            f"the body did not stop within the graceful window of {ending.graceful:g}s, "
            f"so it was ended by force ({crash})"
        )
    else:  # stopped while starting: there was no body to stop yet (D90, D92)
        how = (
            f"its body had not begun when the graceful window of {ending.graceful:g}s "
            f"passed, so its process was ended by force ({crash})"
        )
    requested = _stopped(ending.stop_reason).message
    return Failure.of(FailureKind.CANCELLED, f"{requested}; {how}", retryable=False)


def _never_begun(ending: AttemptEnding) -> Failure:
    """The failure of a stop whose graceful window passed before the body began (D92)."""
    how = f"its body had not begun when the graceful window of {ending.graceful:g}s passed"
    requested = _stopped(ending.stop_reason).message
    return Failure.of(
        FailureKind.CANCELLED, f"{requested}; {how}, and now never will", retryable=False
    )


def _timed_out(ending: AttemptEnding, kind: FailureKind, result: AttemptResult) -> Failure:
    """The failure of an attempt a timeout asked to stop, with what the body did next."""
    message = ending.timeout_message or kind.value
    if result.kind is not ResultKind.CANCELLED:
        detail = result.failure.message if result.failure else None
        if detail is None and result.exception is not None:
            detail = f"{type(result.exception).__qualname__}: {result.exception}"
        if result.kind is ResultKind.CRASHED:
            message = (
                f"{message}; the body did not unwind within the graceful window of "
                f"{ending.graceful:g}s, so it was ended by force ({detail})"
            )
        elif result.kind is ResultKind.RETURNED:
            message = f"{message}; the body then returned, and its value was not kept"
        elif detail:
            message = f"{message}; then the body ended with {detail}"
    error = TaskTimeout(message, task_id=ending.task_id, kind=kind.value)
    return Failure.of(kind, message, retryable=ending.policy.should_retry(error))


def _raised(policy: RetryPolicy, result: AttemptResult) -> Failure:
    """The failure of a body that raised (here, or described across a process boundary)."""
    exc = result.exception
    if result.failure is not None:  # described across a process boundary
        failure = result.failure
        if failure.kind is FailureKind.RESULT_INVALID:
            return failure
        if exc is not None:
            retryable = policy.should_retry(exc)
        elif result.exception_types:  # it could not cross whole: judged by name
            retryable = policy.should_retry_named(result.exception_types)
        else:
            retryable = failure.retryable
        return dataclasses.replace(failure, retryable=retryable)
    if exc is not None:
        kind = FailureKind.NONZERO_EXIT if isinstance(exc, CommandFailed) else FailureKind.EXCEPTION
        return Failure.from_exception(exc, kind=kind, retryable=policy.should_retry(exc))
    return Failure.of(FailureKind.EXCEPTION, "the attempt failed without details")


def _abandoned(ending: AttemptEnding) -> Failure:
    """The ``lost`` failure of a body left running after its graceful window (R2, D54)."""
    window = f"the graceful window of {ending.graceful:g}s"
    if ending.timeout_kind is not None:
        why = f"{ending.timeout_message}, and the body did not unwind within {window}"
    elif ending.cancel_reason is not None and ending.status is not _S.STOPPING:
        why = (
            f"the body did not unwind within {window} after it was cancelled "
            f"({ending.cancel_reason})"
        )
    else:
        requested = f" ({ending.stop_reason})" if ending.stop_reason else ""
        why = f"the body did not stop within {window} after the stop request{requested}"
    return Failure.of(
        FailureKind.LOST,
        f"{why}; its thread was abandoned and may still be running (result unknown)",
        retryable=True,
    )
