"""A closing worker hands its durable tasks that wait to retry back to the queue (D207).

Such a task has no body running: its last attempt ended and its next one is due at
``retry_at``. Stopping it with the worker would end a task the fleet still means to run
because one of its workers left (a rolling restart would stop every task between two
attempts). So the worker gives it up instead: ``retry_wait -> queued``, its lease cleared
and ``run_at`` its retry time, one compare-and-set under the version it holds. Any worker
that serves the name and owns the bucket claims the next attempt when it is due, as after
`reconcile` queued again the task of a worker that died (D204).

The run is withdrawn first (`TaskRun.withdraw`: it begins no attempt from then on), so
no body starts here once the task may be another worker's. Once the store took the
hand-back, the writer stops writing the task (`StoreWriter.release`): the close's stop of
the run is never written, and the run is reported as the store holds it. When the
hand-back is not taken (another process changed the task, the store is down), nothing is
released: the close stops the run as before and writes it. A claim released by
`release_claim` keeps its version, so a lease renewal recorded before the close may still
land on it; the task is then claimable when that lease runs out.
"""

from __future__ import annotations

import logging

from chongming_core import (
    Clock,
    ConcurrencyConflict,
    StateMachine,
    StoreError,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    Transition,
)

__all__ = ["hand_back", "queued_for_retry"]

_log = logging.getLogger("chongming_task.controller")


def queued_for_retry(
    waiting: TaskSnapshot, *, actor: str, reason: str, clock: Clock
) -> tuple[TaskSnapshot, tuple[Transition, ...]]:
    """The durable task `waiting` (``retry_wait``) queued again for any worker: the row to
    write under its version, lease cleared and due at its retry time, and its transition
    (a closing worker's hand-back here; `reconcile` for a worker that is gone, D204)."""
    machine = StateMachine(waiting, clock=clock)
    machine.mark_queued(actor=actor, reason=reason)
    queued = machine.snapshot.evolve(lease_owner=None, lease_until=None, run_at=waiting.retry_at)
    return queued, machine.transitions


def hand_back(
    store: TaskStore, task_id: str, *, owner: str, reason: str, clock: Clock
) -> TaskSnapshot | None:
    """Queue the durable task `task_id` again for any worker, if the store shows it waiting
    to retry (or queued for its retry) under `owner`'s lease; returns the row written, or
    None when it was left as it is (not waiting, another holder, a conflict, a store
    error)."""
    try:
        stored = store.get(task_id)
    except StoreError as exc:
        _log.warning("could not hand back task %r: %s", task_id, exc)
        return None
    if stored is None or not stored.durable or stored.lease_owner != owner:
        return None
    if stored.status is TaskStatus.QUEUED:
        # its retry came due and its run wrote ``queued`` before the close: free the claim
        try:
            if store.release_claim(task_id, owner, stored.status_version):
                return store.get(task_id)
        except StoreError as exc:
            _log.warning("could not hand back task %r: %s", task_id, exc)
        return None
    if stored.status is not TaskStatus.RETRY_WAIT:
        return None
    queued, transitions = queued_for_retry(
        stored,
        actor=owner,
        reason=f"handed back to the queue ({reason}); its next attempt is any worker's",
        clock=clock,
    )
    try:
        store.save(queued, expect_version=stored.status_version, transitions=transitions)
    except (ConcurrencyConflict, StoreError) as exc:
        _log.warning("could not hand back task %r: %s", task_id, exc)
        return None
    return queued
