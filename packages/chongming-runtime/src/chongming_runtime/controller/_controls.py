"""`Controls`: stop, pause, resume, retry and wait for the tasks a controller reaches, and
the handler of the commands sent to it (guide §8.3, §8.9).

A task held here is controlled through its run; a pipeline node not yet released,
through the pipeline coordinator; any other task by a command row that its holder's
`CommandPoller` claims. `Controller` delegates its public controls here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta

from chongming_core import (
    Clock,
    Command,
    CommandAction,
    ConcurrencyConflict,
    ConfigurationError,
    StateMachine,
    StoreError,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
)
from chongming_runtime.controller._held_runs import HeldRuns
from chongming_runtime.controller._orphans import settle_orphaned
from chongming_runtime.controller._reconcile import lease_expired
from chongming_runtime.controller._waiting_work import settle_waiting
from chongming_runtime.persistence._commands import NOT_HELD, new_command
from chongming_runtime.persistence._writer import StoreWriter
from chongming_runtime.pipeline._coordinator import PipelineCoordinator
from chongming_runtime.run._outcome import TaskOutcome
from chongming_runtime.run._setup import wait_timeout
from chongming_runtime.run._task_run import TaskRun
from chongming_runtime.support._text import check_reason

__all__ = ["Controls", "still_unfinished"]

_S = TaskStatus
_log = logging.getLogger("chongming_task.controller")
#: How long the commands `requeue` completes are leased to it (it completes them at once).
_SETTLING_LEASE = 30.0

#: Makes and holds the run of a retry: ``make_run(fn, machine, args, kwargs, options,
#: replacing=run)`` (the controller's own `_make_run`).
MakeRun = Callable[..., TaskRun]


class Controls:
    """Controls of one controller: applied here, or sent as commands to the holder.

    Args:
        held: the runs held here.
        pipelines: the nodes not yet released.
        store: where other processes' tasks are, and where commands go.
        writer: writes a retry's first transition.
        owner: who acts (written in transitions and commands).
        clock: stamps commands; tells whose lease expired long ago.
        lease_ttl: how long after its lease expired a holder is taken for gone (D50).
        make_run: makes and holds a retry's run.
        get: the task's snapshot, live or from the store (what `wait` polls).
    """

    def __init__(
        self,
        *,
        held: HeldRuns,
        pipelines: PipelineCoordinator,
        store: TaskStore,
        writer: StoreWriter,
        owner: str,
        clock: Clock,
        lease_ttl: float,
        make_run: MakeRun,
        get: Callable[[str], TaskSnapshot | None],
    ) -> None:
        self._held = held
        self._pipelines = pipelines
        self._store = store
        self._writer = writer
        self._owner = owner
        self._clock = clock
        self._lease_ttl = lease_ttl
        self._make_run = make_run
        self._get = get

    # ================================================================ controls
    def stop(self, task_id: str, reason: str | None) -> bool:
        """Request a stop: here, of a node not released, or by command (`Controller.stop`)."""
        check_reason(reason)
        run = self._held.get(task_id)
        if run is not None:
            return run.stop(reason, actor=self._owner)
        if self._pipelines.holds(task_id):
            return self._pipelines.stop_unreleased(task_id, reason)
        settled = self._settle_waiting(task_id, CommandAction.STOP, reason)
        if settled is not None:
            return settled
        if self.pending(task_id, CommandAction.STOP):
            # the stop asked before stands: a second row would only be applied as a no-op,
            # or pile up for a holder that is gone (D194)
            snapshot = self._store.get(task_id)
            return snapshot is not None and not snapshot.is_terminal
        return self._send(task_id, CommandAction.STOP, reason)

    def pause(self, task_id: str, timeout: float | None) -> bool:
        """Request a pause; True only once confirmed here (`Controller.pause`)."""
        run = self._held.get(task_id)
        if run is not None:
            return run.pause(timeout, actor=self._owner)
        if self._pipelines.holds(task_id):
            # a pipeline node waiting for its upstream (blocked) has no pause (§9.2): nothing
            # is sent, so no pause lands later, once it is released
            return False
        settled = self._settle_waiting(task_id, CommandAction.PAUSE, None)
        if settled is not None:
            return settled  # a durable task nobody runs yet: paused before its start here
        self._send(task_id, CommandAction.PAUSE, None)
        return False

    def resume(self, task_id: str) -> bool:
        """Withdraw a pause here, or send a resume to the holder (`Controller.resume`)."""
        run = self._held.get(task_id)
        if run is not None:
            return run.resume(actor=self._owner)
        snapshot = self._store.get(task_id)
        if snapshot is None or snapshot.is_terminal:
            return False
        if snapshot.status not in {_S.PAUSED, _S.PAUSING}:
            # a pause sent a moment ago may not have reached its holder yet: the resume goes
            # behind it, and the holder applies both in the order they were issued (D181)
            if not self._pause_pending(task_id):
                return False
            return self._send(task_id, CommandAction.RESUME, None)
        settled = self._settle_waiting(task_id, CommandAction.RESUME, None, snapshot)
        if settled is not None:
            return settled
        return self._send(task_id, CommandAction.RESUME, None)

    def _pause_pending(self, task_id: str) -> bool:
        """Whether a pause command of `task_id` is in the store, not yet completed."""
        return self.pending(task_id, CommandAction.PAUSE) is not None

    def pending(self, task_id: str, action: CommandAction) -> Command | None:
        """The oldest command of `action` for `task_id` in the store not yet completed."""
        for command in self._store.commands(task_id=task_id, include_complete=False):
            if command.known_action() is action:
                return command
        return None

    def _settle_waiting(
        self,
        task_id: str,
        action: CommandAction,
        reason: str | None,
        snapshot: TaskSnapshot | None = None,
    ) -> bool | None:
        """`settle_waiting` for a durable task nobody runs yet; None for any other task, or
        when a worker started it meanwhile (the caller sends a command to it)."""
        if snapshot is None:
            snapshot = self._store.get(task_id)
        if snapshot is None or not snapshot.durable:
            return None
        return settle_waiting(
            self._store, snapshot, action, actor=self._owner, reason=reason, clock=self._clock
        )

    def _send(self, task_id: str, action: CommandAction, reason: str | None) -> bool:
        snapshot = self._store.get(task_id)
        if snapshot is None or snapshot.is_terminal:
            return False
        self._store.submit_command(
            new_command(
                task_id=task_id,
                action=action.value,
                issued_by=self._owner,
                clock=self._clock,
                reason=reason,
                bucket=snapshot.bucket,
            )
        )
        return True

    def stop_all(self, reason: str | None) -> int:
        """Request a stop of every unfinished task held here (`Controller.stop_all`)."""
        check_reason(reason)
        runs = self._held.all()
        sent = sum(1 for run in runs if run.stop(reason, actor=self._owner))
        return sent + self._pipelines.stop_all(reason)

    def retry(self, task_id: str, reason: str | None) -> TaskRun:
        """Run a finished task held here again under its id (`Controller.retry`)."""
        check_reason(reason)
        run = self._held.get(task_id)
        if run is None:
            stored = self._store.get(task_id)
            if stored is not None and stored.durable:
                raise ConfigurationError(
                    f"task {task_id!r} is a durable task this process does not hold; its "
                    "name and arguments are in the store, so queue it again for the workers "
                    f"from any process: controller.requeue({task_id!r})"
                )
            where = "it is in the store" if stored is not None else "no such task"
            raise ConfigurationError(
                f"task {task_id!r} is not held by this process ({where}); its function "
                "and arguments are only known where it was submitted — resubmit it under a "
                "new task id"
            )
        snapshot = run.snapshot
        if snapshot.pipeline_id is not None:
            # its downstream nodes were settled by its first end (D46)
            raise ConfigurationError(
                f"task {task_id!r} is node {snapshot.node_id!r} of pipeline "
                f"{snapshot.pipeline_id!r}, which was settled by the node's end; a node is not "
                "retried alone — submit the pipeline again"
            )
        if not run.done:
            status = run.status
            why = (
                f"it ended {status.value} and its end is still being written"
                if status.is_terminal
                else f"it is still {status.value}"
            )
            raise ConfigurationError(
                f"task {task_id!r} cannot be retried yet: {why}; wait for it to finish first "
                "(controller.wait)"
            )
        machine = StateMachine(run.snapshot, run.transitions, clock=self._clock)
        transition = machine.retry(actor=self._owner, reason=reason)
        # the run keeps the function, arguments and options it was made with
        fn, args, kwargs, options = run.recipe()
        revived = self._make_run(fn, machine, args, kwargs, options, replacing=run)
        self._writer.record(machine.snapshot, (transition,))
        revived.start_unless_ended()  # a stop by id may have reached it first
        return revived

    def requeue(self, task_id: str, reason: str | None) -> TaskSnapshot:
        """Queue a finished durable task again for the workers, in the store
        (`Controller.requeue`, D186)."""
        check_reason(reason)
        held = self._held.get(task_id)
        if held is not None and not held.done:
            status = held.status
            why = (
                f"it ended {status.value} here and its end is still being written"
                if status.is_terminal
                else f"it is still {status.value} here"
            )
            raise ConfigurationError(
                f"task {task_id!r} cannot be queued again yet: {why}; only a finished task is "
                "queued again (wait for it first: controller.wait)"
            )
        self._writer.flush()  # this process's last write of it is in the store
        stored = self._store.get(task_id)
        if stored is None:
            raise ConfigurationError(f"no task {task_id!r} in the store")
        if not stored.durable:
            raise ConfigurationError(
                f"task {task_id!r} is not a durable task: its function and arguments are known "
                "only to the process that submitted it; retry it there (controller.retry), or "
                "enqueue it under a new id"
            )
        if stored.pipeline_id is not None:
            raise ConfigurationError(
                f"task {task_id!r} is a node of pipeline {stored.pipeline_id!r}; a node is not "
                "queued again alone — submit the pipeline again"
            )
        machine = StateMachine(stored, clock=self._clock)
        if not machine.can_retry():
            state = (
                f"still {stored.status.value}" if not stored.is_terminal else stored.status.value
            )
            raise ConfigurationError(
                f"task {task_id!r} is {state}; only a failed, stopped, cancelled or lost task "
                "is queued again"
            )
        # a control sent to the run that ended is not one for the run queued now
        self._close_commands_of_ended(task_id, stored.status)
        transition = machine.retry(actor=self._owner, reason=reason)
        # held by nobody, due now: any worker that serves its name and owns its bucket
        queued = machine.snapshot.evolve(lease_owner=None, lease_until=None, run_at=None)
        try:
            self._store.save(
                queued, expect_version=stored.status_version, transitions=(transition,)
            )
        except ConcurrencyConflict:
            raise ConfigurationError(
                f"task {task_id!r} changed in the store while it was queued again (another "
                "process queued it first?); nothing was written — look at it with status"
            ) from None
        if held is not None:  # its state is the store's now (a claim here takes it on anew)
            self._held.drop(held)
        return queued

    def _close_commands_of_ended(self, task_id: str, status: TaskStatus) -> None:
        """Complete the commands of `task_id` its holder never applied before the task ended
        `status` (its holder died, say, and `reconcile` marked it lost): queued again, the
        task must not be stopped or paused by a control meant for the run that ended (D194).
        A finished task holds no lease, so they are claimable here; a command written since
        it ended is none of them (a control of a finished task is refused)."""
        now = self._clock.now()
        claimed = self._store.claim_commands(
            self._owner, now=now, lease_seconds=_SETTLING_LEASE, task_ids=[task_id]
        )
        result = (
            f"ignored: the task ended {status.value} before its holder applied it; "
            "it was not applied to the task queued again"
        )
        for command in claimed:
            if command.task_id == task_id:
                self._store.complete_command(
                    command.command_id, owner=self._owner, now=now, result=result
                )
            else:  # not asked for: another task's holder claims it
                self._store.release_command(command.command_id, owner=self._owner)

    def wait(self, task_id: str, timeout: float | None) -> TaskOutcome:
        """Block until the task is terminal, here or in the store (`Controller.wait`). A task
        another process wrote while this node held it (D177) ends as the store holds it: the
        run here waits for its body, then the store is read."""
        timeout = wait_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        run = self._held.get(task_id)
        if run is not None:
            outcome = run.wait(timeout)
            if not self._writer.diverged(task_id):
                return outcome
        delay = 0.01
        while True:
            snapshot = self._get(task_id)
            if snapshot is None:
                raise ConfigurationError(f"no task {task_id!r} in the store")
            if snapshot.is_terminal:
                return TaskOutcome.from_snapshot(snapshot)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"task {task_id!r} is still {snapshot.status.value} after {timeout:g}s; "
                    "wait() changed nothing"
                )
            pause = delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
            if snapshot.durable and self._store.supports_durable_work:
                # woken by its terminal write (a notification on PostgreSQL), else a slice
                self._store.wait_for_change(task_id, pause)
            else:
                time.sleep(pause)
            delay = min(delay * 2, 0.2)

    def wait_all(self, timeout: float | None) -> list[TaskOutcome]:
        """Wait for every pipeline and task held here (`Controller.wait_all`)."""
        timeout = wait_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        self._pipelines.wait_all(deadline)
        # the latest submitted usually finishes last: waiting for it first means one
        # wake-up for a whole batch instead of one per task
        outcomes = []
        runs = self._held.all()
        for run in reversed(runs):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                outcomes.append(self.outcome_of(run, run.wait(left)))
            except TimeoutError:
                raise TimeoutError(
                    still_unfinished(runs, timeout, "wait_all() changed nothing")
                ) from None
        outcomes.reverse()  # in submission order
        return outcomes

    def outcome_of(self, run: TaskRun, outcome: TaskOutcome) -> TaskOutcome:
        """`outcome`, the end of `run` here, unless another process wrote its task while
        this node held it (D177): that record stands, and the task is reported as the
        store holds it (a stop here is not the task's end when `reconcile` marked it lost)."""
        if not self._writer.diverged(run.task_id):
            return outcome
        try:
            stored = self._store.get(run.task_id)
        except StoreError:  # cannot be read now: the end here, which the store may not hold
            _log.warning("task %r: the store's record of it cannot be read", run.task_id)
            return outcome
        return outcome if stored is None else TaskOutcome.from_snapshot(stored)

    # ================================================================ commands
    def handle_command(self, command: Command) -> str | None:
        """The result of a command claimed by this node's poller (D30, D50, D61); None
        when the task is not held here (the poller releases the command at once)."""
        action = command.known_action()
        if action is None:
            _log.warning(
                "rejected command %s: unknown action %r for task %r (issued by %r)",
                command.command_id,
                command.action,
                command.task_id,
                command.issued_by,
            )
            return f"rejected: unknown action {command.action!r}"
        run = self._held.get(command.task_id)
        if run is None:
            return self._handle_unheld(command, action)
        who = f"{command.issued_by} (command)"
        if action is CommandAction.STOP:
            done = run.stop(command.reason, actor=who)
        elif action is CommandAction.RESUME:
            done = run.resume(actor=who)
        else:
            # requested here and now, before the next command of the batch is applied (a
            # resume right behind it must find it); nobody waits: its window ends it (D61)
            if run.pause_without_waiting(actor=who):
                return "applied: pause requested"
            done = False
        return "applied" if done else f"ignored: task is {run.status.value}"

    def _handle_unheld(self, command: Command, action: CommandAction) -> str | None:
        if self._pipelines.holds(command.task_id):
            if action is CommandAction.STOP:
                who = f"{command.issued_by} (command)"  # as for a run held here
                self._pipelines.stop_unreleased(command.task_id, command.reason, actor=who)
                return "applied"
            # held here, so not released to another holder: completed, never retried
            # until the node is released and the stale request applied then
            return (
                f"ignored: the task is a pipeline node waiting for its upstream; "
                f"it cannot {action.value} (only a stop applies to it)"
            )
        snapshot = self._store.get(command.task_id)
        if snapshot is None:
            return f"rejected: no task {command.task_id!r} in the store"
        if snapshot.is_terminal:
            return f"ignored: task is already {snapshot.status.value}"
        who = f"{command.issued_by} (command)"
        settled = settle_waiting(
            self._store, snapshot, action, actor=who, reason=command.reason, clock=self._clock
        )
        if settled is not None:  # a durable task nobody runs yet
            return "applied" if settled else f"ignored: task is {snapshot.status.value}"
        # no one will ever take it: its lease expired a whole lease_ttl ago (a holder
        # merely late to renew, or whose clock disagrees a little, still gets it)
        long_ago = self._clock.now() - timedelta(seconds=self._lease_ttl)
        if lease_expired(snapshot, long_ago):
            return settle_orphaned(self._store, command, action, snapshot, self._clock)
        return NOT_HELD


def still_unfinished(runs: list[TaskRun], timeout: float | None, then: str) -> str:
    """What a wait for several runs that ran out of time says: how many, which, and `then`
    (what the call did all the same)."""
    left = [run for run in runs if not run.done]
    shown = ", ".join(f"{run.task_id!r} ({run.status.value})" for run in left[:5])
    more = f" and {len(left) - 5} more" if len(left) > 5 else ""
    return (
        f"{len(left)} of {len(runs)} tasks still unfinished after {timeout or 0:g}s: "
        f"{shown}{more}; {then}"
    )
