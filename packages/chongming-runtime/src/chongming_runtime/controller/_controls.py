"""`ControllerControls`: stop, pause, resume, retry, wait and the command handler
of a `Controller` (guide §8.3, §8.9)."""

import logging
import time
from datetime import timedelta

from chongming_core import (
    Command,
    CommandAction,
    ConfigurationError,
    StateMachine,
    TaskStatus,
)
from chongming_runtime.controller._base import ControllerBase
from chongming_runtime.controller._orphans import settle_orphaned
from chongming_runtime.controller._reconcile import lease_expired
from chongming_runtime.persistence._commands import NOT_HELD, new_command
from chongming_runtime.run._outcome import TaskOutcome
from chongming_runtime.run._task_run import TaskRun
from chongming_runtime.support._text import refuse_unstorable

__all__ = ["ControllerControls"]

_S = TaskStatus
_log = logging.getLogger("chongming_task.controller")


class ControllerControls(ControllerBase):
    """Controls of a `Controller`: applied here, or sent as commands to the holder (a mixin)."""

    # ================================================================ controls
    def stop(self, task_id: str, *, reason: str | None = None) -> bool:
        """Request a stop; never blocks.

        Returns True when a stop was requested (applied here, or sent as a command to the
        holder), False when there is no such task or it has already finished.
        """
        refuse_unstorable("reason", reason)
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return run.stop(reason, actor=self.owner)
        if self._pipelines.holds(task_id):
            return self._pipelines.stop_unreleased(task_id, reason)
        return self._send(task_id, CommandAction.STOP, reason)

    def pause(self, task_id: str, *, timeout: float | None = None) -> bool:
        """Request a pause. True only once the task is confirmed ``paused``.

        Across processes there is no receipt: the command is sent and False
        ("not confirmed") is returned — poll `get()` to observe the result.
        """
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return run.pause(timeout, actor=self.owner)
        if self._pipelines.holds(task_id):
            # a pipeline node waiting for its upstream (blocked) has no pause (§9.2): nothing
            # is sent, so no pause lands later, once it is released
            return False
        self._send(task_id, CommandAction.PAUSE, None)
        return False

    def resume(self, task_id: str) -> bool:
        """Withdraw a pause. True when applied here or accepted for the holder (R14)."""
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return run.resume(actor=self.owner)
        snapshot = self.store.get(task_id)
        if snapshot is None or snapshot.status not in {_S.PAUSED, _S.PAUSING}:
            return False
        return self._send(task_id, CommandAction.RESUME, None)

    def _send(self, task_id: str, action: CommandAction, reason: str | None) -> bool:
        snapshot = self.store.get(task_id)
        if snapshot is None or snapshot.is_terminal:
            return False
        self.store.submit_command(
            new_command(
                task_id=task_id,
                action=action.value,
                issued_by=self.owner,
                clock=self.clock,
                reason=reason,
                bucket=snapshot.bucket,
            )
        )
        return True

    def stop_all(self, *, reason: str | None = None) -> int:
        """Request a stop of every unfinished task held here; returns how many requests were sent
        (not how many have stopped: follow with `wait_all`)."""
        refuse_unstorable("reason", reason)
        with self._lock:
            runs = list(self._runs.values())
        sent = sum(1 for run in runs if run.stop(reason, actor=self.owner))
        return sent + self._pipelines.stop_all(reason)

    def retry(self, task_id: str, *, reason: str | None = None) -> TaskRun:
        """Run a failed/stopped/cancelled/lost task of this process again under the same id (R6).

        Raises:
            ConfigurationError: the task is not held here (its function and arguments are
                only known where it was submitted), it is not finished, or it is a pipeline
                node (submit the pipeline again).
        """
        with self._lock:
            run = self._runs.get(task_id)
        if run is None:
            where = "it is in the store" if self.store.get(task_id) is not None else "no such task"
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
        machine = StateMachine(run.snapshot, run.transitions, clock=self.clock)
        transition = machine.retry(actor=self.owner, reason=reason)
        # the run keeps the function, arguments and options it was made with
        revived = self._make_run(run._fn, machine, *run._recipe(), replacing=run)
        self._writer.record(machine.snapshot, (transition,))
        revived._start_unless_ended()  # a stop by id may have reached it first
        return revived

    def wait(self, task_id: str, timeout: float | None = None) -> TaskOutcome:
        """Block until the task is terminal; raises `TimeoutError` (changing nothing) after
        `timeout`. Works for tasks of other processes too (by polling the store)."""
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return run.wait(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.01
        while True:
            snapshot = self.get(task_id)
            if snapshot is None:
                raise ConfigurationError(f"no task {task_id!r} in the store")
            if snapshot.is_terminal:
                return TaskOutcome.from_snapshot(snapshot)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"task {task_id!r} is still {snapshot.status.value} after {timeout:g}s; "
                    "wait() changed nothing"
                )
            time.sleep(
                delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
            )
            delay = min(delay * 2, 0.2)

    def wait_all(self, timeout: float | None = None) -> list[TaskOutcome]:
        """Wait for every task held here; raises `TimeoutError` when some are still unfinished."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._pipelines.wait_all(deadline)
        # the latest submitted usually finishes last: waiting for it first means one
        # wake-up for a whole batch instead of one per task
        outcomes = []
        runs = self.runs()
        for run in reversed(runs):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                outcomes.append(run.wait(left))
            except TimeoutError:
                raise TimeoutError(
                    still_unfinished(runs, timeout, "wait_all() changed nothing")
                ) from None
        outcomes.reverse()  # in submission order
        return outcomes

    # ================================================================ commands
    def _handle_command(self, command: Command) -> str | None:
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
        with self._lock:
            run = self._runs.get(command.task_id)
        who = f"{command.issued_by} (command)"
        if run is None:
            if self._pipelines.holds(command.task_id):
                if action is CommandAction.STOP:
                    self._pipelines.stop_unreleased(command.task_id, command.reason)
                    return "applied"
                # held here, so not released to another holder: completed, never retried
                # until the node is released and the stale request applied then
                return (
                    f"ignored: the task is a pipeline node waiting for its upstream; "
                    f"it cannot {action.value} (only a stop applies to it)"
                )
            snapshot = self.store.get(command.task_id)
            if snapshot is None:
                return f"rejected: no task {command.task_id!r} in the store"
            if snapshot.is_terminal:
                return f"ignored: task is already {snapshot.status.value}"
            # no one will ever take it: its lease expired a whole lease_ttl ago (a holder
            # merely late to renew, or whose clock disagrees a little, still gets it)
            long_ago = self.clock.now() - timedelta(seconds=self.lease_ttl)
            if lease_expired(snapshot, long_ago):
                return settle_orphaned(self.store, command, action, snapshot, self.clock)
            return NOT_HELD
        if action is CommandAction.STOP:
            done = run.stop(command.reason, actor=who)
        elif action is CommandAction.RESUME:
            done = run.resume(actor=who)
        else:
            # requested here and now, before the next command of the batch is applied (a
            # resume right behind it must find it); nobody waits: its window ends it (D61)
            if run._pause_without_waiting(actor=who):
                return "applied: pause requested"
            done = False
        return "applied" if done else f"ignored: task is {run.status.value}"


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
