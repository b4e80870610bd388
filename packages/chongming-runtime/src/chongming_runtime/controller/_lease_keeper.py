"""This node's lease and the touch timer that keeps it (guide §8.10, §8.11; R18).

`Lease` is what this node writes into every task it holds: its name and until when
it vouches for the task. Every snapshot the store writer takes is stamped with it
(D26, D42).

`LeaseKeeper` is the touch timer: every `touch_interval` it writes the progress,
heartbeats and pids of the runs holding a slot through the writer's ``touch``, and every
``lease_ttl / 3`` it renews the lease and writes it for every held task — the
runs, and whatever its holders keep (pipeline nodes not yet released). A tick
that meets a failure is logged and recorded, and the next one is armed all the
same (D65).

Whoever learns that a task's lease was taken by another node reports it with
`LeaseKeeper.lease_taken`; callbacks registered with `on_taken` hear of it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Protocol

from chongming_core import (
    ACTIVE_STATUSES,
    Clock,
    TaskSnapshot,
    TaskStatus,
    TimerHandle,
    TouchUpdate,
)
from chongming_runtime.support._background import carry_on
from chongming_runtime.support._call_each import call_each

__all__ = [
    "RENEWALS_PER_LEASE",
    "Lease",
    "LeaseHolder",
    "LeaseKeeper",
    "TouchSink",
    "TouchedRun",
    "default_touch_interval",
]

_log = logging.getLogger("chongming_task.controller")

#: A lease spans at least this many touch intervals: it is renewed on the touch timer.
RENEWALS_PER_LEASE = 3
#: The touch interval when `lease_ttl` leaves room for it (R18).
_DEFAULT_TOUCH_INTERVAL = 1.0

_PAUSED = TaskStatus.PAUSED


def default_touch_interval(lease_ttl: float) -> float:
    """The touch interval a `lease_ttl` gets when none is given: 1 s (R18), or a third of
    the lease when that is shorter, so the lease is always renewed in time (D85)."""
    return min(_DEFAULT_TOUCH_INTERVAL, lease_ttl / RENEWALS_PER_LEASE)


class Lease:
    """The lease this node writes: `owner` holds its tasks `until` then.

    `until` is replaced (never changed in place) by `renew`, so a snapshot that carries
    it is recognised by identity and copied only after a renewal (D42).
    """

    __slots__ = ("_clock", "_next_renewal", "owner", "ttl", "until")

    def __init__(self, owner: str, clock: Clock, ttl: float) -> None:
        self.owner = owner
        self.ttl = ttl
        self._clock = clock
        self.until: datetime = clock.now() + timedelta(seconds=ttl)
        self._next_renewal = clock.monotonic() + ttl / RENEWALS_PER_LEASE

    @property
    def due(self) -> bool:
        """True once a third of the lease has passed since it was last renewed."""
        return self._clock.monotonic() >= self._next_renewal

    def renew(self) -> None:
        """From now on the lease lasts `ttl` from now."""
        self.until = self._clock.now() + timedelta(seconds=self.ttl)
        self._next_renewal = self._clock.monotonic() + self.ttl / RENEWALS_PER_LEASE

    def stamp(self, snapshot: TaskSnapshot) -> TaskSnapshot:
        """`snapshot` with this lease (none once terminal). A run made here carries the
        lease from its submission, so a copy is made only after a renewal."""
        until = None if snapshot.status.is_terminal else self.until
        if snapshot.lease_until is until and snapshot.lease_owner == self.owner:
            return snapshot
        return snapshot.evolve(lease_owner=self.owner, lease_until=until)


class TouchedRun(Protocol):
    """A run as the touch timer sees it (a `TaskRun` is one)."""

    @property
    def task_id(self) -> str:
        """The task's id."""
        ...

    @property
    def status(self) -> TaskStatus:
        """The status now."""
        ...

    @property
    def snapshot(self) -> TaskSnapshot:
        """The task now, progress and heartbeat included."""
        ...


class TouchSink(Protocol):
    """Where touches go (the controller's `StoreWriter`)."""

    def touch(self, update: TouchUpdate) -> None:
        """Queue a side-path update."""
        ...

    def renew_leases(self, task_ids: Iterable[str], owner: str, until: datetime) -> None:
        """Queue a renewal of the lease of each of `task_ids`: `owner` until `until`."""
        ...

    def request_flush(self) -> None:
        """Flush soon."""
        ...

    def note(self, operation: str, error: str, task_ids: tuple[str, ...] = ()) -> None:
        """Record a failure in `persist_failures`."""
        ...


class LeaseHolder(Protocol):
    """Keeps tasks under this node's lease besides its runs (pipeline nodes not released)."""

    def renew(self, until: datetime) -> None:
        """Write the renewed lease, valid `until` then, for every task it keeps."""
        ...


class LeaseKeeper:
    """The touch timer of one controller: progress, heartbeats, pids and lease renewals.

    Example::

        keeper = LeaseKeeper(lease, clock=clock, interval=1.0, writer=writer, runs=held)
        keeper.start()  # renews the lease first, then ticks every second until stop()

    Args:
        lease: the lease it renews.
        clock: arms the timer.
        interval: seconds between ticks (the touch interval).
        writer: takes the touches, and records what a tick met (`persist_failures`).
        runs: the unfinished runs held here (a tick that renews the lease asks).
        executing: the runs holding an execution slot (the other ticks ask: only a body
            reports progress and heartbeats, and a controller may hold thousands of
            queued runs); None: `runs` at every tick.
    """

    def __init__(
        self,
        lease: Lease,
        *,
        clock: Clock,
        interval: float,
        writer: TouchSink,
        runs: Callable[[], Sequence[TouchedRun]],
        executing: Callable[[], Sequence[TouchedRun]] | None = None,
    ) -> None:
        self.lease = lease
        self.interval = interval
        self._clock = clock
        self._writer = writer
        self._runs = runs
        self._executing = executing if executing is not None else runs
        self._lock = threading.Lock()
        self._holders: list[LeaseHolder] = []
        self._on_taken: list[Callable[[str, str | None], None]] = []
        self._stopped = False
        self._timer: TimerHandle | None = None
        #: The timer was started (it runs until `stop`).
        self.ticking = False

    # ================================================================ holders
    def add_holder(self, holder: LeaseHolder) -> None:
        """Have `holder` write each renewal for the tasks it keeps."""
        self._holders.append(holder)

    def on_taken(self, callback: Callable[[str, str | None], None]) -> None:
        """Call ``callback(task_id, holder)`` whenever `lease_taken` is reported."""
        self._on_taken.append(callback)

    def lease_taken(self, task_id: str, holder: str | None) -> None:
        """Another node (`holder`, None when unknown) holds `task_id` now: tell every
        callback registered with `on_taken` (one that fails is logged, the rest told)."""
        calls = [partial(callback, task_id, holder) for callback in self._on_taken]
        call_each(calls, _log, f"could not tell that the lease of {task_id!r} was taken")

    # ================================================================ the timer
    def start(self) -> None:
        """Start the timer (once), renewing the lease first: a node idle since its
        construction (longer than the lease, maybe) must not write a stale lease."""
        with self._lock:
            if not self.ticking and not self._stopped:  # not ticking: no timer armed
                self.ticking = True
                self.lease.renew()
                self._timer = self._clock.call_later(self.interval, self._tick)

    def stop(self) -> None:
        """No tick from now on (the one under way finishes; none is armed after it)."""
        with self._lock:
            self._stopped = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _tick(self) -> None:
        """Every `interval`: flush progress and heartbeats; renew the lease when due. The
        next tick is armed whatever this one meets (a failing store, a bug): leases must
        keep being renewed; what it met is logged and listed in `persist_failures` (D65)."""
        with self._lock:
            self._timer = None
            if self._stopped:
                return
        try:
            # (a renewal that falls due between this look and the one in `_touch_all`
            # skips the queued runs once: the next renewal, a third of a lease later,
            # writes theirs before the lease they carry runs out)
            self._touch_all(self._runs() if self.lease.due else self._executing())
        except BaseException as exc:
            carry_on("the touch timer", exc, _log, self._writer.note)
        finally:
            with self._lock:
                if self._timer is None and not self._stopped:
                    self._timer = self._clock.call_later(self.interval, self._tick)

    def _touch_all(self, runs: Sequence[TouchedRun]) -> None:
        lease = self.lease
        renew = lease.due
        if renew:
            lease.renew()
        writer = self._writer
        leased: dict[str, Any] = (
            {"lease_owner": lease.owner, "lease_until": lease.until} if renew else {}
        )
        touched = renew
        waiting: list[str] = []  # renewed with one mark each, not an update each (D175)
        for run in runs:
            status = run.status
            if status.is_terminal:
                continue
            touched = True
            if status in ACTIVE_STATUSES or status is _PAUSED:
                snap = run.snapshot
                writer.touch(
                    TouchUpdate(
                        snap.task_id,
                        progress=snap.progress,
                        heartbeat_at=snap.last_heartbeat_at,
                        pid=snap.pid,
                        **leased,
                    )
                )
            elif renew:
                waiting.append(run.task_id)
        if waiting:
            writer.renew_leases(waiting, lease.owner, lease.until)
        if renew:
            for holder in self._holders:
                holder.renew(lease.until)
        if touched:  # an idle controller's tick wakes nothing else (writes wake the writer)
            writer.request_flush()
