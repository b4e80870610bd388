"""`ControllerFlow`: scheduling, the run listener, leases and touches of a `Controller`."""

import logging
from datetime import timedelta
from functools import partial
from typing import Any

from chongming_core import (
    ACTIVE_STATUSES,
    TaskSnapshot,
    TaskStatus,
    TouchUpdate,
    Transition,
)
from chongming_runtime.controller._base import ControllerBase
from chongming_runtime.controller._scheduling_lock import Then
from chongming_runtime.persistence._writer import PersistFailure
from chongming_runtime.run._task_run import TaskRun
from chongming_runtime.support._background import carry_on
from chongming_runtime.support._call_each import call_each
from chongming_runtime.support._thread_cache import keeping_launch, run_elsewhere

__all__ = ["ControllerFlow"]

_log = logging.getLogger("chongming_task.controller")

_S = TaskStatus


class ControllerFlow(ControllerBase):
    """How runs of a `Controller` are admitted, scheduled and written through (a mixin)."""

    #: As a run listener it never blocks a report, except in durable store writes, which
    #: pass a kept attempt on by themselves (see `_thread_cache.hand_over`).
    reports_quickly = True

    # ================================================================ scheduling
    def _admit(self, run: TaskRun) -> None:
        """Admission callback of every run: it is ready for an attempt; queue it."""
        with self._lock:
            closing = self._closing
            if not closing:
                snap = run._scheduling_snapshot()
                self._ready.push(
                    snap.task_id, priority=snap.priority, tags=snap.tags, bucket=snap.bucket
                )
                startable = self._take_startable()
        if closing:  # made while closing (a pipeline node released just now): never runs (R4)
            run.stop(self._close_reason, actor=self.owner)
            return
        self._dispatch_all(startable)

    def _start_here(self, startable: list[TaskRun], then: list[Then]) -> None:
        """Start runs that posted scheduling work made startable, then tell its waiters
        (even when a start is interrupted)."""
        try:
            self._dispatch_all(startable)
        finally:
            call_each(then, _log, "could not release a finished run's waiters")

    def _start_elsewhere(self, startable: list[TaskRun], then: list[Then]) -> None:
        """`_start_here` on another thread: the holder that ran the posted work was not
        reporting a task (a query, a submit, a pipeline release holding its own lock)."""
        try:
            run_elsewhere(partial(self._start_here, startable, then), "chongming-scheduler")
        except Exception:  # no thread to be had (a process limit, shutdown): start them here
            _log.exception("could not start a scheduling thread; starting the runs here")
            self._start_here(startable, then)

    def _dispatch_all(self, startable: list[TaskRun]) -> None:
        """Start runs taken by `_take_startable` (admitted, each holding its slot)."""
        for index, ready in enumerate(startable):
            try:
                ready._kick()
            except Exception:  # one failure must not keep the others from starting
                _log.exception("could not start task %r", ready.task_id)
            except BaseException:
                # a Ctrl-C on the main thread (D43): the runs after this one hold their
                # slots; another thread starts them, so none is left admitted but unstarted
                rest = startable[index + 1 :]
                if rest:
                    self._start_elsewhere(rest, [])
                raise

    def _take_startable(self) -> list[TaskRun]:
        """Pop every queued run that fits now, admit it and take its capacity. Call under
        the lock (the run's own lock is taken inside it, never the other way round).

        Admission and slot are given together: a run paused before it is started loses
        its admission with its queued state, and gives the slot back when the pause is
        told here. The runs are started after the lock is released; one critical section
        takes them all, so threads finishing tasks at the same moment do not queue on the
        lock once per task they start.
        """
        startable: list[TaskRun] = []
        if self._closing:
            return startable
        while True:
            item = self._ready.pop_fitting(self._capacity)
            if item is None:
                return startable
            run = self._runs.get(item.task_id)
            if run is None or not run._admit_now():  # admitted with its slot, atomically
                continue
            self._capacity.acquire(item.task_id, item.tags, item.bucket)
            startable.append(run)

    # ================================================================ run listener
    def on_transition(self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot) -> None:
        """Write the transition through and keep the capacity account (a `RunListener`).

        A finished task gives its slot back before its terminal write is made durable, so
        the next task starts while the write commits (together with those of the other
        tasks finishing meanwhile: group commit). The finishing thread does not wait for
        the commit either: the run holds ``wait()`` and ``done`` until the writer reports
        the write durable (pipeline nodes are written synchronously, before their
        downstream nodes are released).
        """
        status = transition.to_status
        terminal = status.is_terminal
        if not terminal:
            self._writer.record(snapshot, (transition,))
        if status is _S.STARTING or status is _S.RUNNING:
            return  # dispatched by _take_startable: out of the ready queue, holding its slot
        if status is _S.QUEUED:
            # nothing to account: a run reaches queued holding no slot (from pending,
            # blocked, paused before its start or retry_wait), and its admission queues it;
            # if it has moved on since, that move is told and accounted by itself (D38)
            return
        # when another thread holds the lock, its holder does the accounting (and starts
        # what it releases) instead of this thread waiting for it (see SchedulingLock)
        startable = self._lock.run_or_post(
            partial(self._account, run, snapshot.task_id),
            # posted: wait() waits until the slot this gave back was passed on, as it would
            # if this thread did it itself
            run._hold_finish if terminal else None,
        )
        if startable is None:
            pass
        elif len(startable) == 1 and terminal and snapshot.pipeline_id is None:
            # the one run this finish made room for: on this thread, after its report
            keeping_launch(partial(self._dispatch_all, startable))
        elif startable:
            self._dispatch_all(startable)
        if not terminal:
            return
        if snapshot.pipeline_id is not None:
            try:
                self._writer.record(snapshot, (transition,), durable=True)
            finally:  # whatever the write did, what follows the node is decided
                self._pipelines.node_settled(snapshot)
        else:  # this thread goes on at once; wait() returns once the write is durable
            self._writer.record(snapshot, (transition,), on_durable=run._hold_finish())

    def _account(self, run: TaskRun, task_id: str) -> list[TaskRun]:
        """Bring the ready queue and the capacity in line with `run`'s state; returns the
        runs that now fit. Under the lock, on whichever thread holds it."""
        # the run's state now, not the one told: an event can arrive after the run has
        # moved on (another thread was delivering), e.g. a `paused` told after a resume
        # that was admitted and started again
        now, needs_slot = run._needs_slot()
        if now is not _S.QUEUED:
            self._ready.remove(task_id)
        if needs_slot and now.is_terminal:
            # lost, but its abandoned body still executes: what it holds stays held, under
            # a key of its own (a retry of the task takes a slot of its own), until the
            # body returns (D54)
            held = f"{task_id}\x00abandoned-{id(run)}"  # the run lives while its body runs
            if run._when_body_returns(partial(self._abandoned_body_returned, held)):
                self._capacity.rekey(task_id, held)
                return []
            needs_slot = False  # it returned meanwhile
        if not needs_slot and self._capacity.release(task_id):
            return self._take_startable()
        return []

    def _abandoned_body_returned(self, held: str) -> None:
        """A body abandoned after its graceful window returned: pass on what it held (on
        its thread, which holds no lock)."""
        startable = self._lock.run_or_post(partial(self._release_held, held))
        if startable:
            self._dispatch_all(startable)

    def _release_held(self, held: str) -> list[TaskRun]:
        if self._capacity.release(held):
            return self._take_startable()
        return []

    def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
        """Progress is flushed on the touch timer, never per call (R18)."""

    # ================================================================ leases and touches
    def _stamp_lease(self, snapshot: TaskSnapshot) -> TaskSnapshot:
        """`snapshot` with this node's current lease (none once terminal). A run made here
        carries the lease from its submission, so a copy is made only after a renewal."""
        until = None if snapshot.status.is_terminal else self._lease_until
        if snapshot.lease_until is until and snapshot.lease_owner == self.owner:
            return snapshot
        return snapshot.evolve(lease_owner=self.owner, lease_until=until)

    def _ensure_tick(self) -> None:
        """Start the touch timer (once), renewing the lease first: a node idle since its
        construction (longer than `lease_ttl`, maybe) must not submit with a stale lease."""
        with self._lock:
            if not self._ticking and not self._closing:  # not ticking: no timer armed
                self._ticking = True
                self._renew_lease()
                self._tick_timer = self.clock.call_later(self.touch_interval, self._tick)

    def _renew_lease(self) -> None:
        """The lease this node writes from now on: `lease_ttl` from now."""
        self._lease_until = self.clock.now() + timedelta(seconds=self.lease_ttl)
        self._next_renewal = self.clock.monotonic() + self.lease_ttl / 3

    def _tick(self) -> None:
        """Every `touch_interval`: flush progress and heartbeats; renew leases when due. The
        next tick is armed whatever this one meets (a failing store, a bug): leases must
        keep being renewed; what it met is logged and listed in `persist_failures` (D65)."""
        with self._lock:
            self._tick_timer = None
            if self._closing:
                return
            runs = [r for r in self._runs.values() if not r.done]
        try:
            self._touch_all(runs)
        except BaseException as exc:
            carry_on("the touch timer", exc, _log, self._writer.note)
        finally:
            with self._lock:
                if self._tick_timer is None and not self._closing:
                    self._tick_timer = self.clock.call_later(self.touch_interval, self._tick)

    def _touch_all(self, runs: list[TaskRun]) -> None:
        renew = self.clock.monotonic() >= self._next_renewal
        if renew:
            self._renew_lease()
        for run in runs:
            status = run.status
            if status.is_terminal:
                continue
            if status in ACTIVE_STATUSES or status is _S.PAUSED:
                snap = run.snapshot
                self._writer.touch(
                    TouchUpdate(
                        snap.task_id,
                        progress=snap.progress,
                        heartbeat_at=snap.last_heartbeat_at,
                        pid=snap.pid,
                        **self._lease_fields(renew),
                    )
                )
            elif renew:
                self._writer.touch(TouchUpdate(run.task_id, **self._lease_fields(True)))
        self._pipelines.renew(renew)
        self._writer.request_flush()

    def _lease_fields(self, renew: bool) -> dict[str, Any]:
        if not renew:
            return {}
        return {"lease_owner": self.owner, "lease_until": self._lease_until}

    def flush(self) -> bool:
        """Write everything pending to the store now; True when the store took it all."""
        return self._writer.flush()

    @property
    def persist_failures(self) -> list[PersistFailure]:
        """The latest store failures (at most 20). Tasks are unaffected; the store catches up.

        Besides failed writes: a failed command poll, a command row that could not be read,
        whatever a round of a background thread raised, a pipeline step that failed (D67).
        """
        return self._writer.failures
