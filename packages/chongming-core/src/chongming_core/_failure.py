"""Why an attempt did not succeed (guide §5.2): `FailureKind` and `Failure`."""

from __future__ import annotations

import traceback as _traceback
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from chongming_core._decoding import Fields

__all__ = ["Failure", "FailureKind", "read_failure", "storable_text"]


class FailureKind(StrEnum):
    """The category of a failure. A field of the snapshot, never a status."""

    EXCEPTION = "exception"
    NONZERO_EXIT = "nonzero_exit"
    TIMEOUT_START = "timeout_start"
    TIMEOUT_ATTEMPT = "timeout_attempt"
    TIMEOUT_IDLE = "timeout_idle"
    CANCELLED = "cancelled"
    LOST = "lost"
    DEPENDENCY_FAILED = "dependency_failed"
    CONDITION_FALSE = "condition_false"
    RESULT_INVALID = "result_invalid"

    @property
    def default_retryable(self) -> bool:
        """Whether a failure of this kind is worth another attempt by default.

        Cancellation is never retried (retrying it would ignore a stop); timeouts,
        lost carriers, crashes and exceptions usually are transient.
        """
        return self in _RETRYABLE_BY_DEFAULT

    @property
    def is_timeout(self) -> bool:
        """True for the three timeout kinds."""
        return self in _TIMEOUTS


_K = FailureKind
_RETRYABLE_BY_DEFAULT = frozenset(
    {
        _K.EXCEPTION,
        _K.NONZERO_EXIT,
        _K.TIMEOUT_START,
        _K.TIMEOUT_ATTEMPT,
        _K.TIMEOUT_IDLE,
        _K.LOST,
    }
)
_TIMEOUTS = frozenset({_K.TIMEOUT_START, _K.TIMEOUT_ATTEMPT, _K.TIMEOUT_IDLE})


def storable_text(text: str) -> str:
    """`text` with what no store can keep written as escapes: a NUL byte as ``\\x00``, a
    lone surrogate (bytes that were not UTF-8, decoded leniently: a file name in an error)
    as ``\\udcXX``. A failure that could not be stored would hide the task's end."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


@dataclass(frozen=True, slots=True)
class Failure:
    """A failure record: what kind, what happened, and whether another try makes sense.

    Example::

        Failure.of(FailureKind.CANCELLED, "stopped by ops: release window")
    """

    kind: FailureKind
    message: str
    retryable: bool
    exception_type: str | None = None
    traceback: str | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls,
        kind: FailureKind,
        message: str,
        *,
        retryable: bool | None = None,
        exception_type: str | None = None,
        traceback: str | None = None,
    ) -> Failure:
        """Build a failure whose `retryable` defaults to the kind's default."""
        return cls(
            kind=kind,
            message=message,
            retryable=kind.default_retryable if retryable is None else retryable,
            exception_type=exception_type,
            traceback=traceback,
        )

    @classmethod
    def from_exception(
        cls,
        exc: BaseException,
        *,
        kind: FailureKind = FailureKind.EXCEPTION,
        retryable: bool | None = None,
    ) -> Failure:
        """Describe an exception raised by a task body (type, message and traceback)."""
        exc_type = type(exc)
        qualified = f"{exc_type.__module__}.{exc_type.__qualname__}"
        if exc_type.__module__ == "builtins":
            qualified = exc_type.__qualname__
        text = str(exc)
        message = f"{exc_type.__qualname__}: {text}" if text else exc_type.__qualname__
        return cls.of(
            kind,
            storable_text(message),  # an exception's text is whatever the body put in it
            retryable=retryable,
            exception_type=qualified,
            traceback=storable_text("".join(_traceback.format_exception(exc))),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (used by stores and the CLI's --json output)."""
        return {
            "kind": self.kind.value,
            "message": self.message,
            "retryable": self.retryable,
            "exception_type": self.exception_type,
            "traceback": self.traceback,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Failure:
        """The inverse of `to_dict`.

        Raises:
            ValueError: `data` is not a failure record, e.g. ``failure.kind 'zombie' is
                not a failure kind``.
        """
        return read_failure(data, "failure")


def read_failure(data: object, what: str) -> Failure:
    """A `Failure` read from a stored value; `what` names it in messages ("failure",
    "attempts[0].failure").

    Raises:
        ValueError: `data` is not a failure record (the message names the field).
    """
    fields = Fields(data, what)
    return Failure(
        kind=fields.choice("kind", FailureKind, "a failure kind"),
        message=fields.text("message"),
        retryable=fields.boolean("retryable"),
        exception_type=fields.optional_text("exception_type"),
        traceback=fields.optional_text("traceback"),
    )
