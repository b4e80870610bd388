"""The arguments of a durable task: plain JSON, checked where the call is made.

A durable task travels as its registered name and its arguments, which any worker
on any machine reads back; so they must be JSON every process reads back as the
same value. `durable_arguments` checks them before anything is written and says,
for the first one that is not, which argument it is, its type and what to pass
instead ("argument 'path' of type PosixPath is not JSON: pass str(path)").
"""

from __future__ import annotations

import datetime as _dt
import enum
import math
import os
import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from chongming_core._errors import ConfigurationError
from chongming_core._json import MAX_DEPTH, portable_json

__all__ = ["arguments_problem", "durable_arguments"]


def durable_arguments(args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The stored form of a durable task's arguments: ``{"args": [...], "kwargs": {...}}``.

    Allowed, nested to any reasonable depth: None, bool, int, finite float, str, list or
    tuple (stored as a list), and dict with str keys.

    Example::

        durable_arguments(["a.csv"], {"limit": 10})
        # {'args': ['a.csv'], 'kwargs': {'limit': 10}}

    Raises:
        ConfigurationError: an argument is not JSON; the message names it (its position
            or keyword, and where inside it), its type and what to pass instead.
    """
    stored = {"args": list(args), "kwargs": dict(kwargs)}
    if _plainly_json(stored):  # the usual case: its JSON round trip would be an equal copy
        copied: dict[str, Any] = _plain_copy(stored)
        return copied
    for index, value in enumerate(args):
        problem = _problem(value, f"argument {index}", f"args[{index}]")
        if problem is not None:
            raise ConfigurationError(problem)
    for key, value in kwargs.items():
        if not isinstance(key, str):
            raise ConfigurationError(
                f"keyword argument {key!r} of type {type(key).__name__} is not a str: "
                "keyword names are text"
            )
        problem = _problem(value, f"argument {key!r}", key)
        if problem is not None:
            raise ConfigurationError(problem)
    try:
        kept: dict[str, Any] = portable_json(stored)
    except ValueError as exc:  # limits of every store: an int too long, a lone surrogate
        raise ConfigurationError(
            f"the arguments cannot be stored: {str(exc).replace('the result', 'an argument')}"
        ) from None
    return kept


def arguments_problem(arguments: object) -> str | None:
    """Why a store cannot keep `arguments` as a durable task's arguments, or None.

    `arguments` must be None or a JSON object (a dict with str keys) every reader gets
    back unchanged; a store calls this before it writes a snapshot.
    """
    if arguments is None:
        return None
    if not isinstance(arguments, Mapping):
        return f"arguments must be a JSON object or None, got {type(arguments).__name__}"
    if type(arguments) is dict and _plainly_json(arguments):
        return None  # a store checks them at every save: the usual case costs little
    problem = _problem(dict(arguments), "arguments", "arguments")
    if problem is not None:
        return problem
    try:
        portable_json(dict(arguments))
    except ValueError as exc:
        return str(exc).replace("the result", "the arguments")
    return None


#: The scalars `_plainly_json` takes as they are (exact types: no subclass, no enum).
_PLAIN_SCALARS = frozenset({type(None), bool, int, float, str})
#: The depth and the int size `_plainly_json` looks no further than (well within the limits).
_PLAIN_DEPTH = 32
_PLAIN_INT = 1 << 63


def _plainly_json(value: dict[str, Any]) -> bool:
    """True when `value` is JSON no rule could refuse or change: dicts with str keys, lists,
    ASCII str, small ints, finite floats, bool and None, shallow. False means "look
    closely" (`_problem` and `portable_json`), not that something is wrong."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict:
            if depth >= _PLAIN_DEPTH:
                return False
            for key, inner in item.items():
                if type(key) is not str or not key.isascii():
                    return False
                stack.append((inner, depth + 1))
        elif kind is list:
            if depth >= _PLAIN_DEPTH:
                return False
            stack.extend((inner, depth + 1) for inner in item)
        elif kind not in _PLAIN_SCALARS:
            return False
        elif kind is str:
            if not item.isascii():
                return False
        elif kind is int:
            if not -_PLAIN_INT < item < _PLAIN_INT:
                return False
        elif kind is float and not math.isfinite(item):
            return False
    return True


def _plain_copy(value: Any) -> Any:
    """A copy of `value`, which `_plainly_json` took (its JSON round trip, made without
    the text): new dicts and lists, so nothing the caller changes later reaches it."""
    kind = type(value)
    if kind is dict:
        return {key: _plain_copy(inner) for key, inner in value.items()}
    if kind is list:
        return [_plain_copy(inner) for inner in value]
    return value


def _problem(value: Any, where: str, name: str) -> str | None:
    """The first value inside `value` that is not JSON, as a sentence (iterative)."""
    stack: list[tuple[str, str, Any, int]] = [(where, name, value, 0)]
    while stack:
        place, label, item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return (
                f"{_short(place)} nests lists and dicts more than {MAX_DEPTH} levels deep: "
                "pass a flatter structure"
            )
        if isinstance(item, enum.Enum):  # an IntEnum or StrEnum member would lose its kind
            return _refused(place, item, f"{label}.value")
        if item is None or isinstance(item, bool | str | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{_short(place)} is {item!r}, which JSON cannot hold: pass None or a str"
            continue
        if isinstance(item, list | tuple):
            for index in reversed(range(len(item))):
                stack.append((f"{place}[{index}]", f"{label}[{index}]", item[index], depth + 1))
            continue
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    return (
                        f"{_short(place)} has the key {key!r} of type {type(key).__name__}: JSON "
                        "keeps only str keys, pass str keys"
                    )
            for key in reversed(list(item)):
                stack.append((f"{place}[{key!r}]", f"{label}[{key!r}]", item[key], depth + 1))
            continue
        return _refused(place, item, _instead(item, _short(label)))
    return None


def _refused(place: str, item: object, instead: str) -> str:
    return f"{_short(place)} of type {type(item).__name__} is not JSON: pass {instead}"


#: The longest path a message shows whole (a value nested thousands deep has a path of
#: thousands of characters: its start and its end say where it is).
_PATH_SHOWN = 120


def _short(path: str) -> str:
    """`path` as a message shows it: whole, or its start and end around an ellipsis."""
    if len(path) <= _PATH_SHOWN:
        return path
    return f"{path[:60]}...{path[-50:]}"


def _instead(item: object, label: str) -> str:
    """What to pass instead of `item` (named `label` in the hint)."""
    if isinstance(item, os.PathLike | uuid.UUID):
        return f"str({label})"
    if isinstance(item, _dt.datetime | _dt.date | _dt.time):
        return f"{label}.isoformat()"
    if isinstance(item, set | frozenset):
        return f"sorted({label}) or list({label})"
    if isinstance(item, bytes | bytearray | memoryview):
        return f"text ({label}.decode() or base64)"
    if isinstance(item, Decimal):
        return f"str({label}) or float({label})"
    if isinstance(item, _dt.timedelta):
        return f"{label}.total_seconds()"
    return "plain JSON data (None, bool, int, float, str, list, dict with str keys)"
