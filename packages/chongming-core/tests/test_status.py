"""The statuses of guide §9.1 and the transition table of §9.2, checked literally."""

from __future__ import annotations

import pytest

from chongming_core import (
    ACTIVE_STATUSES,
    NON_TERMINAL_STATUSES,
    TERMINAL_STATUSES,
    TRANSITIONS,
    TaskStatus,
)

S = TaskStatus

# Guide §9.2, copied verbatim (as status values) so that any drift in the code shows up here.
SPEC_TABLE: dict[str, set[str]] = {
    "pending": {"blocked", "queued", "skipped", "cancelled", "stopped"},
    "blocked": {"queued", "skipped", "cancelled", "stopped"},
    "queued": {"starting", "paused", "skipped", "stopped", "cancelled"},
    "starting": {"running", "retry_wait", "pausing", "stopping", "failed", "cancelled", "lost"},
    "running": {"succeeded", "failed", "retry_wait", "pausing", "stopping", "cancelled", "lost"},
    "pausing": {"paused", "running", "stopping", "failed", "cancelled", "lost"},
    "paused": {"queued", "running", "stopped", "cancelled"},
    "retry_wait": {"starting", "queued", "paused", "stopped", "failed", "cancelled"},
    "stopping": {"stopped", "succeeded", "failed", "lost"},
    "succeeded": set(),
    "failed": set(),
    "stopped": set(),
    "cancelled": set(),
    "skipped": set(),
    "lost": set(),
}

SPEC_NON_TERMINAL = [
    "pending",
    "blocked",
    "queued",
    "starting",
    "running",
    "pausing",
    "paused",
    "retry_wait",
    "stopping",
]
SPEC_TERMINAL = ["succeeded", "failed", "stopped", "cancelled", "skipped", "lost"]


def test_there_are_exactly_the_fifteen_statuses_of_the_guide() -> None:
    assert len(TaskStatus) == 15
    assert [s.value for s in TaskStatus] == SPEC_NON_TERMINAL + SPEC_TERMINAL


def test_status_is_a_string_enum() -> None:
    assert isinstance(S.RUNNING, str)
    assert S.RUNNING.value == "running"
    assert S("retry_wait") is S.RETRY_WAIT
    assert str(S.STOPPING) == "stopping"


def test_terminal_and_non_terminal_partition_the_statuses() -> None:
    assert {s.value for s in TERMINAL_STATUSES} == set(SPEC_TERMINAL)
    assert {s.value for s in NON_TERMINAL_STATUSES} == set(SPEC_NON_TERMINAL)
    assert TERMINAL_STATUSES.isdisjoint(NON_TERMINAL_STATUSES)
    assert frozenset(TaskStatus) == TERMINAL_STATUSES | NON_TERMINAL_STATUSES


def test_transition_table_is_exactly_the_guide_table() -> None:
    actual = {
        source.value: {target.value for target in targets}
        for source, targets in TRANSITIONS.items()
    }
    assert actual == SPEC_TABLE


def test_every_status_has_an_entry_in_the_table() -> None:
    assert set(TRANSITIONS) == set(TaskStatus)


@pytest.mark.parametrize("status", SPEC_TERMINAL)
def test_terminal_statuses_map_to_an_explicitly_empty_set(status: str) -> None:
    targets = TRANSITIONS[S(status)]
    assert isinstance(targets, frozenset)
    assert targets == frozenset()


@pytest.mark.parametrize("status", SPEC_NON_TERMINAL)
def test_non_terminal_statuses_have_exits(status: str) -> None:
    assert TRANSITIONS[S(status)]


def test_no_status_moves_to_itself_or_back_to_pending() -> None:
    for source, targets in TRANSITIONS.items():
        assert source not in targets
        assert S.PENDING not in targets


def test_the_table_cannot_be_changed_at_runtime() -> None:
    with pytest.raises(TypeError):
        TRANSITIONS[S.SUCCEEDED] = frozenset({S.RUNNING})  # type: ignore[index]
    with pytest.raises(AttributeError):
        TRANSITIONS[S.PENDING].add(S.RUNNING)  # type: ignore[attr-defined]


@pytest.mark.parametrize("status", list(TaskStatus))
def test_is_terminal(status: TaskStatus) -> None:
    assert status.is_terminal is (status.value in SPEC_TERMINAL)


@pytest.mark.parametrize("status", list(TaskStatus))
def test_is_active_means_an_executor_holds_the_task(status: TaskStatus) -> None:
    expected = status.value in {"starting", "running", "pausing", "stopping"}
    assert status.is_active is expected
    assert (status in ACTIVE_STATUSES) is expected


def test_active_statuses_are_the_buffered_ones_of_the_table_rule() -> None:
    # §9.2: starting/running/pausing hold resources, so control actions on them go
    # through an intermediate status; stopping is that intermediate status itself.
    for status in (S.STARTING, S.RUNNING, S.PAUSING):
        assert S.STOPPING in TRANSITIONS[status]
        assert S.STOPPED not in TRANSITIONS[status]
    for status in (S.PENDING, S.BLOCKED, S.QUEUED, S.PAUSED, S.RETRY_WAIT):
        assert not status.is_active
        assert S.STOPPED in TRANSITIONS[status]
        assert S.STOPPING not in TRANSITIONS[status]
