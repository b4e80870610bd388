"""``run``: submit a registered task and supervise it in the foreground until it ends.

The process is the task's supervisor: when it exits, nobody manages the task.
So Ctrl-C (SIGINT) and SIGTERM do not kill it mid-flight: they end the wait,
and ``controller.close()`` in a ``finally`` stops the task cleanly (graceful
window, then ``stopped`` — or ``lost`` when the body never reaches a checkpoint,
as the library reports it). The exit code follows the outcome.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from chongming_cli._args import checked_task_id, convert_args, split_args
from chongming_cli._commands import Console
from chongming_cli._exit import EXIT_OK, EXIT_TASK_NOT_SUCCEEDED, CliError
from chongming_cli._hints import suggest
from chongming_cli._loading import check_task_args, load_task_module, task_function
from chongming_cli._output import format_outcome, outcome_document, write_json
from chongming_cli._progress import ProgressReporter
from chongming_cli._session import NodeOptions, make_controller
from chongming_core import RetryPolicy, Timeout
from chongming_runtime import ProcessExecutor, TaskOutcome, TaskRun, printable

__all__ = ["cmd_run"]

#: How often the foreground loop looks at the task and at received signals.
_POLL = 0.1


class _Signals:
    """Remembers the first SIGINT/SIGTERM instead of unwinding the stack at a random point."""

    def __init__(self) -> None:
        self.received: str | None = None

    def first(self) -> str | None:
        """The name of the first signal received, if any."""
        return self.received

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum).name

    @contextmanager
    def installed(self) -> Iterator[_Signals]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.signal(s, self.handle) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _submit_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {
        "task_id": checked_task_id(args.task_id),
        "label": args.label,
        "tags": args.tag,
        "priority": args.priority,
        "bucket_key": args.bucket_key,
    }
    if args.retries is not None:
        options["retry"] = RetryPolicy(max_attempts=args.retries + 1)
    if any(t is not None for t in (args.timeout_start, args.timeout_attempt, args.timeout_idle)):
        options["timeout"] = Timeout(
            start=args.timeout_start, per_attempt=args.timeout_attempt, idle=args.timeout_idle
        )
    if args.executor == "process":
        options["executor"] = ProcessExecutor()
    return options


def _follow(run: TaskRun, signals: _Signals, reporter: ProgressReporter) -> None:
    while signals.received is None:
        try:
            run.wait(_POLL)
        except TimeoutError:
            reporter.update(run.snapshot)
            continue
        return


def cmd_run(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """Submit `args.task` and stay in the foreground until it ends; exit 0 or 3 by outcome."""
    raw_args = split_args(args.arg)
    options = _submit_options(args)
    signals = _Signals()
    with signals.installed():
        controller = make_controller(node, create=True)
        reason = "chongming-task run ended"
        run: TaskRun | None = None
        try:
            load_task_module(controller, args.tasks)
            if signals.first() is not None:
                raise CliError(f"received {signals.first()} before the task was submitted")
            fn = task_function(controller, args.task, args.tasks)
            # converted by the annotations and checked against the signature before the
            # task exists: a value that cannot fit is refused, not run into a TypeError
            task_kwargs = convert_args(fn, raw_args, task=args.task)
            check_task_args(args.task, fn, task_kwargs)
            run = controller.submit(args.task, **options, **task_kwargs)
            running = (
                f"running task {printable(repr(run.task_id))} ({run.name}) as {controller.owner}"
            )
            if controller.flush():  # visible to other processes before we say so
                console.note(
                    f"{running}; stop it from another terminal with: "
                    f"{suggest(node, 'stop', run.task_id)}"
                )
            else:
                console.note(
                    f"{running}; the store has not taken it yet (it is retried), so other "
                    "terminals can neither see nor stop it until then"
                )
            reporter = ProgressReporter(console.err, tty=_isatty(console.err))
            try:
                _follow(run, signals, reporter)
            finally:
                reporter.finish()
            received = signals.first()
            if received is not None:
                reason = f"chongming-task run received {received}"
                console.note(
                    f"received {received}: stopping task {run.task_id!r} "
                    f"(it gets {controller.graceful_stop:g}s to wind up)"
                )
        finally:
            saved = False
            try:
                controller.close(reason=reason)
                # failed writes stay pending in the controller: a last flush says whether
                # the store holds the end of the task
                saved = controller.flush()
            finally:
                controller.store.close()
    assert run is not None
    outcome = run.outcome()
    _show(outcome, args, console)
    if not saved:
        failures = controller.persist_failures
        cause = f" ({failures[-1].error})" if failures else ""
        raise CliError(
            f"task {run.task_id!r} ended {outcome.status.value} in this process, but the store "
            f"did not take its final state{cause}; other processes still see an older state — "
            f"once the store is healthy, check it with: {suggest(node, 'status', run.task_id)}"
        )
    return EXIT_OK if outcome.ok else EXIT_TASK_NOT_SUCCEEDED


def _isatty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(callable(isatty) and isatty())


def _show(outcome: TaskOutcome, args: argparse.Namespace, console: Console) -> None:
    if args.json:
        write_json(console.out, outcome_document(outcome))
        return
    console.say(format_outcome(outcome, console.palette))
