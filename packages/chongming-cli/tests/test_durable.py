"""The pieces of ``submit`` and ``worker``: durations, moments, fleet limits, reserved
``--arg`` names."""

from __future__ import annotations

import io
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from chongming_cli import CliError
from chongming_cli._args import ENQUEUE_ARG_NAMES, split_args
from chongming_cli._commands import Console
from chongming_cli._durable import _limits, _Signals, _wait, ended_summary
from chongming_cli._parser import build_parser
from chongming_cli._session import NodeOptions
from chongming_cli._stores import StoreLocation
from chongming_cli._when import parse_duration, parse_moment
from chongming_core import FakeClock, InMemoryTaskStore, TaskSnapshot, TaskStatus, TaskStore
from chongming_runtime import Controller, TaskOutcome

NOW = datetime(2026, 10, 2, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30.0), ("5m", 300.0), ("1h", 3600.0), ("1.5s", 1.5), ("250ms", 0.25), ("2", 2.0),
     (" 2d ", 172800.0), ("0s", 0.0), (".5s", 0.5)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "-1s", "1x", "1 h 2", "nan", "inf", "1e3s"])
def test_bad_durations_say_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 30s, 5m, 1h, 1\.5s"):
        parse_duration(text)


def test_a_duration_is_refused_by_the_parser_in_one_line() -> None:
    with pytest.raises(CliError, match="not a duration"):
        build_parser().parse_args(["submit", "x", "--delay", "soon"])


def test_delay_and_at_exclude_each_other() -> None:
    with pytest.raises(CliError, match="not allowed with"):
        build_parser().parse_args(["submit", "x", "--delay", "1s", "--at", "2026-10-02T08:00Z"])


def test_moments_with_an_offset_are_kept() -> None:
    moment, local = parse_moment("2026-10-02T08:00:00+08:00")
    assert not local
    assert moment == datetime(2026, 10, 2, 0, 0, tzinfo=UTC)
    assert parse_moment("2026-10-02 08:00Z") == (datetime(2026, 10, 2, 8, 0, tzinfo=UTC), False)


def test_a_moment_without_offset_is_local_time_and_said_so() -> None:
    moment, local = parse_moment("2026-10-02T08:00")
    assert local
    assert moment.utcoffset() is not None
    assert moment.replace(tzinfo=None) == datetime(2026, 10, 2, 8, 0)


@pytest.mark.parametrize(
    "text", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00", "0001-01-01T00:00:00"]
)
def test_a_moment_no_store_keeps_is_refused(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Shanghai")  # the last one: local, 8 hours ahead of UTC
    time.tzset()
    try:
        with pytest.raises(ValueError, match="outside the years 1 to 9999 in UTC"):
            parse_moment(text)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_bad_moment_gives_an_example() -> None:
    with pytest.raises(ValueError, match=r"ISO-8601 time; write e\.g\. 2026-10-02T08:00:00"):
        parse_moment("tomorrow")


def test_fleet_limits() -> None:
    assert _limits(["gpu=4", " db =2"]) == {"gpu": 4, "db": 2}
    for bad, said in (("gpu", "TAG=N"), ("=3", "TAG=N"), ("gpu=x", "whole number"),
                      ("gpu=-1", ">= 0")):  # fmt: skip
        with pytest.raises(CliError, match=said):
            _limits([bad])
    with pytest.raises(CliError, match="given twice"):
        _limits(["gpu=1", "gpu=2"])


#: The node options of a console on ``--db t.db``.
NODE = NodeOptions(
    StoreLocation(url="sqlite:///t.db", label="t.db", source="--db"),
    num_buckets=None,
    owned_buckets=None,
    owner=None,
)


def _hold(store: TaskStore, task_id: str, owner: str) -> None:
    """Move queued `task_id` to running under `owner`'s lease (30 s from NOW), as a worker
    that claimed it would."""
    queued = store.get(task_id)
    assert queued is not None
    held = queued.evolve(
        status=TaskStatus.RUNNING, lease_owner=owner, lease_until=NOW + timedelta(seconds=30)
    )
    store.save(held, expect_version=queued.status_version)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def console(clock: FakeClock) -> Iterator[Controller]:
    """A console's controller on a store in memory, at NOW."""
    with Controller(store=InMemoryTaskStore(), owner="console", clock=clock) as made:
        yield made


def test_a_wait_given_up_says_what_the_store_holds_of_the_task(
    monkeypatch: pytest.MonkeyPatch, console: Controller
) -> None:
    store = console.store
    task_id = console.enqueue("add", 1)

    def interrupted(task_id: str, timeout: float | None = None) -> TaskOutcome:
        raise KeyboardInterrupt

    monkeypatch.setattr(console, "wait", interrupted)
    quiet = Console(out=io.StringIO(), err=io.StringIO(), environ={})
    with pytest.raises(CliError) as caught:
        _wait(console, task_id, None, NODE, quiet)
    said = str(caught.value)
    assert f"task '{task_id}' is queued in the store, waiting for a worker" in said
    assert "nothing was changed" in said
    assert "still runs" not in said
    _hold(store, task_id, "w-1")
    with pytest.raises(CliError, match="is running in the store, held by 'w-1'"):
        _wait(console, task_id, None, NODE, quiet)


def test_a_wait_says_once_that_the_holder_stopped_renewing_its_lease(
    monkeypatch: pytest.MonkeyPatch, console: Controller, clock: FakeClock
) -> None:
    store = console.store
    _hold(store, task_id := console.enqueue("add", 1), "w-1")
    polls: list[float | None] = []

    def polled(task_id: str, timeout: float | None = None) -> TaskOutcome:
        polls.append(timeout)
        if len(polls) == 2:
            clock.advance(40)  # its lease ran out 10 s ago: nobody renews it
        if len(polls) == 5:
            raise KeyboardInterrupt
        raise TimeoutError

    monkeypatch.setattr(console, "wait", polled)
    err = io.StringIO()
    with pytest.raises(CliError, match="interrupted: stopped waiting"):
        _wait(console, task_id, None, NODE, Console(out=io.StringIO(), err=err, environ={}))
    notes = err.getvalue().splitlines()
    assert notes == [
        f"task '{task_id}' is running, but its holder 'w-1' stopped renewing its lease "
        "10.0s ago: nobody ends it until chongming-task --db t.db reconcile marks it lost "
        "(then `retry` queues it again); still waiting"
    ]


@pytest.mark.parametrize("name", sorted(ENQUEUE_ARG_NAMES))
def test_enqueue_options_are_not_task_arguments(name: str) -> None:
    with pytest.raises(CliError, match="not a task argument"):
        split_args([f"{name}=1"], reserved=ENQUEUE_ARG_NAMES)


# ==================================================================== the worker's last line
def _outcome(task_id: str, status: TaskStatus) -> TaskOutcome:
    snapshot = TaskSnapshot(task_id=task_id, name="resize", status=status)
    return TaskOutcome(status=status, value=None, failure=None, snapshot=snapshot, attempts=())


def test_a_worker_counts_what_the_store_holds_and_names_what_ended_otherwise_here() -> None:
    outcomes = [
        _outcome("a", TaskStatus.STOPPED),
        _outcome("b", TaskStatus.STOPPED),
        _outcome("c", TaskStatus.SUCCEEDED),
    ]
    # "a" was marked lost by reconcile while this worker was frozen past its lease; the
    # store could not be read for "c": what this worker saw is all there is to say
    summary, differences = ended_summary(outcomes, {"a": TaskStatus.LOST, "b": TaskStatus.STOPPED})
    assert summary == "1 lost, 1 stopped, 1 succeeded"
    assert differences == [
        "task 'a' ended stopped here, but the store holds lost: another process wrote it "
        "first (its record wins)"
    ]
    assert ended_summary([], {}) == ("none held", [])


# ==================================================================== status: arguments
def test_status_shows_a_durable_tasks_arguments_as_a_call_reads() -> None:
    from chongming_cli._output import format_snapshot

    def shown(arguments: dict[str, object] | None, durable: bool = True) -> list[str]:
        snapshot = TaskSnapshot(task_id="t", name="resize").evolve(
            durable=durable, arguments=arguments
        )
        text = format_snapshot(snapshot, now=NOW)
        return [line for line in text.splitlines() if line.startswith("arguments:")]

    assert shown({"args": ["a.csv", [1, 2]], "kwargs": {"limit": 10, "城市": "北京"}}) == [
        'arguments: "a.csv", [1, 2], limit=10, 城市="北京"'
    ]
    assert shown({"args": [], "kwargs": {}}) == ["arguments: (none)"]
    assert shown({"other": 1}) == ['arguments: {"other": 1}']  # not enqueue's form: as stored
    (long,) = shown({"args": ["x" * 500], "kwargs": {}})
    assert long.endswith("… (--json shows them all)")
    assert len(long) < 260
    assert shown(None, durable=False) == []  # a submitted task stores none


def test_a_task_another_worker_took_over_is_not_counted_as_ended() -> None:
    # marked lost while this worker was frozen, queued again and claimed by another worker
    outcomes = [_outcome("frz", TaskStatus.STOPPED), _outcome("ok", TaskStatus.SUCCEEDED)]
    stored = {"frz": TaskStatus.RUNNING, "ok": TaskStatus.SUCCEEDED}
    summary, differences = ended_summary(outcomes, stored)
    assert summary == "1 running under another worker, 1 succeeded"
    assert differences == [
        "task 'frz' ended stopped here, but the store holds running: another process wrote "
        "it first (its record wins)"
    ]


def test_the_first_signal_delivered_twice_at_once_is_one_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exits: list[int] = []
    monkeypatch.setattr("os._exit", exits.append)
    now = [100.0]
    monkeypatch.setattr("time.monotonic", lambda: now[0])
    signals = _Signals()
    signals.handle(signal.SIGTERM, None)
    now[0] += 0.01  # relayed to the process group too (GNU timeout)
    signals.handle(signal.SIGTERM, None)
    assert (signals.first, exits) == ("SIGTERM", [])
    now[0] += 0.5  # a person's second signal
    signals.handle(signal.SIGTERM, None)
    assert exits == [1]


def test_another_signal_at_once_is_a_second_one(monkeypatch: pytest.MonkeyPatch) -> None:
    exits: list[int] = []
    monkeypatch.setattr("os._exit", exits.append)
    signals = _Signals()
    signals.handle(signal.SIGINT, None)
    signals.handle(signal.SIGTERM, None)
    assert exits == [1]


def test_a_worker_names_what_it_stops_after_its_grace_as_it_is() -> None:
    """A task waiting to retry is not running: the shutdown's notes say which are stopped
    and which are handed back to the queue (D207)."""
    from types import SimpleNamespace

    from chongming_cli._durable import _left_over_notes
    from chongming_runtime import TaskRun

    def run(task_id: str, status: TaskStatus) -> TaskRun:
        return SimpleNamespace(task_id=task_id, status=status)  # type: ignore[return-value]

    running = [run("a", TaskStatus.RUNNING)]
    assert _left_over_notes(running) == ["stopping 1 task(s) still running: a"]
    mixed = [
        run("a", TaskStatus.RUNNING),
        run("b", TaskStatus.RETRY_WAIT),
        run("c", TaskStatus.PAUSED),
    ]
    assert _left_over_notes(mixed) == [
        "handing back 1 task(s) that run no attempt (waiting to retry, or to start) to the "
        "queue; any worker runs the next attempt when it is due: b",
        "stopping 2 task(s) not finished (1 paused, so it cannot finish): a, c",
    ]
    many = [run(f"t{i}", TaskStatus.RUNNING) for i in range(12)]
    assert _left_over_notes(many)[0].endswith("t8, t9 and 2 more")


def test_a_handed_back_task_is_counted_as_queued_again() -> None:
    outcome = _outcome("a", TaskStatus.QUEUED)  # reported as the store holds it
    summary, differences = ended_summary([outcome], {"a": TaskStatus.QUEUED})
    assert (summary, differences) == ("1 queued again", [])
