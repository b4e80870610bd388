"""``retry``: queue a finished durable task again for the workers (`Controller.requeue`).

A console holds no task, so only a durable task can be retried from it: its name and
arguments are in the store, and any worker that serves the name claims it again. A task
run by ``run`` (or by a process's own ``submit()``) is known only to that process.
"""

from __future__ import annotations

import argparse

from chongming_cli._commands import Console, unknown_task
from chongming_cli._exit import EXIT_OK, CliError
from chongming_cli._hints import suggest
from chongming_cli._output import write_json
from chongming_cli._session import NodeOptions, open_controller
from chongming_core import ConfigurationError, StateMachine, TaskSnapshot, TaskStatus
from chongming_runtime import printable

__all__ = ["cmd_retry"]


def cmd_retry(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """Queue a finished durable task again for the workers; say who will take it."""
    with open_controller(node) as controller:
        found = controller.get(args.task_id)
        _refuse_unless_requeueable(found, args.task_id, node)
        try:
            queued = controller.requeue(args.task_id, reason=args.reason)
        except ConfigurationError as exc:  # another process changed it meanwhile
            raise CliError(str(exc)) from None
        waiting = controller.waiting_reasons([queued]).get(queued.task_id)
    assert found is not None
    if found.status is TaskStatus.LOST:  # said whatever the output form: it is a warning
        console.note(
            f"note: task {printable(repr(found.task_id))} ended lost: its last attempt may "
            "have run to its end (its outcome is unknown), so it runs once more now"
        )
    if args.json:
        write_json(console.out, queued.to_dict())
        return EXIT_OK
    shown = printable(repr(queued.task_id))
    who = (
        f"it waits: {waiting}"
        if waiting is not None
        else f"a worker that serves {printable(repr(queued.name))} claims it"
    )
    console.say(
        f"task {shown} is queued again (attempt {queued.attempt + 1} of at most "
        f"{queued.max_attempts}); {who}; follow it with: "
        f"{suggest(node, 'status', queued.task_id)}"
    )
    return EXIT_OK


def _refuse_unless_requeueable(found: TaskSnapshot | None, task_id: str, node: NodeOptions) -> None:
    """The console's refusals, worded for the console (the library's name its methods)."""
    shown = printable(repr(task_id))
    if found is None:
        raise CliError(unknown_task(task_id, node))
    if not found.durable:
        raise CliError(
            f"task {shown} was not enqueued for workers (submit): its function and arguments "
            "are known only to the process that ran it; run it again under a new id"
        )
    if found.pipeline_id is not None:
        raise CliError(
            f"task {shown} is a node of pipeline {printable(repr(found.pipeline_id))}; a node "
            "is not retried alone: submit the pipeline again"
        )
    if not StateMachine(found).can_retry():
        if found.is_terminal:
            raise CliError(
                f"task {shown} ended {found.status.value}; only a failed, stopped, cancelled "
                "or lost task is retried (a finished task is never run again otherwise)"
            )
        raise CliError(
            f"task {shown} is {found.status.value}, not finished; only a failed, stopped, "
            f"cancelled or lost task is retried; follow it with: {suggest(node, 'status', task_id)}"
        )
