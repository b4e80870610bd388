"""Commands for a task whose holder is gone (`lease_expired`: its lease ran out, or it has
none).

No process will ever claim such a command as its own, so a poller that meets one
settles it instead of handing it back at every poll: open forever, those commands
would crowd a poll's batch (the oldest first) and keep the commands of live tasks
from being claimed. A stop of a task that holds nothing (queued, paused before its
start, waiting for a retry) and whose lease expired is applied in the store, under
the task's version: an operator's stop means the task must not run. A row no node
ever leased (written outside a controller, or forged) is never changed. Anything
else is completed as ignored, with what to do: a task that held an executor slot
is for ``reconcile()`` to mark ``lost`` (design D50).
"""

from __future__ import annotations

from chongming_core import (
    Clock,
    Command,
    CommandAction,
    SnapshotWrite,
    StateMachine,
    TaskSnapshot,
    TaskStore,
)
from chongming_runtime.controller._reconcile import holds_resources

__all__ = ["settle_orphaned"]


def settle_orphaned(
    store: TaskStore, command: Command, action: CommandAction, snapshot: TaskSnapshot, clock: Clock
) -> str | None:
    """The result of `command` for a task whose holder is gone; None (not held here: hand it
    back) when another writer changed the task meanwhile (its holder may be back)."""
    status = snapshot.status
    if snapshot.lease_until is None:
        return (
            f"ignored: no node holds the task (it was never leased: written outside a "
            f"controller); it is {status.value} and was left unchanged"
        )
    holder = snapshot.lease_owner or "nobody"
    gone = f"its lease expired at {snapshot.lease_until:%Y-%m-%d %H:%M:%S} UTC"
    idle = not holds_resources(snapshot)
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
        else "it waits for a node to take it over; stop it, or resubmit it under a new id"
    )
    return (
        f"ignored: its holder {holder!r} is gone ({gone}) and it is {status.value}; "
        f"nothing can {action.value} it — {advice}"
    )
