"""Contention: six processes on one store submit, stop, pause, resume and query at once.

Each process (`reliability_worker.py contend`) runs its own `Controller` on the
shared store for a bounded time, controlling its own tasks and the other
processes' (through command rows), records every exception a call raised, then
closes its controller and reports the trajectory of every task it held.

Asserted afterwards:

* no call raised anything but a legal refusal (in particular no
  ``database is locked``), and no write failed in the background;
* the store's history of every task equals, transition for transition, the
  trajectory its holder observed (nothing lost, nothing duplicated), and is the
  contiguous chain 1..n;
* every task ended (each process closed its controller);
* every command row was completed at most once, by a known node, with a known
  result; every transition a command caused (actor ``... (command)``) is matched
  by an applied command of that issuer for that task, never more often.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from chongming_core import TaskStore
from chongming_store_sqlite import SqliteTaskStore
from reliability.reliability_support import (
    TALLY,
    Children,
    finish,
    history_violations,
    read_report,
    seeds,
)

PROCESSES = 6
DURATION = 3.0
_ACTION_OF_TRIGGER = {"control:stop": "stop", "control:pause": "pause", "control:resume": "resume"}


def _run_processes(children: Children, tmp_path: Path, store_args: list[str], seed: int) -> list[
    list[dict[str, Any]]
]:  # fmt: skip
    procs = []
    for i in range(PROCESSES):
        report = tmp_path / f"p{i}.jsonl"
        proc = children.start("contend", *store_args, "--seed", str(seed * 100 + i),
                              "--report", str(report), "--owner", f"p{i}",
                              "--duration", str(DURATION))  # fmt: skip
        procs.append((proc, report))
    reports = []
    for proc, report in procs:
        code, err = finish(proc, timeout=60)
        assert code == 0, err
        reports.append(read_report(report))
    return reports


def _violations(store: TaskStore, reports: list[list[dict[str, Any]]]) -> tuple[list[str], int]:
    found: list[str] = []
    owners = {f"p{i}" for i in range(PROCESSES)}
    observed: dict[str, list[list[Any]]] = {}
    for lines in reports:
        summary = next(line for line in lines if line["event"] == "summary")
        found.extend(f"call failed: {e}" for e in summary["errors"])
        found.extend(f"background write failed: {e}" for e in summary["persist_failures"])
        if summary["calls"] < 20:
            found.append(f"a process made only {summary['calls']} calls")
        for line in lines:
            if line["event"] == "trajectory":
                observed[line["task_id"]] = line["transitions"]
    tasks = store.query()
    if {s.task_id for s in tasks} != set(observed):
        found.append(
            f"tasks in the store {len(tasks)} differ from the tasks held by the processes "
            f"{len(observed)}"
        )
    caused: Counter[tuple[str, str, str]] = Counter()
    for snap in tasks:
        history = store.history(snap.task_id)
        found.extend(history_violations(snap, history))
        if not snap.is_terminal:
            found.append(f"{snap.task_id}: still {snap.status.value} after every process closed")
        mine = [[t.status_version, t.from_status.value, t.to_status.value, t.trigger, t.actor]
                for t in history]  # fmt: skip
        if mine != observed.get(snap.task_id):
            found.append(f"{snap.task_id}: the store's history differs from what its holder saw")
        for t in history:
            # a stop of a task paused in place unwinds paused -> running -> stopping (R3):
            # one application, two transitions; the first is not counted
            unwind = t.trigger == "control:stop" and t.to_status.value == "running"
            if t.actor.endswith(" (command)") and t.trigger in _ACTION_OF_TRIGGER and not unwind:
                issuer = t.actor.removesuffix(" (command)")
                caused[(snap.task_id, _ACTION_OF_TRIGGER[t.trigger], issuer)] += 1
    applied: Counter[tuple[str, str, str]] = Counter()
    commands = store.commands()
    for command in commands:
        if command.is_complete:
            if command.claimed_by not in owners:
                found.append(f"command {command.command_id} completed by {command.claimed_by!r}")
            result = command.result or ""
            if not result.startswith(("applied", "ignored: ", "rejected: ")):
                found.append(f"command {command.command_id} has result {result!r}")
            if result.startswith("applied"):
                applied[(command.task_id, command.action, command.issued_by)] += 1
    for key, count in caused.items():
        if count > applied[key]:
            found.append(f"{key}: {count} transitions caused by commands, {applied[key]} applied")
    if len({c.command_id for c in commands}) != len(commands):
        found.append("a command row appears twice")
    TALLY.add(
        contention_commands=len(commands),
        contention_commands_applied=sum(applied.values()),
    )
    return found, len(tasks)


@pytest.mark.parametrize("seed", seeds(1, 10))
def test_six_processes_on_one_sqlite_file(seed: int, tmp_path: Path, children: Children) -> None:
    db = tmp_path / "tasks.db"
    SqliteTaskStore(db).close()  # created once, so six openers race only on opening it
    reports = _run_processes(children, tmp_path, ["--db", str(db)], seed)
    with SqliteTaskStore(db) as store:
        violations, checked = _violations(store, reports)
    TALLY.add(contention_runs=1, contention_tasks_checked=checked,
              contention_violations=len(violations))  # fmt: skip
    assert not violations, "\n".join(violations)
    assert checked >= PROCESSES


@pytest.mark.postgres
@pytest.mark.parametrize("seed", seeds(1, 10))
def test_six_processes_on_one_postgres_schema(
    seed: int, tmp_path: Path, children: Children, postgres_dsn: str, pg_schema: str
) -> None:
    from chongming_store_postgres import PostgresTaskStore

    PostgresTaskStore(postgres_dsn, schema=pg_schema).close()
    reports = _run_processes(
        children, tmp_path, ["--dsn", postgres_dsn, "--schema", pg_schema], seed
    )
    with PostgresTaskStore(postgres_dsn, schema=pg_schema) as store:
        violations, checked = _violations(store, reports)
    TALLY.add(contention_runs=1, contention_tasks_checked=checked,
              contention_violations=len(violations))  # fmt: skip
    assert not violations, "\n".join(violations)
    assert checked >= PROCESSES
