"""Commands for a task whose holder is gone (its lease expired, or it never had one).

No process will ever claim such a command as its own, so a poller that meets one
settles it instead of handing it back at every poll: open forever, those commands
would crowd a poll's batch (the oldest first) and keep the commands of live tasks
from being claimed. A stop of a task that holds nothing (queued, paused before its
start, waiting for a retry) is applied in the store, under the task's version: an
operator's stop means the task must not run. Anything else is completed as ignored,
with what to do: a task that held an executor slot is for ``reconcile()`` to mark
``lost`` (design D50).
"""

from __future__ import annotations

from datetime import datetime

from chongming_core import (
    Command,
    CommandAction,
    SnapshotWrite,
    StateMachine,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
)
from chongming_core._clock import Clock

__all__ = ["holder_gone", "settle_orphaned"]

_S = TaskStatus
#: Statuses in which a task holds nothing: a stop takes effect at once (guide §9).
_HOLDS_NOTHING = frozenset({_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT})


def holder_gone(snapshot: TaskSnapshot, now: datetime) -> bool:
    """True when no live process holds the unfinished task: its lease expired (or it has
    none), as `reconcile()` judges it."""
    return snapshot.lease_until is None or snapshot.lease_until < now


def settle_orphaned(
    store: TaskStore, command: Command, action: CommandAction, snapshot: TaskSnapshot, clock: Clock
) -> str | None:
    """The result of `command` for a task whose holder is gone; None (not held here: hand it
    back) when another writer changed the task meanwhile (its holder may be back)."""
    holder = snapshot.lease_owner or "nobody"
    gone = (
        "it has no lease"
        if snapshot.lease_until is None
        else f"its lease expired at {snapshot.lease_until:%Y-%m-%d %H:%M:%S} UTC"
    )
    status = snapshot.status
    idle = status in _HOLDS_NOTHING or (status is _S.PAUSED and not snapshot.paused_in_place)
    if action is CommandAction.STOP and idle:
        machine = StateMachine(snapshot, clock=clock)
        transition = machine.mark_stopped(
            actor=f"{command.issued_by} (command)", reason=command.reason
        )
        write = SnapshotWrite(machine.snapshot, snapshot.status_version, (transition,))
        if store.save_many([write]):  # a conflict: someone wrote the task meanwhile
            return None
        return f"applied: its holder {holder!r} is gone ({gone}); stopped in the store"
    advice = (
        "run reconcile() to mark it lost"
        if not idle
        else "it waits for a node to take it over; stop it, or resubmit it"
    )
    return (
        f"ignored: its holder {holder!r} is gone ({gone}) and it is {status.value}; "
        f"nothing can {action.value} it — {advice}"
    )
