"""Reading a command row that anyone may have written: `read_command` (design D64).

The command channel is a table of a shared store, and a row of it is data. A
process that did not go through `submit_command` — a script, a hand-written SQL
statement, a damaged file — can leave a value of any type in any column: a time
that is not a time, a blob where text belongs, bytes that are not UTF-8. A store
decodes each row on its own, through `read_command`, so one such row never fails
the claim of the others; and a row it cannot read whole comes back as a
`Command` whose `problem` says what is wrong, so that nobody acts on half of it.
The command poller completes it as rejected with that text and goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime

from chongming_core._store import Command

__all__ = ["Undecodable", "checked_command", "read_command"]

#: Longest rendering of a bad value quoted in a problem (a row may hold megabytes).
_SHOWN = 60

_REQUIRED_TEXT = ("command_id", "task_id", "action", "issued_by")
_OPTIONAL_TEXT = ("reason", "claimed_by", "result")
_OPTIONAL_TIMES = ("lease_until", "completed_at")


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A stored value the driver could not turn into a Python value at all.

    A backend passes one to `read_command` in place of the value: text that is not
    valid UTF-8 (SQLite keeps any bytes in a TEXT column), or a time no `datetime`
    can hold (PostgreSQL's ``infinity``, a year past 9999).

    Attributes:
        what: what the column holds, in words ("a time", "text").
        shown: how the stored value reads, for the problem text.
    """

    what: str
    shown: str


def _show(value: object) -> str:
    shown = value.shown if isinstance(value, Undecodable) else repr(value)
    return shown if len(shown) <= _SHOWN else f"{shown[: _SHOWN - 3]}..."


_KINDS = {str: "text", int: "an integer", float: "a number", bool: "a boolean"}


def _kind(value: object) -> str:
    """`value` in words, with what it holds: ``an integer (7)``, ``a blob (b'x')``."""
    if isinstance(value, Undecodable):
        return f"{value.what} that cannot be decoded ({_show(value)})"
    if isinstance(value, bytes | bytearray | memoryview):
        what = "a blob"
    else:
        what = _KINDS.get(type(value), f"a {type(value).__name__}")
    return f"{what} ({_show(value)})"


def _text_problem(value: object) -> str | None:
    if isinstance(value, str):
        return None
    if value is None:
        return "is missing"
    if isinstance(value, Undecodable):
        return f"is {_kind(value)}"
    return f"is {_kind(value)}, not text"


def _time(value: object) -> tuple[datetime | None, str | None]:
    """The time `value` stands for (a timezone-aware datetime, or its ISO-8601 text)."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None, f"is {_show(value)}, not an ISO-8601 time"
    elif isinstance(value, datetime):
        moment = value
    elif isinstance(value, Undecodable):
        return None, f"is {_kind(value)}"
    else:
        return None, f"is {_kind(value)}, not a time"
    if moment.utcoffset() is None:
        return None, f"is {_show(value)}, a time without a UTC offset"
    return moment, None


def _bucket(value: object) -> tuple[int | None, str | None]:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value, None
    return None, f"is {_kind(value)}, not an integer"


def read_command(values: Mapping[str, object]) -> Command:
    """The `Command` of one stored row, whatever its columns hold.

    Args:
        values: the row's stored values by `Command` field name (``command_id``,
            ``task_id``, ``action``, ``issued_by``, ``issued_at``, ``reason``,
            ``bucket``, ``claimed_by``, ``lease_until``, ``completed_at``,
            ``result``); a time may be a datetime or its ISO-8601 text; a value the
            driver could not decode is an `Undecodable`. A missing key reads as None.

    Returns:
        The command, with ``problem`` None when every value is what its column
        holds. Otherwise ``problem`` names each bad column and what it holds; a bad
        text column then holds the stored value's rendering (so the task id or the
        id of the row can still be quoted), a bad time or bucket holds None.
    """
    problems: list[str] = []
    found: dict[str, object] = {}
    for name in _REQUIRED_TEXT:
        value = values.get(name)
        problem = _text_problem(value)
        if problem is None:
            found[name] = value
        else:
            problems.append(f"{name} {problem}")
            found[name] = "" if value is None else _show(value)
    for name in _OPTIONAL_TEXT:
        value = values.get(name)
        problem = None if value is None else _text_problem(value)
        found[name] = value if problem is None else _show(value)
        if problem is not None:
            problems.append(f"{name} {problem}")
    issued = values.get("issued_at")
    if issued is None:
        found["issued_at"], problem = None, "is missing"
    else:
        found["issued_at"], problem = _time(issued)
    if problem is not None:
        problems.append(f"issued_at {problem}")
    for name in _OPTIONAL_TIMES:
        value = values.get(name)
        moment, problem = (None, None) if value is None else _time(value)
        found[name] = moment
        if problem is not None:
            problems.append(f"{name} {problem}")
    found["bucket"], problem = _bucket(values.get("bucket"))
    if problem is not None:
        problems.append(f"bucket {problem}")
    return Command(**found, problem="; ".join(problems) or None)  # type: ignore[arg-type]


def checked_command(command: Command) -> Command:
    """`command` itself when it is a well-formed row, else what `read_command` makes of its
    fields (for a store that keeps `Command` objects as they were handed to it)."""
    if command.problem is not None:
        return command
    read = read_command({f.name: getattr(command, f.name) for f in fields(Command)})
    return command if read.problem is None else read
