"""`StateMachine`: the only writer of a task's status (guide §1.3, §9).

Each event checks the transition table and the guards of §9.3, produces a new
immutable `TaskSnapshot` with ``status_version`` raised by exactly one, and
appends a `Transition`. Illegal moves raise `InvalidTransition` and leave the
snapshot untouched; nothing fails silently.

The new snapshot is built when someone reads it, not at every event: an event
records its changes (a few fields) over the last snapshot built, and `snapshot`
applies them all at once. A task driven through four events by a runtime whose
store writer reads it once costs one snapshot, not four (the changes are applied in
order, so the snapshot read is the one the events produced one by one).

A machine is not thread-safe by itself: its owner (a `TaskRun`) serialises
every call under one lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from chongming_core import _triggers as trig
from chongming_core._arguments import arguments_problem
from chongming_core._clock import SYSTEM_CLOCK, Clock
from chongming_core._errors import AttemptsExhausted, ConfigurationError, InvalidTransition
from chongming_core._failure import Failure, FailureKind
from chongming_core._json import portable_json
from chongming_core._records import (
    AttemptRecord,
    TaskSnapshot,
    Transition,
    new_transition,
)
from chongming_core._status import (
    ACTIVE_STATUSES,
    NON_TERMINAL_STATUSES,
    TERMINAL_STATUSES,
    TRANSITIONS,
    TaskStatus,
)
from chongming_core._task_spec import validate_tags

__all__ = ["StateMachine"]

_S = TaskStatus
_REVIVABLE = frozenset({_S.FAILED, _S.STOPPED, _S.CANCELLED, _S.LOST})
_DEFAULT_ACTOR = "system"
#: Exits an in-place paused task may not take directly: its body is still on the stack (R3),
#: so it must go back to running and unwind first (queued would start a second body).
_NEEDS_UNWIND = frozenset({_S.STOPPED, _S.CANCELLED, _S.QUEUED})


class StateMachine:
    """Drives one task through the lifecycle and records every step.

    Example::

        machine = StateMachine.create("t1", "extract", max_attempts=3)
        machine.mark_queued()
        machine.mark_starting(executor="thread")
        machine.mark_running()
        machine.mark_succeeded(outcome={"rows": 42})
    """

    __slots__ = ("_changes", "_clock", "_snapshot", "_transitions")

    def __init__(
        self,
        snapshot: TaskSnapshot,
        transitions: Iterable[Transition] = (),
        *,
        clock: Clock | None = None,
    ) -> None:
        self._snapshot = snapshot
        # the fields changed since `_snapshot` was built (always with status and version),
        # applied by `snapshot` when read; None while `_snapshot` is current
        self._changes: dict[str, Any] | None = None
        # a tuple, or the transition itself while there is one: a waiting task's one
        # transition costs no container (a list's 88 bytes, a tuple's 48), and
        # `transitions` hands the tuple out without a copy (a machine records a handful)
        recorded = tuple(transitions)
        self._transitions: tuple[Transition, ...] | Transition = (
            recorded[0] if len(recorded) == 1 else recorded
        )
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK

    @classmethod
    def create(
        cls,
        task_id: str,
        name: str,
        *,
        max_attempts: int = 1,
        label: str | None = None,
        description: str | None = None,
        tags: Iterable[str] = (),
        priority: int = 0,
        bucket: int | None = None,
        bucket_key: str | None = None,
        pipeline_id: str | None = None,
        node_id: str | None = None,
        clock: Clock | None = None,
        durable: bool = False,
        arguments: Mapping[str, Any] | None = None,
        run_at: datetime | None = None,
    ) -> StateMachine:
        """A new task in ``pending`` at version 0, with an empty trajectory.

        A `durable` task carries its `arguments` (see `durable_arguments`) and is not
        claimed by a worker before `run_at`.
        """
        if not isinstance(task_id, str) or not task_id:
            raise ConfigurationError(f"task_id must be a non-empty string, got {task_id!r}")
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"name must be a non-empty string, got {name!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigurationError(
                f"max_attempts must be an integer >= 1 (it counts the first try), "
                f"got {max_attempts!r}"
            )
        tag_set = validate_tags(tags)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ConfigurationError(f"priority must be an integer, got {priority!r}")
        if not isinstance(durable, bool):
            raise ConfigurationError(f"durable must be True or False, got {durable!r}")
        problem = arguments_problem(arguments)
        if problem is not None:
            raise ConfigurationError(problem)
        if arguments is not None:  # as every store hands it back: tuples as lists
            arguments = portable_json(dict(arguments))
        if run_at is not None and (not isinstance(run_at, datetime) or run_at.utcoffset() is None):
            raise ConfigurationError(f"run_at must be a timezone-aware datetime, got {run_at!r}")
        clk: Clock = clock if clock is not None else SYSTEM_CLOCK
        now = clk.now()
        snapshot = TaskSnapshot(
            task_id=task_id,
            name=name,
            max_attempts=max_attempts,
            label=label,
            description=description,
            tags=tag_set,
            priority=priority,
            bucket=bucket,
            bucket_key=bucket_key,
            pipeline_id=pipeline_id,
            node_id=node_id,
            created_at=now,
            updated_at=now,
            durable=durable,
            arguments=arguments,
            run_at=run_at,
        )
        return cls(snapshot, clock=clk)

    # ------------------------------------------------------------------ reading
    @property
    def snapshot(self) -> TaskSnapshot:
        """The current immutable snapshot (built now if an event changed the task since it
        was last read)."""
        changes = self._changes
        if changes is None:
            return self._snapshot
        snapshot = self._snapshot = self._snapshot.evolve(**changes)
        self._changes = None
        return snapshot

    @property
    def base(self) -> TaskSnapshot:
        """A snapshot of this task that may be older than `snapshot`: the fields fixed at
        its creation (id, name, label, tags, priority, bucket, pipeline) are current. Reading
        it builds nothing and changes nothing, so it needs none of the owner's locking."""
        return self._snapshot

    @property
    def status(self) -> TaskStatus:
        """The current status."""
        changes = self._changes
        if changes is None:
            return self._snapshot.status
        status: TaskStatus = changes["status"]
        return status

    @property
    def version(self) -> int:
        """The current ``status_version``."""
        changes = self._changes
        if changes is None:
            return self._snapshot.status_version
        version: int = changes["status_version"]
        return version

    @property
    def attempt(self) -> int:
        """The current attempt number (0 before the first start)."""
        attempt: int = self._field("attempt")
        return attempt

    @property
    def max_attempts(self) -> int:
        """The current attempt budget (the first try included)."""
        budget: int = self._field("max_attempts")
        return budget

    def _field(self, name: str) -> Any:
        """The current value of the snapshot field `name`, without building a snapshot."""
        changes = self._changes
        if changes is not None and name in changes:
            return changes[name]
        return getattr(self._snapshot, name)

    def _paused_in_place_now(self) -> bool:
        """Whether the task is paused in place now (its body held at a checkpoint)."""
        return self.status is _S.PAUSED and bool(self._field("paused_in_place"))

    def _paused_through(self, end: datetime) -> float:
        """`paused_through` of the current state, without building a snapshot."""
        seconds: float = self._field("paused_seconds")
        if not self._paused_in_place_now():
            return seconds
        since: datetime = self._field("updated_at")
        return seconds + max(0.0, (end - since).total_seconds())

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self._snapshot.task_id

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """Every transition this machine recorded (or was rehydrated with), oldest first."""
        recorded = self._transitions
        return recorded if isinstance(recorded, tuple) else (recorded,)

    @property
    def clock(self) -> Clock:
        """The clock that stamps transitions."""
        return self._clock

    # ------------------------------------------------------------------ pre-checks
    def can(self, target: TaskStatus) -> bool:
        """Whether moving to `target` now would pass the table and the guards."""
        return self._refusal(TaskStatus(target)) is None

    def can_stop(self) -> bool:
        """Whether a stop request can take effect now (not terminal, not already stopping)."""
        return self.status in NON_TERMINAL_STATUSES and self.status is not _S.STOPPING

    def can_pause(self) -> bool:
        """Whether a pause can be requested now."""
        return self.status in {_S.STARTING, _S.RUNNING, _S.QUEUED, _S.RETRY_WAIT}

    def can_resume(self) -> bool:
        """Whether the task is paused (or pausing) and can be resumed."""
        return self.status in {_S.PAUSED, _S.PAUSING}

    def can_retry(self) -> bool:
        """Whether `retry()` can revive the task (failed, stopped, cancelled or lost)."""
        return self.status in _REVIVABLE

    def _refusal(self, target: TaskStatus) -> str | None:
        """Why moving to `target` is refused, or None when it is allowed."""
        current = self.status
        if target not in TRANSITIONS[current]:
            return "not in the transition table"
        field = self._field
        if target is _S.RUNNING:
            if field("started_at") is None:
                return "mark_running() needs started_at: the task never started"
            if current is _S.PAUSED and not field("paused_in_place"):
                return "the task was paused before it started; resume it to queued"
        if target is _S.STARTING and field("attempt") + 1 > field("max_attempts"):
            return "attempt budget spent"
        if target is _S.RETRY_WAIT and field("attempt") >= field("max_attempts"):
            return f"no attempt left ({field('attempt')}/{field('max_attempts')}) to wait for"
        if current is _S.PAUSED and field("paused_in_place") and target in _NEEDS_UNWIND:
            return (
                "the task is paused in place and its body is still on the stack; "
                "move it back to running first so the body can unwind"
            )
        return None

    def _check(self, target: TaskStatus, action: str) -> None:
        refusal = self._refusal(target)
        if refusal is None:
            return
        snap = self.snapshot
        if target is _S.STARTING and refusal == "attempt budget spent":
            raise AttemptsExhausted(
                task_id=snap.task_id, attempt=snap.attempt, max_attempts=snap.max_attempts
            )
        allowed = {t for t in TRANSITIONS[snap.status] if self._refusal(t) is None}
        detail = None if refusal == "not in the transition table" else refusal
        raise InvalidTransition(
            task_id=snap.task_id,
            current=snap.status,
            target=target,
            action=action,
            allowed=allowed,
            detail=detail,
        )

    # ------------------------------------------------------------------ core write
    def _apply(
        self,
        target: TaskStatus,
        trigger: str,
        actor: str,
        reason: str | None,
        *,
        at: datetime | None = None,
        **changes: Any,
    ) -> Transition:
        now = self._clock.now() if at is None else at
        current = self.status
        version = self.version + 1
        if target in TERMINAL_STATUSES:
            changes.setdefault("finished_at", now)
            changes.setdefault("retry_at", None)  # an ended task has no next attempt due
            if self._field("lease_until") is not None:  # a finished task holds no lease
                changes.setdefault("lease_until", None)
        executing = current in ACTIVE_STATUSES or (
            current is _S.PAUSED and bool(self._field("paused_in_place"))
        )
        if executing and target not in ACTIVE_STATUSES and target is not _S.PAUSED:
            # the attempt ended; a body suspended in place ends only through
            # force_transition (reconcile: its process died), and its attempt ended too
            changes.setdefault(
                "attempts", (*self._field("attempts"), self._attempt_record(target, now, changes))
            )
        record = new_transition(
            self._snapshot.task_id, current, target, trigger, actor, reason, version, now
        )
        # the changes of this event, over those not yet built into a snapshot (`snapshot`)
        changes["status"] = target
        changes["status_version"] = version
        changes["updated_at"] = now
        pending = self._changes
        if pending is None:
            self._changes = changes
        else:
            pending.update(changes)
        recorded = self._transitions
        if not isinstance(recorded, tuple):
            self._transitions = (recorded, record)
        elif recorded:
            self._transitions = (*recorded, record)
        else:
            self._transitions = record
        return record

    def _attempt_record(
        self, target: TaskStatus, now: Any, changes: dict[str, Any]
    ) -> AttemptRecord:
        field = self._field
        failure = changes["failure"] if "failure" in changes else field("failure")
        return AttemptRecord(
            number=field("attempt"),
            started_at=field("started_at"),
            ended_at=now,
            status=target,
            failure=None if target is _S.SUCCEEDED else failure,
            paused_seconds=self._paused_through(now),
        )

    # ------------------------------------------------------------------ events
    def mark_blocked(self, *, actor: str = _DEFAULT_ACTOR, reason: str | None = None) -> Transition:
        """pending -> blocked: waiting for upstream nodes."""
        self._check(_S.BLOCKED, trig.BLOCK)
        return self._apply(_S.BLOCKED, trig.BLOCK, actor, reason)

    def mark_queued(
        self,
        *,
        actor: str = _DEFAULT_ACTOR,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> Transition:
        """Accepted and waiting for an execution slot (from pending, blocked, retry_wait, or a
        pause before start).

        `at` is when it was accepted, by default the clock's now: a task created and queued
        in one act (a submission) passes its creation time, so both are one moment.

        Raises:
            ConfigurationError: `at` is not a timezone-aware datetime, or it is before the
                task's last change.
        """
        trigger = trig.RESUME if self.status is _S.PAUSED else trig.QUEUE
        self._check(_S.QUEUED, trigger)
        if at is not None:
            if not isinstance(at, datetime) or at.utcoffset() is None:
                raise ConfigurationError(f"at must be a timezone-aware datetime, got {at!r}")
            last = self._field("updated_at")
            if last is not None and at < last:
                raise ConfigurationError(
                    f"at {at.isoformat()} is before the task's last change ({last.isoformat()}); "
                    "a transition never goes back in time"
                )
        return self._apply(
            _S.QUEUED, trigger, actor, reason, at=at, paused_in_place=False, retry_at=None
        )

    def mark_starting(
        self,
        *,
        executor: str | None = None,
        actor: str = _DEFAULT_ACTOR,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> Transition:
        """queued/retry_wait -> starting: a new attempt begins (at `at`, by default now).

        Raises:
            AttemptsExhausted: when ``attempt + 1 > max_attempts``.
        """
        self._check(_S.STARTING, trig.START)
        now = self._clock.now() if at is None else at
        return self._apply(
            _S.STARTING,
            trig.START,
            actor,
            reason,
            at=now,
            attempt=self._field("attempt") + 1,
            started_at=now,
            finished_at=None,
            failure=None,
            outcome=None,
            retry_at=None,
            pid=None,
            executor=executor if executor is not None else self._field("executor"),
            progress=None,
            paused_in_place=False,
            paused_seconds=0.0,
        )

    def mark_running(
        self,
        *,
        pid: int | None = None,
        heartbeat_at: datetime | None = None,
        actor: str = _DEFAULT_ACTOR,
        reason: str | None = None,
        trigger: str | None = None,
    ) -> Transition:
        """starting -> running (the body was launched), or an in-place paused task resumed.

        `heartbeat_at`, when given, is recorded as the latest sign of life.
        Guard: the task must have a ``started_at``.
        """
        if trigger is None:
            trigger = trig.RESUME if self.status is _S.PAUSED else trig.LAUNCH
        self._check(_S.RUNNING, trigger)
        changes: dict[str, Any] = {"paused_in_place": False}
        if self._paused_in_place_now():  # a pause in place ends: count it
            changes["paused_seconds"] = self._paused_through(self._clock.now())
        if pid is not None:
            changes["pid"] = pid
        if heartbeat_at is not None:
            changes["last_heartbeat_at"] = heartbeat_at
        return self._apply(_S.RUNNING, trigger, actor, reason, **changes)

    def mark_pausing(self, *, actor: str = _DEFAULT_ACTOR, reason: str | None = None) -> Transition:
        """starting/running -> pausing: a pause was requested, waiting for a checkpoint."""
        self._check(_S.PAUSING, trig.PAUSE)
        return self._apply(_S.PAUSING, trig.PAUSE, actor, reason)

    def mark_paused(self, *, actor: str = _DEFAULT_ACTOR, reason: str | None = None) -> Transition:
        """pausing -> paused (suspended in place at a checkpoint), or queued/retry_wait ->
        paused (paused before it started; holds nothing)."""
        in_place = self.status is _S.PAUSING
        trigger = trig.PAUSED if in_place else trig.PAUSE
        self._check(_S.PAUSED, trigger)
        return self._apply(_S.PAUSED, trigger, actor, reason, paused_in_place=in_place)

    def abort_pause(self, *, actor: str = _DEFAULT_ACTOR, reason: str | None = None) -> Transition:
        """pausing -> running: the pause window passed without reaching a checkpoint.

        Guard: only from ``pausing``.
        """
        if self.status is not _S.PAUSING:
            raise InvalidTransition(
                task_id=self.task_id,
                current=self.status,
                target=_S.RUNNING,
                action=trig.ABORT_PAUSE,
                allowed={t for t in TRANSITIONS[self.status] if self._refusal(t) is None},
                detail="abort_pause() is only valid while pausing",
            )
        return self._apply(_S.RUNNING, trig.ABORT_PAUSE, actor, reason)

    def resume(self, *, actor: str = _DEFAULT_ACTOR, reason: str | None = None) -> Transition:
        """paused -> running (in-place pause) or paused -> queued (paused before start);
        pausing -> running withdraws a pause that was not reached yet."""
        if not self.can_resume():
            raise InvalidTransition(
                task_id=self.task_id,
                current=self.status,
                target=None,
                action=trig.RESUME,
                allowed={t for t in TRANSITIONS[self.status] if self._refusal(t) is None},
                detail="resume() applies only to a paused or pausing task",
            )
        if self.status is _S.PAUSED and not self._field("paused_in_place"):
            return self.mark_queued(actor=actor, reason=reason)
        return self.mark_running(actor=actor, reason=reason, trigger=trig.RESUME)

    def mark_stopping(
        self, *, actor: str = _DEFAULT_ACTOR, reason: str | None = None
    ) -> Transition:
        """starting/running/pausing -> stopping: the graceful window begins."""
        self._check(_S.STOPPING, trig.STOP)
        return self._apply(_S.STOPPING, trig.STOP, actor, reason)

    def mark_stopped(
        self,
        *,
        failure: Failure | None = None,
        actor: str = _DEFAULT_ACTOR,
        reason: str | None = None,
    ) -> Transition:
        """-> stopped: an operator's stop took effect (kind ``cancelled``, not retryable)."""
        trigger = trig.STOPPED if self.status is _S.STOPPING else trig.STOP
        self._check(_S.STOPPED, trigger)
        if failure is None:
            text = f"stopped: {reason}" if reason else "stopped on request"
            failure = Failure.of(FailureKind.CANCELLED, text, retryable=False)
        return self._apply(_S.STOPPED, trigger, actor, reason, failure=failure)

    def mark_succeeded(
        self,
        *,
        outcome: Any = None,
        actor: str = _DEFAULT_ACTOR,
        reason: str | None = None,
    ) -> Transition:
        """running/stopping -> succeeded, keeping the body's return value."""
        self._check(_S.SUCCEEDED, trig.SUCCEED)
        return self._apply(_S.SUCCEEDED, trig.SUCCEED, actor, reason, outcome=outcome, failure=None)

    def mark_failed(
        self,
        failure: Failure,
        *,
        actor: str = _DEFAULT_ACTOR,
        reason: str | None = None,
    ) -> Transition:
        """-> failed: an error with no retry left, or one not worth retrying."""
        self._check(_S.FAILED, trig.FAIL)
        return self._apply(_S.FAILED, trig.FAIL, actor, reason or failure.message, failure=failure)

    def mark_retry_wait(
        self,
        failure: Failure,
        *,
        retry_at: Any = None,
        actor: str = _DEFAULT_ACTOR,
        reason: str | None = None,
    ) -> Transition:
        """starting/running -> retry_wait: this attempt failed, another one will follow."""
        self._check(_S.RETRY_WAIT, trig.RETRY_WAIT)
        return self._apply(
            _S.RETRY_WAIT,
            trig.RETRY_WAIT,
            actor,
            reason or failure.message,
            failure=failure,
            retry_at=retry_at,
        )

    def mark_cancelled(
        self,
        *,
        failure: Failure | None = None,
        actor: str = _DEFAULT_ACTOR,
        reason: str | None = None,
    ) -> Transition:
        """-> cancelled: the orchestration layer gave up on the task (e.g. fail_fast)."""
        self._check(_S.CANCELLED, trig.CANCEL)
        if failure is None:
            failure = Failure.of(
                FailureKind.CANCELLED, f"cancelled: {reason}" if reason else "cancelled"
            )
        return self._apply(_S.CANCELLED, trig.CANCEL, actor, reason, failure=failure)

    def mark_skipped(
        self,
        *,
        failure: Failure | None = None,
        actor: str = _DEFAULT_ACTOR,
        reason: str | None = None,
    ) -> Transition:
        """-> skipped: the task should not run (condition false or upstream did not succeed)."""
        self._check(_S.SKIPPED, trig.SKIP)
        if failure is None:
            failure = Failure.of(
                FailureKind.CONDITION_FALSE, f"skipped: {reason}" if reason else "skipped"
            )
        return self._apply(_S.SKIPPED, trig.SKIP, actor, reason, failure=failure)

    def mark_lost(
        self,
        failure: Failure | None = None,
        *,
        actor: str = _DEFAULT_ACTOR,
        reason: str | None = None,
    ) -> Transition:
        """-> lost: the carrier vanished or was abandoned; the result is unknown.

        Pass a failure that says why: without one, nobody can tell whether to rerun.
        """
        self._check(_S.LOST, trig.LOSE)
        if failure is None:
            failure = Failure.of(FailureKind.LOST, reason or "carrier lost; no cause recorded")
        return self._apply(_S.LOST, trig.LOSE, actor, reason or failure.message, failure=failure)

    # ------------------------------------------------------------------ revival
    def retry(self, *, actor: str = _DEFAULT_ACTOR, reason: str | None = None) -> Transition:
        """Revive a failed/stopped/cancelled/lost task to ``queued``, keeping its attempt history.

        When the attempt budget is spent, it is raised by one so the new attempt can start.
        """
        if not self.can_retry():
            raise InvalidTransition(
                task_id=self.task_id,
                current=self.status,
                target=_S.QUEUED,
                action=trig.RETRY,
                allowed={t for t in TRANSITIONS[self.status] if self._refusal(t) is None},
                detail="retry() revives only failed, stopped, cancelled or lost tasks",
            )
        return self._apply(
            _S.QUEUED,
            trig.RETRY,
            actor,
            reason,
            max_attempts=max(self._field("max_attempts"), self._field("attempt") + 1),
            finished_at=None,
            retry_at=None,
            paused_in_place=False,
        )

    def reset(
        self,
        *,
        confirm: bool = False,
        actor: str = _DEFAULT_ACTOR,
        reason: str | None = None,
    ) -> Transition:
        """Back to ``pending``, discarding every attempt record. Dangerous: needs ``confirm=True``.

        The trajectory itself is append-only and keeps the reset as a transition.
        """
        if confirm is not True:
            raise ConfigurationError(
                f"reset() of task {self.task_id!r} discards its whole attempt history; "
                "call reset(confirm=True) if that is really intended, or use retry() to keep it"
            )
        if self.status in ACTIVE_STATUSES or self._field("paused_in_place"):
            raise InvalidTransition(
                task_id=self.task_id,
                current=self.status,
                target=_S.PENDING,
                action=trig.RESET,
                allowed={t for t in TRANSITIONS[self.status] if self._refusal(t) is None},
                detail="an executor still holds the task; stop it and wait for a terminal status",
            )
        return self._apply(
            _S.PENDING,
            trig.RESET,
            actor,
            reason,
            attempt=0,
            attempts=(),
            failure=None,
            outcome=None,
            started_at=None,
            finished_at=None,
            retry_at=None,
            progress=None,
            pid=None,
            paused_in_place=False,
            paused_seconds=0.0,
        )

    def force_transition(
        self,
        target: TaskStatus,
        *,
        actor: str,
        reason: str,
        failure: Failure | None = None,
    ) -> Transition:
        """Move to any status, bypassing the table. The only such door, so it is audited:
        `actor` and `reason` must be non-empty. `failure` records why, for failed/lost targets."""
        target = TaskStatus(target)
        if not (isinstance(actor, str) and actor.strip()) or not (
            isinstance(reason, str) and reason.strip()
        ):
            raise InvalidTransition(
                task_id=self.task_id,
                current=self.status,
                target=target,
                action=trig.FORCE,
                allowed={t for t in TRANSITIONS[self.status] if self._refusal(t) is None},
                detail="force_transition() needs a non-empty actor and reason for the audit trail",
            )
        changes: dict[str, Any] = {}
        if target not in TERMINAL_STATUSES:
            changes["finished_at"] = None
        if target is not _S.PAUSED:
            changes["paused_in_place"] = False
        if failure is not None:
            changes["failure"] = failure
        return self._apply(target, trig.FORCE, actor, reason, **changes)
