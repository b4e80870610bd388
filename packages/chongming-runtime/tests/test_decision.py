"""`decide`, row by row against the guide (§4.1, §4.4, §4.5, §5, §6, §7.4) and R1/R2/R7/R9.

Every row is a plain `AttemptEnding` and the `Decision` it must give: no thread,
no clock, no store. The row id names the section or ruling it follows.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from chongming_core import (
    Failure,
    FailureKind,
    RetryPolicy,
    TaskCancelled,
    TaskStatus,
)
from chongming_runtime import AttemptResult, CommandFailed
from chongming_runtime.body._results import result_failure
from chongming_runtime.run._decision import AttemptEnding, Decision, decide

_S = TaskStatus
_K = FailureKind
_POLICY = RetryPolicy(max_attempts=3, give_up_on=(KeyError,))
_KILLED = "the child process 41 was killed by signal SIGKILL (9) before reporting a result"
_PER_ATTEMPT = "per-attempt timeout of 2s expired"
_START = Failure.of(
    _K.TIMEOUT_START, "start timeout of 3s expired before the task started", retryable=True
)


def ending(result: AttemptResult | None = None, **facts: Any) -> AttemptEnding:
    """Attempt 1 of 3 of a running task that returned 42, unless `facts` say otherwise."""
    base = AttemptEnding(
        task_id="t1",
        status=_S.RUNNING,
        result=AttemptResult.returned(42) if result is None else result,
        attempt=1,
        max_attempts=3,
        policy=_POLICY,
        graceful=5.0,
    )
    return dataclasses.replace(base, **facts)


def abandoned(**facts: Any) -> AttemptEnding:
    """The graceful window passed and the begun body is left running."""
    return dataclasses.replace(ending(**facts), result=None)


def unbegun(**facts: Any) -> AttemptEnding:
    """The graceful window passed before the body began: none runs, and none ever will."""
    return dataclasses.replace(ending(**facts), result=None, began=False)


def raised(exc: BaseException) -> AttemptResult:
    return AttemptResult.raised(exc)


def refused() -> Failure:
    return result_failure("t1", object(), "Object of type object is not JSON serializable")


# (id, ending, status, failure kind or None, retryable or None, exact message or None)
ROWS: list[tuple[str, AttemptEnding, TaskStatus, FailureKind | None, bool | None, str | None]] = [
    # --- a value (§3.3, §4.4, §8.13)
    ("s3.3-value-succeeds", ending(), _S.SUCCEEDED, None, None, None),
    (
        "s4.4-stop-then-value-succeeds",
        ending(status=_S.STOPPING, stop_reason="ops"),
        _S.SUCCEEDED,
        None,
        None,
        None,
    ),
    (
        "s8.13-value-refused-fails-not-retried",
        ending(value_refused=refused()),
        _S.FAILED,
        _K.RESULT_INVALID,
        False,
        None,
    ),
    (
        "s8.13-value-refused-while-stopping-fails",
        ending(status=_S.STOPPING, value_refused=refused()),
        _S.FAILED,
        _K.RESULT_INVALID,
        False,
        None,
    ),
    (
        "s8.13-child-refused-value-not-rejudged-by-policy",
        ending(AttemptResult.raised(TypeError("not JSON"), refused())),
        _S.FAILED,
        _K.RESULT_INVALID,
        False,
        None,
    ),
    # --- exceptions and the retry policy (§5)
    (
        "s5-exception-attempts-left-retries",
        ending(raised(OSError("disk"))),
        _S.RETRY_WAIT,
        _K.EXCEPTION,
        True,
        "OSError: disk",
    ),
    (
        "s5-exception-last-attempt-fails-retryable",
        ending(raised(OSError("disk")), attempt=3),
        _S.FAILED,
        _K.EXCEPTION,
        True,
        "OSError: disk",
    ),
    (
        "s5-give-up-on-fails-at-once",
        ending(raised(KeyError("k"))),
        _S.FAILED,
        _K.EXCEPTION,
        False,
        "KeyError: 'k'",
    ),
    (
        "s5-retry-on-does-not-name-it",
        ending(raised(OSError("x")), policy=RetryPolicy(max_attempts=3, retry_on=(ValueError,))),
        _S.FAILED,
        _K.EXCEPTION,
        False,
        None,
    ),
    (
        "s5-no-budget-max-attempts-1",
        ending(raised(OSError("x")), max_attempts=1),
        _S.FAILED,
        _K.EXCEPTION,
        True,
        None,
    ),
    (
        "s5-exception-while-starting-retries",
        ending(raised(OSError("spawn")), status=_S.STARTING),
        _S.RETRY_WAIT,
        _K.EXCEPTION,
        True,
        None,
    ),
    (
        "s5.2-command-failed-is-nonzero-exit",
        ending(raised(CommandFailed(["false"], 1))),
        _S.RETRY_WAIT,
        _K.NONZERO_EXIT,
        True,
        None,
    ),
    (
        "s5-child-exception-judged-by-names",
        ending(
            AttemptResult.raised(
                None,
                Failure.of(_K.EXCEPTION, "KeyError: 'k'", retryable=True),
                exception_types=("builtins.KeyError", "builtins.LookupError"),
            )
        ),
        _S.FAILED,
        _K.EXCEPTION,
        False,
        "KeyError: 'k'",
    ),
    (
        "s5-child-exception-judged-by-object",
        ending(
            AttemptResult.raised(
                OSError("x"), Failure.of(_K.EXCEPTION, "OSError: x", retryable=False)
            )
        ),
        _S.RETRY_WAIT,
        _K.EXCEPTION,
        True,
        "OSError: x",
    ),
    (
        "s5-child-exception-nameless-keeps-its-own-answer",
        ending(AttemptResult.raised(None, Failure.of(_K.EXCEPTION, "odd", retryable=False))),
        _S.FAILED,
        _K.EXCEPTION,
        False,
        "odd",
    ),
    (
        "s5-failed-without-details",
        ending(AttemptResult.raised(None)),
        _S.RETRY_WAIT,
        _K.EXCEPTION,
        True,
        "the attempt failed without details",
    ),
    (
        "s5-exception-after-stop-never-retries",
        ending(raised(OSError("x")), status=_S.STOPPING, stop_reason="ops"),
        _S.FAILED,
        _K.EXCEPTION,
        True,
        None,
    ),
    (
        "s5-exception-while-cancelling-never-retries",
        ending(raised(OSError("x")), cancel_reason="upstream failed"),
        _S.FAILED,
        _K.EXCEPTION,
        True,
        None,
    ),
    # --- TaskCancelled and stops (§4.1, §4.5, §5.1, R7)
    (
        "s4.1-cancelled-after-stop-is-stopped",
        ending(AttemptResult.cancelled(TaskCancelled()), status=_S.STOPPING, stop_reason="ops"),
        _S.STOPPED,
        _K.CANCELLED,
        False,
        "stopped: ops",
    ),
    (
        "s4.1-cancelled-after-stop-without-reason",
        ending(AttemptResult.cancelled(), status=_S.STOPPING),
        _S.STOPPED,
        _K.CANCELLED,
        False,
        "stopped on request",
    ),
    (
        "R7-stop-before-checkpoint-is-stopped-not-succeeded",
        ending(AttemptResult.cancelled(TaskCancelled()), status=_S.STOPPING, stop_reason="r"),
        _S.STOPPED,
        _K.CANCELLED,
        False,
        "stopped: r",
    ),
    (
        "s5.1-cancelled-without-request-fails-unretried",
        ending(AttemptResult.cancelled(TaskCancelled())),
        _S.FAILED,
        _K.CANCELLED,
        False,
        "the body raised TaskCancelled without a stop request",
    ),
    (
        "R16-cancel-then-unwound-is-cancelled",
        ending(AttemptResult.cancelled(), cancel_reason="upstream failed"),
        _S.CANCELLED,
        _K.CANCELLED,
        False,
        "cancelled: upstream failed",
    ),
    (
        "R16-cancel-then-value-succeeds",
        ending(cancel_reason="upstream failed"),
        _S.SUCCEEDED,
        None,
        None,
        None,
    ),
    (
        "R16-cancel-then-child-killed-is-cancelled",
        ending(AttemptResult.crashed(_KILLED), cancel_reason="upstream", forced=True),
        _S.CANCELLED,
        _K.CANCELLED,
        False,
        "cancelled: upstream",
    ),
    # --- timeouts of a running attempt (§6, R2)
    (
        "R2-timeout-unwound-retries-with-its-kind",
        ending(
            AttemptResult.cancelled(),
            timeout_kind=_K.TIMEOUT_ATTEMPT,
            timeout_message=_PER_ATTEMPT,
        ),
        _S.RETRY_WAIT,
        _K.TIMEOUT_ATTEMPT,
        True,
        _PER_ATTEMPT,
    ),
    (
        "R2-idle-timeout-last-attempt-fails",
        ending(
            AttemptResult.cancelled(),
            attempt=3,
            timeout_kind=_K.TIMEOUT_IDLE,
            timeout_message="idle timeout: no checkpoint() or heartbeat for 1s",
        ),
        _S.FAILED,
        _K.TIMEOUT_IDLE,
        True,
        "idle timeout: no checkpoint() or heartbeat for 1s",
    ),
    (
        "R2-timeout-then-value-is-not-kept",
        ending(timeout_kind=_K.TIMEOUT_ATTEMPT, timeout_message=_PER_ATTEMPT),
        _S.RETRY_WAIT,
        _K.TIMEOUT_ATTEMPT,
        True,
        f"{_PER_ATTEMPT}; the body then returned, and its value was not kept",
    ),
    (
        "R2-timeout-then-exception-named",
        ending(
            raised(OSError("late")),
            timeout_kind=_K.TIMEOUT_ATTEMPT,
            timeout_message=_PER_ATTEMPT,
        ),
        _S.RETRY_WAIT,
        _K.TIMEOUT_ATTEMPT,
        True,
        f"{_PER_ATTEMPT}; then the body ended with OSError: late",
    ),
    (
        "R2-timeout-without-message-uses-kind",
        ending(AttemptResult.cancelled(), timeout_kind=_K.TIMEOUT_IDLE),
        _S.RETRY_WAIT,
        _K.TIMEOUT_IDLE,
        True,
        "timeout_idle",
    ),
    (
        "R2-timeout-policy-refuses-timeouts",
        ending(
            AttemptResult.cancelled(),
            timeout_kind=_K.TIMEOUT_ATTEMPT,
            timeout_message=_PER_ATTEMPT,
            policy=RetryPolicy(max_attempts=3, retry_on=(ValueError,)),
        ),
        _S.FAILED,
        _K.TIMEOUT_ATTEMPT,
        False,
        _PER_ATTEMPT,
    ),
    (
        "R2-R9-timeout-then-child-killed-keeps-timeout-kind",
        ending(
            AttemptResult.crashed(_KILLED),
            timeout_kind=_K.TIMEOUT_ATTEMPT,
            timeout_message=_PER_ATTEMPT,
            forced=True,
        ),
        _S.RETRY_WAIT,
        _K.TIMEOUT_ATTEMPT,
        True,
        f"{_PER_ATTEMPT}; the body did not unwind within the graceful window of 5s, so it "
        f"was ended by force ({_KILLED})",
    ),
    (
        "R2-stop-after-timeout-value-succeeds",
        ending(status=_S.STOPPING, timeout_kind=_K.TIMEOUT_ATTEMPT, timeout_message=_PER_ATTEMPT),
        _S.SUCCEEDED,
        None,
        None,
        None,
    ),
    # --- the graceful window passed (§4.1, R2, D54)
    (
        "s4.1-window-passed-after-stop-thread-is-lost",
        abandoned(status=_S.STOPPING, stop_reason="ops"),
        _S.LOST,
        _K.LOST,
        True,
        "the body did not stop within the graceful window of 5s after the stop request "
        "(ops); its thread was abandoned and may still be running (result unknown)",
    ),
    (
        "s4.1-window-passed-after-stop-without-reason",
        abandoned(status=_S.STOPPING),
        _S.LOST,
        _K.LOST,
        True,
        "the body did not stop within the graceful window of 5s after the stop request; its "
        "thread was abandoned and may still be running (result unknown)",
    ),
    (
        "R2-window-passed-after-timeout-names-it",
        abandoned(timeout_kind=_K.TIMEOUT_IDLE, timeout_message="idle timeout: x"),
        _S.LOST,
        _K.LOST,
        True,
        "idle timeout: x, and the body did not unwind within the graceful window of 5s; its "
        "thread was abandoned and may still be running (result unknown)",
    ),
    (
        "R16-window-passed-after-cancel",
        abandoned(cancel_reason="upstream"),
        _S.LOST,
        _K.LOST,
        True,
        "the body did not unwind within the graceful window of 5s after it was cancelled "
        "(upstream); its thread was abandoned and may still be running (result unknown)",
    ),
    (
        "R16-window-passed-cancel-then-stop-is-a-stop",
        abandoned(status=_S.STOPPING, cancel_reason="upstream", stop_reason="ops"),
        _S.LOST,
        _K.LOST,
        True,
        "the body did not stop within the graceful window of 5s after the stop request "
        "(ops); its thread was abandoned and may still be running (result unknown)",
    ),
    # --- a graceful window that passed before the body began (D55, D92, D103)
    (
        "D103-window-passed-before-the-body-after-stop-is-stopped",
        unbegun(status=_S.STOPPING, stop_reason="ops"),
        _S.STOPPED,
        _K.CANCELLED,
        False,
        "stopped: ops; its body had not begun when the graceful window of 5s passed, and "
        "now never will",
    ),
    (
        "D103-window-passed-before-the-body-after-stop-without-reason",
        unbegun(status=_S.STOPPING),
        _S.STOPPED,
        _K.CANCELLED,
        False,
        "stopped on request; its body had not begun when the graceful window of 5s passed, "
        "and now never will",
    ),
    (
        "D103-window-passed-before-the-body-after-cancel-is-cancelled",
        unbegun(cancel_reason="upstream"),
        _S.CANCELLED,
        _K.CANCELLED,
        False,
        "cancelled: upstream",
    ),
    (
        "D103-window-passed-before-the-body-after-cancel-then-stop-is-a-stop",
        unbegun(status=_S.STOPPING, cancel_reason="upstream", stop_reason="ops"),
        _S.STOPPED,
        _K.CANCELLED,
        False,
        "stopped: ops; its body had not begun when the graceful window of 5s passed, and "
        "now never will",
    ),
    (
        "D103-window-passed-before-the-body-after-timeout-is-the-timeouts",
        unbegun(timeout_kind=_K.TIMEOUT_ATTEMPT, timeout_message=_PER_ATTEMPT),
        _S.RETRY_WAIT,
        _K.TIMEOUT_ATTEMPT,
        True,
        _PER_ATTEMPT,
    ),
    # --- process attempts (§7.4, R9)
    (
        "R9-killed-after-stop-is-stopped",
        ending(AttemptResult.crashed(_KILLED), status=_S.STOPPING, stop_reason="ops", forced=True),
        _S.STOPPED,
        _K.CANCELLED,
        False,
        "stopped: ops; the body did not stop within the graceful window of 5s, so it was "
        f"ended by force ({_KILLED})",
    ),
    (
        "D92-killed-after-stop-while-starting-had-no-body-to-stop",
        ending(
            AttemptResult.crashed(_KILLED),
            status=_S.STOPPING,
            stop_reason="ops",
            forced=True,
            began=False,
        ),
        _S.STOPPED,
        _K.CANCELLED,
        False,
        "stopped: ops; its body had not begun when the graceful window of 5s passed, so its "
        f"process was ended by force ({_KILLED})",
    ),
    (
        "D91-start-timeout-in-retry-wait-with-no-body-begun-is-cancelled",
        ending(None, status=_S.RETRY_WAIT, start_timeout=_START),
        _S.CANCELLED,
        _K.TIMEOUT_START,
        True,
        _START.message,
    ),
    (
        "R9-died-by-itself-while-stopping-is-stopped",
        ending(AttemptResult.crashed(_KILLED), status=_S.STOPPING),
        _S.STOPPED,
        _K.CANCELLED,
        False,
        f"stopped on request; its process ended before the body stopped ({_KILLED})",
    ),
    (
        "R9-died-by-itself-is-nonzero-exit-retried",
        ending(AttemptResult.crashed(_KILLED)),
        _S.RETRY_WAIT,
        _K.NONZERO_EXIT,
        True,
        _KILLED,
    ),
    (
        "R9-died-by-itself-last-attempt-fails",
        ending(AttemptResult.crashed(_KILLED), attempt=3),
        _S.FAILED,
        _K.NONZERO_EXIT,
        True,
        _KILLED,
    ),
    (
        "R9-died-by-itself-policy-retries-only-value-errors",
        ending(
            AttemptResult.crashed(_KILLED),
            policy=RetryPolicy(max_attempts=3, retry_on=(ValueError,)),
        ),
        _S.FAILED,
        _K.NONZERO_EXIT,
        False,
        _KILLED,
    ),
    # --- the start timeout (§6, R1)
    (
        "R1-start-timeout-while-queued-is-cancelled",
        ending(status=_S.QUEUED, start_timeout=_START),
        _S.CANCELLED,
        _K.TIMEOUT_START,
        True,
        _START.message,
    ),
    (
        "R1-start-timeout-while-blocked-is-cancelled",
        ending(status=_S.BLOCKED, start_timeout=_START),
        _S.CANCELLED,
        _K.TIMEOUT_START,
        True,
        _START.message,
    ),
    (
        "R1-start-timeout-while-starting-retries",
        ending(status=_S.STARTING, start_timeout=_START),
        _S.RETRY_WAIT,
        _K.TIMEOUT_START,
        True,
        _START.message,
    ),
    (
        "R1-start-timeout-while-starting-last-attempt-fails",
        ending(status=_S.STARTING, start_timeout=_START, attempt=3),
        _S.FAILED,
        _K.TIMEOUT_START,
        True,
        _START.message,
    ),
]


@pytest.mark.parametrize(
    ("row_ending", "status", "kind", "retryable", "message"),
    [pytest.param(*row[1:], id=row[0]) for row in ROWS],
)
def test_decision_row(
    row_ending: AttemptEnding,
    status: TaskStatus,
    kind: FailureKind | None,
    retryable: bool | None,
    message: str | None,
) -> None:
    decision = decide(row_ending)
    assert decision.status is status
    assert decision.keeps_value is (status is _S.SUCCEEDED)
    assert decision.body_may_run is (status is _S.LOST)
    if kind is None:
        assert decision.failure is None
        return
    assert decision.failure is not None
    assert decision.failure.kind is kind
    assert decision.failure.retryable is retryable
    if message is not None:
        assert decision.failure.message == message


def test_row_ids_are_unique() -> None:
    ids = [row[0] for row in ROWS]
    assert len(ids) == len(set(ids))


def test_reasons_the_transitions_record() -> None:
    """A stop and a cancellation record their reason; a start timeout its message (R1)."""
    stop = decide(ending(AttemptResult.cancelled(), status=_S.STOPPING, stop_reason="ops"))
    killed = decide(ending(AttemptResult.crashed(_KILLED), status=_S.STOPPING, stop_reason="x"))
    cancel = decide(ending(AttemptResult.cancelled(), cancel_reason="upstream"))
    queued = decide(ending(status=_S.QUEUED, start_timeout=_START))
    failed = decide(ending(raised(KeyError("k"))))
    never = decide(unbegun(status=_S.STOPPING, stop_reason="ops"))
    assert (stop.reason, killed.reason, cancel.reason, never.reason) == (
        "ops",
        "x",
        "upstream",
        "ops",
    )
    assert queued.reason == _START.message
    assert failed.reason is None  # the state machine records the failure's message


def test_an_exception_keeps_its_type_and_traceback() -> None:
    try:
        raise OSError("disk full")
    except OSError as exc:
        decision = decide(ending(raised(exc)))
    assert decision.failure is not None
    assert decision.failure.exception_type == "OSError"
    assert decision.failure.traceback is not None
    assert "disk full" in decision.failure.traceback


def test_the_same_ending_gives_the_same_decision() -> None:
    """Pure: asked twice, the same answer; the ending is not changed by asking."""
    facts = ending(raised(OSError("x")), status=_S.RUNNING)
    before = dataclasses.replace(facts)
    first, second = decide(facts), decide(facts)
    assert first == second
    assert isinstance(first, Decision)
    assert facts == before
