"""`Scheduler`: which runs of a controller start, and when (guide §8.4, §8.8).

It owns the ready queue (priority, then arrival), the capacity account (slots,
per-bucket limits, named-resource units) and the controller's lock
(`SchedulingLock`), and takes three calls:

* `admit(run)`: a run is ready for an attempt (its admission callback); it is
  queued, and whatever fits now is started.
* `account(run, ...)`: a run's transition may have changed what it holds; its
  queue place and its slot are brought in line with its state *now* (D38), and
  the runs the freed capacity lets in are started.
* `startable()` / `dispatch(runs)`: take every queued run that fits (admitted,
  each holding its slot), then start them outside the lock.

A body abandoned after its graceful window keeps what it holds until it returns
(D54). The scheduler knows runs only as `SchedulableRun`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

from chongming_core import TaskStatus
from chongming_runtime.controller._capacity import Capacity, ReadyQueue
from chongming_runtime.controller._schedulable import SchedulableRun
from chongming_runtime.controller._scheduling_lock import SchedulingLock, Then
from chongming_runtime.support._call_each import call_each
from chongming_runtime.support._thread_cache import keeping_launch, run_elsewhere

__all__ = ["Scheduler"]

_log = logging.getLogger("chongming_task.controller")

_QUEUED = TaskStatus.QUEUED


class Scheduler:
    """The ready queue and the capacity of one controller, and the lock that orders them.

    Example::

        scheduler = Scheduler(2, find=runs.get, actor="host:1")
        run = TaskRun(fn, admission=scheduler.admit, ...)  # queued and started by it

    Args:
        max_parallel: tasks executing at once.
        limits: units per limited resource tag.
        max_per_bucket: slots per bucket (None: no per-bucket limit).
        find: the run held under a task id (called under the lock).
        actor: who stops a run admitted after `close()` (written in its transition).
    """

    def __init__(
        self,
        max_parallel: int,
        *,
        limits: Mapping[str, int] | None = None,
        max_per_bucket: int | None = None,
        find: Callable[[str], SchedulableRun | None],
        actor: str,
    ) -> None:
        self._capacity = Capacity(max_parallel, limits=limits, max_per_bucket=max_per_bucket)
        self._ready = ReadyQueue()
        self._find = find
        self._actor = actor
        self._open = True
        self._close_reason = "controller closed"
        #: The controller's lock: every critical section of the controller is one that
        #: accounting posted by a finishing task may run in front of (D39).
        self.lock = SchedulingLock(self._start_here, self._start_elsewhere)

    # ================================================================ questions
    @property
    def active(self) -> int:
        """Tasks holding an execution slot (paused in place included)."""
        with self.lock:
            return self._capacity.active

    def active_in_bucket(self, bucket: int) -> int:
        """Slots held by tasks of `bucket`."""
        with self.lock:
            return self._capacity.active_in_bucket(bucket)

    def room(self, tags: Iterable[str] = (), bucket: int | None = None) -> int:
        """How many more tasks with `tags` in `bucket` could start now."""
        with self.lock:
            return self._capacity.room(tags, bucket)

    def holding(self) -> list[str]:
        """The ids of the tasks holding an execution slot (a lost task whose abandoned
        body still executes is not among them: it ended)."""
        with self.lock:
            return self._capacity.holders()

    def claim_room(self) -> tuple[int, dict[str, int]]:
        """Room for durable work this process may claim now: the free slots not promised
        to a task already queued here, and for each limited tag the units neither held
        nor promised (a worker never claims what it could not start)."""
        with self.lock:
            capacity = self._capacity
            free = capacity.max_parallel - capacity.active - len(self._ready)
            queued = self._ready.tag_counts()
            tag_room = {
                tag: max(0, limit - capacity.in_use(tag) - queued.get(tag, 0))
                for tag, limit in capacity.limits.items()
            }
            return max(0, free), tag_room

    def queued_ids(self) -> list[str]:
        """The queued task ids, in the order they would start."""
        with self.lock:
            return self._ready.task_ids()

    # ================================================================ admission
    def admit(self, run: SchedulableRun) -> None:
        """Admission callback of every run: it is ready for an attempt; queue it, and start
        what fits. Once closed, the run is stopped instead and never runs (R4)."""
        startable: list[SchedulableRun] | None = None
        with self.lock:
            if self._open:
                snap = run.scheduling_snapshot()
                self._ready.push(
                    snap.task_id, priority=snap.priority, tags=snap.tags, bucket=snap.bucket
                )
                startable = self.startable()
        if startable is None:  # made while closing (a pipeline node released just now)
            run.stop(self._close_reason, actor=self._actor)
            return
        self.dispatch(startable)

    def hold(self, task_id: str, tags: Iterable[str], bucket: int | None) -> None:
        """Take the slot of a task whose start a worker's claim wrote (D165): it was
        claimed within `claim_room`, and it is ``starting`` here whatever comes next; its
        end gives the slot back as any run's does (`account`)."""
        with self.lock:
            self._capacity.acquire(task_id, frozenset(tags), bucket)

    def unhold(self, task_id: str) -> None:
        """Give back a slot `hold` took for a run that could not be made; start what fits."""
        with self.lock:
            startable = self.startable() if self._capacity.release(task_id) else []
        self.dispatch(startable)

    def close(self, reason: str) -> None:
        """Start nothing from now on; a run admitted later is stopped with `reason`."""
        with self.lock:
            self._open = False
            self._close_reason = reason

    # ================================================================ dispatch
    def startable(self) -> list[SchedulableRun]:
        """Pop every queued run that fits now, admit it and take its capacity. Call under
        the lock (the run's own lock is taken inside it, never the other way round).

        Admission and slot are given together (D38): a run paused before it is started
        loses its admission with its queued state, and gives the slot back when the pause
        is accounted. The runs are started after the lock is released; one critical
        section takes them all, so threads finishing tasks at the same moment do not queue
        on the lock once per task they start.
        """
        startable: list[SchedulableRun] = []
        if not self._open:
            return startable
        ready, capacity, find = self._ready, self._capacity, self._find
        while True:
            item = ready.pop_fitting(capacity)
            if item is None:
                return startable
            run = find(item.task_id)
            if run is None or not run.admit_now():  # admitted with its slot, atomically
                continue
            capacity.acquire(item.task_id, item.tags, item.bucket)
            startable.append(run)

    def dispatch(self, startable: Sequence[SchedulableRun]) -> None:
        """Start runs taken by `startable` (admitted, each holding its slot)."""
        for index, ready in enumerate(startable):
            try:
                ready.kick()
            except Exception:  # one failure must not keep the others from starting
                _log.exception("could not start task %r", ready.task_id)
            except BaseException:
                # a Ctrl-C on the main thread (D43): the runs after this one hold their
                # slots; another thread starts them, so none is left admitted but unstarted
                rest = list(startable[index + 1 :])
                if rest:
                    self._start_elsewhere(rest, [])
                raise

    def _start_here(self, startable: list[SchedulableRun], then: list[Then]) -> None:
        """Start runs that posted work made startable, then tell its waiters (even when a
        start is interrupted)."""
        try:
            self.dispatch(startable)
        finally:
            call_each(then, _log, "could not release a finished run's waiters")

    def _start_elsewhere(self, startable: list[SchedulableRun], then: list[Then]) -> None:
        """`_start_here` on another thread: the holder that ran the posted work was not
        reporting a task (a query, a submit, a pipeline release holding its own lock)."""
        try:
            run_elsewhere(partial(self._start_here, startable, then), "chongming-scheduler")
        except Exception:  # no thread to be had (a process limit, shutdown): start them here
            _log.exception("could not start a scheduling thread; starting the runs here")
            self._start_here(startable, then)

    # ================================================================ accounting
    def account(self, run: SchedulableRun, task_id: str, *, ended: bool, keep_one: bool) -> None:
        """`run` moved to a status that may change what it holds (anything but queued,
        starting or running): bring its queue place and slot in line, and start the runs
        the capacity it gave back lets in.

        When another thread holds the lock, this leaves the accounting to it instead of
        waiting (D39); for a run that `ended`, its ``wait()`` is held until the slot was
        passed on, as when this thread does it. With `keep_one`, a single run let in is
        started on this thread after its report (D37).
        """
        startable = self.lock.run_or_post(
            partial(self._account_now, run, task_id), run.hold_finish if ended else None
        )
        if not startable:
            return
        if keep_one and len(startable) == 1:
            keeping_launch(partial(self.dispatch, startable))
        else:
            self.dispatch(startable)

    def _account_now(self, run: SchedulableRun, task_id: str) -> list[SchedulableRun]:
        """Bring the ready queue and the capacity in line with `run`'s state; returns the
        runs that now fit. Under the lock, on whichever thread holds it."""
        # the run's state now, not the one told: an event can arrive after the run has
        # moved on (another thread was delivering), e.g. a `paused` told after a resume
        # that was admitted and started again
        now, needs_slot = run.needs_slot()
        if now is not _QUEUED:
            self._ready.remove(task_id)
        if needs_slot and now.is_terminal:
            # lost, but its abandoned body still executes: what it holds stays held, under
            # a key of its own (a retry of the task takes a slot of its own), until the
            # body returns (D54)
            held = f"{task_id}\x00abandoned-{id(run)}"  # the run lives while its body runs
            if run.when_body_returns(partial(self._abandoned_body_returned, held)):
                self._capacity.rekey(task_id, held)
                return []
            needs_slot = False  # it returned meanwhile
        if not needs_slot and self._capacity.release(task_id):
            return self.startable()
        return []

    def _abandoned_body_returned(self, held: str) -> None:
        """A body abandoned after its graceful window returned: pass on what it held (on
        its thread, which holds no lock)."""
        startable = self.lock.run_or_post(partial(self._release_held, held))
        if startable:
            self.dispatch(startable)

    def _release_held(self, held: str) -> list[SchedulableRun]:
        if self._capacity.release(held):
            return self.startable()
        return []
