"""Reading records back from stored data, strictly: every field is checked.

A store's rows are data, which another program, another version or a hand at a SQL
prompt may have written. The ``from_dict`` methods of the records read through
`Fields`, so a value of the wrong shape is refused with a `ValueError` naming the
field and the value ("status 'zombie' is not a status", "attempts[0].started_at
'yesterday' is not an ISO-8601 time") instead of surfacing later as a `TypeError` in
whoever used the record, or being misread (tags ``"abc"`` as the set of its letters).

A key that is absent takes its default (documents written before a field existed);
a value that is present must have the field's type, and ``null`` only where the
field may be empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

__all__ = ["REQUIRED", "Fields", "read_choice", "read_list", "read_text_set", "shown"]

_E = TypeVar("_E", bound=Enum)

#: The default of a field that must be present.
REQUIRED: Any = object()
_ABSENT: Any = object()
_from_iso = datetime.fromisoformat

_SHOWN = 60


def shown(value: object) -> str:
    """`value` as it appears in a message: its ``repr`` (control characters escaped),
    cut to a few dozen characters (a damaged row may hold a whole document there)."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _is_integer(value: object) -> bool:
    """An `int` of a subclass (an `IntEnum`), never a `bool`: `type(v) is int` is the
    fast test of the usual case, this one the rest."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    """An `int` or `float` of a subclass (``numpy.float64``), never a `bool`."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_choice(value: object, kind: type[_E], what: str, noun: str) -> _E:
    """`value` as a member of the text enum `kind`; `what` names the field, `noun` the
    kind in messages ("status 'zombie' is not a status")."""
    if isinstance(value, str):
        # the enum's own table: a dictionary lookup, where calling the enum costs ten times that
        member = kind._value2member_map_.get(value)
        if member is not None:
            return member  # type: ignore[return-value]
    raise ValueError(f"{what} {shown(value)} is not {noun}")


def read_text_set(value: object, what: str) -> frozenset[str]:
    """A list of texts (the stored tags), as a set."""
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    raise ValueError(f"{what} must be a list of texts, got {shown(value)}")


def read_list(value: object, what: str) -> list[Any]:
    """A stored list."""
    if isinstance(value, list | tuple):
        return list(value)
    raise ValueError(f"{what} must be a list, got {shown(value)}")


class Fields:
    """Typed reads from one JSON object; each failure names the field by its path.

    Example::

        fields = Fields(data, "progress")
        done = fields.number("done")          # ValueError: progress.done is missing
    """

    __slots__ = ("_data", "_prefix")

    def __init__(self, data: object, what: str) -> None:
        if not isinstance(data, Mapping):
            raise ValueError(f"{what or 'the record'} must be a JSON object, got {shown(data)}")
        self._data: Mapping[str, Any] = data
        self._prefix = what + "." if what else ""

    # Each read is one dictionary lookup and one type test: every snapshot a store lists
    # goes through here, thirty fields at a time.
    def _name(self, key: str) -> str:
        return self._prefix + key

    def _get(self, key: str, default: Any) -> Any:
        value = self._data.get(key, _ABSENT)
        if value is _ABSENT:
            if default is REQUIRED:
                raise ValueError(f"{self._name(key)} is missing")
            return default
        return value

    def _wrong(self, key: str, kind: str, value: object) -> ValueError:
        return ValueError(f"{self._name(key)} must be {kind}, got {shown(value)}")

    def raw(self, key: str, default: Any = None) -> Any:
        """The value as stored (any JSON value; `default` when absent)."""
        return self._data.get(key, default)

    def text(self, key: str, default: Any = REQUIRED) -> str:
        """Text that may not be null."""
        value = self._get(key, default)
        if not isinstance(value, str):
            raise self._wrong(key, "text", value)
        return value

    def optional_text(self, key: str) -> str | None:
        """Text or null (absent: null)."""
        value = self._data.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self._wrong(key, "text or null", value)

    def integer(self, key: str, default: Any = REQUIRED) -> int:
        """An integer that may not be null (a bool is not an integer here)."""
        value = self._get(key, default)
        if type(value) is not int and not _is_integer(value):
            raise self._wrong(key, "an integer", value)
        return value  # type: ignore[no-any-return]

    def optional_integer(self, key: str) -> int | None:
        """An integer or null (absent: null)."""
        value = self._data.get(key)
        if value is None or type(value) is int or _is_integer(value):
            return value
        raise self._wrong(key, "an integer or null", value)

    def number(self, key: str) -> float:
        """A number (integer or float) that must be present."""
        value = self._get(key, REQUIRED)
        if type(value) not in (int, float) and not _is_number(value):
            raise self._wrong(key, "a number", value)
        return value  # type: ignore[no-any-return]

    def optional_number(self, key: str) -> float | None:
        """A number or null (absent: null)."""
        value = self._data.get(key)
        if value is None or type(value) in (int, float) or _is_number(value):
            return value
        raise self._wrong(key, "a number or null", value)

    def boolean(self, key: str, default: Any = REQUIRED) -> bool:
        """``true`` or ``false``."""
        value = self._get(key, default)
        if type(value) is not bool:
            raise self._wrong(key, "true or false", value)
        return value

    def choice(self, key: str, kind: type[_E], noun: str) -> _E:
        """A member of the text enum `kind` (`noun` names it in messages: "a status")."""
        value = self._data.get(key, _ABSENT)
        if isinstance(value, str):
            member = kind._value2member_map_.get(value)
            if member is not None:
                return member  # type: ignore[return-value]
        if value is _ABSENT:
            raise ValueError(f"{self._name(key)} is missing")
        raise ValueError(f"{self._name(key)} {shown(value)} is not {noun}")

    def time(self, key: str) -> datetime | None:
        """An ISO-8601 time with its UTC offset, or null (absent: null)."""
        value = self._data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._wrong(key, "an ISO-8601 time or null", value)
        try:
            moment = _from_iso(value)
        except ValueError:
            raise ValueError(f"{self._name(key)} {shown(value)} is not an ISO-8601 time") from None
        if moment.tzinfo is None:  # what fromisoformat makes of text without an offset
            raise ValueError(f"{self._name(key)} {shown(value)} has no UTC offset")
        return moment

    def required_time(self, key: str) -> datetime:
        """An ISO-8601 time with its UTC offset that must be present."""
        moment = self.time(key)
        if moment is None:
            raise ValueError(f"{self._name(key)} is missing")
        return moment

    def text_set(self, key: str) -> frozenset[str]:
        """A list of texts, as a set (absent: empty)."""
        return read_text_set(self._data.get(key, ()), self._name(key))

    def optional_object(self, key: str) -> Any:
        """A JSON object or null (absent: null), to read with a `Fields` of its own."""
        value = self._data.get(key)
        if value is None or isinstance(value, Mapping):
            return value
        raise self._wrong(key, "a JSON object or null", value)

    def items(self, key: str) -> list[Any]:
        """A list (absent: empty)."""
        return read_list(self._data.get(key, ()), self._name(key))

    def path(self, key: str) -> str:
        """The path of a nested value, for the `Fields` that reads it."""
        return self._name(key)
