"""What a body returns becomes the outcome the store keeps, decided by the store (D68, D69)."""

from __future__ import annotations

from typing import Any

import pytest

from chongming_core import (
    ConfigurationError,
    FailureKind,
    InMemoryTaskStore,
    RetryPolicy,
    TaskStatus,
    TaskStore,
)
from chongming_runtime import InlineExecutor, TaskRun
from chongming_runtime.controller._controller import Controller
from chongming_runtime.testing import Closer

S = TaskStatus
WAIT = 10.0


class SmallStore(InMemoryTaskStore):
    """A store with a limit of its own: outcomes of at most 16 characters of text."""

    def stored_outcome(self, value: Any) -> Any:
        kept = super().stored_outcome(value)
        if isinstance(value, str) and len(value) > 16:
            raise ValueError(f"the result is {len(value)} characters, more than 16")
        return kept


class BrokenCheckStore(InMemoryTaskStore):
    def stored_outcome(self, value: Any) -> Any:
        raise RuntimeError("the size table is unreadable")


@pytest.fixture
def make_controller(closer: Closer) -> Any:
    def make(store: Any) -> Controller:
        controller = closer.controller(store=store)
        controller.register("give", lambda ctx, value: value)
        return controller

    return make


def test_the_controller_asks_its_store_what_it_can_keep(make_controller: Any) -> None:
    store = SmallStore()
    controller = make_controller(store)
    long = controller.submit("give", "x" * 17)
    outcome = long.wait(WAIT)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.RESULT_INVALID
    assert "the result is 17 characters, more than 16" in outcome.failure.message
    stored = store.get(long.task_id)
    assert stored is not None
    assert (stored.status, stored.failure) == (S.FAILED, outcome.failure)
    assert controller.submit("give", "short").wait(WAIT).value == "short"


def test_a_store_whose_check_breaks_fails_the_attempt_instead_of_telling_success(
    make_controller: Any,
) -> None:
    store = BrokenCheckStore()
    run = make_controller(store).submit("give", 1)
    outcome = run.wait(WAIT)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.RESULT_INVALID
    assert "the store could not check it (RuntimeError: the size table is unreadable)" in (
        outcome.failure.message
    )
    stored = store.get(run.task_id)
    assert stored is not None
    assert stored.status is S.FAILED


def test_the_outcome_told_is_the_one_a_fresh_reader_of_the_store_sees(
    make_controller: Any,
) -> None:
    store: TaskStore = InMemoryTaskStore()
    run = make_controller(store).submit("give", {"pair": (1, 2)})
    told = run.wait(WAIT)
    stored = store.get(run.task_id)
    assert stored is not None
    assert told.value == stored.outcome == {"pair": [1, 2]}
    assert type(told.value["pair"]) is type(stored.outcome["pair"]) is list


def test_a_run_of_its_own_applies_the_rules_every_store_shares() -> None:
    run = TaskRun(lambda ctx: (1, "x"), executor=InlineExecutor())
    run.start()
    assert run.wait(WAIT).value == [1, "x"]


def test_an_int_too_long_for_text_is_described_in_the_refusal_not_raised_from_it(
    make_controller: Any,
) -> None:
    """The message formatted the int itself, which raises ValueError past 4300 digits."""
    controller = make_controller(InMemoryTaskStore())
    with pytest.raises(
        ConfigurationError, match="priority is out of range \\(an int of 5001 digits\\)"
    ):
        controller.submit("give", 1, priority=10**5000)
    with pytest.raises(ConfigurationError, match="max_attempts must be below 2"):
        controller.submit("give", 1, retry=RetryPolicy(max_attempts=2**63))
