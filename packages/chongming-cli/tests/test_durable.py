"""The pieces of ``submit``, ``worker`` and the waiting reason: durations, moments,
fleet limits, reserved ``--arg`` names, and `waiting_reason` itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chongming_cli import CliError
from chongming_cli._args import ENQUEUE_ARG_NAMES, split_args
from chongming_cli._durable import _limits
from chongming_cli._parser import build_parser
from chongming_cli._waiting import waiting_reason
from chongming_cli._when import parse_duration, parse_moment
from chongming_core import TaskSnapshot, TaskStatus, WorkerRecord

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


def test_a_bad_moment_gives_an_example() -> None:
    with pytest.raises(ValueError, match=r"ISO-8601 time; write e\.g\. 2026-10-02T08:00:00"):
        parse_moment("tomorrow")


def test_fleet_limits() -> None:
    assert _limits(["gpu=4", " db =2"]) == {"gpu": 4, "db": 2}
    for bad, said in (("gpu", "TAG=N"), ("=3", "TAG=N"), ("gpu=x", "whole number"),
                      ("gpu=-1", ">= 0")):  # fmt: skip
        with pytest.raises(CliError, match=said):
            _limits([bad])


@pytest.mark.parametrize("name", sorted(ENQUEUE_ARG_NAMES))
def test_enqueue_options_are_not_task_arguments(name: str) -> None:
    with pytest.raises(CliError, match="not a task argument"):
        split_args([f"{name}=1"], reserved=ENQUEUE_ARG_NAMES)


# ==================================================================== waiting_reason
def _task(**fields: object) -> TaskSnapshot:
    base = TaskSnapshot(task_id="t1", name="resize", status=TaskStatus.QUEUED)
    return base.evolve(**{"durable": True, **fields})


def _worker(
    owner: str = "w1",
    names: tuple[str, ...] = ("resize",),
    buckets: tuple[int, ...] | None = None,
    live: bool = True,
) -> WorkerRecord:
    until = NOW + timedelta(seconds=30) if live else NOW - timedelta(seconds=1)
    return WorkerRecord(
        owner=owner,
        host="h",
        pid=1,
        buckets=buckets,
        names=names,
        capacity={},
        started_at=NOW - timedelta(hours=1),
        last_seen=NOW,
        lease_until=until,
    )


def _reason(snapshot: TaskSnapshot, workers: list[WorkerRecord]) -> str | None:
    served = frozenset(n for w in workers if w.is_live(NOW) for n in w.names)
    return waiting_reason(snapshot, now=NOW, served=served, workers=workers)


def test_no_live_worker_serves_the_name() -> None:
    assert _reason(_task(), []) == "no worker serves 'resize'"
    assert _reason(_task(), [_worker(live=False)]) == "no worker serves 'resize'"
    assert _reason(_task(), [_worker(names=("other",))]) == "no worker serves 'resize'"


def test_no_live_worker_owns_the_bucket() -> None:
    workers = [_worker(buckets=(0, 1)), _worker("w2", buckets=(7,), live=False),
               _worker("w3", names=("other",), buckets=(7,))]  # fmt: skip
    assert _reason(_task(bucket=7), workers) == "no live worker owns bucket 7"
    assert _reason(_task(bucket=1), workers) is None
    assert _reason(_task(bucket=7), [_worker()]) is None  # it owns every bucket


def test_due_later() -> None:
    later = NOW + timedelta(minutes=5)
    assert _reason(_task(run_at=later), [_worker()]) == "due at 2026-10-02 08:05:00 UTC"
    assert _reason(_task(run_at=NOW - timedelta(seconds=1)), [_worker()]) is None


def test_nothing_to_say_of_other_tasks() -> None:
    assert _reason(_task(durable=False), []) is None
    assert _reason(_task(status=TaskStatus.RUNNING), []) is None
    held = _task(lease_owner="w1", lease_until=NOW + timedelta(seconds=5))
    assert _reason(held, []) is None  # claimed: it waits for nobody
    expired = _task(lease_owner="w1", lease_until=NOW - timedelta(seconds=5))
    assert _reason(expired, []) == "no worker serves 'resize'"
