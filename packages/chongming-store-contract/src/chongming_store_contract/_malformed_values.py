"""`Malformed`: what a column of a command row holds instead of its value (the contract's
vocabulary for `ContractBase.write_malformed_command`)."""

from __future__ import annotations

import dataclasses
from enum import Enum

from chongming_core import Command

__all__ = ["Malformed", "malformed_command"]


class Malformed(Enum):
    """What a column of a malformed command row holds instead of its value."""

    #: text that is no time, in a time column ("next tuesday")
    NOT_A_TIME = "not_a_time"
    #: a time without a UTC offset, in a time column
    NAIVE_TIME = "naive_time"
    #: a time no `datetime` can hold (PostgreSQL's ``infinity``, a year past 9999)
    OUT_OF_RANGE_TIME = "out_of_range_time"
    #: bytes (a blob) in a text, time or integer column
    BLOB = "blob"
    #: text whose bytes are not UTF-8
    NOT_UTF8 = "not_utf8"
    #: a value of another type: a number in a text column, text in the bucket column
    WRONG_TYPE = "wrong_type"


def malformed_command(command: Command, column: str, bad: Malformed) -> Command | None:
    """`command` with `column` holding `bad` as a Python value, or None when no Python
    value stands for it (text that is not UTF-8, a time no `datetime` can hold)."""
    value: object
    if bad is Malformed.NOT_A_TIME:
        value = "next tuesday"
    elif bad is Malformed.NAIVE_TIME:
        value = None if command.issued_at is None else command.issued_at.replace(tzinfo=None)
    elif bad is Malformed.BLOB:
        value = b"\x00\xffblob"
    elif bad is Malformed.WRONG_TYPE:
        value = "seven" if column == "bucket" else 7
    else:
        return None
    return dataclasses.replace(command, **{column: value})  # type: ignore[arg-type]
