"""`reconcile()`: after a crash, honestly mark what lost its supervisor (guide §8.11).

The criterion is "is anyone still managing it" (the lease), never "is it still
moving" (the heartbeat): a healthy task in a long computation does not beat,
and judging liveness by heartbeats would kill it.

| situation                                               | action                         |
|---------------------------------------------------------|--------------------------------|
| lease not expired                                       | untouched: someone manages it  |
| lease expired, holding resources (starting, running,    | ``lost``                       |
| pausing, stopping, or paused in place)                  |                                |
| lease expired, holding nothing (pending, blocked,       | unchanged, reported adoptable  |
| queued, paused before start, retry_wait)                |                                |
| the same, a node of a pipeline (its structure lived in  | ``cancelled``: nobody will     |
| the process that is gone, §8.12)                        | release or start it            |
| a durable task no worker claimed yet (no lease at all)  | untouched, not reported: any   |
|                                                         | worker that serves it claims it|
| lease expired, a durable task in retry_wait             | ``queued`` again, due at its   |
|                                                         | retry time: any worker claims  |
|                                                         | its next attempt (D204)        |
| the supervisor wrote first (version conflict)           | left alone, reported skipped   |
| its stored row cannot be decoded                        | left alone, reported unreadable|

Nothing is re-executed: the store holds states, not recipes. A damaged row is not
judged (its status, its lease may be what is damaged): it is named, and every other
task is reconciled as usual.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from chongming_core import (
    Clock,
    ConcurrencyConflict,
    Failure,
    FailureKind,
    StateMachine,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    Transition,
    UnreadableRow,
    unreadable_in,
)
from chongming_runtime.controller._hand_back import queued_for_retry

__all__ = ["ReconcileReport", "holds_resources", "lease_expired", "reconcile_store"]

S = TaskStatus
_HOLDING = frozenset({S.STARTING, S.RUNNING, S.PAUSING, S.STOPPING})
_IDLE = frozenset({S.PENDING, S.BLOCKED, S.QUEUED, S.PAUSED, S.RETRY_WAIT})


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    """What `reconcile()` found (R17): tuples of snapshots as they were found.

    `unreadable` names the tasks whose stored row could not be decoded: they were not
    judged (nothing about them can be trusted) and are left as they are. `leased` are the
    unfinished tasks another process holds under a lease that has not run out: not judged
    either, since their holder may be alive; one that died is found once its lease ends.
    `cancelled` are the pipeline nodes that were waiting (for their upstream, a slot or a
    retry) when their pipeline's supervisor went: a pipeline cannot go on after its
    process ended (guide §8.12), so nobody would ever release or start them; they never
    started, so they are not lost but cancelled. `requeued` are the durable tasks that
    were waiting to retry when their worker went: queued again, due at their retry time,
    so any worker that serves them claims their next attempt.
    """

    lost: tuple[TaskSnapshot, ...] = ()
    adoptable: tuple[TaskSnapshot, ...] = ()
    skipped: tuple[TaskSnapshot, ...] = ()
    dry_run: bool = False
    unreadable: tuple[UnreadableRow, ...] = ()
    leased: tuple[TaskSnapshot, ...] = ()
    cancelled: tuple[TaskSnapshot, ...] = ()
    requeued: tuple[TaskSnapshot, ...] = ()

    @property
    def changed(self) -> bool:
        """True when a real run marked at least one task lost or cancelled, or queued one
        again."""
        return bool(self.lost or self.cancelled or self.requeued) and not self.dry_run


def holds_resources(snapshot: TaskSnapshot) -> bool:
    if snapshot.status in _HOLDING:
        return True
    return snapshot.status is S.PAUSED and snapshot.paused_in_place


def lease_expired(snapshot: TaskSnapshot, now: datetime) -> bool:
    """True when no live process holds the unfinished task: its lease expired, or it has
    none (the liveness signal of `reconcile_store`; heartbeats never are)."""
    return snapshot.lease_until is None or snapshot.lease_until < now


def _lost_failure(snapshot: TaskSnapshot) -> Failure:
    owner = snapshot.lease_owner or "no supervisor"
    until = snapshot.lease_until.isoformat() if snapshot.lease_until else "never leased"
    # a durable task keeps its arguments in the store: it can be queued again under its id
    again = (
        f"(chongming-task retry {shlex.quote(snapshot.task_id)})"
        if snapshot.durable
        else "under a new id"
    )
    return Failure.of(
        FailureKind.LOST,
        f"the supervisor {owner!r} stopped renewing its lease (expired: {until}) while the task "
        f"was {snapshot.status.value}; its process is gone and the outcome is unknown — check "
        f"side effects before running it again {again}",
    )


def _interrupted_failure(snapshot: TaskSnapshot) -> Failure:
    owner = snapshot.lease_owner or "no supervisor"
    until = snapshot.lease_until.isoformat() if snapshot.lease_until else "never leased"
    return Failure.of(
        FailureKind.CANCELLED,
        f"its pipeline's supervisor {owner!r} stopped renewing its lease (expired: {until}) "
        f"while the node was {snapshot.status.value}; a pipeline cannot go on after its "
        "process ended, so nobody will release or start it (it never ran) — submit the "
        "pipeline again",
        retryable=False,
    )


def reconcile_store(
    store: TaskStore,
    *,
    actor: str,
    clock: Clock,
    buckets: Collection[int] | None,
    dry_run: bool = False,
    skip_task_ids: Collection[str] = (),
    now: datetime | None = None,
) -> ReconcileReport:
    """Mark tasks whose supervisor vanished as lost; see the module docstring.

    Args:
        store: the shared store.
        actor: who reconciles (written into the transitions).
        clock: stamps the transitions and gives "now".
        buckets: only tasks in these buckets (None: every task).
        dry_run: report what would change and write nothing.
        skip_task_ids: tasks this process holds itself (never judged).
        now: the moment leases are compared with (default: the clock's now).
    """
    moment = now or clock.now()
    query = TaskQuery(
        statuses=_HOLDING | _IDLE,
        lease_expired_before=moment,
        buckets=None if buckets is None else frozenset(buckets),
    )
    lost: list[TaskSnapshot] = []
    cancelled: list[TaskSnapshot] = []
    adoptable: list[TaskSnapshot] = []
    requeued: list[TaskSnapshot] = []
    skipped: list[TaskSnapshot] = []
    mine = set(skip_task_ids)
    found = store.query(query)
    for snapshot in found:
        if snapshot.task_id in mine:
            continue
        if not lease_expired(snapshot, moment):
            continue  # a row whose lease columns disagree with its record: someone holds it
        if not holds_resources(snapshot):
            if snapshot.durable and not snapshot.lease_owner:
                continue  # enqueued, never claimed: any worker that serves it claims it (D172)
            if snapshot.durable and snapshot.status is S.RETRY_WAIT:
                # its worker is gone: its next attempt is any worker's, when it is due
                if not dry_run:
                    again, transitions = queued_for_retry(
                        snapshot,
                        actor=actor,
                        reason=(
                            f"reconcile: the lease of {snapshot.lease_owner!r} expired while "
                            "it waited to retry; queued again for its next attempt"
                        ),
                        clock=clock,
                    )
                    if not _saved(store, again, transitions, snapshot):
                        skipped.append(snapshot)
                        continue
                requeued.append(snapshot)
                continue
            if snapshot.pipeline_id is None:
                adoptable.append(snapshot)
                continue
            # a node of a pipeline whose process is gone: nothing will release or start it
            if not dry_run:
                machine = StateMachine(snapshot, clock=clock)
                failure = _interrupted_failure(snapshot)
                machine.mark_cancelled(
                    failure=failure, actor=actor, reason="reconcile: its pipeline's lease expired"
                )
                if not _saved(store, machine.snapshot, machine.transitions, snapshot):
                    skipped.append(snapshot)
                    continue
            cancelled.append(snapshot)
            continue
        if dry_run:
            lost.append(snapshot)
            continue
        machine = StateMachine(snapshot, clock=clock)
        failure = _lost_failure(snapshot)
        if snapshot.status is S.PAUSED:
            # a body suspended in place died with its process: no table edge leads from
            # paused to lost, so the audited door is used and says why
            machine.force_transition(S.LOST, actor=actor, reason=failure.message, failure=failure)
        else:
            machine.mark_lost(failure, actor=actor, reason="reconcile: lease expired")
        ended = _ended_by_lease(machine.snapshot, snapshot)
        if not _saved(store, ended, machine.transitions, snapshot):
            skipped.append(snapshot)
            continue
        lost.append(snapshot)
    unreadable = tuple(row for row in unreadable_in(found) if row.task_id not in mine)
    held = store.query(
        TaskQuery(
            statuses=_HOLDING | {S.PAUSED},
            buckets=None if buckets is None else frozenset(buckets),
        )
    )
    leased = tuple(
        s
        for s in held
        if isinstance(s, TaskSnapshot)
        and s.task_id not in mine
        and holds_resources(s)
        and not lease_expired(s, moment)
    )
    return ReconcileReport(
        tuple(lost),
        tuple(adoptable),
        tuple(skipped),
        dry_run,
        unreadable,
        leased,
        tuple(cancelled),
        tuple(requeued),
    )


def _saved(
    store: TaskStore,
    ended: TaskSnapshot,
    transitions: Sequence[Transition],
    found: TaskSnapshot,
) -> bool:
    """Write `ended` and its `transitions` over `found` (the task as it was read); False
    when its supervisor wrote first (a version conflict): left alone."""
    try:
        store.save(ended, expect_version=found.status_version, transitions=transitions)
    except ConcurrencyConflict:
        return False
    return True


def _ended_by_lease(lost: TaskSnapshot, before: TaskSnapshot) -> TaskSnapshot:
    """`lost` with its last attempt ended when the lease of `before` (the task as found)
    expired, not when it was noticed: the supervisor vouched for the body until then, and
    nobody knows anything after it. A task noticed hours after its process died ran
    seconds, not hours (D58); one suspended in place was paused until then (D88)."""
    attempts = lost.attempts
    lease_until = before.lease_until
    if lease_until is None or not attempts:
        return lost
    last = attempts[-1]
    if last.ended_at is None or last.ended_at <= lease_until:
        return lost
    if last.started_at is not None and lease_until < last.started_at:
        return lost  # a lease older than the attempt (written by hand): it says nothing
    paused = before.paused_for(lease_until)
    ended = dataclasses.replace(
        last, ended_at=lease_until, paused_seconds=last.paused_seconds if paused is None else paused
    )
    return lost.evolve(attempts=(*attempts[:-1], ended))
