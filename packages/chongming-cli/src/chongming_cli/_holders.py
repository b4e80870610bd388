"""Whether the holder of a task is gone, as far as this console can tell: its lease ran
out, or it is a worker of this host whose process no longer runs (D194)."""

from __future__ import annotations

from chongming_cli._output import lease_expired_for
from chongming_core import TaskSnapshot, WorkerRecord
from chongming_runtime import Controller, format_elapsed, printable, worker_process_gone

__all__ = ["dead_holder_pid", "holder_gone"]


def dead_holder_pid(controller: Controller, owner: str) -> int | None:
    """The pid of worker `owner` when it is a worker of this host whose process is gone."""
    store = controller.store
    if not store.supports_durable_work:
        return None
    for row in store.workers():
        if isinstance(row, WorkerRecord) and row.owner == owner and worker_process_gone(row):
            return row.pid
    return None


def holder_gone(controller: Controller, snapshot: TaskSnapshot) -> str | None:
    """Why nobody will end `snapshot`, an unfinished task held under a lease, unless
    `reconcile` marks it lost (``its holder 'w-1' stopped renewing its lease 12.0s ago``);
    None while its holder may still be at work."""
    owner = snapshot.lease_owner
    if snapshot.is_terminal or not owner:
        return None
    shown = printable(repr(owner))
    gone = lease_expired_for(snapshot, controller.clock.now())
    if gone is not None:
        return f"its holder {shown} stopped renewing its lease {format_elapsed(gone)} ago"
    pid = dead_holder_pid(controller, owner)
    if pid is not None:
        return f"its holder {shown} is gone (its process {pid} no longer runs on this host)"
    return None
