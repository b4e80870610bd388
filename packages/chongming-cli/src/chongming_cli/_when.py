"""Durations (``30s``, ``5m``, ``1h``, ``1.5s``) and moments (ISO-8601) of the command line."""

from __future__ import annotations

import contextlib
import math
import re
from datetime import UTC, datetime

__all__ = ["parse_duration", "parse_moment"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"(?P<number>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>ms|s|m|h|d)?")


def parse_duration(text: str) -> float:
    """Seconds of ``30s``, ``5m``, ``1h``, ``1.5s``, ``250ms``, ``2d`` (a bare number is
    seconds).

    Raises:
        ValueError: anything else, or a negative or infinite duration (the message says
            what is accepted).
    """
    match = _DURATION.fullmatch(text.strip())
    if match is None and _DURATION.fullmatch(text.strip().removeprefix("-")) is not None:
        raise ValueError(
            f"{text!r} is negative; a duration counts forward from now, e.g. 30s, 5m, 1h, 1.5s"
        )
    if match is None:
        raise ValueError(
            f"{text!r} is not a duration; write a number with a unit, e.g. 30s, 5m, 1h, 1.5s"
        )
    seconds = float(match["number"]) * _UNITS[match["unit"] or "s"]
    if not math.isfinite(seconds):
        raise ValueError(f"{text!r} is too long a duration")
    return seconds


#: The first and last times a store keeps (UTC, years 1 to 9999).
_FIRST = datetime.min.replace(tzinfo=UTC)
_LAST = datetime.max.replace(tzinfo=UTC)


def parse_moment(text: str) -> tuple[datetime, bool]:
    """An ISO-8601 time (``2026-10-02T08:00:00+08:00``, ``2026-10-02 08:00Z``) and whether
    it named no offset: such a time is taken as this machine's local time.

    Raises:
        ValueError: not an ISO-8601 time (the message gives an example), or one outside
            the years 1 to 9999 in UTC.
    """
    cleaned = text.strip()
    if cleaned.endswith(("z", "Z")):
        cleaned = cleaned[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(cleaned)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an ISO-8601 time; write e.g. 2026-10-02T08:00:00+08:00 "
            "(or ...Z for UTC; without an offset it is local time)"
        ) from None
    local = moment.utcoffset() is None
    placed: datetime | None = moment
    if local:  # local time, as the machine's zone says
        with contextlib.suppress(OverflowError, ValueError):  # ("year 0 is out of range")
            placed = moment.astimezone()
        placed = None if placed is moment else placed
    if placed is None or not _FIRST <= placed <= _LAST:  # every store keeps UTC times
        raise ValueError(
            f"{text!r} is outside the years 1 to 9999 in UTC, the times a store keeps; "
            "write a time within them"
        )
    return placed, local
