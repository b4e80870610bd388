"""Make the stores of the previous release that the upgrade tests open (schema 2).

Run it ONCE with the previous release's code first on the path, e.g. from a checkout
of that release::

    git archive <release> packages | tar -x -C /tmp/v2
    PYTHONPATH=/tmp/v2/packages/chongming-core/src:/tmp/v2/packages/chongming-store-sqlite/src:\\
    /tmp/v2/packages/chongming-store-postgres/src:/tmp/v2/packages/chongming-store-contract/src \\
        .venv/bin/python tests-integration/make_v2_stores.py [POSTGRES_DSN]

It writes, beside each store's tests, ``data/store-v2.*`` (a SQLite file; a plain SQL
script made by ``pg_dump --inserts`` of a real schema) and ``data/store-v2.json``:
every task, history and command as that release read them back. The upgrade tests
open the stores with the current code and compare.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from chongming_core import FakeClock, Progress, TaskStatus, TaskStore
from chongming_store_contract import BASE_TIME, build_command, build_task, build_versions

ROOT = Path(__file__).resolve().parents[1]
SQLITE_DATA = ROOT / "packages" / "chongming-store-sqlite" / "tests" / "data"
POSTGRES_DATA = ROOT / "packages" / "chongming-store-postgres" / "tests" / "data"
#: The schema the PostgreSQL fixture is dumped from (the test replaces the name).
FIXTURE_SCHEMA = "chongming_v2_fixture"


def populate(store: TaskStore) -> None:
    """Tasks of every status (histories, tags, labels, buckets, progress, failures, a
    lease), a long history, and commands pending, claimed and complete."""
    clock = FakeClock(BASE_TIME)
    for index, status in enumerate(TaskStatus):
        built = build_task(
            f"task-{status.value}",
            status,
            name="etl.同步" if index % 2 else "job",
            clock=clock,
            label=f"任务 {status.value}",
            tags=("io", "数据") if index % 3 == 0 else (f"tag-{index}",),
            priority=index % 4 - 1,
            bucket=index,
            bucket_key=f"tenant-{index}",
        )
        store.create(*built)
        if status in (TaskStatus.RUNNING, TaskStatus.PAUSING, TaskStatus.STOPPING):
            store.touch(
                built.snapshot.task_id,
                progress=Progress(done=index, total=40, unit="行", message="第 2 批"),
                heartbeat_at=clock.now(),
                lease_owner="node-a@host-1",
                lease_until=clock.now() + timedelta(seconds=30),
                pid=4242,
            )
    store.create(*build_versions("long-history", 12, clock=clock, tags=("long",)))
    for number, action in enumerate(("stop", "pause", "resume", "stop")):
        clock.advance(1)
        command = build_command(
            f"c{number}", "task-running", action=action, issued_at=clock.now(), bucket=4
        )
        store.submit_command(command)
    store.claim_commands("node-a@host-1", now=clock.now(), lease_seconds=60, limit=2)
    store.complete_command("c0", owner="node-a@host-1", now=clock.now(), result="applied")


def contents(store: TaskStore) -> dict[str, Any]:
    """What `store` holds, as JSON: every snapshot, history and command."""
    tasks = store.query()
    return {
        "tasks": [s.to_dict() for s in tasks],
        "histories": {s.task_id: [t.to_dict() for t in store.history(s.task_id)] for s in tasks},
        "commands": [_command(c) for c in store.commands()],
    }


def _command(command: Any) -> dict[str, Any]:
    document = dataclasses.asdict(command)
    for key, value in document.items():
        if hasattr(value, "isoformat"):
            document[key] = value.isoformat()
    return document


def _write_json(path: Path, data: dict[str, Any]) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True)
    path.write_text(text + "\n", encoding="utf-8")


def make_sqlite() -> None:
    from chongming_store_sqlite import SqliteTaskStore

    SQLITE_DATA.mkdir(exist_ok=True)
    path = SQLITE_DATA / "store-v2.db"
    path.unlink(missing_ok=True)
    store = SqliteTaskStore(path)
    populate(store)
    _write_json(SQLITE_DATA / "store-v2.json", contents(store))
    store.close()


def make_postgres(dsn: str) -> None:
    from chongming_store_postgres import PostgresTaskStore

    POSTGRES_DATA.mkdir(exist_ok=True)
    store = PostgresTaskStore(dsn, schema=FIXTURE_SCHEMA)
    try:
        populate(store)
        _write_json(POSTGRES_DATA / "store-v2.json", contents(store))
        dump = subprocess.run(
            ["pg_dump", "--inserts", "--no-owner", "--no-privileges", "-n", FIXTURE_SCHEMA, dsn],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        # psql meta-commands (\\restrict) out: the test runs the script through a driver
        lines = [line for line in dump.stdout.split("\n") if not line.startswith("\\")]
        (POSTGRES_DATA / "store-v2.sql").write_text("\n".join(lines), encoding="utf-8")
    finally:
        store.close()
        subprocess.run(
            ["psql", dsn, "-c", f"DROP SCHEMA {FIXTURE_SCHEMA} CASCADE"],
            capture_output=True,
            check=False,
            timeout=60,
        )


if __name__ == "__main__":
    os.chdir(ROOT)
    make_sqlite()
    if len(sys.argv) > 1:
        make_postgres(sys.argv[1])
