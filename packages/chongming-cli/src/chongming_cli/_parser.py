"""The argument parser of ``chongming-task`` (stdlib `argparse`).

Usage errors exit 1, not argparse's 2 (R22): the parser raises `UsageError`
instead of printing its usage block, and the caller prints one line.
Global options are accepted before or after the command.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any, NoReturn

from chongming_cli._exit import CliError
from chongming_cli._numbers import whole_number
from chongming_cli._versions import versions_text
from chongming_cli._when import parse_duration
from chongming_core import TaskStatus

__all__ = ["UsageError", "build_parser"]

PROG = "chongming-task"


class UsageError(CliError):
    """The command line itself is wrong (unknown option, missing argument, ...)."""


def _knows(parser: argparse.ArgumentParser, name: str) -> bool:
    """Whether `parser` takes the long option `name` (an abbreviation of one too)."""
    options = parser._option_string_actions
    return name in options or (
        parser.allow_abbrev and any(option.startswith(name) for option in options)
    )


#: The command line being parsed (the parser of a command sees only its own part).
_GIVEN: ContextVar[Sequence[str]] = ContextVar("chongming_cli_given", default=())

_WANTS_ONE = re.compile(r"argument (--[\w-]+)(?:/-\w)?: expected one argument")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        wants = _WANTS_ONE.fullmatch(message)
        if wants is not None:
            given = list(_GIVEN.get())
            option = wants.group(1)
            index = given.index(option) if option in given else -1
            value = given[index + 1] if 0 <= index < len(given) - 1 else None
            if value is not None and value.startswith("-") and not _knows(self, value):
                # argparse takes a value that begins with '-' for an option: the value's own
                # problem when it has one (a negative duration), else how to write it
                message = self._unreached_value(option, value) or (
                    f"argument {option}: expected one argument, and {value!r} was taken for an "
                    f"option; a value that begins with '-' is written {option}={value}"
                )
        raise UsageError(f"{message} (see: {self.prog} --help)")

    def _unreached_value(self, option: str, value: str) -> str | None:
        """What `option`'s type says of `value`, when it refuses it (None: it takes it)."""
        action = self._option_string_actions.get(option)
        convert = None if action is None else action.type
        if not callable(convert):
            return None
        try:
            convert(value)
        except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
            return f"argument {option}: {exc}"
        return None

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """`parse_known_args`; what is left over is named with the help of its command."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            where = f"{self.prog} {command}" if command else self.prog
            raise UsageError(f"unrecognized arguments: {' '.join(extras)} (see: {where} --help)")
        return parsed

    def _refuse_command_options_before_the_command(self, given: Sequence[str]) -> None:
        """An option of a command written before the command's name is said to go after
        it; an unknown one followed by a value is named (argparse would take the value for
        the command: "invalid choice: '2'"). Anything else is left to argparse."""
        commands: dict[str, argparse.ArgumentParser] = {
            name: parser
            for action in self._actions
            if isinstance(action, argparse._SubParsersAction)
            for name, parser in action.choices.items()
        }
        if not commands:
            return
        for index, token in enumerate(given):
            if token in commands or token == "--":
                return
            if not token.startswith("--"):
                continue
            name = token.split("=", 1)[0]
            if _knows(self, name):
                continue
            command = next((t for t in given[index + 1 :] if t in commands), None)
            if command is not None and _knows(commands[command], name):
                raise UsageError(
                    f"{name} is an option of the {command} command, not of {self.prog} "
                    f"itself: put it after the command's name, e.g. {self.prog} {command} "
                    f"{name} ..."
                )
            value = given[index + 1] if index + 1 < len(given) else None
            if "=" in token or value is None or value.startswith("-") or value in commands:
                return  # nothing is taken for the command: argparse names the option
            hint = (
                f"the {command} command has no such option either; see: "
                f"{self.prog} {command} --help"
                if command
                else f"see: {self.prog} --help"
            )
            raise UsageError(f"unrecognized arguments: {name} ({hint})")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        given = sys.argv[1:] if args is None else list(args)
        _GIVEN.set(given)
        if any(a == "--schema" or a.startswith("--schema=") for a in given):
            # argparse would say "invalid choice" of the schema's name, taken for a command
            self.error(
                "--schema is not an option of chongming-task: name the PostgreSQL schema in "
                "the URL, e.g. --dsn 'postgresql://host/db?schema=NAME'"
            )
        self._refuse_command_options_before_the_command(given)
        parsed, extras = super().parse_known_args(args, namespace)
        # the command is checked here, after the unknown options: `chongming-task --bogus`
        # is told that --bogus is unknown, not that a command is missing
        if not extras and getattr(parsed, "command", "") is None:
            self.error("the following arguments are required: COMMAND")
        return parsed, extras


class _Versions(argparse.Action):
    """``--version``: the version of every installed chongming distribution, then exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", "print the version of every installed chongming distribution")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(versions_text() + "\n")  # a result: stdout, as argparse's version does
        parser.exit()


_DESCRIPTION = """\
Run and control chongming tasks from the shell: a thin layer over the Controller.
Only task names registered by your task module can run; values are never code."""

_EPILOG = """\
store:
  The tasks live in a SQLite file by default: --db, else $CHONGMING_DB, else
  ./chongming.db. --dsn (or $CHONGMING_DSN) takes a store URL instead, e.g.
  postgresql://user@host:5432/db (pip install "chongming-task[postgres]"); any
  backend registered under the "chongming.stores" entry points works; ?schema=NAME
  picks the PostgreSQL schema (default chongming). Options win over environment
  variables. Passwords are never printed. Only run, submit and worker create a store (or
  migrate an older one); every other command opens an existing store and changes
  nothing.

exit codes:
  0  the command did what was asked
  1  the command failed (bad arguments, unknown task id or name, unreachable
     store, a request the task cannot take); one line on stderr says why
  3  the command worked but the task did not succeed (run, submit --wait: the
     task ended failed, stopped, lost, cancelled or skipped)
  141  the reader of the output closed it early (e.g. ps | head); nothing else
     is printed

examples:
  chongming-task tasks --tasks myapp.tasks
  chongming-task --db tasks.db run worker --tasks myapp.tasks --arg source=kafka://orders \\
      --task-id orders-worker
  chongming-task --db tasks.db ps --status running
  chongming-task --db tasks.db stop orders-worker --reason "release window"
"""

_RUN_EPILOG = """\
--arg NAME=VALUE passes a keyword argument to the task, converted by the type
annotation of the task's parameter before anything is submitted (a value that
does not convert is refused, exit 1):
  str: the text as it is (--arg code=007 -> "007")    int: --arg n=3 -> 3
  float: --arg ratio=0.5    bool: --arg flag=true -> True (false, yes, no, 1, 0)
  X | None: --arg limit=null -> None    other types: JSON (--arg ids='[1, 2]')
Without an annotation (or Any) VALUE is parsed as JSON when it is valid JSON, else
kept as a string: --arg n=3 -> 3, --arg s=kafka://x -> "kafka://x".
Nothing is ever evaluated as code.

run stays in the foreground until the task ends and prints its outcome; the exit
code is 0 when it succeeded and 3 otherwise. Ctrl-C or SIGTERM stops the task
cleanly (graceful window, then the outcome). To stop it from another terminal,
paste the command it prints ("stop it from another terminal with: ..."). With
--owned-buckets covering only some buckets, --bucket-key is required (a task in
nobody's bucket would never run)."""


_SUBMIT_EPILOG = """\
submit writes the task to the store, queued and held by nobody, and prints its id;
a worker that serves the name (chongming-task worker) claims and runs it. With
--tasks MODULE, --arg values are converted by the task's annotations as run does
(a value that does not convert is refused, exit 1, and nothing is written); without
it, or when the module cannot be imported, they are read as JSON (text when not
JSON), and a note on stderr says so. --delay and --at keep it from being claimed
before then; an --at time without an offset is this machine's local time (a note
says which UTC time that is). --wait stays until the task ends and prints its
outcome: exit 0 when it succeeded, 3 otherwise; Ctrl-C or --timeout stop the
waiting only (exit 1), never the task."""

_WORKER_EPILOG = """\
worker registers every task of MODULE (its register(controller), else its @task
functions), claims queued durable tasks of those names in the buckets it owns
(--owned-buckets) while it has room, and runs them until told to stop. It keeps a
row in the store that chongming-task nodes lists. On SIGTERM or Ctrl-C it stops
claiming, gives running tasks --grace seconds to finish, then asks each one still
running to stop: it ends stopped, or lost when its body does not unwind within the
graceful window (5s); then it exits 0. A second signal exits at once (exit 1): what
still ran keeps its lease until it runs out, and reconcile then marks it lost."""

_CONTROL_EPILOG = """\
--json prints what happened as one object: {"task_id", "action", "outcome",
"reason", "status", "holder", "holder_renewing", "command_sent"}. outcome is
requested (a command was written for the holder), not_confirmed (a pause was
written; across processes there is no receipt), unchanged (already so: nothing
was sent) or refused (exit 1; reason says why)."""


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The store and node options; `suppress` keeps a sub-command from resetting them."""
    default = argparse.SUPPRESS if suppress else None
    group = parser.add_argument_group("store and node options")
    group.add_argument(
        "--db",
        metavar="PATH",
        default=default,
        help="SQLite file of the tasks (env CHONGMING_DB; default ./chongming.db)",
    )
    group.add_argument(
        "--dsn",
        metavar="URL",
        default=default,
        help="store URL instead of a file, e.g. postgresql://user@host/db (env CHONGMING_DSN)",
    )
    group.add_argument(
        "--num-buckets",
        metavar="N",
        default=default,
        help="buckets of the deployment, fixed for its life (env CHONGMING_NUM_BUCKETS; "
        "default 64)",
    )
    group.add_argument(
        "--owned-buckets",
        metavar="SPEC",
        default=default,
        help="buckets this node owns, e.g. 0-15,32 (env CHONGMING_OWNED_BUCKETS; default all)",
    )
    group.add_argument(
        "--owner",
        metavar="NAME",
        default=default,
        help="this node's name in leases and commands (env CHONGMING_OWNER; default host:pid)",
    )
    group.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="show the traceback of an error",
    )


def _complete_statuses(prefix: str, **_: Any) -> list[str]:
    """argcomplete's candidates for ``--status``: the statuses, after a comma too."""
    done, comma, last = prefix.rpartition(",")
    head = done + comma
    return [head + s.value for s in TaskStatus if s.value.startswith(last)]


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a timeout must be > 0 seconds")
    return value


def _at_least(text: str, least: int) -> int:
    try:
        value = whole_number(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= {least}")
    if value >= 2**63:  # what a store would refuse later, as a store error
        raise argparse.ArgumentTypeError(
            f"{text!r} is too large: stores keep it as a 64-bit integer (at most {2**63 - 1})"
        )
    return value


def _non_negative(text: str) -> int:
    return _at_least(text, 0)


def _positive(text: str) -> int:
    return _at_least(text, 1)


def _integer(text: str) -> int:
    try:
        return whole_number(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _durable_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``submit``, ``worker`` and ``nodes``."""
    submit = command(
        "submit", "enqueue a durable task for any worker to run (prints its id)", _SUBMIT_EPILOG
    )
    submit.add_argument("task", metavar="TASK", help="a task name some worker serves")
    submit.add_argument(
        "--tasks",
        metavar="MODULE",
        help="the task module, to convert --arg values by the task's annotations "
        "(without it: JSON)",
    )
    submit.add_argument(
        "--arg",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="a keyword argument of the task; repeatable",
    )
    when = submit.add_mutually_exclusive_group()
    when.add_argument(
        "--delay",
        metavar="DURATION",
        type=_duration,
        help="claimable only after this long, e.g. 30s, 5m, 1h, 1.5s",
    )
    when.add_argument(
        "--at",
        metavar="TIME",
        help="claimable only from this ISO-8601 time, e.g. 2026-10-02T08:00:00+08:00 "
        "(no offset: local time)",
    )
    submit.add_argument("--task-id", metavar="ID", help="the task's id (default NAME-<random>)")
    submit.add_argument("--label", help="display name (any script)")
    submit.add_argument("--tag", action="append", default=None, help="a tag; repeatable")
    submit.add_argument("--priority", type=_integer, help="larger is claimed first (default 0)")
    submit.add_argument("--bucket-key", metavar="KEY", help="business key choosing the bucket")
    submit.add_argument(
        "--wait", action="store_true", help="wait for the outcome; exit 0 or 3 as run does"
    )
    submit.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_seconds,
        help="with --wait: give up waiting after SECONDS (exit 1; the task is left as it is)",
    )
    _json_option(submit)

    worker = command(
        "worker", "serve the tasks of a module: claim durable tasks and run them", _WORKER_EPILOG
    )
    worker.add_argument("--tasks", metavar="MODULE", required=True, help="e.g. myapp.tasks")
    worker.add_argument(
        "--max-parallel",
        metavar="N",
        type=_positive,
        default=4,
        help="tasks run at once (default 4)",
    )
    worker.add_argument(
        "--executor",
        choices=("thread", "process"),
        default="thread",
        help="run each task's body in a thread (default) or a child process of its own",
    )
    worker.add_argument(
        "--grace",
        metavar="SECONDS",
        type=_non_negative_seconds,
        default=30.0,
        help="after SIGTERM or Ctrl-C, how long running tasks get to finish (default 30)",
    )
    worker.add_argument(
        "--fleet-limit",
        metavar="TAG=N",
        action="append",
        default=[],
        help="at most N running durable tasks with TAG in the whole store (every worker "
        "holds to it); repeatable",
    )

    _json_option(command("nodes", "list the workers that serve the store, live or expired"))


def _non_negative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds >= 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``chongming-task`` parser with every command."""
    parser = _Parser(
        prog=PROG,
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _global_options(parser, suppress=False)
    shared = _Parser(add_help=False)
    _global_options(shared, suppress=True)
    parser.add_argument("--version", action=_Versions)
    # not required=True: see _Parser.parse_known_args
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help_text: str, epilog: str | None = None) -> argparse.ArgumentParser:
        return commands.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=epilog,
            parents=[shared],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    tasks = command("tasks", "list the task definitions a task module registers")
    tasks.add_argument("--tasks", metavar="MODULE", required=True, help="e.g. myapp.tasks")
    _json_option(tasks)

    run = command("run", "submit a registered task and run it in the foreground", _RUN_EPILOG)
    run.add_argument("task", metavar="TASK", help="a name the task module registered")
    run.add_argument("--tasks", metavar="MODULE", required=True, help="e.g. myapp.tasks")
    run.add_argument(
        "--arg",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="a keyword argument of the task, converted by its annotation; repeatable",
    )
    run.add_argument("--task-id", metavar="ID", help="the task's id (default NAME-<random>)")
    run.add_argument("--label", help="display name (any script)")
    run.add_argument("--tag", action="append", default=None, help="a tag; repeatable")
    run.add_argument("--priority", type=_integer, help="larger runs first (default 0)")
    run.add_argument("--bucket-key", metavar="KEY", help="business key choosing the bucket")
    run.add_argument(
        "--executor",
        choices=("thread", "process"),
        default="thread",
        help="run the body in a thread (default) or a child process",
    )
    run.add_argument(
        "--retries", metavar="N", type=_non_negative, help="retries after a failure (default 0)"
    )
    run.add_argument(
        "--timeout-start",
        metavar="SECONDS",
        type=_seconds,
        help="cancel the task if it has not started SECONDS after its submission",
    )
    run.add_argument(
        "--timeout-attempt",
        metavar="SECONDS",
        type=_seconds,
        help="end an attempt that runs longer than SECONDS (retried when --retries allows)",
    )
    run.add_argument(
        "--timeout-idle",
        metavar="SECONDS",
        type=_seconds,
        help="end an attempt whose body reaches no checkpoint() or heartbeat for SECONDS",
    )
    _json_option(run)

    ps = command("ps", "list tasks (of every process sharing the store)")
    status_option = ps.add_argument(
        "--status",
        action="append",
        default=None,
        metavar="STATUS",
        help="only these statuses; repeatable or comma-separated ("
        + ", ".join(s.value for s in TaskStatus)
        + ")",
    )
    setattr(status_option, "completer", _complete_statuses)  # noqa: B010 - read by argcomplete
    ps.add_argument("--name-prefix", metavar="PREFIX", help="registered names starting with this")
    ps.add_argument("--tag", help="only tasks with this tag")
    ps.add_argument("--bucket", type=_non_negative, help="only tasks in this bucket")
    ps.add_argument("--limit", type=_positive, help="only the N most recent tasks")
    _json_option(ps)

    for name, text in (
        ("status", "show one task"),
        ("history", "show a task's trajectory (every transition)"),
    ):
        sub = command(name, text)
        sub.add_argument("task_id", metavar="TASK_ID")
        _json_option(sub)

    _json_option(command("stats", "count tasks per status"))
    _json_option(command("buckets", "count tasks per bucket"))

    stop = command(
        "stop", "request a stop (a command to the process that runs the task)", _CONTROL_EPILOG
    )
    stop.add_argument("task_id", metavar="TASK_ID")
    stop.add_argument("--reason", help="why (kept in the task's history)")
    pause = command(
        "pause",
        "request a pause (across processes it is not confirmed: check with status)",
        _CONTROL_EPILOG,
    )
    pause.add_argument("task_id", metavar="TASK_ID")
    resume = command("resume", "withdraw a pause", _CONTROL_EPILOG)
    resume.add_argument("task_id", metavar="TASK_ID")
    for control in (stop, pause, resume):
        _json_option(control)
    retry = command(
        "retry",
        "queue a finished durable task again for the workers (failed, stopped, cancelled or lost)",
        "A task enqueued with submit keeps its name and arguments in the store: it goes back "
        "to queued, held by nobody, its history kept, and any worker that serves its name "
        "claims it. --json prints the task as queued.",
    )
    retry.add_argument("task_id", metavar="TASK_ID")
    retry.add_argument("--reason", help="why (kept in the task's history)")
    _json_option(retry)

    reconcile = command(
        "reconcile", "mark tasks whose supervising process is gone as lost (this node's buckets)"
    )
    reconcile.add_argument(
        "--dry-run", action="store_true", help="report what would change, write nothing"
    )
    _json_option(reconcile)

    prune = command("prune", "drop all but the newest N finished tasks from the store")
    prune.add_argument(
        "--keep-terminal",
        metavar="N",
        type=_non_negative,
        required=True,
        help="how many of the most recently finished tasks to keep (0 drops them all)",
    )

    _durable_commands(command)

    command("dashboard", 'open the live dashboard (needs: pip install "chongming-task[tui]")')
    return parser
