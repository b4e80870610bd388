"""The query and control commands: parse, call the `Controller`, render."""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from chongming_cli._encoding import stream_encoding
from chongming_cli._exit import EXIT_OK, CliError
from chongming_cli._hints import suggest
from chongming_cli._holders import dead_holder_pid
from chongming_cli._loading import load_task_module
from chongming_cli._output import (
    HISTORY_HEADER,
    Palette,
    format_snapshot,
    format_time,
    history_rows,
    lease_expired_for,
    render_rows,
    write_json,
)
from chongming_cli._session import NodeOptions, open_controller
from chongming_core import TaskSnapshot, TaskStatus, UnreadableRow, unreadable_in
from chongming_runtime import (
    Controller,
    RegisteredTask,
    encodable,
    printable,
    render_table,
)

__all__ = ["COMMANDS", "Command", "Console", "unknown_task"]


@dataclass
class Console:
    """Where a command writes: results on `out`, messages on `err`."""

    out: TextIO
    err: TextIO
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    @property
    def palette(self) -> Palette:
        """Colours for `out`."""
        return Palette(self.out, self.environ)

    @property
    def encoding(self) -> str | None:
        """The encoding of `out`, for tables measured on what it can hold."""
        return stream_encoding(self.out)

    def say(self, text: str) -> None:
        """A result line on `out` (what its encoding cannot hold written as escapes)."""
        self.out.write(encodable(text + "\n", self.encoding or "utf-8"))

    def note(self, text: str) -> None:
        """A message on `err` (progress, hints), never mixed into results."""
        self.err.write(encodable(text + "\n", stream_encoding(self.err) or "utf-8"))
        self.err.flush()


Command = Callable[[argparse.Namespace, NodeOptions, Console], int]


def unknown_task(task_id: str, node: NodeOptions) -> str:
    """What a command says of a task id the store does not have."""
    return (
        f"no task {printable(repr(task_id))} in {node.location.label} (is it the right "
        f"store?); list the tasks with: {suggest(node, 'ps')}"
    )


#: Durable tasks whose wait `ps` explains, one line each.
_NAMED_WAITING = 20

#: Rows that could not be read named one per line before the rest are only counted.
_NAMED_UNREADABLE = 20


def _unreadable_failure(console: Console, rows: Sequence[UnreadableRow], done: str) -> None:
    """Name each stored row that could not be read on stderr, one line each, then fail
    (exit 1) once `done` ("everything else was listed") is said: the output is honest
    about what it holds, but it is not all that was asked for."""
    if not rows:
        return
    for row in rows[:_NAMED_UNREADABLE]:
        console.note(f"error: {printable(row.message)}")
    if len(rows) > _NAMED_UNREADABLE:
        console.note(f"error: and {len(rows) - _NAMED_UNREADABLE} more rows that cannot be read")
    count = "1 stored row" if len(rows) == 1 else f"{len(rows)} stored rows"
    raise CliError(
        f"{count} could not be read (named above); {done}. A damaged row was written by "
        "another program or by hand: restore it from a backup, or delete that task's rows "
        "with the database's own tools"
    )


def _existing(controller: Controller, task_id: str, node: NodeOptions) -> TaskSnapshot:
    snapshot = controller.get(task_id)
    if snapshot is None:
        raise CliError(unknown_task(task_id, node))
    return snapshot


# ==================================================================== queries
def _definition(registered: RegisteredTask) -> dict[str, Any]:
    timeout = registered.timeout
    return {
        "name": registered.name,
        "description": registered.description,
        "tags": sorted(registered.tags),
        "max_attempts": registered.retry.max_attempts if registered.retry else 1,
        "timeout": None
        if timeout is None
        else {"start": timeout.start, "per_attempt": timeout.per_attempt, "idle": timeout.idle},
    }


def cmd_tasks(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """List the definitions the task module registers (no store is opened)."""
    controller = Controller(owner=node.owner)
    try:
        load_task_module(controller, args.tasks)
        definitions = [_definition(r) for r in controller.definitions()]
    finally:
        controller.close()
    if args.json:
        write_json(console.out, definitions)
        return EXIT_OK
    rows = [
        [
            d["name"],
            ", ".join(d["tags"]) or "-",
            str(d["max_attempts"]),
            _timeout_text(d["timeout"]),
            d["description"] or "-",
        ]
        for d in definitions
    ]
    console.say(
        render_rows(
            ("NAME", "TAGS", "ATTEMPTS", "TIMEOUT", "DESCRIPTION"), rows, encoding=console.encoding
        )
    )
    return EXIT_OK


def _timeout_text(timeout: dict[str, float | None] | None) -> str:
    if timeout is None:
        return "-"
    parts = [f"{k}={v:g}s" for k, v in timeout.items() if v is not None]
    return " ".join(parts) or "-"


def _statuses(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    statuses = [s.strip() for value in values for s in value.split(",") if s.strip()]
    known = {s.value for s in TaskStatus}
    bad = [s for s in statuses if s not in known]
    if bad:
        raise CliError(
            f"--status {bad[0]!r} is not a status; choose from {', '.join(sorted(known))}"
        )
    return statuses


def cmd_ps(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """List tasks with the filters of `Controller.list_tasks`."""
    statuses = _statuses(args.status)
    with open_controller(node) as controller:
        found = controller.list_tasks(
            statuses,
            name_prefix=args.name_prefix,
            tag=args.tag,
            bucket=args.bucket,
            limit=args.limit,
            # the most recent ones (the first ones ever made say little), listed in order
            newest_first=args.limit is not None,
        )
        if args.limit is not None:
            found.reverse()
        now = controller.clock.now()
        waiting = controller.waiting_reasons(found, now=now)
    unreadable = unreadable_in(found)
    if args.json:
        write_json(console.out, [_with_waiting(s, waiting) for s in found])
        _unreadable_failure(console, unreadable, "every other task was listed")
        return EXIT_OK
    console.say(render_table(found, now=now, encoding=console.encoding))
    for task_id, reason in list(waiting.items())[:_NAMED_WAITING]:
        console.note(f"waiting: {printable(task_id)}: {printable(reason)}")
    if len(waiting) > _NAMED_WAITING:
        console.note(f"waiting: and {len(waiting) - _NAMED_WAITING} more queued durable tasks")
    unrenewed = [s.task_id for s in found if lease_expired_for(s, now) is not None]
    if unrenewed:
        shown = ", ".join(printable(t) for t in unrenewed[:10])
        more = f" and {len(unrenewed) - 10} more" if len(unrenewed) > 10 else ""
        console.note(
            f"warning: {len(unrenewed)} unfinished task(s) with an expired lease (nobody renews "
            f"them, their process may be gone): {shown}{more}; see: "
            f"{suggest(node, 'reconcile', '--dry-run')}"
        )
    _unreadable_failure(console, unreadable, "every other task was listed")
    return EXIT_OK


def _with_waiting(found: TaskSnapshot | UnreadableRow, waiting: Mapping[str, str]) -> Any:
    """The ``--json`` document of a listed task: its snapshot, and ``waiting``, why a
    durable queued task waits (null when nothing known keeps a worker from claiming it, and
    for every other task); a row that cannot be read as it is."""
    if not isinstance(found, TaskSnapshot):
        return found.to_dict()
    return {**found.to_dict(), "waiting": waiting.get(found.task_id)}


def cmd_status(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """Show one task."""
    with open_controller(node) as controller:
        snapshot = _existing(controller, args.task_id, node)
        now = controller.clock.now()
        waiting = controller.waiting_reasons([snapshot], now=now).get(snapshot.task_id)
        owner = snapshot.lease_owner
        gone_pid = (
            dead_holder_pid(controller, owner) if owner and not snapshot.is_terminal else None
        )
    if args.json:
        write_json(
            console.out,
            _with_waiting(snapshot, {} if waiting is None else {snapshot.task_id: waiting}),
        )
    else:
        console.say(
            format_snapshot(
                snapshot,
                console.palette,
                now=now,
                reconcile_hint=suggest(node, "reconcile", "--dry-run"),
                waiting=waiting,
                holder_gone_pid=gone_pid,
            )
        )
    return EXIT_OK


def cmd_history(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """Show a task's trajectory."""
    with open_controller(node) as controller:
        _existing(controller, args.task_id, node)
        transitions = controller.history(args.task_id)
    if args.json:
        write_json(console.out, [t.to_dict() for t in transitions])
    else:
        console.say(render_rows(HISTORY_HEADER, history_rows(transitions), console.encoding))
    _unreadable_failure(console, unreadable_in(transitions), "every other transition was listed")
    return EXIT_OK


def cmd_stats(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """Count tasks per status."""
    with open_controller(node) as controller:
        found = controller.stats()
    stats = found.as_dict()
    if args.json:
        write_json(console.out, stats)
    else:
        console.say(render_rows(("STATUS", "TASKS"), [[k, str(v)] for k, v in stats.items()]))
    _unreadable_failure(console, found.unreadable, "they are counted under no status")
    return EXIT_OK


def cmd_buckets(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """Count tasks per bucket (and say which buckets this node owns)."""
    with open_controller(node) as controller:
        counts = controller.bucket_counts()
        num_buckets = controller.bucket_policy.num_buckets
        rows = [
            # a bucket past this node's count is no bucket of its own, whatever it owns
            {"bucket": b, "tasks": n, "owned": b < num_buckets and controller.owns_bucket(b)}
            for b, n in sorted(counts.items())
        ]
    if args.json:
        write_json(console.out, {"num_buckets": num_buckets, "buckets": rows})
    else:
        console.say(
            render_rows(
                ("BUCKET", "TASKS", "OWNED"),
                [[str(r["bucket"]), str(r["tasks"]), "yes" if r["owned"] else "no"] for r in rows],
            )
        )
    beyond = [r for r in rows if r["bucket"] >= num_buckets]
    if beyond:
        shown = ", ".join(str(r["bucket"]) for r in beyond[:10])
        console.note(
            f"warning: bucket(s) {shown} hold tasks, but this node counts {num_buckets} "
            "buckets: a node that counts more wrote them, and no node counting "
            f"{num_buckets} ever claims them; give every node, producers too, the same "
            "--num-buckets"
        )
    _unreadable_failure(console, unreadable_in(counts), "they are counted in no bucket")
    return EXIT_OK


# ==================================================================== housekeeping
def cmd_reconcile(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """Mark tasks whose supervisor vanished as lost (guide §8.11)."""
    with open_controller(node) as controller:
        report = controller.reconcile(dry_run=args.dry_run)
    if args.json:
        document: dict[str, Any] = {
            "dry_run": report.dry_run,
            "lost": [s.to_dict() for s in report.lost],
            "adoptable": [s.to_dict() for s in report.adoptable],
            "skipped": [s.to_dict() for s in report.skipped],
        }
        if report.unreadable:  # only then: the document of a sound store is as it always was
            document["unreadable"] = [row.to_dict() for row in report.unreadable]
        if report.leased:  # likewise
            document["leased"] = [s.to_dict() for s in report.leased]
        if report.cancelled:  # likewise
            document["cancelled"] = [s.to_dict() for s in report.cancelled]
        if report.requeued:  # likewise
            document["requeued"] = [s.to_dict() for s in report.requeued]
        write_json(console.out, document)
        _unreadable_failure(console, report.unreadable, _NOT_JUDGED)
        return EXIT_OK
    verb = "would mark" if report.dry_run else "marked"
    unread = f", {len(report.unreadable)} unreadable" if report.unreadable else ""
    ended = f", {len(report.cancelled)} cancelled" if report.cancelled else ""
    if report.requeued:
        ended += f", {len(report.requeued)} {'would queue' if report.dry_run else 'queued'} again"
    console.say(
        f"reconcile{' (dry run)' if report.dry_run else ''}: {verb} {len(report.lost)} lost"
        f"{ended}, {len(report.adoptable)} adoptable, {len(report.skipped)} skipped{unread}"
    )
    for title, group in (
        (f"lost — supervisor gone, {verb} lost (the status each had before):", report.lost),
        (
            f"cancelled — nodes of a pipeline whose supervisor is gone (a pipeline cannot go on "
            f"after its process ended; submit it again), {verb} cancelled:",
            report.cancelled,
        ),
        (
            f"queued again — durable tasks waiting to retry whose worker is gone; any worker "
            f"that serves them claims their next attempt when it is due ("
            f"{'would be ' if report.dry_run else ''}queued, the status each had before):",
            report.requeued,
        ),
        ("adoptable — unsupervised and not started; resubmit them:", report.adoptable),
        ("skipped — their supervisor wrote first:", report.skipped),
    ):
        if group:
            console.say("")
            console.say(title)
            console.say(render_table(group, encoding=console.encoding))
    if report.leased:
        ends = max(s.lease_until for s in report.leased if s.lease_until is not None)
        console.note(
            f"note: {len(report.leased)} unfinished task(s) are held under a lease that has "
            f"not run out (the last one ends {format_time(ends)}): not judged, their holder "
            "may be alive. A holder that died is found once its lease ends: run reconcile "
            "again after that"
        )
    _unreadable_failure(console, report.unreadable, _NOT_JUDGED)
    return EXIT_OK


#: What `reconcile` did with the rows it could not read.
_NOT_JUDGED = "those tasks were not judged and are left as they are, every other one was"


def cmd_prune(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """Drop all but the newest N finished tasks."""
    with open_controller(node) as controller:
        dropped = controller.prune(args.keep_terminal)
    console.say(f"pruned {dropped} finished task(s); kept the newest {args.keep_terminal}")
    return EXIT_OK


def cmd_dashboard(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """Open the dashboard of the optional ``tui`` extra."""
    try:
        tui = importlib.import_module("chongming_tui")
    except ImportError as exc:
        raise CliError(
            f'the dashboard needs the "tui" extra ({exc}); install it with: '
            'pip install "chongming-task[tui]"'
        ) from exc
    run_dashboard = getattr(tui, "run_dashboard", None)
    if not callable(run_dashboard):
        raise CliError(
            "the installed chongming-tui has no dashboard (chongming_tui.run_dashboard is "
            'missing); install one that has: pip install -U "chongming-task[tui]"'
        )
    with open_controller(node) as controller:
        result = run_dashboard(
            controller=controller,
            store_label=node.location.label,
            reconcile_command=suggest(node, "reconcile"),
        )
    return result if isinstance(result, int) and not isinstance(result, bool) else EXIT_OK


COMMANDS: dict[str, Command] = {
    "tasks": cmd_tasks,
    "ps": cmd_ps,
    "status": cmd_status,
    "history": cmd_history,
    "stats": cmd_stats,
    "buckets": cmd_buckets,
    "reconcile": cmd_reconcile,
    "prune": cmd_prune,
    "dashboard": cmd_dashboard,
}
