"""Durable work in core: `durable_arguments`, the claim rules, worker records, wake-ups."""

from __future__ import annotations

import enum
import re
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import PurePosixPath

import pytest

from chongming_core import (
    ClaimRequest,
    ClaimStart,
    ConfigurationError,
    InMemoryTaskStore,
    StartPlan,
    StateMachine,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    durable_arguments,
)
from chongming_core.backend import (
    MAX_DEPTH,
    ChangeSignals,
    WakeUp,
    arguments_problem,
    choose_claims,
    claimable,
    holds_fleet_slot,
    wakes_workers,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 2


# ---------------------------------------------------------------------- arguments
def test_durable_arguments_keep_json_and_turn_tuples_into_lists() -> None:
    stored = durable_arguments(["a.csv", (1, 2.5)], {"opts": {"deep": [None, True]}})
    assert stored == {"args": ["a.csv", [1, 2.5]], "kwargs": {"opts": {"deep": [None, True]}}}


def test_durable_arguments_are_a_copy_the_caller_cannot_change_later() -> None:
    rows = [{"id": 1, "tags": ["a"]}]
    options = {"limit": 10, "nested": {"deep": [1.5, None, True, -(2**62)]}}
    stored = durable_arguments([rows, "x"], {"options": options})
    assert stored == {"args": [rows, "x"], "kwargs": {"options": options}}
    rows[0]["tags"].append("b")  # type: ignore[attr-defined]
    options["nested"]["deep"].clear()  # type: ignore[index]
    assert stored["args"][0] == [{"id": 1, "tags": ["a"]}]
    assert stored["kwargs"]["options"]["nested"]["deep"] == [1.5, None, True, -(2**62)]
    # what JSON would change is taken the long way: its round trip, as every store keeps it
    assert durable_arguments([], {"t": ("é", 2**70 // 2**10)}) == {
        "args": [],
        "kwargs": {"t": ["é", 2**60]},
    }


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            [],
            {"path": PurePosixPath("/x")},
            "argument 'path' of type PurePosixPath is not JSON: pass str(path)",
        ),
        (
            [PurePosixPath("/x")],
            {},
            "argument 0 of type PurePosixPath is not JSON: pass str(args[0])",
        ),
        ([], {"when": date(2026, 1, 1)}, "of type date is not JSON: pass when.isoformat()"),
        ([], {"ids": {1, 2}}, "argument 'ids' of type set is not JSON: pass sorted(ids)"),
        ([], {"raw": b"x"}, "of type bytes is not JSON: pass text (raw.decode() or base64)"),
        ([], {"n": Decimal("1.5")}, "pass str(n) or float(n)"),
        ([], {"c": Color.RED}, "argument 'c' of type Color is not JSON: pass c.value"),
        ([], {"level": Level.HIGH}, "of type Level is not JSON: pass level.value"),
        ([], {"u": uuid.UUID(int=1)}, "pass str(u)"),
        ([float("nan")], {}, "argument 0 is nan, which JSON cannot hold"),
        ([], {"d": {"a": [1, {2: 3}]}}, "argument 'd'['a'][1] has the key 2 of type int"),
        ([], {"o": object()}, "argument 'o' of type object is not JSON: pass plain JSON data"),
    ],
)
def test_durable_arguments_name_the_argument_its_type_and_the_way_out(
    args: list[object], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        durable_arguments(args, kwargs)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_value_nested_deep_is_named_by_the_start_and_end_of_its_path() -> None:
    """The path of a value thousands of levels deep is thousands of characters long: the
    message shows its start and its end, and stays one short line."""
    deep: list[object] = [1]
    for _ in range(3000):
        deep = [deep]
    bad: list[object] = [object()]
    for _ in range(150):
        bad = [bad]
    for args, said in ((deep, "levels deep"), (bad, "of type object is not JSON")):
        with pytest.raises(ConfigurationError) as caught:
            durable_arguments([args], {})
        message = str(caught.value)
        assert said in message
        assert message.startswith("argument 0[0][0]")
        assert "...0][0]" in message
        assert len(message) < 300


def test_arguments_problem_checks_what_a_store_keeps() -> None:
    assert arguments_problem(None) is None
    assert arguments_problem({"args": [1], "kwargs": {}}) is None
    assert "JSON object" in (arguments_problem(["a"]) or "")
    assert "of type set" in (arguments_problem({"args": [{1}]}) or "")


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"args": [float("nan")]}, "JSON cannot hold"),
        ({"args": [float("inf")], "kwargs": {}}, "JSON cannot hold"),
        ({"args": [1 << 20_000]}, "digits"),
        ({"args": ["\ud800"]}, "surrogate"),
        ({"args": [Level.HIGH]}, "of type Level"),
        ({"args": [True, Color.RED]}, "of type Color"),
        ({"kwargs": {1: "a"}}, "key 1"),
        ({"args": [[[]] * 2, {"x": {"y": [b"raw"]}}]}, "of type bytes"),
        ({"deep": [[]] * 1 + [_nested(MAX_DEPTH + 5)]}, "levels"),
    ],
)
def test_arguments_problem_finds_what_hides_inside_plain_looking_arguments(
    value: dict[str, object], words: str
) -> None:
    # a store checks arguments at every save, first with a quick look at plain JSON: what
    # the quick look cannot vouch for is looked at closely
    assert words in (arguments_problem(value) or "no problem found")


def test_arguments_problem_passes_plain_json_of_every_shape() -> None:
    values: tuple[dict[str, object], ...] = (
        {},
        {"args": [], "kwargs": {}},
        {"args": [None, True, 0, -(1 << 62), 2.5, "ascii", [], {}], "kwargs": {"k": [1]}},
        {"args": [_nested(40)]},  # deeper than the quick look goes, within MAX_DEPTH
        {"args": ["中文", 1 << 70], "kwargs": {"键": "值"}},
        {"args": [(1, 2)]},  # a tuple is stored as a list
    )
    for value in values:
        assert arguments_problem(value) is None, value


def test_state_machine_create_checks_and_keeps_the_durable_fields() -> None:
    m = StateMachine.create("t", "job", durable=True, arguments={"args": [(1, 2)]}, run_at=T0)
    assert (m.snapshot.durable, m.snapshot.arguments, m.snapshot.run_at) == (
        True,
        {"args": [[1, 2]]},
        T0,
    )
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        StateMachine.create("t", "job", run_at=datetime(2026, 1, 1))
    with pytest.raises(ConfigurationError, match="of type set"):
        StateMachine.create("t", "job", arguments={"args": [{1}]})
    with pytest.raises(ConfigurationError, match="durable must be"):
        StateMachine.create("t", "job", durable=1)  # type: ignore[arg-type]


def test_old_documents_read_with_the_durable_defaults() -> None:
    document = TaskSnapshot(task_id="t", name="n").to_dict()
    for key in ("durable", "arguments", "run_at"):
        del document[key]
    snapshot = TaskSnapshot.from_dict(document)
    assert (snapshot.durable, snapshot.arguments, snapshot.run_at) == (False, None, None)
    with pytest.raises(ValueError, match="arguments"):
        TaskSnapshot.from_dict({**document, "arguments": [1]})


def test_evolve_keeps_the_durable_fields() -> None:
    snap = TaskSnapshot(task_id="t", name="n", durable=True, arguments={"args": []}, run_at=T0)
    moved = snap.evolve(status=TaskStatus.QUEUED)
    assert (moved.durable, moved.arguments, moved.run_at) == (True, {"args": []}, T0)
    assert snap.evolve(run_at=None).run_at is None


# ---------------------------------------------------------------------- claim rules
def _queued(task_id: str, **changes: object) -> TaskSnapshot:
    base = TaskSnapshot(task_id=task_id, name="job", status=TaskStatus.QUEUED, durable=True)
    return base.evolve(**changes)


def _request(**changes: object) -> ClaimRequest:
    values: dict[str, object] = {
        "owner": "w",
        "names": frozenset({"job"}),
        "buckets": None,
        "limit": 10,
        "now": T0,
        "lease_until": T0 + timedelta(seconds=30),
    }
    values.update(changes)
    return ClaimRequest(**values)  # type: ignore[arg-type]


def test_claimable_needs_durable_queued_served_owned_due_and_unheld() -> None:
    request = _request(buckets=frozenset({1}))
    assert claimable(_queued("a", bucket=1), request)
    assert not claimable(_queued("a", bucket=2), request)
    assert not claimable(_queued("a", bucket=1, durable=False), request)
    assert not claimable(_queued("a", bucket=1, name="other"), request)
    assert not claimable(_queued("a", bucket=1, status=TaskStatus.RUNNING), request)
    assert not claimable(_queued("a", bucket=1, run_at=T0 + timedelta(seconds=1)), request)
    assert claimable(_queued("a", bucket=1, run_at=T0), request)
    held = _queued("a", bucket=1, lease_owner="x", lease_until=T0 + timedelta(seconds=1))
    assert not claimable(held, request)
    assert claimable(held.evolve(lease_until=T0), request)  # a lease ending now has ended


def test_choose_claims_applies_every_room() -> None:
    tasks = [
        _queued("g1", tags=frozenset({"gpu"}), bucket=1),
        _queued("g2", tags=frozenset({"gpu"}), bucket=1),
        _queued("c1", tags=frozenset({"cpu"}), bucket=1),
        _queued("c2", tags=frozenset({"cpu"}), bucket=2),
        _queued("p", bucket=2),
    ]
    chosen = choose_claims(tasks, _request(tag_room={"gpu": 1}, bucket_room=2), {})
    assert [s.task_id for s in chosen] == ["g1", "c1", "c2", "p"]
    fleet = _request(fleet_limits={"gpu": 3, "cpu": 1})
    assert [s.task_id for s in choose_claims(tasks, fleet, {"gpu": 2})] == ["g1", "c1", "p"]
    assert choose_claims(tasks, _request(limit=0), {}) == []
    assert [s.task_id for s in choose_claims(tasks, _request(limit=2), {})] == ["g1", "g2"]


def test_holds_fleet_slot() -> None:
    now = T0
    assert holds_fleet_slot(_queued("a", status=TaskStatus.RUNNING), now)
    assert holds_fleet_slot(_queued("a", status=TaskStatus.PAUSED, paused_in_place=True), now)
    assert not holds_fleet_slot(_queued("a", status=TaskStatus.PAUSED), now)
    assert not holds_fleet_slot(_queued("a"), now)
    live = _queued("a", lease_owner="w", lease_until=now + timedelta(seconds=1))
    assert holds_fleet_slot(live, now)
    assert not holds_fleet_slot(live, now + timedelta(seconds=1))
    assert not holds_fleet_slot(_queued("a", status=TaskStatus.RUNNING, durable=False), now)
    assert wakes_workers(_queued("a"))
    assert not wakes_workers(live)


# ---------------------------------------------------------------------- wake-ups
def test_wake_up_is_consumed_by_one_wait() -> None:
    flag = WakeUp()
    assert not flag.wait(0)
    flag.set()
    assert flag.wait(0)
    assert not flag.wait(0)
    with pytest.raises(ConfigurationError, match="timeout"):
        flag.wait(-1)


def test_change_signals_wake_the_waiters_of_one_task() -> None:
    signals = ChangeSignals()
    assert signals.wait("a", 0, lambda: True)
    assert not signals.wait("a", 0)
    woken: list[bool] = []
    waiting = threading.Event()

    def finished() -> bool:
        waiting.set()
        return False

    waiter = threading.Thread(target=lambda: woken.append(signals.wait("a", 30, finished)))
    waiter.start()
    assert waiting.wait(10)
    signals.notify(["b"])
    signals.notify(["a"])
    waiter.join(30)
    assert woken == [True]


def test_a_store_without_durable_work_says_so_in_one_line() -> None:
    store = InMemoryTaskStore()
    assert not TaskStore.supports_durable_work
    for call in (  # the base class's methods, which a store without durable work inherits
        lambda: TaskStore.claim_tasks(store, _request()),
        lambda: TaskStore.workers(store),
        lambda: TaskStore.wait_for_work(store, 0),
        lambda: TaskStore.release_claim(store, "t", "w", 1),
    ):
        with pytest.raises(ConfigurationError, match="does not support durable tasks") as caught:
            call()
        assert "\n" not in str(caught.value)


# ---------------------------------------------------------------- ClaimStart
def _claimed(attempt: int = 0, max_attempts: int = 1) -> TaskSnapshot:
    machine = StateMachine.create("t1", "load", max_attempts=max_attempts, durable=True)
    machine.mark_queued()
    return machine.snapshot.evolve(
        attempt=attempt, lease_owner="w1", lease_until=T0 + timedelta(seconds=30)
    )


def test_a_claim_start_writes_the_next_attempt_as_the_state_machine_does() -> None:
    start = ClaimStart(executor="process", plans={"load": StartPlan(3, "载入")})
    leased = _claimed()
    write = start.write(leased, T0)
    assert write is not None
    s = write.snapshot
    assert (s.status, s.status_version, s.attempt, s.max_attempts) == (
        TaskStatus.STARTING,
        leased.status_version + 1,
        1,
        3,
    )
    assert (s.description, s.executor, s.started_at, s.updated_at) == ("载入", "process", T0, T0)
    assert (s.lease_owner, s.lease_until) == ("w1", leased.lease_until)
    assert write.expect_version == leased.status_version
    (transition,) = write.transitions
    assert transition == ClaimStart.transition_of(s)
    assert (transition.from_status, transition.to_status, transition.actor) == (
        TaskStatus.QUEUED,
        TaskStatus.STARTING,
        "w1",
    )


def test_a_claim_start_never_refuses_a_task_whose_budget_is_spent() -> None:
    start = ClaimStart(executor="thread", plans={"load": StartPlan(1)})
    write = start.write(_claimed(attempt=2, max_attempts=2), T0)
    assert write is not None
    assert (write.snapshot.attempt, write.snapshot.max_attempts) == (3, 3)


def test_a_claim_start_leaves_a_name_without_a_plan_and_an_unleased_task() -> None:
    start = ClaimStart(executor="thread", plans={"other": StartPlan(1)})
    assert start.write(_claimed(), T0) is None
    mine = ClaimStart(executor="thread", plans={"load": StartPlan(1)})
    assert mine.write(_claimed().evolve(lease_owner=None), T0) is None


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: StartPlan(0), "max_attempts must be an integer >= 1, got 0"),
        (lambda: StartPlan(True), "max_attempts must be an integer >= 1, got True"),
        (lambda: StartPlan(1, 5), "description must be a str or None, got 5"),  # type: ignore[arg-type]
        (lambda: ClaimStart("", {}), "executor must be a non-empty str"),
        (lambda: ClaimStart("thread", {"x": 1}), "plans['x'] must be a StartPlan, got 1"),  # type: ignore[dict-item]
        (lambda: ClaimStart("thread", ["x"]), "plans must be a mapping of task name"),  # type: ignore[arg-type]
    ],
)
def test_a_claim_start_refuses_what_it_cannot_write(
    make: Callable[[], object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        make()


def test_transition_of_refuses_a_task_no_claim_started() -> None:
    with pytest.raises(ConfigurationError, match="it was not started by a claim"):
        ClaimStart.transition_of(_claimed())
