"""``--arg NAME=VALUE``: command-line text turned into a task's keyword arguments.

Every command that submits a task shares this. The text is converted by the
annotation of the task function's parameter, before anything is submitted, so a
value that does not fit is refused in one line instead of starting a task that
fails with a `TypeError`:

============================  ==============================================
annotation                    the text
============================  ==============================================
``str``                       taken as it is (``--arg code=007`` -> ``"007"``)
``int``                       a whole number (``--arg n=3``)
``float``                     a number (``--arg ratio=0.5``)
``bool``                      true/false, yes/no, on/off, 1/0 (any case)
``X | None``, ``Optional[X]`` ``null`` -> None, else converted as ``X``
``X | Y``                     the first of X, Y that converts
anything else                 JSON (``--arg ids='[1, 2]'``)
none, ``Any``, ``object``     JSON when it is valid JSON, else the text
============================  ==============================================

Nothing is ever evaluated as code.
"""

from __future__ import annotations

import enum
import inspect
import json
import math
import types
import typing
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from chongming_cli._exit import CliError
from chongming_cli._numbers import whole_number

__all__ = [
    "ENQUEUE_ARG_NAMES",
    "RESERVED_ARG_NAMES",
    "checked_task_id",
    "convert_args",
    "parse_arg_value",
    "parse_task_args",
    "split_args",
]

#: Keyword names `Controller.submit` takes itself; a task cannot receive them via ``--arg``
#: (the task's name is positional only, so a parameter may be called ``name``).
RESERVED_ARG_NAMES = frozenset(
    {"task_id", "label", "tags", "priority", "bucket_key", "retry", "timeout", "executor"}
)

#: Keyword names a `Job` of `Controller.enqueue_many` takes itself (``submit`` enqueues
#: one, so a task parameter may be called ``name``, ``tags``, ``delay`` or ``run_at``).
ENQUEUE_ARG_NAMES = frozenset({"task_id", "label", "priority", "bucket_key"})

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
#: What a string annotation names when the function's hints cannot be resolved.
_SIMPLE = {"str": str, "int": int, "float": float, "bool": bool, "Any": Any, "object": object}


def parse_arg_value(text: str) -> Any:
    """A ``--arg`` value for a parameter without annotation: JSON when it parses as JSON,
    else the text itself.

    Example::

        parse_arg_value("3") == 3
        parse_arg_value("true") is True
        parse_arg_value('["a", "b"]') == ["a", "b"]
        parse_arg_value("kafka://orders") == "kafka://orders"
    """
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return text


def _no_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; keep them as the strings the user typed
    raise ValueError(name)


def split_args(
    items: Iterable[str], reserved: frozenset[str] = RESERVED_ARG_NAMES
) -> dict[str, str]:
    """``["n=3", "s=x"]`` -> ``{"n": "3", "s": "x"}``: names checked, values left as text.

    `reserved` are the keyword names the submitting call takes itself.

    Raises:
        CliError: an item without ``=``, a name that is not an identifier or that `submit`
            takes itself, or a name given twice.
    """
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise CliError(f"--arg {item!r} has no '='; write --arg NAME=VALUE, e.g. --arg n=3")
        if not key.isidentifier():
            raise CliError(
                f"--arg {item!r}: {key!r} is not a valid keyword argument name; "
                "write --arg NAME=VALUE with a Python identifier as NAME"
            )
        if key in reserved:
            raise CliError(
                f"--arg {key}=...: {key!r} is an option of the run itself, not a task argument; "
                f"use --{key.replace('_', '-')} if there is such an option, or rename the "
                "task's parameter"
            )
        if key in result:
            raise CliError(f"--arg {key}=... is given twice; give each argument once")
        result[key] = value
    return result


def parse_task_args(items: Iterable[str]) -> dict[str, Any]:
    """``["n=3", "s=x"]`` -> ``{"n": 3, "s": "x"}``: `split_args`, each value by
    `parse_arg_value` (for a task whose annotations are not known)."""
    return {key: parse_arg_value(value) for key, value in split_args(items).items()}


def convert_args(
    fn: Callable[..., Any], raw: Mapping[str, str], *, task: str | None = None, stored: bool = False
) -> dict[str, Any]:
    """Convert the text of each ``--arg`` by the annotation of `fn`'s parameter of that name.

    The first parameter (the task context) is never one of them. A name `fn` has no
    parameter for goes to its ``**kwargs`` annotation, if any; otherwise it is parsed as
    `parse_arg_value` does (the signature check refuses it later).

    Args:
        fn: the task function.
        raw: names and their text, from `split_args`.
        task: the task's name, for messages.
        stored: the arguments are stored as JSON (a durable task's): a number JSON cannot
            hold (``nan``, ``inf``) is refused here, in the same form as any other value.

    Returns:
        The keyword arguments to submit.

    Raises:
        CliError: a value that does not convert, naming the argument, the value, the type
            expected and an example.
    """
    annotations = _annotations(fn)
    converted: dict[str, Any] = {}
    for name, text in raw.items():
        annotation = annotations.get(name, annotations.get("**", Any))
        try:
            converted[name] = _convert(text, annotation)
        except ValueError:
            who = f"task {task!r}" if task else "the task"
            shown = _type_name(annotation)
            raise CliError(
                f"--arg {name}={text!r}: {who} takes {name} as {shown}, and {text!r} is not "
                f"one; write {_example(name, annotation)}"
            ) from None
        value = converted[name]
        if stored and isinstance(value, float) and not math.isfinite(value):
            raise CliError(
                f"--arg {name}={text!r}: a durable task's arguments are stored as JSON, which "
                f"holds no {text.strip()}; write a finite number, e.g. --arg {name}=0.5"
            )
    return converted


def _annotations(fn: Callable[..., Any]) -> dict[str, Any]:
    """Parameter name -> annotation (``"**"`` for the ``**kwargs`` one; `Any` for a
    parameter without one)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return {}
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # a forward reference the module cannot resolve: read the text
        hints = {}
    found: dict[str, Any] = {}
    for parameter in parameters:
        if parameter.kind is parameter.VAR_POSITIONAL:
            continue
        annotation = hints.get(parameter.name, parameter.annotation)
        if annotation is parameter.empty:
            annotation = Any
        if isinstance(annotation, str):  # unresolved: only the simple names are known
            annotation = _SIMPLE.get(annotation.strip(), Any)
        key = "**" if parameter.kind is parameter.VAR_KEYWORD else parameter.name
        found[key] = annotation
    return found


def _members(annotation: Any) -> tuple[Any, ...] | None:
    """The members of a union (``X | Y``, ``Optional[X]``), None for anything else."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return None


def _convert(text: str, annotation: Any) -> Any:
    """`text` as `annotation`; ValueError when it does not convert."""
    if annotation in (Any, object):
        return parse_arg_value(text)
    members = _members(annotation)
    if members is not None:
        if type(None) in members and text.strip() == "null":
            return None
        for member in (m for m in members if m is not type(None)):
            try:
                return _convert(text, member)
            except ValueError:
                continue
        raise ValueError(text)
    if annotation is str:
        return text
    if annotation is bool:
        word = text.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise ValueError(text)
    if annotation is int:
        return whole_number(text)
    if annotation is float:
        return float(text)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum_value(text, annotation)
    if typing.get_origin(annotation) is typing.Literal:
        for allowed in typing.get_args(annotation):
            if text == str(allowed) or (isinstance(allowed, str) and text == json.dumps(allowed)):
                return allowed
        raise ValueError(text)
    value = json.loads(text, parse_constant=_no_constant)
    if not _shaped(value, annotation):
        raise ValueError(text)
    return value


def _enum_value(text: str, kind: type[enum.Enum]) -> Any:
    """The value of the member of `kind` that `text` names, by its value or its name (a
    task's arguments are JSON: it receives the member's value)."""
    word = text.strip()
    try:
        quoted = json.loads(word)  # '"red"', as JSON
    except ValueError:
        quoted = None
    if isinstance(quoted, bool):  # true is no member's value, even of an int enum
        quoted = None
    for member in kind:
        if word in (str(member.value), member.name) or (
            quoted is not None and quoted == member.value
        ):
            return member.value
    raise ValueError(text)


#: The element types `_shaped` checks inside a list or a dict (one level deep).
_SCALARS: dict[Any, tuple[type, ...]] = {
    int: (int,),
    float: (int, float),
    str: (str,),
    bool: (bool,),
}


def _shaped(value: Any, annotation: Any) -> bool:
    """Whether JSON `value` has the shape of a container `annotation` (``list[int]``,
    ``dict[str, float]``...): a list for a sequence or a set, an object for a mapping, and
    their scalar elements of the type named. Anything else is taken as it is."""
    origin = typing.get_origin(annotation) or annotation
    if not isinstance(origin, type):
        return True
    args = typing.get_args(annotation)
    if issubclass(origin, Mapping):
        if not isinstance(value, dict):
            return False
        return len(args) != 2 or all(_scalar_is(inner, args[1]) for inner in value.values())
    if issubclass(origin, list | tuple | set | frozenset):
        if not isinstance(value, list):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(map(_scalar_is, value, args))
        return not args or all(_scalar_is(inner, args[0]) for inner in value)
    return True


def _scalar_is(value: Any, annotation: Any) -> bool:
    """Whether `value` is of the scalar type `annotation` (True for any other annotation)."""
    kinds = _SCALARS.get(annotation)
    if kinds is None:
        return True
    if isinstance(value, bool) and annotation is not bool:
        return False
    return isinstance(value, kinds)


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _example(name: str, annotation: Any) -> str:
    """An ``--arg`` that converts, for the error message."""
    members = _members(annotation)
    if members is not None:
        usable = [m for m in members if m is not type(None)]
        if usable:
            return _example(name, usable[0]) + (
                f" (or --arg {name}=null)" if len(usable) < len(members) else ""
            )
    if annotation is bool:
        return f"--arg {name}=true (or false, yes, no, 1, 0)"
    if annotation is int:
        return f"a whole number, e.g. --arg {name}=3"
    if annotation is float:
        return f"a number, e.g. --arg {name}=0.5"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        shown = ", ".join(str(member.value) for member in list(annotation)[:10])
        return f"one of its values ({shown}) or a member's name"
    if typing.get_origin(annotation) is typing.Literal:
        shown = ", ".join(str(allowed) for allowed in typing.get_args(annotation)[:10])
        return f"one of {shown}"
    origin = typing.get_origin(annotation) or annotation
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return f"""JSON, e.g. --arg {name}='{{"key": 1}}'"""
    if isinstance(origin, type) and issubclass(origin, list | tuple | set | frozenset):
        return f"JSON, e.g. --arg {name}='[1, 2]'"
    return f"""its value as JSON, e.g. --arg {name}='"text"' or --arg {name}=3"""


def checked_task_id(task_id: str | None) -> str | None:
    """`--task-id` as given, refused when it holds a control character (a newline, a tab,
    an escape sequence): every view shows such an id escaped, so it could never be pasted
    back into a command, and an escape sequence would reach the terminal raw.

    Raises:
        CliError: one line naming the character.
    """
    if task_id is None:
        return None
    for char in task_id:
        if unicodedata.category(char) == "Cc":
            raise CliError(
                f"--task-id {task_id!r} holds the control character {char!r}: an id is "
                "typed and pasted back into commands, so give one of printable characters"
            )
    return task_id
