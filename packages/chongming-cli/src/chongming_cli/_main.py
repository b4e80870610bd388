"""``main()``: parse, dispatch, and turn every failure into one line and an exit code."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Mapping, Sequence

from chongming_cli._commands import COMMANDS, Console
from chongming_cli._completion import complete_if_asked
from chongming_cli._controls import CONTROLS
from chongming_cli._durable import cmd_nodes, cmd_submit, cmd_worker
from chongming_cli._encoding import (
    protected_streams,
    recover_arguments,
    recover_environ,
    undecodable_argument,
)
from chongming_cli._exit import EXIT_FAILED, EXIT_OUTPUT_CLOSED, CliError
from chongming_cli._parser import PROG, UsageError, build_parser
from chongming_cli._requeue import cmd_retry
from chongming_cli._run import cmd_run
from chongming_cli._session import resolve_node
from chongming_cli._stores import resolve_location, scrub
from chongming_core import (
    ConfigurationError,
    InvalidTransition,
    StoreError,
    TaskError,
)
from chongming_runtime import printable

__all__ = ["main"]


_DURABLE = {"submit": cmd_submit, "worker": cmd_worker, "nodes": cmd_nodes, "retry": cmd_retry}


def _describe(exc: BaseException) -> str:
    """One line saying what was wrong and what to do."""
    if isinstance(exc, CliError):
        return exc.message
    if isinstance(exc, StoreError):
        return f"store error: {exc}"
    if isinstance(exc, ConfigurationError | InvalidTransition | TaskError):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return f"timed out: {exc}"
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror or exc}{where}; check the path and its permissions"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return (
        f"unexpected error: {type(exc).__name__}: {exc} (run with --debug for the traceback; "
        "please report it)"
    )


def _secrets(db: str | None, dsn: str | None, environ: Mapping[str, str]) -> tuple[str, ...]:
    try:
        return resolve_location(db, dsn, environ).secrets
    except Exception:  # reported by the command itself, as one line
        return ()


#: Text options checked where they are used: a file path may hold any bytes, a module
#: name is refused by its import, a DSN by `resolve_location`.
_CHECKED_ELSEWHERE = frozenset({"db", "dsn", "tasks"})


def _argument_names(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """Each dest of the command given, named as on the command line (``--tag``, ``TASK_ID``)."""
    actions = list(parser._actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            command = action.choices.get(getattr(args, "command", None) or "")
            if command is not None:
                actions.extend(command._actions)
    names: dict[str, str] = {}
    for action in actions:
        if action.option_strings:
            names[action.dest] = max(action.option_strings, key=len)
        elif isinstance(action.metavar, str):
            names[action.dest] = action.metavar
    return names


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``chongming-task`` with `argv` (default ``sys.argv[1:]``); returns the exit code.

    Whatever the encoding of stdout and stderr (an ASCII-only one too), nothing written
    raises: what a stream cannot hold is written as a backslash escape.
    """
    with protected_streams(sys.stdout, sys.stderr):
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    console = Console(out=sys.stdout, err=sys.stderr)
    parser = build_parser()
    complete_if_asked(parser)  # a shell asking for completions: answers and exits
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        console.note(f"{PROG}: error: {printable(exc.message)}")
        return EXIT_FAILED
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_FAILED
    # a file path keeps its bytes; other text that is UTF-8 is read as such (see _encoding)
    recover_arguments(args, paths=frozenset({"db"}))
    refused = undecodable_argument(args, _argument_names(parser, args), skip=_CHECKED_ELSEWHERE)
    if refused is not None:  # before any store is opened: nothing is read or written
        console.note(f"{PROG}: error: {printable(refused)}")
        return EXIT_FAILED
    environ = recover_environ(os.environ, paths=frozenset({"CHONGMING_DB"}))
    secrets = _secrets(args.db, args.dsn, environ)
    debug = bool(args.debug) or os.environ.get("CHONGMING_DEBUG", "") not in {"", "0"}
    try:
        node = resolve_node(args, environ)
        if args.command == "run":
            code = cmd_run(args, node, console)
        else:
            command = (
                COMMANDS.get(args.command) or CONTROLS.get(args.command) or _DURABLE[args.command]
            )
            code = command(args, node, console)
        sys.stdout.flush()  # what is still buffered is written here: a closed pipe too
        return code
    except BrokenPipeError:  # the reader closed stdout (`ps | head -1`): no error to report
        _quiet_stdout()
        return EXIT_OUTPUT_CLOSED
    except (Exception, KeyboardInterrupt) as exc:
        if debug:
            console.note(scrub("".join(traceback.format_exception(exc)).rstrip(), secrets))
        console.note(f"{PROG}: error: {printable(scrub(_describe(exc), secrets))}")
        return exc.code if isinstance(exc, CliError) else EXIT_FAILED
    finally:
        try:
            sys.stdout.flush()
        except BrokenPipeError:  # e.g. `chongming-task ps | head -1`
            _quiet_stdout()


def _quiet_stdout() -> None:
    """Point stdout at the null device: what is left to write (the interpreter's own
    flush at exit too) goes nowhere instead of raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
