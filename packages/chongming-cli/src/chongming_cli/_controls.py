"""``stop``, ``pause`` and ``resume``: what each did, said to a person or as JSON.

A console process holds no task (it submitted none), so a control it accepts is a
command written to the store for the holder (D50, D56), never applied here; a durable
task that no worker holds yet has no holder, and its control is applied in the store
at once (D172). Each
control ends in one of these outcomes:

- ``requested``: the command was written; the holder applies it at its next poll
  (``holder_renewing`` false: its holder stopped renewing its lease, so it may
  never be applied);
- ``not_confirmed``: a pause was written; across processes there is no receipt;
- ``confirmed``: the control took effect already, nothing was sent: the task was a
  durable one that no worker held yet, so it was applied in the store (a stop:
  ``stopped``; a pause: ``paused``; a resume: ``queued`` again);
- ``unchanged``: nothing was sent, because what was asked is already so (a pause
  of a ``paused`` or ``pausing`` task, a stop of a ``stopping`` one, a stop of a
  task whose earlier stop command its holder has not applied yet);
- ``refused``: nothing was sent, because the task cannot take it (exit 1).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from chongming_cli._commands import Command, Console, unknown_task
from chongming_cli._exit import EXIT_OK, CliError
from chongming_cli._hints import suggest
from chongming_cli._holders import dead_holder_pid
from chongming_cli._output import lease_expired_for, write_json
from chongming_cli._session import NodeOptions, open_controller
from chongming_core import Command as StoredCommand
from chongming_core import StateMachine, TaskSnapshot, TaskStatus
from chongming_runtime import Controller, format_elapsed, printable

__all__ = ["CONTROLS", "ControlReport"]

_S = TaskStatus
REQUESTED = "requested"
NOT_CONFIRMED = "not_confirmed"
CONFIRMED = "confirmed"
#: Why a control of a task no worker held took effect at once (its report's reason).
_UNHELD = "no worker held it yet, so the {} was applied in the store"
UNCHANGED = "unchanged"
REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class ControlReport:
    """What one control did (the ``--json`` document, less `message`).

    Attributes:
        task_id: the task.
        action: ``stop``, ``pause`` or ``resume``.
        outcome: see the module docstring.
        reason: why, for every outcome but a plain ``requested``; None otherwise.
        status: the task's status in the store when the control was made (None: no such
            task).
        holder: the process whose lease the task carried (None: none).
        holder_renewing: whether that lease was still renewed (None: no holder).
        command_sent: whether a command was written to the store.
        message: the line shown to a person.
    """

    task_id: str
    action: str
    outcome: str
    reason: str | None
    status: str | None
    holder: str | None
    holder_renewing: bool | None
    command_sent: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document."""
        document = asdict(self)
        del document["message"]
        return document


@dataclass(frozen=True, slots=True)
class _Found:
    """The task as the control found it, and how to report on it."""

    task_id: str
    action: str
    snapshot: TaskSnapshot | None
    node: NodeOptions
    #: seconds since the holder's lease ran out (None: renewed, or no holder)
    gone: float | None = None
    #: the holder's process, a worker of this host that no longer runs (None: not known
    #: gone) though its lease has not ended yet
    dead_pid: int | None = None

    @property
    def renewing(self) -> bool | None:
        """Whether the holder still renews its lease (None: the task has no holder)."""
        if self.snapshot is None or not self.snapshot.lease_owner:
            return None
        return self.gone is None and self.dead_pid is None

    @property
    def holder_text(self) -> str:
        owner = None if self.snapshot is None else self.snapshot.lease_owner
        return f"its holder {printable(repr(owner))}" if owner else "its holder"

    def report(
        self, outcome: str, message: str, *, reason: str | None = None, sent: bool = False
    ) -> ControlReport:
        snap = self.snapshot
        return ControlReport(
            task_id=self.task_id,
            action=self.action,
            outcome=outcome,
            reason=reason,
            status=None if snap is None else snap.status.value,
            holder=None if snap is None else snap.lease_owner,
            holder_renewing=self.renewing,
            command_sent=sent,
            message=message,
        )

    def refused(self, reason: str) -> ControlReport:
        return self.report(REFUSED, reason, reason=reason)

    def applies(self, verb: str) -> tuple[str, str | None]:
        """Who applies the command and when (`verb`, e.g. "applies it at its next poll"),
        and the reason to give when its holder stopped renewing its lease (D56) or its
        process is known gone (D194)."""
        if self.dead_pid is not None:
            assert self.snapshot is not None
            assert self.snapshot.lease_until is not None
            text = (
                f"{self.holder_text} is gone (its process {self.dead_pid} no longer runs on "
                "this host), so it will never apply it; once its lease ends at "
                f"{self.snapshot.lease_until:%Y-%m-%d %H:%M:%S} UTC, mark the task lost "
                f"with: {suggest(self.node, 'reconcile')}"
            )
            return text, text
        if self.gone is None:
            return f"{self.holder_text} {verb}", None
        text = (
            f"{self.holder_text} stopped renewing its lease {format_elapsed(self.gone)} ago, so it "
            "may never be applied (if that process is gone, mark a task that held a slot lost "
            f"with: {suggest(self.node, 'reconcile')})"
        )
        return text, text


def _find(controller: Controller, task_id: str, action: str, node: NodeOptions) -> _Found:
    snapshot = controller.get(task_id)
    if snapshot is None:
        return _Found(task_id, action, None, node)
    gone = lease_expired_for(snapshot, controller.clock.now()) if snapshot.lease_owner else None
    dead_pid = None
    if gone is None and snapshot.lease_owner and not snapshot.is_terminal:
        dead_pid = dead_holder_pid(controller, snapshot.lease_owner)
    return _Found(task_id, action, snapshot, node, gone, dead_pid)


def _applied_unheld(controller: Controller, found: _Found, status: TaskStatus) -> bool:
    """Whether a control just accepted took effect in the store already: this process wrote
    the task's move to `status` itself (`Controller.stop`, `pause` and `resume` apply a
    control of a durable task that no worker holds at once instead of sending a command to
    nobody). Read from the task's history, not its status: a worker may claim a task
    resumed so a moment later, and it is then no longer `queued` nor unheld."""
    before = found.snapshot.status_version if found.snapshot is not None else 0
    return any(
        t.status_version > before and t.to_status is status and t.actor == controller.owner
        for t in controller.history(found.task_id)
    )


def _unfinished(found: _Found) -> ControlReport | None:
    """The refusal of a control of a task that is unknown or already ended, if it is."""
    snapshot = found.snapshot
    if snapshot is None:
        return found.refused(unknown_task(found.task_id, found.node))
    if snapshot.is_terminal:
        return found.refused(
            f"task {printable(repr(found.task_id))} already ended {snapshot.status.value}; "
            f"there is nothing to {found.action} (a finished task runs again only when "
            "`chongming-task retry` queues it again)"
        )
    return None


def _stop(controller: Controller, args: argparse.Namespace, node: NodeOptions) -> ControlReport:
    found = _find(controller, args.task_id, "stop", node)
    shown = printable(repr(args.task_id))
    follow = suggest(node, "status", args.task_id)
    early = _unfinished(found)
    if early is not None:
        return early
    assert found.snapshot is not None
    if found.snapshot.status is _S.STOPPING:
        already = f"task {shown} is already stopping (a stop was applied; it is winding up)"
        return found.report(
            UNCHANGED,
            f"{already}; no other stop was sent; follow it with: {follow}",
            reason=already,
        )
    pending = controller.pending_command(args.task_id, "stop")
    if pending is not None:
        return _stop_on_its_way(found, pending, controller.clock.now(), follow)
    if not controller.stop(args.task_id, reason=args.reason):
        latest = _unfinished(_find(controller, args.task_id, "stop", node))
        return latest or found.refused(f"the stop of task {shown} was not accepted; retry it")
    if _applied_unheld(controller, found, _S.STOPPED):
        return found.report(
            CONFIRMED,
            f"task {shown} is stopped: {_UNHELD.format('stop')}",
            reason=_UNHELD.format("stop"),
        )
    who, reason = found.applies("applies it at its next poll")
    return found.report(
        REQUESTED,
        f"stop requested for task {shown}: a command was written to the store and {who}; "
        f"follow it with: {follow}",
        reason=reason,
        sent=True,
    )


def _stop_on_its_way(
    found: _Found, pending: StoredCommand, now: datetime, follow: str
) -> ControlReport:
    """The report of a stop whose earlier stop command its holder has not applied yet:
    nothing more is sent (D194)."""
    shown = printable(repr(found.task_id))
    when = ""
    if pending.issued_at is not None:
        when = f" {format_elapsed(max(0.0, (now - pending.issued_at).total_seconds()))} ago"
    already = (
        f"a stop of task {shown} is already on its way (sent{when} by "
        f"{printable(repr(pending.issued_by))})"
    )
    who, _ = found.applies("applies it at its next poll")
    return found.report(
        UNCHANGED,
        f"{already} and {who}; no other stop was sent; follow it with: {follow}",
        reason=already,
    )


def _pause(controller: Controller, args: argparse.Namespace, node: NodeOptions) -> ControlReport:
    found = _find(controller, args.task_id, "pause", node)
    shown = printable(repr(args.task_id))
    early = _unfinished(found)
    if early is not None:
        return early
    snapshot = found.snapshot
    assert snapshot is not None
    if snapshot.status in {_S.PAUSED, _S.PAUSING}:
        state = "paused" if snapshot.status is _S.PAUSED else "pausing (a pause is under way)"
        reason = f"task {shown} is already {state}"
        return found.report(
            UNCHANGED,
            f"{reason}; no other pause was sent; resume it with: "
            f"{suggest(node, 'resume', args.task_id)}",
            reason=reason,
        )
    if not StateMachine(snapshot).can_pause():
        return found.refused(
            f"task {shown} is {snapshot.status.value}, and a {snapshot.status.value} task "
            "cannot be paused (only a queued, starting, running or retry_wait one can); "
            "nothing was sent"
        )
    if controller.pause(args.task_id):  # taken in the store directly: no command was sent
        if _applied_unheld(controller, found, _S.PAUSED):
            return found.report(
                CONFIRMED,
                f"task {shown} is paused: {_UNHELD.format('pause')}",
                reason=_UNHELD.format("pause"),
            )
        return found.report(
            CONFIRMED, f"task {shown} is paused", reason="the store holds the task paused"
        )
    who, stale = found.applies("pauses it at its next checkpoint")
    return found.report(
        NOT_CONFIRMED,
        f"pause requested for task {shown} but not confirmed: across processes there is no "
        f"receipt, and {who}; check it with: {suggest(node, 'status', args.task_id)}",
        reason=stale or "across processes there is no receipt",
        sent=True,
    )


def _resume(controller: Controller, args: argparse.Namespace, node: NodeOptions) -> ControlReport:
    found = _find(controller, args.task_id, "resume", node)
    shown = printable(repr(args.task_id))
    early = _unfinished(found)
    if early is not None:
        return early
    assert found.snapshot is not None
    # a running task is resumed too when a pause of it is still on its way (D181)
    if controller.resume(args.task_id):
        if _applied_unheld(controller, found, _S.QUEUED):
            return found.report(
                CONFIRMED,
                f"task {shown} is queued again: {_UNHELD.format('resume')}",
                reason=_UNHELD.format("resume"),
            )
        if found.snapshot.status in {_S.PAUSED, _S.PAUSING}:
            who, reason = found.applies("applies it at its next poll")
        else:
            who, reason = found.applies("applies both, in order, at its next poll")
            who = f"a pause sent before it has not been applied yet, and {who}"
        return found.report(
            REQUESTED,
            f"resume requested for task {shown}: {who}; check it with: "
            f"{suggest(node, 'status', args.task_id)}",
            reason=reason,
            sent=True,
        )
    latest = _find(controller, args.task_id, "resume", node)
    ended = _unfinished(latest)
    if ended is not None:
        return ended
    assert latest.snapshot is not None
    status = latest.snapshot.status
    return found.refused(f"task {shown} is {status.value}, not paused; there is nothing to resume")


def _control(
    act: Callable[[Controller, argparse.Namespace, NodeOptions], ControlReport],
) -> Command:
    def command(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
        with open_controller(node) as controller:
            report = act(controller, args, node)
        if args.json:
            write_json(console.out, report.to_dict())
        elif report.outcome != REFUSED:
            console.say(report.message)
        if report.outcome == REFUSED:
            raise CliError(report.message)
        return EXIT_OK

    command.__doc__ = act.__doc__
    return command


CONTROLS: dict[str, Command] = {
    "stop": _control(_stop),
    "pause": _control(_pause),
    "resume": _control(_resume),
}
