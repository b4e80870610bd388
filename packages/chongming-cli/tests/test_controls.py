"""``stop``, ``pause``, ``resume`` say what happened: requested, not confirmed, unchanged
(nothing sent) or refused, as a line or as one JSON object.

The tasks are written straight into the store as a worker elsewhere left them, so
each control meets the status it is about; the commands it writes are counted in
the store's command table.
"""

from __future__ import annotations

import json
import shlex
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_cli import EXIT_FAILED, EXIT_OK, main
from chongming_core import FakeClock, StateMachine
from chongming_store_sqlite import SqliteTaskStore

TOMORROW = datetime.now(UTC) + timedelta(days=1)
LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("CHONGMING_DB", "CHONGMING_DSN", "CHONGMING_OWNED_BUCKETS", "CHONGMING_OWNER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


def _running(m: StateMachine) -> StateMachine:
    m.mark_queued(actor="node-a")
    m.mark_starting(executor="thread", actor="node-a")
    m.mark_running(actor="node-a")
    return m


STATES: dict[str, Callable[[StateMachine], object]] = {
    "running": _running,
    "orphan": _running,
    "paused": lambda m: (_running(m).mark_pausing(), m.mark_paused()),
    "pausing": lambda m: _running(m).mark_pausing(),
    "stopping": lambda m: _running(m).mark_stopping(),
    "done": lambda m: _running(m).mark_succeeded(outcome=1),
    "blocked": lambda m: m.mark_blocked(),
}


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "tasks.db"
    with SqliteTaskStore(path) as store:
        for task_id, advance in STATES.items():
            m = StateMachine.create(task_id, "worker", clock=FakeClock())
            advance(m)
            until = None if m.snapshot.is_terminal else TOMORROW
            if task_id == "orphan":
                until = LONG_AGO
            store.create(m.snapshot.evolve(lease_owner="node-a", lease_until=until), m.transitions)
    return str(path)


def _commands(db: str) -> list[tuple[str, str]]:
    raw = sqlite3.connect(db)
    try:
        return [tuple(r) for r in raw.execute("SELECT task_id, action FROM commands ORDER BY seq")]
    finally:
        raw.close()


def _control(
    db: str, capsys: pytest.CaptureFixture[str], *argv: str, code: int = EXIT_OK
) -> tuple[dict[str, Any], str]:
    assert main(["--db", db, *argv, "--json"]) == code
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


@pytest.mark.parametrize(
    ("argv", "outcome", "action"),
    [
        (["stop", "running", "--reason", "window"], "requested", "stop"),
        (["pause", "running"], "not_confirmed", "pause"),
        (["resume", "paused"], "requested", "resume"),
        (["resume", "pausing"], "requested", "resume"),
    ],
)
def test_a_command_written_for_the_holder(
    db: str, capsys: pytest.CaptureFixture[str], argv: list[str], outcome: str, action: str
) -> None:
    document, err = _control(db, capsys, *argv)
    assert err == ""
    assert document == {
        "task_id": argv[1],
        "action": action,
        "outcome": outcome,
        "reason": None if outcome == "requested" else "across processes there is no receipt",
        "status": argv[1],
        "holder": "node-a",
        "holder_renewing": True,
        "command_sent": True,
    }
    assert _commands(db) == [(argv[1], action)]


def test_a_holder_that_stopped_renewing_is_said_in_the_reason(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    document, _ = _control(db, capsys, "stop", "orphan")
    assert document["outcome"] == "requested"
    assert document["holder_renewing"] is False
    assert "stopped renewing its lease" in document["reason"]
    assert f"chongming-task --db {shlex.quote(db)} reconcile" in document["reason"]


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["pause", "paused"], "task 'paused' is already paused"),
        (["pause", "pausing"], "task 'pausing' is already pausing (a pause is under way)"),
        (["stop", "stopping"], "task 'stopping' is already stopping"),
    ],
)
def test_what_is_already_so_sends_nothing(
    db: str, capsys: pytest.CaptureFixture[str], argv: list[str], reason: str
) -> None:
    document, _ = _control(db, capsys, *argv)
    assert document["outcome"] == "unchanged"
    assert document["command_sent"] is False
    assert document["reason"].startswith(reason)
    assert _commands(db) == []
    assert main(["--db", db, *argv]) == EXIT_OK
    line = capsys.readouterr().out.strip()
    assert line.startswith(reason)
    assert "was sent" in line


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["stop", "ghost"], "no task 'ghost' in"),
        (["pause", "done"], "task 'done' already ended succeeded"),
        (["resume", "running"], "task 'running' is running, not paused"),
        (["pause", "stopping"], "a stopping task cannot be paused"),
        (["pause", "blocked"], "a blocked task cannot be paused"),
    ],
)
def test_a_refusal_exits_1_and_still_says_why_in_json(
    db: str, capsys: pytest.CaptureFixture[str], argv: list[str], reason: str
) -> None:
    document, err = _control(db, capsys, *argv, code=EXIT_FAILED)
    assert document["outcome"] == "refused"
    assert document["command_sent"] is False
    assert reason in document["reason"]
    assert err.startswith("chongming-task: error: ")
    assert reason in err
    assert err.count("\n") == 1
    assert _commands(db) == []


def test_a_resume_right_behind_a_pause_still_on_its_way_goes_behind_it(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    paused, _ = _control(db, capsys, "pause", "running")
    assert paused["outcome"] == "not_confirmed"
    resumed, _ = _control(db, capsys, "resume", "running")  # its holder has not polled yet
    assert (resumed["outcome"], resumed["command_sent"], resumed["status"]) == (
        "requested",
        True,
        "running",
    )
    assert _commands(db) == [("running", "pause"), ("running", "resume")]
    assert main(["--db", db, "resume", "running"]) == EXIT_OK
    line = capsys.readouterr().out
    assert "a pause sent before it has not been applied yet" in line
    assert "applies both, in order, at its next poll" in line


def test_a_resume_applied_in_the_store_is_confirmed_though_a_worker_claimed_it_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from chongming_runtime import Controller

    path = str(tmp_path / "work.db")
    with SqliteTaskStore(path) as store:
        arguments: dict[str, Any] = {"args": [], "kwargs": {}}
        m = StateMachine.create("parked", "worker", durable=True, arguments=arguments)
        m.mark_queued(actor="web")
        m.mark_paused(actor="web")  # paused before any worker took it
        store.create(m.snapshot.evolve(lease_owner="web", lease_until=LONG_AGO), m.transitions)
    resume = Controller.resume

    def resumed_then_claimed(self: Controller, task_id: str) -> bool:
        done = resume(self, task_id)
        queued = self.store.get(task_id)  # a worker claims it before the console looks
        assert queued is not None
        claimed = StateMachine(queued)
        claimed.mark_starting(executor="thread", actor="w-1")
        self.store.save(
            claimed.snapshot.evolve(lease_owner="w-1", lease_until=TOMORROW),
            expect_version=queued.status_version,
            transitions=claimed.transitions[-1:],
        )
        return done

    monkeypatch.setattr(Controller, "resume", resumed_then_claimed)
    report, _ = _control(path, capsys, "resume", "parked")
    assert (report["outcome"], report["command_sent"]) == ("confirmed", False)
    assert _commands(path) == []


def test_a_control_applied_in_the_store_says_why_in_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`reason` is given for every outcome but a plain ``requested`` (docs/cli.md): a
    ``confirmed`` one says it was applied in the store because no worker held the task."""
    path = str(tmp_path / "work.db")
    with SqliteTaskStore(path) as store:
        for task_id in ("a", "b"):
            m = StateMachine.create(task_id, "nosuch", durable=True, arguments={})
            m.mark_queued(actor="web")
            store.create(m.snapshot, m.transitions)
    paused, _ = _control(path, capsys, "pause", "a")
    resumed, _ = _control(path, capsys, "resume", "a")
    stopped, _ = _control(path, capsys, "stop", "b")
    for report, action in ((paused, "pause"), (resumed, "resume"), (stopped, "stop")):
        assert (report["outcome"], report["command_sent"]) == ("confirmed", False)
        assert (
            report["reason"] == f"no worker held it yet, so the {action} was applied in the store"
        )
