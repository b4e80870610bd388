"""What every store can keep as JSON, decided in one place (design D68-D70).

A task's outcome is written as JSON text and read back by other processes. A value
passes when every store can write it *and* every reader gets back the value this
process holds, so `portable_json` refuses, with a sentence saying why:

* what JSON has no form for: a set, bytes, an object, NaN and the infinities;
* an int of more than 4300 digits (Python's default limit for turning an int into
  text and back: another process could not read it);
* text that is not valid Unicode (a lone surrogate: no store can encode it);
* a dict key that is not a string (JSON would hand other readers ``"1"`` for ``1``,
  and ``{1: "a", "1": "b"}`` would lose an entry);
* lists and dicts nested more than `MAX_DEPTH` levels (a reader already deep in its
  own stack could not decode it).

What JSON only renames is converted instead, for every reader alike: the value
returned is the one a store hands back — a tuple becomes a list, an ``IntEnum`` an
int, a ``str`` subclass a str. `TaskStore.stored_outcome` applies these rules by
default; a backend adds its own limits there. `number_problem` and
`progress_problem` are the rules for progress, cheap enough for every report.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
from typing import Any

from chongming_core._records import Progress

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "number_problem",
    "portable_json",
    "progress_problem",
    "safe_repr",
]

#: Decimal digits an int may have: Python's default int/text conversion limit, so every
#: Python process can read it back whatever this one's `sys.set_int_max_str_digits` says.
MAX_INT_DIGITS = 4300
#: How deep lists and dicts may nest in a result. A reader decodes JSON recursively, maybe
#: from a few hundred frames deep (a dashboard's event loop), under Python's default
#: recursion limit of 1000; no real result needs more.
MAX_DEPTH = 200

_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_decode = json.JSONDecoder().decode
_bounds: dict[int, int] = {}  # digit limit -> 10 ** limit, the first int that is too long

# for the nesting check: strings (which may hold brackets) out, then everything but brackets
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_EMPTY_PAIR = re.compile(r"\[\]|\{\}")
_LONG_NUMBER = re.compile(rf"\d{{{MAX_INT_DIGITS + 1}}}")


def portable_json(value: Any) -> Any:
    """`value` as every reader of any store gets it back: its JSON round trip.

    Returns:
        The decoded JSON of `value` (a tuple comes back as a list); scalars as they are.

    Raises:
        ValueError: no store can keep `value` (see the module docstring); the message
            is a sentence saying where and why, and what to return instead.
    """
    kind = type(value)
    if value is None or kind is bool or (kind is str and value.isascii()):
        return value
    if kind is int:
        if -_int_bound() < value < _int_bound():
            return value
        raise ValueError(_why(value))
    if kind is float:
        if math.isfinite(value):
            return value
        raise ValueError(_why(value))
    try:
        text = _encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(_why(value, exc)) from exc
    invalid_text = not text.isascii() and _text_problem(text) is not None  # a lone surrogate
    too_deep = text.count("[") + text.count("{") > MAX_DEPTH and _nests_deeper(text, MAX_DEPTH)
    # this process may write longer ints than other processes can read
    long_int = _int_limit_raised() and _LONG_NUMBER.search(text) is not None
    if invalid_text or too_deep or long_int:
        problem = _first_problem(value)
        if problem is None and too_deep:
            problem = _deep_problem(())
        if problem is not None:
            raise ValueError(problem)
    decoded = _decode(text)
    if "{" in text:  # a dict: were its keys strings? (JSON turns others into strings)
        try:
            changed = bool(decoded != value)  # also unequal for a tuple, which is fine
        except Exception:  # the __eq__ of a subclass raised: look closer
            changed = True
        problem = _first_problem(value) if changed else None
        if problem is not None:
            raise ValueError(problem)
    return decoded


def number_problem(value: object) -> str | None:
    """Why `value` cannot be a progress number (``done``, ``total``), or None.

    Progress is shown as a fraction and a count, so it must be a finite int or float
    that fits a float (not a bool, not NaN, not an infinity).
    """
    kind = type(value)
    if (kind is not int and kind is not float) and (
        isinstance(value, bool) or not isinstance(value, int | float)
    ):
        return f"must be a number, got {safe_repr(value)}"
    try:
        if math.isfinite(value):  # type: ignore[arg-type]
            return None
    except OverflowError:  # an int beyond a float's range
        assert isinstance(value, int)
        return f"must fit a float, got an int of {_digits(value)} digits"
    return f"must be a finite number, got {_float_text(value)}"


def progress_problem(progress: Progress) -> str | None:
    """Why no store can keep `progress`, or None: its numbers (`number_problem`), and
    a unit or message that is not text or not valid Unicode."""
    done_problem = number_problem(progress.done)
    if done_problem is not None:
        return f"progress done {done_problem}"
    if progress.total is not None:
        total_problem = number_problem(progress.total)
        if total_problem is not None:
            return f"progress total {total_problem}"
    texts: tuple[tuple[str, object], ...] = (("unit", progress.unit), ("message", progress.message))
    for label, text in texts:
        if text is None:
            continue
        if not isinstance(text, str):
            return f"progress {label} must be a str or None, got {safe_repr(text)}"
        if not text.isascii():
            why = _text_problem(text)
            if why is not None:
                return f"progress {label} {why}"
    return None


# ---------------------------------------------------------------------- explaining
def _int_limit() -> int:
    """Digits an int may have: `MAX_INT_DIGITS`, or fewer when this process lowered its
    own limit (it could not even write a longer one)."""
    current = sys.get_int_max_str_digits()
    return MAX_INT_DIGITS if current == 0 or current > MAX_INT_DIGITS else current


def _int_bound() -> int:
    """The magnitude of the first int too long to keep (``10 ** _int_limit()``)."""
    limit = _int_limit()
    bound = _bounds.get(limit)
    if bound is None:
        bound = _bounds[limit] = 10**limit
    return bound


def _int_limit_raised() -> bool:
    """True when this process encodes ints longer than other processes can read."""
    current = sys.get_int_max_str_digits()
    return current == 0 or current > MAX_INT_DIGITS


def _digits(value: int) -> int:
    """Decimal digits of `value` (without turning it into text, which may be refused)."""
    magnitude = abs(value)
    if magnitude == 0:
        return 1
    digits = int(math.log10(magnitude)) + 1
    if 10 ** (digits - 1) > magnitude:  # log10 rounds near powers of ten
        digits -= 1
    elif 10**digits <= magnitude:
        digits += 1
    return digits


def safe_repr(value: object) -> str:
    """A short repr for a message that cannot fail: an int of more digits than Python
    turns into text is described ("an int of 5001 digits"), a long repr is cut."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an int of {_digits(value)} digits"
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__qualname__}>"
    return text if len(text) <= 60 else f"{text[:57]}..."


def _float_text(value: object) -> str:
    return "NaN" if isinstance(value, float) and math.isnan(value) else repr(value)


def _text_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"is not valid Unicode (a lone surrogate {text[exc.start]!r} at position "
            f"{exc.start}: text decoded from bytes that were not UTF-8), which no store can keep"
        )
    return None


def _nests_deeper(text: str, limit: int) -> bool:
    """Whether the JSON `text` nests lists and dicts more than `limit` levels deep."""
    shape = _NOT_BRACKET.sub("", _STRING.sub("", text))
    for _ in range(limit):
        if not shape:
            return False
        shape = _EMPTY_PAIR.sub("", shape)  # one level of innermost pairs per pass
    return bool(shape)


def _where(path: tuple[object, ...]) -> str:
    return (
        "the result" if not path else "the result at " + "".join(f"[{safe_repr(k)}]" for k in path)
    )


def _why(value: Any, exc: BaseException | None = None) -> str:
    problem = _first_problem(value)
    if problem is not None:
        return problem
    if isinstance(exc, ValueError) and "ircular" in str(exc):
        return "the result contains itself (a circular reference), which JSON cannot hold"
    return f"the result cannot be written as JSON ({type(exc).__name__}: {exc})"


def _deep_problem(path: tuple[object, ...]) -> str:
    where = _where(path[:3]) + ("..." if len(path) > 3 else "")
    return (
        f"{where} nests lists and dicts more than {MAX_DEPTH} levels deep, which not every "
        "reader can decode; return a flatter structure"
    )


def _first_problem(value: Any) -> str | None:
    """The first thing in `value` no store can keep, as a sentence, or None (iterative:
    a structure deep enough to be refused must not overflow the stack here either)."""
    bound = _int_bound()
    stack: list[tuple[tuple[object, ...], Any]] = [((), value)]
    seen: set[int] = set()
    while stack:
        path, item = stack.pop()
        problem = _item_problem(path, item, bound)
        if problem is not None:
            return problem
        if not isinstance(item, dict | list | tuple) or id(item) in seen:
            continue
        if len(path) >= MAX_DEPTH:
            return _deep_problem(path)
        seen.add(id(item))
        if isinstance(item, dict):
            for key in item:
                key_problem = _key_problem(path, key)
                if key_problem is not None:
                    return key_problem
            stack.extend(((*path, k), v) for k, v in reversed(list(item.items())))
        else:
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(item))))
    return None


def _item_problem(path: tuple[object, ...], item: Any, bound: int) -> str | None:
    if item is None or isinstance(item, bool | dict | list | tuple):
        return None
    if isinstance(item, str):
        why = None if item.isascii() else _text_problem(item)
        return None if why is None else f"{_where(path)} {why}"
    if isinstance(item, int):
        if -bound < item < bound:
            return None
        return (
            f"{_where(path)} is an int of {_digits(item)} digits, which the store cannot "
            f"encode as JSON (limit {_int_limit()} digits); return it as a str"
        )
    if isinstance(item, float):
        if math.isfinite(item):
            return None
        return (
            f"{_where(path)} is {_float_text(item)}, which JSON cannot hold; return None or a str"
        )
    hint: dict[type, str] = {set: "a list", frozenset: "a list", bytes: "a str", bytearray: "a str"}
    instead = hint.get(type(item), "plain JSON data")
    name = type(item).__qualname__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return f"{_where(path)} is {article} {name}, which is not JSON; return {instead}"


def _key_problem(path: tuple[object, ...], key: object) -> str | None:
    if isinstance(key, str):
        why = None if key.isascii() else _text_problem(key)
        return None if why is None else f"a key of {_where(path)} {why}"
    read = ""
    if key is None or isinstance(key, int | float):  # JSON writes these as text
        with contextlib.suppress(ValueError):  # too long, or not finite: no text at all
            read = f", so other processes would read {_encode(key)!r}"
    return (
        f"the dict key {safe_repr(key)} ({type(key).__name__}) of {_where(path)} is not a "
        f"string: JSON keeps only string keys{read}"
    )
