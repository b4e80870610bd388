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
    """Whether process `pid` of this host runs (a process of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by someone else
        return True
    return True


def worker_process_gone(row: WorkerRecord) -> bool:
    """True when `row` is a worker of this host whose process no longer runs: nothing
    renews its lease nor applies its commands, though its lease may not have ended yet.
    False while it runs, and for a worker of another host (it cannot be seen from here)."""
    return row.host == socket.gethostname() and row.pid > 0 and not process_alive(row.pid)
