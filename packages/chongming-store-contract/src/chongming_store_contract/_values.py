"""Contract cases: values no store can keep are refused by every store alike, before anything
is written; values JSON only renames come back as every store hands them back.

The runtime asks `TaskStore.stored_outcome` before it tells anyone a task succeeded, so
the store's answer and the store's writes must agree: an outcome it accepts is written,
and read back as the value it returned; one it refuses is refused by every write.
The same hostile values (`hostile_outcomes`, `hostile_progress`) drive the runtime's
tests over every store.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from chongming_core import Progress, SnapshotWrite, StoreError, TaskStatus, TouchUpdate
from chongming_core.backend import MAX_DEPTH, MAX_INT_DIGITS
from chongming_store_contract._base import ContractBase
from chongming_store_contract._builders import next_version
from chongming_store_contract._checks import expect, expect_equal, present, raises, same_json

__all__ = [
    "ValuesContract",
    "hostile_outcomes",
    "hostile_progress",
    "nested",
    "renamed_outcomes",
]

_S = TaskStatus
#: A lone surrogate: bytes that were not UTF-8, decoded leniently (a file name).
_SURROGATE = "caf\udce9"


def nested(depth: int) -> list[Any]:
    """A list nested `depth` levels deep."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _cycle() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def hostile_outcomes() -> dict[str, Any]:
    """Outcomes no store can keep, by name (new objects at every call)."""
    return {
        "an int of 5001 digits": 10**5000,
        "a nested int one digit too long": {"rows": [1, -(10**MAX_INT_DIGITS)]},
        "NaN": float("nan"),
        "an infinity in a list": [1.0, float("inf")],
        "a negative infinity in a dict": {"x": float("-inf")},
        "a set": {1, 2},
        "bytes": {"blob": b"\x00\x01"},
        "an object": [object()],
        "a lone surrogate": _SURROGATE,
        "a lone surrogate in a key": {_SURROGATE: 1},
        "an int key": {1: "a"},
        "a bool key": {"a": {True: 1}},
        "a None key": {None: 1},
        "a tuple key": {(1, 2): "a"},
        "keys that collide as text": {1: "a", "1": "b"},
        "nesting too deep": nested(MAX_DEPTH + 1),
        "a circular list": _cycle(),
    }


class _Colour(enum.IntEnum):
    RED = 1


class _Mode(enum.StrEnum):
    FAST = "fast"


class _Ratio(float):
    pass


class _Point(NamedTuple):
    x: int
    y: int


def renamed_outcomes() -> dict[str, tuple[Any, Any]]:
    """Outcomes every store keeps, by name: (the value returned, the value read back)."""
    deep = nested(MAX_DEPTH)
    longest = 10**MAX_INT_DIGITS - 1
    return {
        "a tuple": ((1, "x"), [1, "x"]),
        "nested tuples": ({"pair": (1, (2, 3))}, {"pair": [1, [2, 3]]}),
        "a named tuple": (_Point(1, 2), [1, 2]),
        "an IntEnum member": (_Colour.RED, 1),
        "StrEnum members as a value and a key": (
            [_Mode.FAST, {_Mode.FAST: _Colour.RED}],
            ["fast", {"fast": 1}],
        ),
        "a float subclass": ([_Ratio(0.5)], [0.5]),
        "an OrderedDict": (collections.OrderedDict(b=1, a=2), {"b": 1, "a": 2}),
        "an int of 4300 digits": ([longest, -longest], [longest, -longest]),
        "nesting at the limit": (deep, nested(MAX_DEPTH)),
        "text with a NUL": ({"k": "a\x00b"}, {"k": "a\x00b"}),
        "brackets in text": (["[" * (MAX_DEPTH + 5)], ["[" * (MAX_DEPTH + 5)]),
    }


def hostile_progress() -> dict[str, Progress]:
    """Progress no store can keep, by name."""
    return {
        "an infinite done": Progress(done=float("inf")),
        "a NaN total": Progress(done=1, total=float("nan")),
        "a negative infinite total": Progress(done=1, total=float("-inf")),
        "a done beyond a float": Progress(done=10**400),
        "a total of 5001 digits": Progress(done=1, total=10**5000),
        "a bool done": Progress(done=True),
        "a text done": Progress(done="3"),  # type: ignore[arg-type]
        "a bytes unit": Progress(done=1, unit=b"rows"),  # type: ignore[arg-type]
        "a number as the message": Progress(done=1, message=3),  # type: ignore[arg-type]
        "a lone surrogate in the message": Progress(done=1, message=_SURROGATE),
    }


class ValuesContract(ContractBase):
    """`stored_outcome` and the writes agree; hostile outcomes and progress are refused."""

    def _refused_whole(self, name: str, call: Callable[[], object], what: str) -> None:
        """`call` raises `StoreError` and the store is left as it was."""
        before = (self.store.query(), self.store.history("kept"))
        with raises(StoreError, f"{what} holding {name}"):
            call()
        after = (self.store.query(), self.store.history("kept"))
        expect_equal(after, before, f"the store after {what} holding {name} was refused")

    def test_an_outcome_no_store_can_keep_is_refused_by_the_check_and_by_every_write(
        self,
    ) -> None:
        kept, _ = self.stored("kept", _S.RUNNING)
        following, more = next_version(kept, clock=self.clock)
        fresh, chain = self.task("fresh", _S.SUCCEEDED)
        for name, value in hostile_outcomes().items():
            with raises(ValueError, f"stored_outcome() of {name}") as caught:
                self.store.stored_outcome(value)
            expect(str(caught.value).strip(), f"stored_outcome() of {name} must say why")
            bad = fresh.evolve(outcome=value)
            self._refused_whole(name, partial(self.store.create, bad, chain), "create()")
            save = partial(
                self.store.save,
                following.evolve(outcome=value),
                expect_version=kept.status_version,
                transitions=more,
            )
            self._refused_whole(name, save, "save()")
            batch = [
                SnapshotWrite(fresh.evolve(task_id="good"), None, ()),
                SnapshotWrite(bad, None, chain),
            ]
            self._refused_whole(name, partial(self.store.save_many, batch), "save_many()")

    def test_an_outcome_json_renames_comes_back_as_stored_outcome_said(self) -> None:
        other = self.other_handle()
        for index, (name, (value, read_back)) in enumerate(renamed_outcomes().items()):
            kept = self.store.stored_outcome(value)
            expect(same_json(kept, read_back), f"stored_outcome() of {name}: found {kept!r:.200}")
            snapshot, chain = self.task(f"t{index}", _S.SUCCEEDED)
            self.store.create(snapshot.evolve(outcome=value), chain)
            for reader, handle in (("get()", self.store), ("another handle's get()", other)):
                found = present(handle.get(f"t{index}"), f"task holding {name}").outcome
                expect(
                    same_json(found, read_back),
                    f"{reader} of an outcome holding {name}: expected {read_back!r:.200}, "
                    f"found {found!r:.200}",
                )

    def test_progress_no_store_can_keep_is_refused_by_touch_and_by_writes(self) -> None:
        kept, _ = self.stored("kept", _S.RUNNING)
        following, more = next_version(kept, clock=self.clock)
        fresh, chain = self.task("fresh", _S.RUNNING)
        for name, progress in hostile_progress().items():
            touch = partial(self.store.touch, "kept", progress=progress)
            self._refused_whole(name, touch, "touch()")
            updates = [TouchUpdate("fresh-none", pid=1), TouchUpdate("kept", progress=progress)]
            self._refused_whole(name, partial(self.store.touch_many, updates), "touch_many()")
            create = partial(self.store.create, fresh.evolve(progress=progress), chain)
            self._refused_whole(name, create, "create()")
            save = partial(
                self.store.save,
                following.evolve(progress=progress),
                expect_version=kept.status_version,
                transitions=more,
            )
            self._refused_whole(name, save, "save()")
