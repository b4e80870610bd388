"""A task whose holder stopped renewing its lease is never shown as happily supervised.

The tasks are written straight into the store, as a worker elsewhere left them: one
whose holder renews its lease (it ends tomorrow), one whose holder died long ago.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chongming_cli import EXIT_OK, main
from chongming_core import (
    Failure,
    FailureKind,
    FakeClock,
    StateMachine,
    TaskStatus,
    WorkerRecord,
)
from chongming_store_sqlite import SqliteTaskStore

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("CHONGMING_DB", "CHONGMING_DSN", "CHONGMING_OWNED_BUCKETS", "CHONGMING_OWNER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


def _running(task_id: str, owner: str, *, paused: bool) -> StateMachine:
    m = StateMachine.create(task_id, "worker", clock=FakeClock())
    m.mark_queued(actor=owner)
    m.mark_starting(executor="thread", actor=owner)
    m.mark_running(actor=owner)
    if paused:
        m.mark_pausing(actor="ops (command)")
        m.mark_paused(actor=owner)
    return m


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "tasks.db"
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    with SqliteTaskStore(path) as store:
        for task_id, owner, until, paused in (
            ("alive", "node-a", tomorrow, False),
            ("orphan", "node-k", LONG_AGO, False),
            ("orphan-paused", "node-k", LONG_AGO, True),
        ):
            m = _running(task_id, owner, paused=paused)
            store.create(
                m.snapshot.evolve(lease_owner=owner, lease_until=until, paused_in_place=paused),
                m.transitions,
            )
    return str(path)


def test_status_says_the_lease_expired(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", db, "status", "orphan"]) == EXIT_OK
    owner = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("owner"))
    assert "node-k (lease EXPIRED " in owner
    assert "nobody renews it" in owner
    assert f"chongming-task --db {shlex.quote(db)} reconcile --dry-run" in owner
    assert main(["--db", db, "status", "alive"]) == EXIT_OK
    owner = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("owner"))
    assert "node-a (lease expires in " in owner
    assert "EXPIRED" not in owner


def test_ps_warns_of_tasks_nobody_renews(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", db, "ps"]) == EXIT_OK
    captured = capsys.readouterr()
    assert "orphan" in captured.out
    warning = captured.err.strip()
    assert warning.startswith("warning: 2 unfinished task(s) with an expired lease")
    assert "orphan, orphan-paused" in warning
    assert "alive" not in warning
    assert main(["--db", db, "ps", "--status", "running", "--json"]) == EXIT_OK
    assert capsys.readouterr().err == ""  # the JSON document carries lease_until itself


@pytest.mark.parametrize(
    ("argv", "task_id"),
    [(["stop", "orphan", "--reason", "x"], "orphan"), (["pause", "orphan"], "orphan"),
     (["resume", "orphan-paused"], "orphan-paused")],
)  # fmt: skip
def test_a_control_of_an_orphan_does_not_promise_delivery(
    db: str, argv: list[str], task_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", db, *argv]) == EXIT_OK
    out = capsys.readouterr().out
    assert "its holder 'node-k' stopped renewing its lease" in out
    assert "so it may never be applied" in out
    assert "at its next" not in out
    assert f"chongming-task --db {shlex.quote(db)} status {task_id}" in out


def test_a_control_of_a_renewed_task_names_its_holder(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", db, "stop", "alive"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "its holder 'node-a' applies it at its next poll" in out


def test_status_shows_the_last_heartbeat_and_the_next_retry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "beats.db"
    clock = FakeClock(datetime.now(UTC) - timedelta(seconds=90))
    moving = StateMachine.create("moving", "worker", clock=clock)
    moving.mark_queued()
    moving.mark_starting(executor="thread")
    moving.mark_running(heartbeat_at=clock.now())
    waiting = StateMachine.create("waiting", "worker", clock=clock, max_attempts=2)
    waiting.mark_queued()
    waiting.mark_starting(executor="thread")
    waiting.mark_running()
    later = datetime.now(UTC) + timedelta(minutes=5)
    waiting.mark_retry_wait(Failure.of(FailureKind.EXCEPTION, "boom"), retry_at=later)
    with SqliteTaskStore(path) as store:
        store.create(moving.snapshot, moving.transitions)
        store.create(waiting.snapshot, waiting.transitions)
    assert main(["--db", str(path), "status", "moving"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    beat = next(line for line in lines if line.startswith("heartbeat"))
    assert "(1m3" in beat  # ~90 s ago: a body that stopped moving shows it
    assert beat.endswith(" ago)")
    assert main(["--db", str(path), "status", "waiting"]) == EXIT_OK
    retry = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("retry"))
    assert "(in 4m5" in retry


def test_reconcile_says_the_listed_status_is_the_one_before(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", db, "reconcile"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "marked 2 lost" in out
    assert "marked lost (the status each had before):" in out  # the rows below say running
    assert main(["--db", db, "status", "orphan"]) == EXIT_OK
    assert re.search(r"^status: +lost$", capsys.readouterr().out, re.MULTILINE)


def test_status_shows_running_time_and_apart_from_it_paused_time_and_a_silent_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """elapsed is running time: a task that ran 10 s and has been paused in place for
    90 s shows 10 s, and the pause on a line of its own; a task whose holder died shows
    since when nobody renewed its lease (D88)."""
    path = tmp_path / "times.db"
    clock = FakeClock(datetime.now(UTC) - timedelta(seconds=100))
    paused = StateMachine.create("paused", "worker", clock=clock)
    paused.mark_queued()
    paused.mark_starting(executor="thread")
    paused.mark_running()
    clock.advance(10)
    paused.mark_pausing()
    paused.mark_paused()
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    with SqliteTaskStore(path) as store:
        store.create(
            paused.snapshot.evolve(lease_owner="node-a", lease_until=tomorrow), paused.transitions
        )
    assert main(["--db", str(path), "status", "paused"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert next(line for line in lines if line.startswith("elapsed")).split() == [
        "elapsed:", "10.0s"
    ]  # fmt: skip
    pause = next(line for line in lines if line.startswith("paused"))
    assert pause.split()[1].startswith("1m3")  # ~90 s
    assert "in place since" in pause
    assert not any(line.startswith("lease ran out") for line in lines)


def test_status_of_an_orphan_says_since_when_its_holder_is_gone(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", db, "status", "orphan"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    gone = next(line for line in lines if line.startswith("lease ran out"))
    assert "2020-01-01 00:00:00 UTC" in gone
    assert "its lease was not renewed after that" in gone
    assert "at most (the holder may have stopped before" in gone  # a bound, not a sighting
    assert main(["--db", db, "status", "alive"]) == EXIT_OK
    assert "lease ran out" not in capsys.readouterr().out


def test_a_second_stop_sends_nothing_while_the_first_is_on_its_way(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", db, "stop", "alive", "--reason", "first"]) == EXIT_OK
    capsys.readouterr()
    assert main(["--db", db, "stop", "alive", "--json"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert (report["outcome"], report["command_sent"], report["holder_renewing"]) == (
        "unchanged",
        False,
        True,
    )
    assert report["reason"].startswith("a stop of task 'alive' is already on its way (sent ")
    assert main(["--db", db, "stop", "alive"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "already on its way" in out
    assert "its holder 'node-a' applies it at its next poll" in out
    assert "no other stop was sent" in out
    with SqliteTaskStore(db) as store:
        assert [(c.action, c.reason) for c in store.commands(task_id="alive")] == [
            ("stop", "first")
        ]


def test_a_control_of_a_task_whose_worker_died_on_this_host_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    pid = int(gone.stdout)
    path = str(tmp_path / "dead.db")
    now = datetime.now(UTC)
    until = now + timedelta(minutes=5)  # its lease has not ended: only the host can tell
    with SqliteTaskStore(path) as store:
        row = WorkerRecord(owner="w-dead", host=socket.gethostname(), pid=pid, buckets=None,
                           names=("worker",), capacity={}, started_at=now, last_seen=now,
                           lease_until=until)  # fmt: skip
        store.register_worker(row)
        m = _running("held", "w-dead", paused=False)
        store.create(m.snapshot.evolve(lease_owner="w-dead", lease_until=until), m.transitions)
    assert main(["--db", path, "stop", "held", "--json"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert (report["outcome"], report["holder_renewing"]) == ("requested", False)
    assert (
        f"its holder 'w-dead' is gone (its process {pid} no longer runs on this host)"
        in (report["reason"])
    )
    assert f"chongming-task --db {shlex.quote(path)} reconcile" in report["reason"]
    assert main(["--db", path, "pause", "held"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "so it will never apply it" in out
    assert "at its next" not in out
    assert main(["--db", path, "status", "held"]) == EXIT_OK
    owner = next(line for line in capsys.readouterr().out.splitlines() if "owner" in line)
    assert f"w-dead (its process {pid} no longer runs on this host: nobody will end it" in owner
    assert "its lease expires in " in owner
    assert f"then see: chongming-task --db {shlex.quote(path)} reconcile --dry-run" in owner


def test_status_shows_the_description_when_the_task_has_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "described.db")
    with SqliteTaskStore(path) as store:
        for task_id, description in (("told", "Rebuild the nightly index"), ("bare", None)):
            m = StateMachine.create(task_id, "worker", description=description, clock=FakeClock())
            m.mark_queued()
            store.create(m.snapshot, m.transitions)
    assert main(["--db", path, "status", "told"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "description: Rebuild the nightly index"
    assert main(["--db", path, "status", "bare"]) == EXIT_OK
    assert "description" not in capsys.readouterr().out


def test_nodes_shows_a_worker_of_this_host_whose_process_is_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    path = str(tmp_path / "nodes.db")
    now = datetime.now(UTC)
    with SqliteTaskStore(path) as store:
        for owner, host, pid in (("w-dead", socket.gethostname(), int(gone.stdout)),
                                 ("w-here", socket.gethostname(), os.getpid()),
                                 ("w-far", "another-host", int(gone.stdout))):  # fmt: skip
            store.register_worker(
                WorkerRecord(
                    owner=owner,
                    host=host,
                    pid=pid,
                    buckets=None,
                    names=("worker",),
                    capacity={},
                    started_at=now,
                    last_seen=now,
                    lease_until=now + timedelta(minutes=5),
                )
            )
    assert main(["--db", path, "nodes", "--json"]) == EXIT_OK
    rows = {r["owner"]: (r["live"], r["process_gone"]) for r in json.loads(capsys.readouterr().out)}
    assert rows == {"w-dead": (True, True), "w-here": (True, False), "w-far": (True, False)}
    assert main(["--db", path, "nodes"]) == EXIT_OK
    states = {
        line.split()[0]: line.split()[-1] for line in capsys.readouterr().out.splitlines()[2:]
    }
    assert states == {"w-dead": "gone", "w-here": "live", "w-far": "live"}


def test_buckets_warns_of_buckets_past_this_nodes_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "counted.db")
    with SqliteTaskStore(path) as store:
        for task_id, bucket in (("in-range", 2), ("past", 26)):
            m = StateMachine.create(task_id, "worker", bucket=bucket, clock=FakeClock())
            m.mark_queued()
            store.create(m.snapshot, m.transitions)
    assert main(["--db", path, "--num-buckets", "4", "buckets", "--json"]) == EXIT_OK
    captured = capsys.readouterr()
    owned = {r["bucket"]: r["owned"] for r in json.loads(captured.out)["buckets"]}
    assert owned == {2: True, 26: False}
    assert captured.err.startswith("warning: bucket(s) 26 hold tasks, but this node counts 4")
    assert "give every node, producers too, the same --num-buckets" in captured.err
    assert main(["--db", path, "buckets"]) == EXIT_OK  # 64 buckets: both are in range
    assert capsys.readouterr().err == ""


def test_the_json_of_status_and_ps_says_why_a_durable_task_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "waiting.db")
    with SqliteTaskStore(path) as store:
        m = StateMachine.create(
            "parked", "resize", durable=True, arguments={"args": [], "kwargs": {}}
        )
        m.mark_queued()
        store.create(m.snapshot, m.transitions)
        done = _running("done", "node-a", paused=False)
        store.create(done.snapshot, done.transitions)
    assert main(["--db", path, "status", "parked", "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["waiting"] == "no worker serves 'resize'"
    assert main(["--db", path, "ps", "--json"]) == EXIT_OK
    listed = {d["task_id"]: d["waiting"] for d in json.loads(capsys.readouterr().out)}
    assert listed == {"parked": "no worker serves 'resize'", "done": None}


def test_reconcile_queues_again_a_durable_task_whose_worker_died_while_it_waited_to_retry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "retry.db")
    clock = FakeClock(datetime.now(UTC) - timedelta(minutes=5))
    m = StateMachine.create("k1", "worker", clock=clock, max_attempts=2, durable=True, arguments={})
    m.mark_queued()
    m.mark_starting(executor="thread")
    m.mark_running()
    due = datetime.now(UTC) + timedelta(minutes=1)
    m.mark_retry_wait(Failure.of(FailureKind.EXCEPTION, "boom"), retry_at=due)
    expired = datetime.now(UTC) - timedelta(minutes=1)
    with SqliteTaskStore(path) as store:
        store.create(m.snapshot.evolve(lease_owner="w-dead", lease_until=expired), m.transitions)
    assert main(["--db", path, "reconcile", "--dry-run", "--json"]) == EXIT_OK
    preview = json.loads(capsys.readouterr().out)
    assert [s["task_id"] for s in preview["requeued"]] == ["k1"]
    assert preview["adoptable"] == []
    assert main(["--db", path, "reconcile"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "marked 0 lost, 1 queued again, 0 adoptable, 0 skipped" in out
    assert "queued again — durable tasks waiting to retry whose worker is gone" in out
    with SqliteTaskStore(path) as store:
        again = store.get("k1")
        assert again is not None
        assert (again.status, again.lease_owner, again.attempt) == (TaskStatus.QUEUED, None, 1)
        assert again.run_at == due  # its backoff still holds: claimed once it is due
        last = store.history("k1")[-1]
        assert (last.from_status, last.to_status) == (TaskStatus.RETRY_WAIT, TaskStatus.QUEUED)
        assert "'w-dead' expired while it waited to retry" in (last.reason or "")


def test_status_shows_when_a_delayed_task_is_due_whatever_else_it_waits_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A task due tomorrow in a bucket no live worker owns waits for both: its waiting line
    names the bucket, and a line of its own says when it is due."""
    path = str(tmp_path / "due.db")
    due = datetime.now(UTC) + timedelta(days=1)
    with SqliteTaskStore(path) as store:
        m = StateMachine.create("later", "worker", durable=True, arguments={}, run_at=due, bucket=3)
        m.mark_queued()
        store.create(m.snapshot, m.transitions)
    assert main(["--db", path, "status", "later"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    due_line = next(line for line in lines if line.startswith("due at"))
    assert "(in 23h" in due_line or "(in 1d" in due_line
