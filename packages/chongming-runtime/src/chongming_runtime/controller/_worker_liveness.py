"""Whether a worker's process still runs, judged where it can be seen: on its own host.

A worker's row and its tasks' leases stay live for up to a lease after its process
died (``kill -9``, a crash); only its own host can tell sooner, from the process
table. On another host nothing is claimed: the lease is all there is to go by.
"""

from __future__ import annotations

import os
import socket

from chongming_core import WorkerRecord

__all__ = ["process_alive", "worker_process_gone"]


def process_alive(pid: int) -> bool:
    """Whether process `pid` of this host runs (a process of another user counts). A
    process that exited and was not reaped yet (a zombie: its parent has not waited for
    it) still answers a signal, but runs no more: it is not alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by someone else
        pass
    return not _exited(pid)


def _exited(pid: int) -> bool:
    """Whether the process table shows `pid` exited and not reaped (Linux's ``/proc``;
    False where there is none to read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return False
    return bool(fields) and fields[0] in (b"Z", b"X")


def worker_process_gone(row: WorkerRecord) -> bool:
    """True when `row` is a worker of this host whose process no longer runs: nothing
    renews its lease nor applies its commands, though its lease may not have ended yet.
    False while it runs, and for a worker of another host (it cannot be seen from here)."""
    return row.host == socket.gethostname() and row.pid > 0 and not process_alive(row.pid)
