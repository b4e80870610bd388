"""chongming-cli: the ``chongming-task`` command line console.

A thin adapter over the runtime's `Controller`: it parses arguments, calls the
library and renders the result. It introduces no concept the library does not
have: only names registered by the operator's task module can run, and every
control goes through the Controller (across processes, as command rows).

Run it as ``chongming-task ...`` or ``python -m chongming_cli ...``; see
``docs/cli.md`` for a walkthrough.
"""

from __future__ import annotations

from chongming_cli._args import parse_arg_value as parse_arg_value
from chongming_cli._exit import EXIT_FAILED as EXIT_FAILED
from chongming_cli._exit import EXIT_OK as EXIT_OK
from chongming_cli._exit import EXIT_OUTPUT_CLOSED as EXIT_OUTPUT_CLOSED
from chongming_cli._exit import EXIT_TASK_NOT_SUCCEEDED as EXIT_TASK_NOT_SUCCEEDED
from chongming_cli._exit import CliError as CliError
from chongming_cli._main import main as main
from chongming_cli._stores import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from chongming_cli._stores import redact_url as redact_url
from chongming_cli._stores import sqlite_url as sqlite_url

__version__ = "0.1.0"

__all__ = [
    "ENTRY_POINT_GROUP",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_OUTPUT_CLOSED",
    "EXIT_TASK_NOT_SUCCEEDED",
    "CliError",
    "main",
    "parse_arg_value",
    "redact_url",
    "sqlite_url",
]
