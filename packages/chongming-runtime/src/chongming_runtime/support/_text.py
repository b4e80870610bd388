"""Checks on text that becomes part of a task's record."""

from __future__ import annotations

import unicodedata

from chongming_core import ConfigurationError

__all__ = ["check_reason", "refuse_control_characters", "refuse_unstorable", "unstorable_text"]


def unstorable_text(value: str) -> str | None:
    """Why no store can keep `value` as text, or None when every store can.

    A NUL byte: PostgreSQL cannot keep it in text. A lone surrogate (text decoded from bytes
    that were not UTF-8, with ``surrogateescape``): it has no UTF-8 encoding, so neither
    SQLite nor PostgreSQL can keep it.
    """
    if "\x00" in value:
        return "contains a NUL byte (\\x00), which not every store can keep (PostgreSQL cannot)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"is not valid Unicode (a lone surrogate {value[exc.start]!r} at position "
            f"{exc.start}: text decoded from bytes that were not UTF-8), which no store can keep"
        )
    return None


def refuse_unstorable(field: str, value: object) -> None:
    """Refuse text a store cannot keep (see `unstorable_text`), before anything runs: a task
    that ran but whose row could never be written would be invisible and uncontrollable."""
    if not isinstance(value, str):
        return
    why = unstorable_text(value)
    if why is not None:
        raise ConfigurationError(
            f"{field} {value!r} {why}; remove or replace those characters, e.g. "
            "value.replace('\\x00', '') or value.encode('utf-8', 'replace').decode()"
        )


def check_reason(reason: object, field: str = "reason") -> None:
    """Refuse a reason that is not text (or None), and text a store cannot keep: it is
    written with the control (a stop, a retry), and each store would keep another thing
    (SQLite its text, PostgreSQL an error from its driver)."""
    if reason is not None and not isinstance(reason, str):
        raise ConfigurationError(
            f"{field} must be a str or None, got {reason!r} ({type(reason).__name__}); "
            f"pass str({reason!r}) to keep it as text"
        )
    refuse_unstorable(field, reason)


def refuse_control_characters(field: str, value: str) -> None:
    """Refuse a name or an id holding a control character (a newline, a tab, an escape
    sequence): every view shows it escaped, so it could never be typed or pasted back into
    a command (`chongming-task status ID`), and an escape sequence would reach a terminal
    raw. The console refuses such a ``--task-id`` the same way."""
    for char in value:
        if unicodedata.category(char) == "Cc":
            raise ConfigurationError(
                f"{field} {value!r} holds the control character {char!r}: it is typed and "
                "pasted back into commands, so give one of printable characters"
            )
