"""Rows a store holds but cannot decode: `UnreadableRow`, and the results that carry them.

One damaged row (a document that is not JSON, a status no version of chongming
wrote, a time that does not parse) must not blind every reader of the store. A
store decodes each row on its own: a listing returns what it could read and names
what it could not (`Listing.unreadable`, `Counts.unreadable`), and reading the one
task directly raises `StoreError` saying what is wrong with it.

`Listing` is a `list` and `Counts` a `dict`, so code written against the plain
types (and stores that return them) keeps working; `unreadable_in` reads the rows a
result names, or none for a plain list or dict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from chongming_core._errors import StoreError

__all__ = [
    "REPAIR_ADVICE",
    "Counts",
    "Listing",
    "UnreadableRow",
    "decode_row",
    "stored_id",
    "unreadable_in",
]

_T = TypeVar("_T")
_K = TypeVar("_K")

#: What an operator can do about a damaged row (the rest of the store is unaffected).
REPAIR_ADVICE = (
    "its row in the store is damaged (written by another program or by hand): restore it "
    "from a backup, or delete that task's rows with the database's own tools; the other "
    "tasks are not affected"
)


@dataclass(frozen=True, slots=True)
class UnreadableRow:
    """A stored row that cannot be decoded: whose it is and what is wrong with it.

    Attributes:
        task_id: the task the row belongs to (as stored; shown with ``repr`` when the
            stored id is not text).
        problem: what is wrong, e.g. ``status 'zombie' is not a status``.
        part: None for the task's own row; else which part of its record,
            e.g. ``history entry 3``.

    Example::

        for row in unreadable_in(store.query()):
            print(row.message)   # task 'x' cannot be read: status 'zombie' is not a status
    """

    task_id: str
    problem: str
    part: str | None = None

    @property
    def message(self) -> str:
        """One line naming the row and what is wrong."""
        if self.part is None:
            return f"task {self.task_id!r} cannot be read: {self.problem}"
        return f"{self.part} of task {self.task_id!r} cannot be read: {self.problem}"

    def to_dict(self) -> dict[str, str | None]:
        """A JSON-ready mapping: ``task_id``, ``part``, ``problem``."""
        return {"task_id": self.task_id, "part": self.part, "problem": self.problem}

    def error(self, where: str) -> StoreError:
        """The `StoreError` of reading this row directly (`where` names the store)."""
        return StoreError(f"{where}: {self.message}; {REPAIR_ADVICE}", task_id=self.task_id)


class Listing(list[_T]):
    """A list of the records a store could read, plus the rows it could not.

    Example::

        found = store.query()            # a Listing: use it as the list it is
        found.unreadable                 # (UnreadableRow(...), ...) or ()
    """

    __slots__ = ("unreadable",)

    def __init__(self, items: Iterable[_T] = (), unreadable: Iterable[UnreadableRow] = ()) -> None:
        super().__init__(items)
        self.unreadable: tuple[UnreadableRow, ...] = tuple(unreadable)

    @classmethod
    def split(cls, decoded: Iterable[_T | UnreadableRow]) -> Listing[_T]:
        """The records of `decoded`, with every `UnreadableRow` among them set aside."""
        items: list[_T] = []
        bad: list[UnreadableRow] = []
        for item in decoded:
            if isinstance(item, UnreadableRow):
                bad.append(item)
            else:
                items.append(item)
        return cls(items, bad)


class Counts(dict[_K, int]):
    """Counts per key (status, bucket), plus the rows whose key could not be read.

    Example::

        counts = store.status_counts()   # a Counts: use it as the dict it is
        counts.unreadable                # rows counted under no status
    """

    __slots__ = ("unreadable",)

    def __init__(
        self, counts: Mapping[_K, int] | None = None, unreadable: Iterable[UnreadableRow] = ()
    ) -> None:
        super().__init__(counts or {})
        self.unreadable: tuple[UnreadableRow, ...] = tuple(unreadable)


def unreadable_in(result: object) -> tuple[UnreadableRow, ...]:
    """The rows `result` (a `Listing`, `Counts` or a plain list or dict) says it could not
    read: none for a plain result, such as one from a store that does not name them."""
    found = getattr(result, "unreadable", ())
    return tuple(row for row in found if isinstance(row, UnreadableRow))


def stored_id(value: object) -> str:
    """A stored task id as text (a damaged row may hold another type there)."""
    return value if isinstance(value, str) else repr(value)


def decode_row(
    task_id: object, decode: Callable[[], _T], *, part: str | None = None
) -> _T | UnreadableRow:
    """`decode()`, or the `UnreadableRow` saying why the row of `task_id` cannot be read.

    The decoders check every field and raise `ValueError` naming it; the other errors
    are caught too because the row is arbitrary data, and whatever it makes a decoder
    trip over, the answer is the same: this row cannot be read, the next one may be.
    """
    try:
        return decode()
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
        problem = str(exc) or type(exc).__name__
        return UnreadableRow(stored_id(task_id), problem, part)
