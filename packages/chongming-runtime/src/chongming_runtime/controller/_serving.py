"""`WorkServer`: a serving controller claims durable tasks and runs them here.

One background thread, ``chongming-serve``, loops:

1. room: the free slots not promised to a task already queued here, and the units
   left of each limited tag (`Scheduler.claim_room`); nothing is claimed without room;
2. claim: one `TaskStore.claim_tasks` for the names this controller registered, the
   buckets it owns and its room, with the store-wide `fleet_limits`; the store decides
   who wins (a write fenced by the task's version that makes this controller the lease
   holder), so no task is ever run by two workers. The request's ``start`` (the
   controller's `ClaimStart`) says how each task is started as the claim takes it, and
   the store writes its ``starting`` with the lease, in the claim's transaction (D165,
   D189);
3. take: each claimed task becomes a `TaskRun` of this controller (its registration
   gives the body, retry policy and timeouts; the store gives the arguments and the
   trajectory so far), holding its slot, and its body is carried at once: its start is
   durable already. From then on it is a task held here: leases, stop, pause, retries.
   (A store that only leases what it claims returns it ``queued``: the run is then
   admitted like a submission and writes its ``starting`` under the claimed version);
4. wait: when a claim took all it asked for and room is left, claim again at once (but
   with fewer than three quarters of the slots free, not before `CLAIM_COOLDOWN` after
   the last claim that found work, or until another slot frees, so slots freed one by one
   are claimed together: fewer, larger claims); with no room, until
   a slot frees; when a claim took less than it asked for (nothing more was claimable),
   `TaskStore.wait_for_work` (a notification on PostgreSQL, a look at the file's data
   version at every poll interval on SQLite; a full claim only after a change, or once
   a second for tasks due later).

The worker's own row (owner, host, pid, buckets, names, capacity, started, last seen)
is written when serving starts and renewed with the lease; when serving stops its
lease is ended at once, so `workers()` shows it expired, never live after it left.
Whatever a round of the loop meets (the store down, a claim it cannot take) is
recorded in the controller's ``persist_failures`` and the loop goes on (D65).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from chongming_core import (
    ClaimRequest,
    ClaimStart,
    Clock,
    ConfigurationError,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    WorkerRecord,
)
from chongming_runtime.controller._waiting_reason import fleet_limits_of
from chongming_runtime.controller._worker_liveness import process_alive
from chongming_runtime.support._background import NOTIFIED_POLL

__all__ = ["WorkServer"]

_log = logging.getLogger("chongming_task.controller")


#: A worker that starts serving deletes the rows of workers whose lease ended longer ago.
FORGET_AFTER = timedelta(days=1)

#: While work flows, a claim follows the last one that found work after at least this
#: long (seconds), unless three quarters of the slots are free: freed slots are claimed
#: together, not one statement each (Oban's dispatch cooldown is 5 ms by default).
CLAIM_COOLDOWN = 0.005

#: Room and units left per limited tag (see `Scheduler.claim_room`).
Room = Callable[[], tuple[int, dict[str, int]]]


class WorkServer:
    """Claims durable work for one controller; started by `Controller.serve`.

    Args:
        store: the shared store (it must support durable work).
        owner: the controller's owner id (the claimed tasks' lease holder).
        clock: stamps claims and the worker row.
        lease_ttl: how long a claim, and the worker row, stay live unrenewed.
        names: the registered task names (read at every claim: a name registered later
            is served from then on).
        default_tags: per registered name, its registered tags (a task enqueued with no
            tags holds these here: they count against the limits, and the claim writes
            them into the task).
        buckets: the owned buckets (None: every bucket).
        room: the room for new work now.
        take: makes a claimed task a run of this controller; raises when it cannot.
        start: how the claim starts what it takes (`ClaimStart`, asked at every claim:
            names registered later are started too; the claim writes each task's
            ``starting``, so its body begins once the claim returns), or None to have
            the claim lease only.
        fleet_limits: store-wide units per tag this worker declares (its claims also hold
            to those other live workers declare: `_learn_fleet_limits`).
        capacity: what the worker row says of its room (JSON).
        interval: the longest wait between two claims while idle.
        note: records what a round met (the controller's ``persist_failures``).
    """

    def __init__(
        self,
        *,
        store: TaskStore,
        owner: str,
        clock: Clock,
        lease_ttl: float,
        names: Callable[[], list[str]],
        default_tags: Callable[[], Mapping[str, frozenset[str]]],
        buckets: frozenset[int] | None,
        room: Room,
        take: Callable[[TaskSnapshot], None],
        start: Callable[[], ClaimStart] | None = None,
        fleet_limits: Mapping[str, int],
        capacity: Mapping[str, object],
        interval: float,
        note: Callable[[str, str, tuple[str, ...]], None],
    ) -> None:
        self._store = store
        self._owner = owner
        self._clock = clock
        self._ttl = timedelta(seconds=lease_ttl)
        self._names = names
        self._default_tags = default_tags
        self._buckets = buckets
        self._room = room
        self._take = take
        self._start = start
        self._declared = dict(fleet_limits)  # this worker's own, written in its row
        self._fleet = dict(fleet_limits)  # what its claims hold to: the fleet's (see there)
        self._capacity = dict(capacity)
        self._interval = interval
        self._note = note
        self._slot_freed = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._started_at: datetime | None = None
        self._renewed_at: datetime | None = None
        self._claimed_at: float | None = None  # monotonic time of the last claim that found work
        max_parallel = capacity.get("max_parallel")
        # while work flows, a claim waits for three quarters of the slots (or the cooldown)
        self._batch = max(1, max_parallel * 3 // 4) if isinstance(max_parallel, int) else 1
        self.claimed = 0  # tasks claimed since serving began (read by tests and `nodes`)

    @property
    def serving(self) -> bool:
        """True between `start` and `stop`."""
        return self._thread is not None and not self._stopping.is_set()

    @property
    def stopped(self) -> bool:
        """True once `stop` was called."""
        return self._stopping.is_set()

    def start(self) -> None:
        """Write this worker's row, listen for work and start claiming (idempotent): a
        task enqueued once this returns wakes the worker, however soon."""
        with self._lock:
            if self._thread is not None:
                return
            self._started_at = self._clock.now()
            self._refuse_a_live_namesake(self._started_at)
            self._write_row(self._started_at)
            # PostgreSQL's listening connection is opened (LISTEN) by the first wait: made
            # here, before the first claim, a notification sent between that claim and the
            # thread's first wait is not missed (the worker slept a fallback poll, 1 s)
            self._store.wait_for_work(0)
            self._thread = threading.Thread(target=self._serve, name="chongming-serve", daemon=True)
            self._thread.start()

    def _refuse_a_live_namesake(self, now: datetime) -> None:
        """Refuse to serve under an owner name another live worker serves under: the two
        would write one row (``nodes`` would show one of them) and share one lease holder's
        name. A row of this process, or of a process of this host that is gone (a worker
        restarted after a crash), is this worker's to take over.

        Raises:
            ConfigurationError: a live worker of another process serves under this name.
        """
        host, pid = socket.gethostname(), os.getpid()
        for row in self._store.workers():
            if not (isinstance(row, WorkerRecord) and row.owner == self._owner):
                continue
            if not row.is_live(now):
                return
            if row.host == host and (row.pid == pid or not process_alive(row.pid)):
                return  # this process's, or left by a process of this host that is gone
            raise ConfigurationError(
                f"worker {row.owner!r} already serves this store from host {row.host!r} "
                f"(pid {row.pid}), live until {row.lease_until.isoformat()}: give this "
                "worker an owner name of its own (--owner), or start it once that lease "
                "has ended"
            )

    def slot_freed(self) -> None:
        """A task held here left its slot: room for a claim may have appeared."""
        self._slot_freed.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop claiming and end this worker's lease in its row (tasks already taken are
        the controller's to finish)."""
        with self._lock:
            thread = self._thread
            if thread is None or self._stopping.is_set():
                return
            self._stopping.set()
        self._slot_freed.set()
        try:
            self._store.wake_work_waiters()  # the loop may be waiting for work: cut it short
        except Exception as exc:  # the store is closed: the wait ends at its timeout
            self._note("wait_for_work", f"{type(exc).__name__}: {exc}", ())
        thread.join(timeout)
        now = self._clock.now()
        try:
            self._store.renew_worker(self._owner, last_seen=now, lease_until=now)
        except Exception as exc:  # the store is down: its row expires by itself
            self._note("renew_worker", f"{type(exc).__name__}: {exc}", ())

    # ------------------------------------------------------------------ the loop
    def _serve(self) -> None:
        self._forget_long_gone()
        try:
            # a watching store remembers per thread what it saw last: seen here, before the
            # first claim, a write in between wakes this thread's first wait
            self._store.wait_for_work(0)
        except Exception as exc:  # the store failed: the round notes it again, and waits
            self._note("wait_for_work", f"{type(exc).__name__}: {exc}", ())
        while not self._stopping.is_set():
            try:
                self._round()
            except Exception as exc:  # the store failed: noted, tried again after a wait
                self._note("claim_tasks", f"{type(exc).__name__}: {exc}", ())
                self._stopping.wait(self._interval)

    def _round(self) -> None:
        """One claim and the wait after it."""
        self._renew_row()
        free, tag_room = self._room()
        names = self._names()
        if 0 < free < self._batch and self._cooling():
            return  # work flows: let a few more slots free, to claim them together
        if free <= 0 or not names:
            self._slot_freed.wait(self._interval)
            self._slot_freed.clear()
            return
        now = self._clock.now()
        request = ClaimRequest(
            owner=self._owner,
            names=frozenset(names),
            buckets=self._buckets,
            limit=free,
            now=now,
            lease_until=now + self._ttl,
            tag_room=tag_room,
            fleet_limits=self._fleet,
            default_tags=self._default_tags(),
            start=None if self._start is None else self._start(),
        )
        claimed = self._store.claim_tasks(request)
        self._claimed_at = time.monotonic() if claimed else None
        for snapshot in claimed:
            self._take_one(snapshot)
        self.claimed += len(claimed)
        if len(claimed) < request.limit:
            # nothing more was claimable (a claim takes all it may, up to its limit): wait
            # for a change rather than claim again at once, which would find nothing and
            # hold up the bodies just started (D189). A full claim is followed at once.
            self._wait_for_work()

    def _wait_for_work(self) -> None:
        """Wait while nothing is claimable. A store that notifies (PostgreSQL) wakes the wait
        on every enqueue, and one that watches (SQLite) begins each slice of the poll
        interval with a look at whether anything was written: claims come only after a change,
        or as a fallback (a task due later, a lost notification) once a second at most,
        and often enough to renew this worker's row. Any other store is polled."""
        store = self._store
        if not (store.notifies_workers or store.watches_work):
            store.wait_for_work(self._interval)
            return
        longest = min(max(self._interval, NOTIFIED_POLL), self._ttl.total_seconds() / 3)
        if store.notifies_workers:
            store.wait_for_work(longest)
            return
        deadline = time.monotonic() + longest
        while not self._stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or store.wait_for_work(min(self._interval, left)):
                return

    def _cooling(self) -> bool:
        """Wait out the rest of `CLAIM_COOLDOWN` after a claim that found work, or until
        another slot frees; True if waited (the round is over: the next one counts the
        room again). Only while work flows: an idle worker claims at once."""
        last = self._claimed_at
        if last is None:
            return False
        left = last + CLAIM_COOLDOWN - time.monotonic()
        if left <= 0:
            return False
        self._slot_freed.wait(left)  # `stop` sets it too
        self._slot_freed.clear()
        return True

    def _take_one(self, snapshot: TaskSnapshot) -> None:
        try:
            self._take(snapshot)
        except Exception as exc:
            if snapshot.status is not TaskStatus.QUEUED:
                # the claim started it here: nobody else may run this attempt; its lease
                # is not renewed, and once it runs out `reconcile()` marks it lost
                self._note(
                    "claim_tasks",
                    f"a task the claim started could not be run here; reconcile() marks it "
                    f"lost once its lease runs out: {type(exc).__name__}: {exc}",
                    (snapshot.task_id,),
                )
                return
            # it cannot run here: give it back for another worker
            self._note(
                "claim_tasks",
                f"a claimed task could not be taken here, so it was given back: "
                f"{type(exc).__name__}: {exc}",
                (snapshot.task_id,),
            )
            try:
                self._store.release_claim(snapshot.task_id, self._owner, snapshot.status_version)
            except Exception as release_error:  # its claim's lease expires by itself
                self._note(
                    "release_claim",
                    f"{type(release_error).__name__}: {release_error}",
                    (snapshot.task_id,),
                )

    def _forget_long_gone(self) -> None:
        """Delete the rows of workers whose lease ended more than `FORGET_AFTER` ago: each
        process of a worker (its owner is ``host:pid`` by default) leaves a row, and
        ``nodes`` would otherwise list every worker that ever served the store. A row that
        expired recently stays, for the operator to see who left."""
        now = self._clock.now()
        try:
            for row in self._store.workers():
                if (
                    isinstance(row, WorkerRecord)
                    and row.owner != self._owner
                    and row.lease_until < now - FORGET_AFTER
                ):
                    self._store.remove_worker(row.owner)
        except Exception as exc:  # housekeeping only: the next worker to start tries again
            self._note("remove_worker", f"{type(exc).__name__}: {exc}", ())

    # ------------------------------------------------------------------ the worker's row
    def _write_row(self, now: datetime) -> None:
        started = self._started_at if self._started_at is not None else now
        self._store.register_worker(
            WorkerRecord(
                owner=self._owner,
                host=socket.gethostname(),
                pid=os.getpid(),
                buckets=None if self._buckets is None else tuple(sorted(self._buckets)),
                names=tuple(self._names()),
                capacity=self._row_capacity(),
                started_at=started,
                last_seen=now,
                lease_until=now + self._ttl,
            )
        )
        self._renewed_at = now
        self._learn_fleet_limits(now)

    def _learn_fleet_limits(self, now: datetime) -> None:
        """Hold this worker's claims to every fleet limit a live worker declares, the
        smallest where several declare one tag: a limit holds for the whole store, whether
        or not this worker was started with it. Read when the row is written (serving
        starts, then every third of a lease); when the rows cannot be read, the limits
        learnt last stay."""
        try:
            rows = self._store.workers()
        except Exception as exc:  # the store is down: the claim will say so too
            self._note("workers", f"{type(exc).__name__}: {exc}", ())
            return
        others = (
            row
            for row in rows
            if isinstance(row, WorkerRecord) and row.owner != self._owner and row.is_live(now)
        )
        self._fleet = fleet_limits_of(others, self._declared)

    def _row_capacity(self) -> dict[str, object]:
        """What the row says of this worker's room, and the tags each name is registered
        with here (``registered_tags``): a task enqueued without tags holds them when this
        worker claims it, and `waiting_reason` reads them to explain a full fleet limit."""
        tags = self._default_tags()
        if not tags:
            return self._capacity
        registered = {name: sorted(held) for name, held in sorted(tags.items())}
        return {**self._capacity, "registered_tags": registered}

    def _renew_row(self) -> None:
        """Rewrite the row (names may have been registered since) a third of a lease
        after the last time."""
        now = self._clock.now()
        last = self._renewed_at
        if last is not None and now - last < self._ttl / 3:
            return
        self._write_row(now)
