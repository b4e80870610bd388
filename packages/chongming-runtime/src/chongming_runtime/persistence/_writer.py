"""`StoreWriter`: write-through of transitions to a `TaskStore`, batched, with group commit.

Data flow: runs report every transition and every side-path update here; this
writer is the only code that writes them to the store. A controller's run is
recorded as a pull (`record_run`): the flush that takes it asks the run for its
snapshot then and the transitions it made since the last take, so a run that moved
several times between two flushes is one row write, and the snapshots it passed
through are never built. Other writers record a snapshot with its transitions
(`record`). Non-terminal transitions are batched and written by a background thread
(one `save_many` per batch); a terminal transition is *durable*: the caller
blocks until it (and everything queued before it) is in the store, so a crash
can never turn a finished task into an unknown one. Callers that flush at the
same moment share one transaction (group commit): while one flush is being
written, every write recorded meanwhile waits for the next one, and a durable
caller whose write a flush already took returns without flushing again. All
pending transitions of a task become one row write (its latest snapshot) plus
its history rows.

A durable write can also be asked for without blocking the caller:
``record(..., on_durable=callback)`` wakes the background thread at once (no
batching delay) and calls `callback` after the flush that took the write. The
controller uses it so that a finishing task's thread never waits for a commit,
while its run still tells ``wait()`` only after the callback. For a store
written in memory (`TaskStore.writes_in_memory`) the recording thread makes that
flush itself unless another flush is under way: cheaper than a thread switch.

Recording only appends to an inbox (a deque; atomic under the GIL) and never takes
a lock: a recording thread that had to wait for a lock held by a thread that lost
the GIL would sleep, be handed the lock while it waits for the GIL in turn, and
make every later recorder wait the same way (a lock convoy, which doubled the cost
of a short task with four threads finishing tasks). A flush moves the inbox, in
order, into its pending writes.

A run may also wait for its row, without blocking anyone: `when_stored` calls back
once a flush has stored a task at a version (or the task is another writer's now),
or tried and failed to (a store failure never holds a task back: D106), and wakes the
background thread at once, so the starts recorded meanwhile share that flush's commit
(D105).

A failing store never fails a task: the writes stay pending, the failure is
kept in `failures` (the latest 20), and the next successful flush brings the
store up to the current truth. A version conflict means another process wrote
the task (for example `reconcile()` marked it lost): the store's version wins
and the conflict is recorded — the writer never overwrites someone else's truth.
A store whose write lock another process holds (`StoreError.locked`) is tried once
per flush, never write by write, and a write whose caller waits is answered by the
flush that found the lock held: each attempt waits a whole lock timeout (D66).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from chongming_core import (
    SYSTEM_CLOCK,
    Clock,
    ConcurrencyConflict,
    SnapshotWrite,
    StoreError,
    TaskQuery,
    TaskSnapshot,
    TaskStore,
    TouchUpdate,
    Transition,
)
from chongming_core.backend import version_conflict
from chongming_runtime.support._background import carry_on
from chongming_runtime.support._call_each import call_each
from chongming_runtime.support._thread_cache import hand_over

__all__ = ["PersistFailure", "StoreWriter", "WrittenRun"]

_log = logging.getLogger("chongming_task.store_writer")

MAX_FAILURES = 20

#: Most task writes in one store transaction (a flush of more is split).
MAX_BATCH = 500

#: Most side-path updates in one ``touch_many`` (a renewal of thousands of waiting tasks'
#: leases is written, and its updates made, a slice at a time).
TOUCH_BATCH = 1000


class _LeaseRenewal:
    """The mark of a task whose only side-path update is a renewal of the writer's latest
    lease (`StoreWriter.renew_leases`): one shared object, not an update per task."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "LEASE_RENEWAL"


_RENEWAL = _LeaseRenewal()

#: Recorded writes waiting beyond which the recording thread flushes them itself.
BACKLOG = 4 * MAX_BATCH

#: Task ids one `PersistFailure` names (an outage of a big batch would fill memory).
_NAMED = 20

#: Single writes that must fail in a row, with none succeeding, to call it an outage.
_OUTAGE_AFTER = 3


@dataclass(frozen=True, slots=True)
class PersistFailure:
    """A write the store refused or could not take; the task itself was not affected."""

    at: datetime
    operation: str
    task_ids: tuple[str, ...]
    error: str


#: How many flushes a recording thread makes in a row for a store written in memory
#: before it leaves what others keep recording to the background thread.
_INLINE_ROUNDS = 4


def _tell(callbacks: list[Callable[[], None]]) -> None:
    """Call every durable-write callback; one that fails never skips the others."""
    call_each(callbacks, _log, "a durable-write callback failed")


def _told() -> None:
    """The callback of a write whose caller waits itself (durable=True): only marks it taken."""


class _Forget:
    """In the inbox: forget the task (it was pruned); drops the writes recorded before."""

    __slots__ = ("on_durable", "task_id")

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.on_durable: Callable[[], None] | None = None


class WrittenRun(Protocol):
    """A task whose writes a `StoreWriter` takes when it flushes (`StoreWriter.record_run`):
    its latest snapshot and the transitions it made since the writer last took them."""

    @property
    def task_id(self) -> str:
        """The task's id."""
        ...

    def take_write(self) -> tuple[TaskSnapshot, Sequence[Transition]] | None:
        """The current snapshot and the transitions not taken before, oldest first, now
        marked taken; None when no transition was made since the last take."""
        ...


class _Pull:
    """In the inbox: the writes of a run, taken from it by the flush that takes this."""

    __slots__ = ("on_durable", "source", "task_id")

    def __init__(self, source: WrittenRun, on_durable: Callable[[], None] | None) -> None:
        self.task_id = source.task_id
        self.source = source
        self.on_durable = on_durable


class _Write:
    """A recorded write (in the inbox), then a task's pending writes (in `_pending`): the
    same object, so a task written once costs one object from record to store."""

    __slots__ = ("on_durable", "snapshot", "task_id", "transitions")

    def __init__(
        self,
        task_id: str,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition],
        on_durable: Callable[[], None] | None,
    ) -> None:
        self.task_id = task_id
        self.snapshot = snapshot
        self.transitions = transitions
        self.on_durable = on_durable


class StoreWriter:
    """Owns every write of one controller to its store.

    Args:
        store: where to write.
        clock: stamps failures.
        flush_interval: how long non-terminal writes may wait to be batched (seconds).
        retry_interval: how long to wait after a failed flush before trying again.
        decorate: applied to every snapshot just before it is written (the controller
            stamps its current lease on it).
        moved_on: called with a task's id when this writer finds that another process
            wrote the task (a conflict, or a fenced touch that changed nothing), once per
            task, on the flushing thread: it must not block nor write (D177).
    """

    def __init__(
        self,
        store: TaskStore,
        *,
        clock: Clock | None = None,
        flush_interval: float = 0.02,
        retry_interval: float = 0.5,
        decorate: Callable[[TaskSnapshot], TaskSnapshot] | None = None,
        moved_on: Callable[[str], None] | None = None,
    ) -> None:
        self._store = store
        self._moved_on = moved_on
        # a store written in this process's memory: a durable write is flushed on the
        # recording thread instead of waking the background thread (see `_flush_here`)
        self._inline = store.writes_in_memory
        self._decorate = decorate
        self._clock = clock if clock is not None else SYSTEM_CLOCK
        self._flush_interval = flush_interval
        self._retry_interval = retry_interval
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._wake = threading.Event()
        self._urgent = threading.Event()  # a durable write waits: skip the batching delay
        # a durable write was recorded while another thread held the flush lock: left to
        # that holder, which looks at this mark once it released the lock (`_flush_here`)
        self._handoff = False
        # recorded writes, in order; `record` only appends (see `_take`), so a recording
        # thread never waits for a lock that a flush, or another recording thread, holds
        self._inbox: deque[_Write | _Pull | _Forget] = deque()
        # tasks with a pull in the inbox that no flush took yet: another is not queued
        self._pulls: set[str] = set()
        self._pending: dict[str, _Write] = {}  # taken from the inbox; the flush lock's
        # side-path updates by task; a waiting task's lease renewal is the shared mark, written
        # with `_renewed` (the latest lease renewed: owner, until) when flushed
        self._touches: dict[str, TouchUpdate | _LeaseRenewal] = {}
        self._renewed: tuple[str, datetime] | None = None
        self._stored_version: dict[str, int] = {}
        self._diverged: set[str] = set()
        # tasks whose latest write taken is terminal: a side-path update (a lease renewal
        # or progress read just before the task finished) must not reach their row
        self._finished: set[str] = set()
        self._poisoned: set[str] = set()  # refused alone while other writes succeeded
        # writes that failed, or that a Ctrl-C interrupted, inside the store: (version,
        # updated_at, lease owner, transitions) of each; the next flush asks the store
        # whether they went in (`_settle_in_doubt`)
        self._in_doubt: dict[str, tuple[int, datetime | None, str | None, int]] = {}
        self._probe_from = 0  # where the next single-write probe starts (see `_save`)
        self._failures: deque[PersistFailure] = deque(maxlen=MAX_FAILURES)
        self._healthy = True
        # the last flush found the store locked by another connection or process (D66)
        self._locked = False
        self._closed = False
        self._thread: threading.Thread | None = None
        # task -> (version, callback) of `when_stored`; at most one per task (one attempt
        # of a run starts at a time); `_gate_lock` orders a registration against a flush
        self._gates: dict[str, tuple[int, Callable[[], None]]] = {}
        # starts a failed flush tried: opened after it, their rows not stored (D106)
        self._tried_gates: frozenset[str] = frozenset()
        self._gate_lock = threading.Lock()

    # ------------------------------------------------------------------ reporting
    @property
    def failures(self) -> list[PersistFailure]:
        """The latest persistence failures (at most 20), oldest first."""
        with self._lock:
            return list(self._failures)

    @property
    def healthy(self) -> bool:
        """False while the last flush failed (writes are pending and will be retried)."""
        return self._healthy

    @property
    def pending_count(self) -> int:
        """Tasks with writes not yet in the store."""
        # each read is one C-level copy, atomic under the GIL; no lock, no waiting for a flush
        tasks = set(self._pending)
        for write in list(self._inbox):  # in order: a forget drops the writes before it
            if isinstance(write, _Forget):
                tasks.discard(write.task_id)
            else:
                tasks.add(write.task_id)
        with self._lock:
            tasks.update(self._touches)
        return len(tasks)

    def diverged(self, task_id: str) -> bool:
        """True once another writer changed `task_id` in the store; this writer left it alone."""
        with self._lock:
            return task_id in self._diverged

    def request_flush(self) -> None:
        """Ask the background thread to flush soon (used by the side-path timer)."""
        self._ensure_thread()
        self._wake.set()

    def adopt(self, task_id: str, version: int) -> None:
        """Take on a task another process wrote (a durable task this process claimed): its
        row is in the store at `version`, so its next write is a compare-and-set under it,
        never a create."""
        with self._lock:
            self._stored_version[task_id] = version
            self._diverged.discard(task_id)

    def release(self, task_id: str) -> None:
        """Stop writing `task_id`: this process gives the task up (a closing worker hands it
        back to the queue, D207). Its writes from now on, and its touches, are dropped
        without a failure recorded; it counts as `diverged`, so it is reported as the store
        holds it."""
        with self._lock:
            self._diverged.add(task_id)
            self._touches.pop(task_id, None)

    def forget(self, task_id: str) -> None:
        """Stop tracking a task (after it was pruned); writes recorded before are dropped."""
        self._inbox.append(_Forget(task_id))  # in order, after its last write
        with self._lock:
            self._touches.pop(task_id, None)

    # ------------------------------------------------------------------ input
    def record(
        self,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        durable: bool = False,
        on_durable: Callable[[], None] | None = None,
    ) -> None:
        """Queue a new snapshot (and the transitions that led to it) for writing.

        With ``durable=True`` this returns only after a flush that included it was
        attempted (successfully, unless the store is failing — see `failures`), or
        after the flush under way found the store locked by another connection or
        process: a flush of its own would wait as long for the same lock (D66). With
        `on_durable`, it returns at once and `on_durable` is called after such a flush
        (by the writer's thread, or by this one before returning for a store written in
        memory). Never waits for a lock, except a durable flush.
        """
        if snapshot.task_id in self._diverged:
            # another process owns the task's truth now: nothing to write, nothing to wait for
            if on_durable is not None:
                on_durable()
            return
        # on_durable is taken by the same flush as the write itself
        if on_durable is None and durable:
            on_durable = _told  # marks it taken, so a flush that ran meanwhile is enough
        self._queue(_Write(snapshot.task_id, snapshot, transitions, on_durable), durable)

    def record_run(
        self,
        run: WrittenRun,
        *,
        durable: bool = False,
        on_durable: Callable[[], None] | None = None,
    ) -> None:
        """Queue the writes of `run`, taken from it by the flush that takes them: its
        snapshot then and every transition it made since the last take (`WrittenRun`).
        A run that moves on several times between two flushes is written once, its latest
        state with all of its new transitions, and its snapshots in between are never
        built. `durable` and `on_durable` are those of `record`: a durable caller returns
        once a flush took (and attempted) every transition the run had made when it called.
        """
        task_id = run.task_id
        if task_id in self._diverged:
            if on_durable is not None:
                on_durable()
            return
        if on_durable is None:
            if durable:
                on_durable = _told
            elif task_id in self._pulls:
                return  # a pull not taken yet takes this transition too
        # marked before it is queued: the flush that takes the pull unmarks it before it
        # takes the run's writes, so a transition this finds marked is taken by that flush
        self._pulls.add(task_id)
        self._queue(_Pull(run, on_durable), durable)

    def _queue(self, write: _Write | _Pull, durable: bool) -> None:
        """Append `write` to the inbox and see that a flush takes it (see `record`)."""
        on_durable = write.on_durable
        self._inbox.append(write)
        if durable:
            self._flush(write)
        elif on_durable is not None:
            # a failing store is retried by the background thread at its own pace
            if self._inline and self._healthy:
                # set before the flush lock is tried: a holder that releases it afterwards
                # sees the mark (see `_flush_here`)
                self._handoff = True
                flushed = self._flush_here()
                if flushed or (flushed is None and not self._closed):
                    return
            self._ensure_thread()
            if self._closed:
                self._flush(write)  # no background thread any more: flush here
            else:
                self._urgent.set()
                self._wake.set()
        elif len(self._inbox) > BACKLOG and self._healthy and not self._closed:
            # a burst the store does not keep up with (a thread submitting thousands of
            # tasks holds the GIL; the background thread, giving it up at every statement,
            # gets it back only every switch interval): the recording thread writes the
            # backlog itself, so memory stays bounded and the submitter waits for the store
            self._flush(None)
        else:
            if self._thread is None:
                self._ensure_thread()
            if not self._wake.is_set():
                self._wake.set()

    def touch(self, update: TouchUpdate) -> None:
        """Queue a side-path update; merged with earlier ones for the same task."""
        with self._lock:
            task_id = update.task_id
            if task_id in self._diverged or task_id in self._finished:
                return
            earlier = self._touches.get(task_id)
            self._touches[task_id] = (
                update if earlier is None else self._combined(task_id, earlier, update)
            )
        self._ensure_thread()

    def renew_leases(self, task_ids: Iterable[str], owner: str, until: datetime) -> None:
        """Queue a renewal of the lease of each of `task_ids` (`owner` holds it `until` then;
        a later renewal's lease replaces it). A controller holding thousands of waiting
        tasks renews them all every third of a lease: each costs a mark in a table, not an
        update object, and they are written `TOUCH_BATCH` at a time (D175)."""
        with self._lock:
            self._renewed = (owner, until)
            touches = self._touches
            skipped = self._diverged.union(self._finished) if self._diverged else self._finished
            for task_id in task_ids:
                if task_id in skipped:
                    continue
                earlier = touches.get(task_id)
                touches[task_id] = (
                    _RENEWAL
                    if earlier is None or earlier is _RENEWAL
                    else self._combined(task_id, earlier, _RENEWAL)
                )
        self._ensure_thread()

    def _renewal(self, task_id: str, held_version: int | None = None) -> TouchUpdate:
        """The update a renewal mark stands for: the latest lease renewed."""
        renewed = self._renewed
        assert renewed is not None  # a mark is set only with a lease
        owner, until = renewed
        return TouchUpdate(task_id, lease_owner=owner, lease_until=until, held_version=held_version)

    def _combined(
        self,
        task_id: str,
        older: TouchUpdate | _LeaseRenewal,
        newer: TouchUpdate | _LeaseRenewal,
    ) -> TouchUpdate | _LeaseRenewal:
        """`newer` over `older`, either a renewal mark or an update."""
        if older is _RENEWAL and newer is _RENEWAL:
            return _RENEWAL
        old = self._renewal(task_id) if isinstance(older, _LeaseRenewal) else older
        new = self._renewal(task_id) if isinstance(newer, _LeaseRenewal) else newer
        return _merge(old, new)

    def when_stored(self, task_id: str, version: int, callback: Callable[[], None]) -> bool:
        """Call `callback` once the store holds `task_id` at `version` or later, written by
        this writer (or once another writer owns the task, D27). True, and no call, when
        that is so already. Otherwise `callback` is called by the thread of the flush that
        stored it, and the background thread flushes at once. A flush that tried the write
        and failed, or found the store locked, calls it too: a store failure never holds a
        task back (guide §8.9; D106), and the failure is in `failures`. A later call for
        the same task replaces this one (a run starts one attempt at a time)."""
        with self._gate_lock:  # registered, then checked: a flush storing it meanwhile sees it
            self._gates[task_id] = (version, callback)
            ready = self._stored_version.get(task_id, -1) >= version or task_id in self._diverged
            if ready:
                del self._gates[task_id]
        if ready:
            return True
        if self._closed:  # no background thread any more: flush here
            self._flush(None)
        else:
            self._ensure_thread()
            self._urgent.set()
            self._wake.set()
        return False

    def _open_gates(self) -> None:
        """Call back every `when_stored` whose write is stored (or whose task diverged), and
        those a failed flush tried (D106)."""
        stored = self._stored_version
        diverged = self._diverged
        with self._gate_lock:
            tried, self._tried_gates = self._tried_gates, frozenset()
            opened = [
                task_id
                for task_id, (version, _) in self._gates.items()
                if stored.get(task_id, -1) >= version or task_id in diverged or task_id in tried
            ]
            callbacks = [self._gates.pop(task_id)[1] for task_id in opened]
        call_each(callbacks, _log, "a stored-write callback failed")

    # ------------------------------------------------------------------ flushing
    def flush(self) -> bool:
        """Write everything pending now (group commit). Returns True when the store took it all."""
        return self._flush(None)

    def _flush_here(self) -> bool | None:
        """For a store written in memory: flush on this thread, unless another flush is
        under way. Returns True when it wrote everything recorded, None when another thread
        held the flush lock (that holder writes what was recorded: see below), and False
        when the flush must be left to the background thread (this one failed and must be
        retried later, or others kept recording).

        No thread switch and no batching delay: an in-memory write is cheaper than waking
        the background thread. A caller that finds a flush under way does not wait for it,
        nor wake the background thread: every holder looks again once it released the lock
        (a holder here at the inbox, one in `_flush` at `_handoff`, which the caller set
        before it tried the lock), so a write recorded before a failed try is never left.
        """
        for _ in range(_INLINE_ROUNDS):
            if not self._flush_lock.acquire(blocking=False):
                return None  # the holder looks again after its release
            self._handoff = False  # this flush takes everything recorded so far
            try:
                ok = self._flush_held()
            finally:
                self._flush_lock.release()
                if self._gates:
                    self._open_gates()
            if not ok:
                return False  # the background thread retries after its interval
            if not self._inbox:  # nothing recorded while this flush ran
                return True
        return False  # others keep recording: the background thread takes the rest

    def _flush(self, write: _Write | _Pull | None) -> bool:
        """Take everything recorded so far and write it; waits for a flush under way. With
        `write`, return at once when a flush that ran meanwhile took (and attempted) it:
        durable writes recorded together share one commit."""
        hand_over()  # a finishing task's thread must not hold the next attempt while it writes
        waited = not self._flush_lock.acquire(blocking=False)
        if waited:
            self._flush_lock.acquire()
        self._handoff = False  # this flush takes everything recorded so far
        try:
            if write is not None and write.on_durable is None:  # `_take` took it (or told it)
                return self._healthy
            if waited and self._locked:
                # the flush this caller waited for found the store locked by another
                # connection or process: its own would wait as long for the same lock (D66)
                return False
            return self._flush_held()
        finally:
            self._flush_lock.release()
            if self._gates:  # after the lock: a call may record a durable write of its own
                self._open_gates()
            if self._handoff and self._inbox:  # left to this holder by `_flush_here`
                self._handoff = False
                self._ensure_thread()
                self._urgent.set()
                self._wake.set()

    def _take(self, count: int) -> list[Callable[[], None]]:
        """Move the first `count` recorded writes into `_pending` (a task's writes become one
        row write and its transitions, in order); returns their durable-write callbacks.
        Hold the flush lock."""
        inbox = self._inbox
        pending = self._pending
        diverged = self._diverged
        finished = self._finished
        callbacks: list[Callable[[], None]] = []
        for _ in range(count):
            write = inbox.popleft()
            task_id = write.task_id
            if write.on_durable is not None:
                callbacks.append(write.on_durable)
                write.on_durable = None
            if isinstance(write, _Forget):  # pruned: nothing of it is kept
                pending.pop(task_id, None)
                self._stored_version.pop(task_id, None)
                finished.discard(task_id)
                self._poisoned.discard(task_id)
                with self._lock:
                    diverged.discard(task_id)
                continue
            if isinstance(write, _Pull):  # the run's writes since the last take, taken now
                self._pulls.discard(task_id)  # before the take (see `record_run`)
                taken = write.source.take_write()
                if taken is None:  # an earlier take had them all
                    continue
                write = _Write(task_id, taken[0], taken[1], None)
            if write.snapshot.status.is_terminal:
                finished.add(task_id)
            else:  # live (again: a retried task)
                finished.discard(task_id)
            if task_id not in diverged:
                older = pending.get(task_id)
                if older is None:
                    pending[task_id] = write
                else:
                    older.snapshot = write.snapshot
                    # a new list: the recorded sequences may be their callers' own
                    older.transitions = [*older.transitions, *write.transitions]
        return callbacks

    def _flush_held(self) -> bool:
        """`_flush` with the flush lock held: everything recorded before it began is written,
        in transactions of at most `MAX_BATCH` tasks taken from the inbox one after the
        other (a burst of thousands of writes is never all decoded at once), and the
        touches after the snapshots."""
        # the starts waiting now: their writes were recorded before they asked, so before
        # `left` is read, and this flush tries them (a failure opens them all the same)
        waiting = self._waiting_gates()
        left = len(self._inbox)  # recorded later: left for the next flush
        callbacks: list[Callable[[], None]] = []
        ok = down = False
        try:
            while True:
                step = min(left, MAX_BATCH)
                left -= step
                callbacks.extend(self._take(step))
                touches: dict[str, TouchUpdate | _LeaseRenewal] = {}
                if not left:
                    with self._lock:
                        touches = self._touches
                        self._touches = {}
                        for task_id in self._finished.intersection(touches):
                            del touches[task_id]  # recorded before the task finished
                # the writes stay in `_pending` until the store answered for them, and the
                # touches taken are put back unless written: a Ctrl-C in the middle of a
                # store's write (the main thread flushing) drops nothing
                batch = self._pending
                ok = True
                if batch or touches:
                    try:
                        ok, down = self._write(batch, touches)
                    except BaseException:
                        self._requeue_touches(touches)  # they only set fields: idempotent
                        self._ensure_thread()  # the background thread writes them now
                        self._urgent.set()
                        self._wake.set()
                        raise
                if not left:
                    break
                if down:  # the rest stays pending untried (its callbacks are told below)
                    callbacks.extend(self._take(left))
                    break
            self._healthy = ok
            if ok:
                self._locked = False
            else:
                # the store failed or was locked: the starts it was asked for go ahead (they
                # would wait as long again); while it is locked, so do those asked meanwhile
                self._open_tried(None if self._locked else waiting)
                if self._locked:
                    callbacks.extend(self._detach_waiters())
        finally:  # even when interrupted: nobody may wait for a write that was taken
            _tell(callbacks)
        return ok

    def _waiting_gates(self) -> frozenset[str]:
        """The tasks whose start waits for their row now (see `when_stored`)."""
        if not self._gates:
            return frozenset()
        with self._gate_lock:
            return frozenset(self._gates)

    def _open_tried(self, tried: frozenset[str] | None) -> None:
        """Have the next `_open_gates` open `tried` (None: every waiting start) though the
        store did not take their rows."""
        with self._gate_lock:
            self._tried_gates = self._tried_gates.union(self._gates if tried is None else tried)

    def _detach_waiters(self) -> list[Callable[[], None]]:
        """The durable-write callbacks of writes recorded while a flush found the store
        locked: told now, their writes kept in the inbox for the next flush. Their own
        attempt would wait the whole lock timeout again for the same lock, so ``wait()`` of
        a task that finished meanwhile returns after about one lock timeout, not after
        several piled up (D66). Hold the flush lock."""
        self._urgent.clear()  # what is detached needs no hurry; a write recorded after it does
        callbacks: list[Callable[[], None]] = []
        for write in list(self._inbox):  # one C-level copy; recorders only append
            if write.on_durable is not None:
                callbacks.append(write.on_durable)
                write.on_durable = None
        return callbacks

    def _write(
        self,
        batch: dict[str, _Write],
        touches: dict[str, TouchUpdate | _LeaseRenewal],
    ) -> tuple[bool, bool]:
        """Write; returns (everything went in, the store is down). `batch` is `_pending`:
        a write leaves it once the store took it, or refused it for a conflict (the store's
        version wins); the others stay, in their order, for the next flush."""
        decorate = self._decorate
        unsettled = self._settle_in_doubt(batch)
        in_doubt = self._in_doubt
        # not written while the store cannot say whether an interrupted write went in
        task_ids = [t for t in batch if t not in in_doubt] if in_doubt else list(batch)
        # only flushes (serialised by the flush lock) and `forget` change versions
        expected = self._stored_version
        failed: dict[str, Exception] = {}
        down = False
        # bounded transactions: a burst of thousands of tasks never holds the store's write
        # lock for long (other processes poll commands on it), and the rows being encoded
        # at any moment stay few
        for start in range(0, len(task_ids), MAX_BATCH):
            chunk = task_ids[start : start + MAX_BATCH]
            writes = {
                t: SnapshotWrite(
                    decorate(batch[t].snapshot) if decorate is not None else batch[t].snapshot,
                    expected.get(t),
                    tuple(batch[t].transitions),
                )
                for t in chunk
            }
            try:
                conflicts, chunk_failed = self._save(writes)
            except BaseException:
                # a Ctrl-C inside the store's write: part of the chunk may be in the store
                # (committed just before, a single-write probe, or the memory store item by
                # item); written again blindly, it would meet its own version as a conflict
                self._doubt(batch, chunk)
                raise
            # a failed write may have gone in all the same (PostgreSQL: the connection
            # dropped after the commit, before its answer): asked before it is written again
            self._doubt(batch, chunk_failed)
            del writes
            conflicted = {c.task_id for c in conflicts}
            stored = {
                task_id: batch[task_id].snapshot.status_version
                for task_id in chunk
                if task_id not in chunk_failed and task_id not in conflicted
            }
            with self._lock:  # one C-level update: the lock is held for no Python code
                self._stored_version.update(stored)
            for task_id in chunk:
                if task_id not in chunk_failed:
                    del batch[task_id]
            for conflict in conflicts:
                self._on_conflict(conflict)
            failed.update(chunk_failed)
            if len(chunk_failed) == len(chunk):  # nothing went in: the store is down
                down = True
                cause = next(iter(chunk_failed.values()))
                for task_id in task_ids[start + MAX_BATCH :]:  # kept for the next flush
                    failed[task_id] = cause
                break
        if unsettled:
            failed.update(unsettled)
        self._locked = locked = any(_is_locked(exc) for exc in failed.values())
        if failed:  # kept in their first order: each flush's probes then start elsewhere
            by_error: dict[str, list[str]] = {}
            for task_id, exc in failed.items():
                by_error.setdefault(self._describe(exc), []).append(task_id)
            for error, task_ids_failed in by_error.items():
                self._fail_text("save_many", tuple(task_ids_failed), error)
        if touches and locked:  # they would wait for the same lock: kept for the next flush
            self._requeue_touches(touches)
        elif touches and not self._touch(batch, touches):
            return False, True
        return not failed, down

    def _touch(
        self, batch: dict[str, _Write], touches: dict[str, TouchUpdate | _LeaseRenewal]
    ) -> bool:
        """Write `touches` (after the snapshots), `TOUCH_BATCH` at a time; False when the
        store failed (what was not written is put back for the next flush)."""
        # fenced to the version this writer last stored: once another process moved a task
        # on (reconcile() marked it lost, say), this one's renewals change nothing. A task
        # whose write failed or is in doubt is at no version this writer knows yet: its
        # touch waits until that write is settled
        in_doubt = self._in_doubt
        held_back = {t: u for t, u in touches.items() if t in batch or t in in_doubt}
        if held_back:
            self._requeue_touches(held_back)
        stored = self._stored_version
        items = [(t, u) for t, u in touches.items() if t not in held_back]
        for start in range(0, len(items), TOUCH_BATCH):
            fenced: list[TouchUpdate] = []
            for task_id, update in items[start : start + TOUCH_BATCH]:
                held = stored.get(task_id)
                if isinstance(update, _LeaseRenewal):
                    fenced.append(self._renewal(task_id, held))
                else:
                    fenced.append(
                        update if held is None else dataclasses.replace(update, held_version=held)
                    )
            try:
                # touches after snapshots: a terminal save must not be overwritten by older
                # side-path values, and touch_many only changes the fields it names
                applied = self._store.touch_many(fenced)
            except Exception as exc:  # a store's own bug too: the writes stay pending
                unwritten = dict(items[start:])
                self._requeue_touches(unwritten)
                self._locked = _is_locked(exc)
                self._fail("touch_many", tuple(unwritten), exc)
                return False
            if applied < len(fenced):
                self._find_moved_on([u for u in fenced if u.held_version is not None])
        return True

    def _find_moved_on(self, fenced: list[TouchUpdate]) -> None:
        """Some fenced touches changed nothing: the tasks that moved on in the store (or left
        it) are another writer's now, and this writer stops writing them, as after a
        conflict. One query; when the store cannot be asked, the next refused touch asks."""
        if not fenced:
            return
        try:
            rows = {
                s.task_id: s
                for s in self._store.query(TaskQuery(task_ids=frozenset(u.task_id for u in fenced)))
            }
        except Exception as exc:  # the store failed right after the touch: asked again later
            self._fail("query", tuple(u.task_id for u in fenced), exc)
            return
        for update in fenced:
            row = rows.get(update.task_id)
            if row is not None and row.status_version == update.held_version:
                continue  # at the held version: the touch did apply
            actual = None if row is None else row.status_version
            self._on_conflict(
                version_conflict(update.task_id, expected=update.held_version, actual=actual)
            )

    def _save(
        self, writes: dict[str, SnapshotWrite]
    ) -> tuple[list[ConcurrencyConflict], dict[str, Exception]]:
        """Write `writes`; returns the conflicts and the items the store refused, by task id.

        One refused item must not hold back the others (a text PostgreSQL cannot store,
        say): when a batch fails, its items are written one by one. Items that fail alone
        while others succeed are quarantined and written on their own from then on. When
        the first few single writes fail too, the store itself is down: everything left is
        kept for the next flush without hammering the store.
        """
        poisoned = self._poisoned
        if poisoned:
            healthy = [t for t in writes if t not in poisoned]
            suspects = [t for t in writes if t in poisoned]
        else:  # the usual case: no quarantine to sort by
            healthy, suspects = list(writes), []
        conflicts: list[ConcurrencyConflict] = []
        failed: dict[str, Exception] = {}
        went_in: list[str] = []
        batch_error: Exception | None = None
        if healthy:
            try:
                conflicts.extend(self._store.save_many([writes[t] for t in healthy]))
            except Exception as exc:  # a store's own bug too: the writes stay pending
                if len(healthy) == 1 and not suspects:
                    if isinstance(exc, ConcurrencyConflict):  # raised instead of returned
                        return [exc], {}
                    return conflicts, {healthy[0]: exc}
                if _is_locked(exc):
                    # nothing about the items was wrong and nothing went in: written one by
                    # one, each would wait the whole lock timeout for the same lock (D66)
                    return conflicts, dict.fromkeys([*healthy, *suspects], exc)
                # the batch may be in the store all the same (its commit's answer was lost):
                # written again one by one, each item would meet its own version and be taken
                # for another writer's (D44); the store is asked first
                try:
                    went_in = self._went_in(writes, healthy)
                except Exception:  # it cannot be asked: all of them wait, in doubt
                    return conflicts, dict.fromkeys([*healthy, *suspects], exc)
                batch_error = exc
                suspects = [t for t in healthy if t not in went_in] + suspects
                healthy = []
        succeeded = bool(healthy) or bool(went_in)
        consecutive = 0
        if suspects and self._probe_from:
            # the first single writes decide "the store is down"; after such a verdict the
            # next flush starts further on, so a few unstorable writes at the head can never
            # keep the rest out of a store that is up
            start = self._probe_from % len(suspects)
            suspects = suspects[start:] + suspects[:start]
        for position, task_id in enumerate(suspects):
            try:
                conflicts.extend(self._store.save_many([writes[task_id]]))
            except ConcurrencyConflict as conflict:  # raised instead of returned: the same
                conflicts.append(conflict)
            except Exception as exc:  # a store's own bug too: the writes stay pending
                failed[task_id] = exc
                consecutive += 1
                if _is_locked(exc):  # the others would wait for the same lock (D66)
                    for rest in suspects[position + 1 :]:
                        failed[rest] = exc
                    break
                if not succeeded and consecutive >= _OUTAGE_AFTER:
                    for rest in suspects[position + 1 :]:
                        failed[rest] = exc
                    self._probe_from += _OUTAGE_AFTER
                    break
                continue
            succeeded = True
            consecutive = 0
            self._poisoned.discard(task_id)
        if succeeded:
            self._poisoned.update(failed)
        if batch_error is not None and not failed:
            # every write went in after all, but the store did fail: never silent (§8.9)
            self._fail_text(
                "save_many",
                tuple(writes),
                f"{type(batch_error).__name__}: {batch_error} (the writes went in: found in "
                "the store or written one by one)",
            )
        return conflicts, failed

    def _went_in(self, writes: dict[str, SnapshotWrite], task_ids: list[str]) -> list[str]:
        """Which of `task_ids` the store holds exactly as `writes` has them (one query)."""
        rows = {s.task_id: s for s in self._store.query(TaskQuery(task_ids=frozenset(task_ids)))}
        return [t for t in task_ids if _holds(rows.get(t), _written(writes[t].snapshot))]

    def _doubt(self, batch: dict[str, _Write], task_ids: Iterable[str]) -> None:
        """Note the writes of `task_ids` as possibly in the store (see `_settle_in_doubt`)."""
        for task_id in task_ids:
            write = batch[task_id]
            self._in_doubt[task_id] = (*_written(write.snapshot), len(write.transitions))

    def _settle_in_doubt(self, batch: dict[str, _Write]) -> dict[str, Exception]:
        """Ask the store whether writes that failed or were interrupted went in (D44): one that
        did is noted as stored and only what was recorded after it is left to write. Returns
        the tasks still in doubt (the store could not be asked) with the reason."""
        in_doubt = self._in_doubt
        for task_id in [t for t in in_doubt if t not in batch]:  # forgotten meanwhile
            del in_doubt[task_id]
        if not in_doubt:
            return {}
        try:  # one query for them all (a backlog after an outage can be thousands)
            rows = {
                s.task_id: s for s in self._store.query(TaskQuery(task_ids=frozenset(in_doubt)))
            }
        except Exception as exc:  # the store is down: they wait for the next flush
            return dict.fromkeys(in_doubt, exc)
        for task_id, (version, updated_at, owner, count) in list(in_doubt.items()):
            del in_doubt[task_id]
            if not _holds(rows.get(task_id), (version, updated_at, owner)):
                continue  # it did not go in: written as usual
            with self._lock:
                self._stored_version[task_id] = version
            write = batch[task_id]
            rest = list(write.transitions)[count:]
            if rest or write.snapshot.status_version != version:
                write.transitions = rest
            else:
                del batch[task_id]
        return {}

    def _requeue_touches(self, touches: dict[str, TouchUpdate | _LeaseRenewal]) -> None:
        """Put touches that were not written back, under any recorded since."""
        with self._lock:
            for task_id, update in touches.items():
                newer_touch = self._touches.get(task_id)
                self._touches[task_id] = (
                    update if newer_touch is None else self._combined(task_id, update, newer_touch)
                )

    def _on_conflict(self, conflict: ConcurrencyConflict) -> None:
        task_id = conflict.task_id or "?"
        with self._lock:
            first = task_id not in self._diverged
            self._diverged.add(task_id)
            self._touches.pop(task_id, None)
            self._failures.append(
                PersistFailure(
                    at=self._clock.now(),
                    operation="save",
                    task_ids=(task_id,),
                    error=f"ConcurrencyConflict: {conflict}",
                )
            )
        _log.warning(
            "another process wrote task %r (the store holds it at version %s, this process "
            "wrote it at %s): the store's record stands; this process stops writing the "
            "task, and stops its body if it runs here",
            task_id,
            "none" if conflict.actual is None else conflict.actual,
            "none" if conflict.expected is None else conflict.expected,
        )
        if first and self._moved_on is not None:
            try:
                self._moved_on(task_id)
            except Exception:  # a bug of the callback: the writer goes on
                _log.exception("could not report that task %r moved on elsewhere", task_id)

    def note(self, operation: str, error: str, task_ids: tuple[str, ...] = ()) -> None:
        """Record a failure in `failures` (the command poller, the touch timer and this
        writer's own thread report here what they met; the operator reads one list)."""
        if len(task_ids) > _NAMED:  # an entry names a few; it says how many it stands for
            error = f"{error} ({len(task_ids)} tasks; the first {_NAMED} are named)"
        with self._lock:
            self._failures.append(
                PersistFailure(
                    at=self._clock.now(),
                    operation=operation,
                    task_ids=task_ids[:_NAMED],
                    error=error,
                )
            )

    def _fail_text(self, operation: str, task_ids: tuple[str, ...], error: str) -> None:
        self.note(operation, task_ids=task_ids, error=error)
        _log.warning("store write failed (%s), will retry: %s", operation, error)

    def _fail(self, operation: str, task_ids: tuple[str, ...], exc: Exception) -> None:
        self._fail_text(operation, task_ids, self._describe(exc))

    def _describe(self, exc: Exception) -> str:
        """What a failed write says in `failures`; a lock held elsewhere says so, and that
        the writes wait for it."""
        text = f"{type(exc).__name__}: {exc}"
        if _is_locked(exc):
            text = (
                f"{text} — the store is locked by another connection or process; the writes "
                f"are kept and retried every {self._retry_interval:g} s, and go in once it "
                "lets go"
            )
        return text

    # ------------------------------------------------------------------ background
    def _ensure_thread(self) -> None:
        if self._thread is not None or self._closed:
            return
        with self._start_lock:  # not `_lock`: recording never waits for that one
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._serve, name="chongming-store-writer", daemon=True
                )
                self._thread.start()

    def _is_closed(self) -> bool:
        return self._closed

    def _serve(self) -> None:
        while not self._is_closed():
            try:
                self._serve_once()
            except BaseException as exc:  # of any kind: the writes must outlive it (D65)
                self._healthy = False
                carry_on("the store writer", exc, _log, self.note)
                threading.Event().wait(self._retry_interval)
                self._wake.set()

    def _serve_once(self) -> None:
        self._wake.wait()
        if self._is_closed():
            return
        self._wake.clear()
        if self._flush_interval and not self._urgent.is_set():
            # let a burst of transitions accumulate into one transaction (a durable
            # write cuts the wait short: whatever came meanwhile shares its commit)
            self._urgent.wait(self._flush_interval)
        self._urgent.clear()
        # give the GIL up once before taking the inbox: the thread whose write woke this
        # one is usually about to record more (a finished task's thread starts the next
        # task, whose start waits for this same commit), and those writes then share it
        # instead of waking this thread for a commit of their own; with no other thread
        # ready to run this costs nothing (D195)
        time.sleep(0)
        if not self.flush():
            if self._locked:
                # a write whose caller waits cuts the pause short: its attempt then waits
                # one lock timeout, not the pause and a lock timeout (D66)
                self._urgent.wait(self._retry_interval)
            else:
                threading.Event().wait(self._retry_interval)
            self._wake.set()

    def close(self, *, flush: bool = True) -> bool:
        """Stop the background thread, after a last flush unless `flush` is False."""
        # closed first: a durable write recorded from now on is flushed by its own caller,
        # so none can slip in after the last flush and wait for a thread that has gone
        self._closed = True
        ok = self.flush() if flush else True
        self._wake.set()
        self._urgent.set()
        if not flush:
            with self._flush_lock:
                callbacks = self._take(len(self._inbox))
            _tell(callbacks)  # nobody may wait for a flush that will not come
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        return ok


def _is_locked(exc: BaseException) -> bool:
    """Whether `exc` says the store was locked by another connection or process."""
    return isinstance(exc, StoreError) and exc.locked


def _written(snapshot: TaskSnapshot) -> tuple[int, datetime | None, str | None]:
    """What tells a write of `snapshot` in the store: its version, time and lease owner."""
    return snapshot.status_version, snapshot.updated_at, snapshot.lease_owner


def _holds(stored: TaskSnapshot | None, written: tuple[int, datetime | None, str | None]) -> bool:
    """Whether the store's row `stored` is the write described by `written` (`_written`)."""
    return stored is not None and _written(stored) == written


def _merge(older: TouchUpdate, newer: TouchUpdate) -> TouchUpdate:
    """`newer`'s fields over `older`'s (UNSET keeps the older value)."""
    return dataclasses.replace(older, **newer.fields())  # type: ignore[arg-type]
