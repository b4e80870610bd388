"""Security: forged store rows run nothing, no string from anywhere is evaluated, no password
leaks, and the SQLite file is private.
"""

from __future__ import annotations

import ast
import logging
import os
import stat
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chongming_core import Command, StateMachine, StoreError, TaskStatus, TaskStore
from chongming_runtime import Controller
from chongming_runtime.testing import wait_until
from chongming_store_sqlite import SqliteTaskStore
from reliability.reliability_support import TALLY, run_cli

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ forged command rows


def _forge(store: TaskStore, task_id: str, action: str, bucket: int | None = None) -> str:
    command_id = f"forged-{uuid.uuid4().hex[:8]}"
    store.submit_command(
        Command(
            command_id=command_id,
            task_id=task_id,
            action=action,
            issued_by="intruder",
            issued_at=datetime.now(UTC),
            reason="__import__('os').system('touch /tmp/pwned')",
            bucket=bucket,
        )
    )
    return command_id


def test_forged_commands_are_rejected_recorded_and_never_run(
    tmp_path: Path, make_controller: Callable[..., Controller]
) -> None:
    calls: list[str] = []
    release = threading.Event()

    def canary(ctx: Any, tag: str) -> str:
        calls.append(tag)
        while not release.is_set():
            ctx.checkpoint()
            time.sleep(0.01)
        return tag

    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        controller = make_controller(store=store, owner="node", poll_interval=0.02)
        controller.register("canary", canary)
        live = controller.submit("canary", "legit", task_id="live")
        wait_until(lambda: live.status is TaskStatus.RUNNING, "the live task to run")
        # a task row written straight into the store: a registered name and an
        # unregistered one, both "queued" and leased by nobody
        for tid, name in (("forged-known", "canary"), ("forged-unknown", "os.system")):
            store.create(StateMachine.create(tid, name, label="forged").snapshot)
        unknown_action = _forge(store, "live", "exec")
        unknown_task = _forge(store, "no-such-task", "stop")
        for tid in ("forged-known", "forged-unknown"):
            for action in ("resume", "stop", "pause"):
                _forge(store, tid, action)
        forged = {unknown_action, unknown_task}
        wait_until(
            lambda: {c.command_id for c in store.commands() if c.is_complete} >= forged,
            "the forged commands to be handled",
        )
        time.sleep(0.3)  # more polls, which must still run nothing
        results = {c.command_id: c.result for c in store.commands()}
        forged_rows = {tid: store.get(tid) for tid in ("forged-known", "forged-unknown")}
        report = controller.reconcile()
        release.set()
        controller.close(timeout=10)
    assert results[unknown_action] == "rejected: unknown action 'exec'"
    assert results[unknown_task] == "rejected: no task 'no-such-task' in the store"
    assert calls == ["legit"], "a forged row ran a task body"
    assert live.status is TaskStatus.SUCCEEDED, "the unknown action touched the live task"
    for tid, snap in forged_rows.items():
        assert snap is not None
        assert (snap.status, snap.status_version) == (TaskStatus.PENDING, 0)
        assert tid in {s.task_id for s in report.adoptable}  # reported, never run or adopted
    assert not Path("/tmp/pwned").exists()
    TALLY.add(forged_commands_checked=len(results))


# ------------------------------------------------------------------ nothing is evaluated

_DYNAMIC = {"eval", "exec", "compile", "__import__"}
#: (file, function) pairs allowed to import a module by a non-literal name, and why
_ALLOWED_IMPORTS = {
    # the operator's --tasks MODULE (a command-line option, never read from a store)
    ("packages/chongming-cli/src/chongming_cli/_loading.py", "import_module"),
    # a fixed table of optional parts of the umbrella package (module-level constants)
    ("packages/chongming-task/src/chongming_task/_lazy.py", "import_module"),
}
#: pickle.loads is allowed only on the pipe between a parent and the child it spawned
_ALLOWED_PICKLE = {
    "packages/chongming-runtime/src/chongming_runtime/executors/process.py",
    "packages/chongming-runtime/src/chongming_runtime/executors/_process_child.py",
}


def _literal(node: ast.Call) -> bool:
    return bool(node.args) and isinstance(node.args[0], ast.Constant)


def test_no_source_evaluates_or_imports_a_string_it_was_given() -> None:
    found = []
    sources = sorted(ROOT.glob("packages/*/src/**/*.py"))
    assert len(sources) > 50
    for path in sources:
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if isinstance(func, ast.Name) and name in _DYNAMIC:  # builtins, not re.compile
                found.append(f"{rel}:{node.lineno} {name}()")
            elif name == "import_module" and not _literal(node):
                if (rel, name) not in _ALLOWED_IMPORTS:
                    found.append(f"{rel}:{node.lineno} import_module(<non-literal>)")
            elif name in {"loads", "load"} and isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else ""
                if owner in {"pickle", "marshal", "shelve", "dill"} and rel not in _ALLOWED_PICKLE:
                    found.append(f"{rel}:{node.lineno} {owner}.{name}()")
    assert not found, "dynamic evaluation found:\n" + "\n".join(found)
    TALLY.add(source_files_scanned=len(sources))


# ------------------------------------------------------------------ passwords

SECRET = "Pw-d0nt-l3ak-9f3e"


def _admin(dsn: str) -> Any:
    import psycopg

    return psycopg.connect(dsn, autocommit=True)


def _all_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc)


@pytest.mark.postgres
def test_postgres_password_never_appears(
    postgres_dsn: str,
    pg_schema: str,
    caplog: pytest.LogCaptureFixture,
    make_controller: Callable[..., Controller],
) -> None:
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from chongming_store_postgres import PostgresTaskStore

    caplog.set_level(logging.DEBUG)
    params = conninfo_to_dict(postgres_dsn)
    # the server trusts local connections, so a password in the DSN is accepted and unused
    with_pw = make_conninfo(postgres_dsn, password=SECRET)
    url_pw = (
        f"postgresql://{params.get('user', 'postgres')}:{SECRET}@{params.get('host', '127.0.0.1')}"
        f":{params.get('port', 5432)}/{params.get('dbname', 'postgres')}"
    )
    with PostgresTaskStore(url_pw, schema=pg_schema) as store:
        assert SECRET not in repr(store) + str(store)
        controller = make_controller(store=store)
        assert SECRET not in repr(controller)
        controller.close()
    # failures: a closed port, a missing database, a bad schema name
    for dsn in (
        f"postgresql://someone:{SECRET}@127.0.0.1:1/db",
        url_pw.rsplit("/", 1)[0] + "/no_such_database_here",
        make_conninfo(with_pw, port="1"),
    ):
        with pytest.raises(StoreError) as caught:
            PostgresTaskStore(dsn, schema=pg_schema, connect_timeout=2)
        assert SECRET not in _all_text(caught.value)
    # a hostile schema name is an identifier, quoted: used as is, injecting nothing
    hostile = f'{pg_schema}"; DROP SCHEMA public; --'
    try:
        PostgresTaskStore(url_pw, schema=hostile).close()
        with _admin(postgres_dsn) as conn:
            names = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace").fetchall()}
        assert {"public", hostile} <= names
    finally:
        with _admin(postgres_dsn) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(hostile))
            )
    logged = "\n".join(r.getMessage() + str(r.args) for r in caplog.records)
    assert SECRET not in logged
    # the CLI, with and without --debug, on a reachable and an unreachable server
    for argv in (
        ["--dsn", f"{url_pw}?schema={pg_schema}", "stats"],
        ["--dsn", f"{url_pw}?schema={pg_schema}", "status", "missing"],
        ["--debug", "--dsn", f"postgresql://u:{SECRET}@127.0.0.1:1/db", "ps"],
    ):
        code, out, err = run_cli(*argv)
        assert SECRET not in out + err, argv
        assert code in (0, 1)


@pytest.mark.postgres
def test_dashboard_store_label_has_no_password(
    postgres_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from psycopg.conninfo import conninfo_to_dict

    import chongming_tui
    from chongming_store_postgres import PostgresTaskStore

    params = conninfo_to_dict(postgres_dsn)
    url_pw = (
        f"postgresql://{params.get('user', 'postgres')}:{SECRET}@{params.get('host', '127.0.0.1')}"
        f":{params.get('port', 5432)}/{params.get('dbname', 'postgres')}?schema={pg_schema}"
    )
    seen: dict[str, Any] = {}

    def fake_dashboard(
        *, controller: Controller, store_label: str, reconcile_command: str, **_: Any
    ) -> int:
        seen["label"] = store_label
        seen["controller"] = repr(controller)
        seen["command"] = reconcile_command
        return 0

    PostgresTaskStore(postgres_dsn, schema=pg_schema).close()  # the dashboard creates nothing
    monkeypatch.setattr(chongming_tui, "run_dashboard", fake_dashboard)
    code, out, err = run_cli("--dsn", url_pw, "dashboard")
    assert code == 0, err
    assert "127.0.0.1" in seen["label"]
    assert seen["command"] == 'chongming-task --dsn "$CHONGMING_DSN" reconcile'
    assert SECRET not in seen["label"] + seen["controller"] + seen["command"] + out + err


# ------------------------------------------------------------------ file permissions


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o002])
def test_sqlite_files_are_private(
    tmp_path: Path, umask: int, make_controller: Callable[..., Controller]
) -> None:
    db = tmp_path / f"tasks-{umask:o}.db"
    old = os.umask(umask)
    try:
        with SqliteTaskStore(db) as store:
            controller = make_controller(store=store)
            controller.register("echo", lambda ctx: "ok")
            controller.submit("echo").wait(10)
            controller.close(timeout=10)
            modes = {
                p.name: stat.S_IMODE(p.stat().st_mode)
                for p in tmp_path.iterdir()
                if p.name.startswith(db.name)
            }
    finally:
        os.umask(old)
    assert modes[db.name] == 0o600
    for name, mode in modes.items():  # -wal / -shm share the database's mode
        assert mode & 0o077 == 0, f"{name} is {mode:o}"
