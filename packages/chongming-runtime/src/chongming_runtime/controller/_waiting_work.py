"""Controls of a durable task that no process runs yet (queued, or paused before its start).

Such a task has no body running anywhere, so nobody to send a command to: the
controller that asks writes the change itself, one compare-and-set under the task's
version. A worker that claimed it meanwhile cannot have started it — its ``starting``
is a compare-and-set under the same version — so exactly one of the two writes wins:
when the stop wins, the worker's start is refused and it never runs the body
(`Controller` stops a claimed run whose start write conflicts); when the start wins,
this write conflicts and the caller sends a command to the new holder instead.

A pause before the start (``queued -> paused``) makes the task unclaimable; a resume
(``paused -> queued``) makes it claimable again, and on PostgreSQL wakes the workers.

A task paused before its start under a live lease has a holder: a worker whose run was
paused while it waited to retry (only a run pauses a task; a claim never does). That run
is the writer of the task: a resume written here made the task claimable while the paused
run still held it, and the same worker claimed it a second time. The caller sends its
holder a command instead. (A queued task under a live lease is left to the race above:
the holder's start is a compare-and-set, and it stops its run when it loses.)
"""

from __future__ import annotations

from chongming_core import (
    Clock,
    CommandAction,
    SnapshotWrite,
    StateMachine,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
)
from chongming_core.backend import lease_is_live

__all__ = ["settle_waiting"]

_S = TaskStatus


def settle_waiting(
    store: TaskStore,
    snapshot: TaskSnapshot,
    action: CommandAction,
    *,
    actor: str,
    reason: str | None,
    clock: Clock,
) -> bool | None:
    """Apply `action` to the waiting durable task `snapshot` in the store.

    Returns:
        True when it was applied; False when it does not apply to the task as it is
        (a resume of a queued task, say); None when `snapshot` is not a waiting durable
        task, when it is paused under a live lease (its holder's run writes it), or when
        another writer moved it on meanwhile (a worker started it): the caller sends a
        command to its holder.
    """
    if not snapshot.durable:
        return None
    status = snapshot.status
    paused_before_start = status is _S.PAUSED and not snapshot.paused_in_place
    if status is not _S.QUEUED and not paused_before_start:
        return None
    if paused_before_start and lease_is_live(
        snapshot.lease_owner, snapshot.lease_until, clock.now()
    ):
        return None
    machine = StateMachine(snapshot, clock=clock)
    if action is CommandAction.STOP:
        transition = machine.mark_stopped(actor=actor, reason=reason)
    elif action is CommandAction.PAUSE:
        if paused_before_start:
            return False
        transition = machine.mark_paused(actor=actor, reason=reason)
    else:
        if not paused_before_start:
            return False
        transition = machine.mark_queued(actor=actor, reason=reason)
    changed = machine.snapshot
    if changed.lease_owner is not None:  # a claim made meanwhile is void now
        changed = changed.evolve(lease_owner=None, lease_until=None)
    write = SnapshotWrite(changed, snapshot.status_version, (transition,))
    return None if store.save_many([write]) else True
