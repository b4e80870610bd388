"""Hostile input: generated CLI arguments, awkward text through both stores, damaged files.

* The CLI, run in-process through ``chongming_cli.main(argv)`` with generated ids,
  reasons, tags, bucket specs, ``--arg`` values and DSNs, never prints a traceback
  or an "unexpected error": it exits 0/3 for valid input, or 1 with one line
  ``chongming-task: error: ...`` (a few subprocess runs check the same end to end).
* CJK, emoji, right-to-left text, 1 MB strings, SQL metacharacters and quote-heavy
  strings round-trip exactly through the Controller on both stores.
* NUL bytes: SQLite keeps them; PostgreSQL cannot store them in text and refuses them.
* A corrupted, a truncated, a foreign and a newer SQLite file are refused with a
  clear error and never modified (compared byte for byte).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chongming_core import ConfigurationError, StoreError, TaskSnapshot, TaskStore
from chongming_runtime import Controller
from chongming_runtime.testing import Closer
from chongming_store_sqlite import SqliteTaskStore
from reliability.reliability_support import HERE, TALLY, history_violations, run_cli

PROG_ERROR = "chongming-task: error: "
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# ------------------------------------------------------------------ the CLI in-process


def check_clean(code: int, out: str, err: str, *, secret: str | None = None) -> None:
    """Exit 0/3, or 1 with exactly one error line; never a traceback or a secret."""
    TALLY.add(cli_invocations=1)
    assert "Traceback" not in out + err
    assert "unexpected error" not in err, err
    assert code in (0, 1, 3), (code, err)
    if code == 1:
        # lines as a terminal shows them (str.splitlines would also split at \x1c-\x1e)
        errors = [line for line in err.split("\n") if line.startswith(PROG_ERROR)]
        assert len(errors) == 1, err
        assert err.rstrip("\n").endswith(errors[0]), f"the error is not one line: {err!r}"
        assert len(errors[0]) > len(PROG_ERROR) + 5
    if secret is not None:
        assert secret not in out + err


@pytest.fixture(scope="module")
def cli_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite store holding a few finished tasks; the CLI's task module on sys.path."""
    db = tmp_path_factory.mktemp("cli") / "tasks.db"
    closer = Closer()
    with SqliteTaskStore(db) as store:
        try:
            controller = closer.controller(store=store)
            controller.register("echo", lambda ctx, value=None: value)
            for i in range(3):
                controller.submit("echo", i, task_id=f"known-{i}", label="已知")
        finally:
            closer.close()
    return str(db)


text = st.text(max_size=40)
ids = st.one_of(text, st.sampled_from(["known-0", "known-1", "", " ", "-x", "--", "'; DROP"]))


@SETTINGS
@given(command=st.sampled_from(["status", "history", "pause", "resume"]), task_id=ids)
def test_cli_control_and_lookup_by_any_id(cli_db: str, command: str, task_id: str) -> None:
    check_clean(*run_cli("--db", cli_db, command, task_id))


@SETTINGS
@given(task_id=ids, reason=text)
@example(task_id="--", reason="\n")  # argparse quotes the stray argument, line break and all
def test_cli_stop_with_any_reason(cli_db: str, task_id: str, reason: str) -> None:
    check_clean(*run_cli("--db", cli_db, "stop", task_id, "--reason", reason))


@SETTINGS
@given(
    tag=text,
    prefix=text,
    limit=st.one_of(st.integers(-5, 10**20).map(str), text),
    status=st.one_of(st.sampled_from(["running", "succeeded", "lost"]), text),
    spec=st.one_of(
        st.sampled_from(["0-15,32", "0", "63", "64", "5-2", "0-", ",", "1,,2", "-1"]), text
    ),
    buckets=st.one_of(st.integers(-3, 10**6).map(str), text),
)
def test_cli_queries_with_any_filter_and_bucket_spec(
    cli_db: str, tag: str, prefix: str, limit: str, status: str, spec: str, buckets: str
) -> None:
    check_clean(*run_cli("--db", cli_db, "ps", "--tag", tag, "--name-prefix", prefix,
                         "--limit", limit, "--status", status))  # fmt: skip
    check_clean(*run_cli("--db", cli_db, "--owned-buckets", spec, "--num-buckets", buckets,
                         "buckets"))  # fmt: skip


@SETTINGS
@given(
    key=st.text(min_size=1, max_size=12),
    value=st.one_of(text, st.sampled_from(['"007"', "[1, 2]", "{", "1e999", "NaN", "null"])),
    label=text,
    tag=text,
    bucket_key=text,
    task_id=st.one_of(st.none(), ids),
)
def test_cli_run_with_any_arguments(
    cli_db: str, key: str, value: str, label: str, tag: str, bucket_key: str, task_id: str | None
) -> None:
    argv = ["--db", cli_db, "run", "echo", "--tasks", "reliability_cli_tasks",
            "--arg", f"{key}={value}", "--label", label, "--tag", tag,
            "--bucket-key", bucket_key]  # fmt: skip
    if task_id is not None:
        argv += ["--task-id", task_id]
    check_clean(*run_cli(*argv))


_SECRET = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789",
                  min_size=8, max_size=16)  # fmt: skip


@SETTINGS
@given(
    scheme=st.sampled_from(["postgresql", "postgres", "mysql", "x-unknown", "POSTGRESQL"]),
    user=st.text(alphabet=st.characters(codec="ascii", categories=["L", "N"]), max_size=8),
    secret=_SECRET,
    port=st.sampled_from(["1", "9", "99999", "abc"]),  # never the real server
    database=text,
    query=st.one_of(st.just(""), st.text(max_size=12).map(lambda q: f"?x{q}")),
    command=st.sampled_from(["ps", "stats", "status"]),
)
def test_cli_any_dsn_fails_in_one_line_without_the_password(
    scheme: str, user: str, secret: str, port: str, database: str, query: str, command: str
) -> None:
    dsn = f"{scheme}://{user}:{secret}@127.0.0.1:{port}/{database}{query}"
    argv = ["--dsn", dsn, command] + (["some-id"] if command == "status" else [])
    code, out, err = run_cli(*argv)
    check_clean(code, out, err, secret=secret)
    assert code == 1
    code, out, err = run_cli("--debug", *argv)  # even the traceback is scrubbed
    assert secret not in out + err
    assert code == 1


def test_cli_subprocess_checks(cli_db: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    for k in ("CHONGMING_DB", "CHONGMING_DSN", "CHONGMING_OWNED_BUCKETS", "CHONGMING_DEBUG"):
        env.pop(k, None)
    cases = [
        ["--db", cli_db, "status", "no such task / 不存在"],
        ["--db", cli_db, "stop", "known-0", "--reason", "'; DROP TABLE tasks; --"],
        ["--db", cli_db, "--owned-buckets", "9-1", "ps"],
        ["--dsn", "postgresql://u:Very-Secret-9@127.0.0.1:1/db", "ps"],
        ["--db", cli_db, "run", "echo", "--tasks", "reliability_cli_tasks", "--arg", "=1"],
        ["--db", str(tmp_path / "missing.db"), "ps"],
    ]
    for argv in cases:
        done = subprocess.run(
            [sys.executable, "-m", "chongming_cli", *argv],
            capture_output=True, text=True, timeout=60, env=env, check=False,
        )  # fmt: skip
        check_clean(done.returncode, done.stdout, done.stderr, secret="Very-Secret-9")
        assert done.returncode == 1, (argv, done.stderr)
        assert done.stderr.count("\n") == 1, done.stderr


# ------------------------------------------------------------------ round-trips


AWKWARD = [
    "任务-数据同步",
    "🚀🔥 emoji 👩‍👩‍👧‍👦",
    "مرحبا بالعالم עברית",
    "\u202eRTL override\u202c",
    "'); DROP TABLE tasks; --",
    "%_\\ LIKE metacharacters * ? [a-z]",
    "\"'`\\\"\\'' '' \"\" quotes",
    "line\nbreak\ttab\r",
    "x" * (1024 * 1024),
]


def _echo(ctx: Any, value: Any) -> Any:
    ctx.checkpoint()
    return {"value": value}


def _hold(ctx: Any) -> str:
    while True:
        ctx.checkpoint()
        ctx.progress(1)
        import time

        time.sleep(0.005)


def _roundtrip(store: TaskStore, reopen: Any) -> int:
    controller = Controller(store=store)
    ids = []
    try:
        controller.register("echo", _echo)
        controller.register("hold", _hold)
        for i, value in enumerate(AWKWARD):
            short = value[:64]
            tid = f"rt-{i}-{short}"
            controller.submit("echo", value, task_id=tid, label=value, tags={short},
                              bucket_key=value).wait(30)  # fmt: skip
            held = controller.submit("hold", task_id=f"stop-{i}-{short}")
            import time

            deadline = time.monotonic() + 10
            while held.snapshot.progress is None and time.monotonic() < deadline:
                time.sleep(0.005)
            controller.stop(held.task_id, reason=value)
            held.wait(30)
            ids.append((tid, held.task_id, value, short))
    finally:
        controller.close(timeout=20)
    with reopen() as fresh:
        for tid, stopped_id, value, short in ids:
            snap = fresh.get(tid)
            assert snap is not None
            assert (snap.label, snap.tags, snap.bucket_key, snap.outcome) == (
                value,
                frozenset({short}),
                value,
                {"value": value},
            ), f"{tid[:80]!r} did not round-trip"
            stopped = fresh.get(stopped_id)
            assert stopped is not None
            history = fresh.history(stopped_id)
            assert value in [t.reason for t in history]
            assert not history_violations(stopped, history)
            assert fresh.query(_search(short))  # searchable by its text
    return len(ids) * 2


def _search(text: str) -> Any:
    from chongming_core import TaskQuery

    return TaskQuery(search=text[:20])


def test_awkward_text_roundtrips_through_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "rt.db"
    with SqliteTaskStore(db) as store:
        checked = _roundtrip(store, lambda: SqliteTaskStore(db))
    TALLY.add(roundtrip_tasks_checked=checked)


@pytest.mark.postgres
def test_awkward_text_roundtrips_through_postgres(postgres_dsn: str, pg_schema: str) -> None:
    from chongming_store_postgres import PostgresTaskStore

    with PostgresTaskStore(postgres_dsn, schema=pg_schema) as store:
        checked = _roundtrip(store, lambda: PostgresTaskStore(postgres_dsn, schema=pg_schema))
    TALLY.add(roundtrip_tasks_checked=checked)


# ------------------------------------------------------------------ NUL bytes


def _nul_snapshot(task_id: str = "nul") -> TaskSnapshot:
    from chongming_core import StateMachine

    return StateMachine.create(task_id, "echo", label="a\x00b", tags={"t\x00"}).snapshot


def test_nul_roundtrips_in_the_sqlite_store(tmp_path: Path) -> None:
    with SqliteTaskStore(tmp_path / "nul.db") as store:
        store.create(_nul_snapshot("id\x00nul"))
        snap = store.get("id\x00nul")
    assert snap is not None
    assert (snap.task_id, snap.label, snap.tags) == ("id\x00nul", "a\x00b", frozenset({"t\x00"}))


def test_nul_through_the_controller_on_sqlite_is_kept_or_refused_at_submit(
    tmp_path: Path, make_controller: Callable[..., Controller]
) -> None:
    """Never silently lost: either kept exactly, or a ConfigurationError at submit."""
    db = tmp_path / "nul.db"
    with SqliteTaskStore(db) as store:
        controller = make_controller(store=store)
        controller.register("echo", _echo)
        kept = []
        cases: list[dict[str, Any]] = [{"label": "a\x00b"}, {"task_id": "id\x00x"},
                                       {"bucket_key": "k\x00"}]  # fmt: skip
        for kwargs in cases:
            try:
                run = controller.submit("echo", "v", **kwargs)
            except ConfigurationError:
                continue
            run.wait(10)
            kept.append(run)
        controller.close(timeout=10)
        assert not controller.persist_failures
        for run in kept:
            snap = store.get(run.task_id)
            assert snap is not None
            assert (snap.label, snap.bucket_key, snap.status) == (
                run.snapshot.label,
                run.snapshot.bucket_key,
                run.snapshot.status,
            )


@pytest.mark.postgres
def test_nul_is_refused_by_the_postgres_store(postgres_dsn: str, pg_schema: str) -> None:
    from chongming_store_postgres import PostgresTaskStore

    with PostgresTaskStore(postgres_dsn, schema=pg_schema) as store:
        with pytest.raises(StoreError, match="NUL"):
            store.create(_nul_snapshot())
        assert store.get("nul") is None


@pytest.mark.postgres
@pytest.mark.parametrize("field", ["label", "task_id", "bucket_key", "tags"])
def test_nul_is_refused_at_submit_on_postgres(
    postgres_dsn: str, pg_schema: str, field: str
) -> None:
    from chongming_store_postgres import PostgresTaskStore

    value: Any = {"t\x00"} if field == "tags" else "a\x00b"
    with PostgresTaskStore(postgres_dsn, schema=pg_schema) as store:
        controller = Controller(store=store)
        try:
            controller.register("echo", _echo)
            with pytest.raises((ConfigurationError, StoreError)):
                controller.submit("echo", "v", **{field: value}).wait(10)
        finally:
            controller.close(timeout=10)


@pytest.mark.postgres
def test_one_unstorable_task_does_not_block_the_others(postgres_dsn: str, pg_schema: str) -> None:
    from chongming_store_postgres import PostgresTaskStore

    with PostgresTaskStore(postgres_dsn, schema=pg_schema) as store:
        controller = Controller(store=store)
        try:
            controller.register("echo", _echo)
            with contextlib.suppress(ConfigurationError, StoreError):
                controller.submit("echo", "v", label="a\x00b").wait(10)
            clean = controller.submit("echo", "clean", task_id="clean")
            clean.wait(10)
            controller.flush()
        finally:
            controller.close(timeout=10)
        snap = store.get("clean")
        assert snap is not None
        assert snap.status is clean.status


# ------------------------------------------------------------------ damaged files


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _good_store(path: Path) -> None:
    closer = Closer()
    with SqliteTaskStore(path) as store:
        try:
            controller = closer.controller(store=store)
            controller.register("echo", _echo)
            for i in range(40):
                controller.submit("echo", "行" * 200, task_id=f"t{i}", label=f"标签{i}")
        finally:
            closer.close()
    # fold the WAL into the file, so the file alone is the database (still in WAL mode,
    # as the store leaves it)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(bytes(data[: len(data) // 2 + 100]))
    elif how == "garbage-header":
        path.write_bytes(b"\xde\xad\xbe\xef" * 25 + bytes(data[100:]))
    elif how == "corrupted-pages":
        page = int.from_bytes(data[16:18], "big")
        for offset in range(page, len(data), 7):
            data[offset] ^= 0x5A
        path.write_bytes(bytes(data))
    elif how == "newer-schema":
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA user_version = 999")
    elif how == "foreign":
        path.unlink()
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
            conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
            conn.commit()


def _open_and_read(db: Path) -> None:
    """Open the store and read everything (a damaged page may only show when it is read)."""
    with SqliteTaskStore(db) as store:
        for snap in store.query():
            store.history(snap.task_id)
        store.status_counts()


@pytest.mark.parametrize(
    "how", ["truncated", "garbage-header", "corrupted-pages", "newer-schema", "foreign"]
)
def test_damaged_sqlite_file_is_refused_and_left_unchanged(tmp_path: Path, how: str) -> None:
    db = tmp_path / "tasks.db"
    _good_store(db)
    _damage(db, how)
    before = _digest(db)
    with pytest.raises(StoreError) as caught:
        _open_and_read(db)
    message = str(caught.value)
    assert str(db) in message
    assert "\n" not in message
    assert _digest(db) == before, "the refused file was modified"
    code, out, err = run_cli("--db", str(db), "ps")
    check_clean(code, out, err)
    assert code == 1
    code, out, err = run_cli("--db", str(db), "run", "echo", "--tasks", "reliability_cli_tasks",
                             "--task-id", "new")  # fmt: skip
    check_clean(code, out, err)
    assert code == 1
    assert _digest(db) == before, "the CLI modified the refused file"
    TALLY.add(damaged_files_refused=1)


def test_cli_run_does_not_claim_success_it_could_not_save(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    _good_store(db)
    _damage(db, "corrupted-pages")
    before = _digest(db)
    code, _, err = run_cli("--db", str(db), "run", "echo", "--tasks", "reliability_cli_tasks")
    assert _digest(db) == before
    assert code == 1, err
