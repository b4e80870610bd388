"""Every route by which user text becomes stored text (D48): what no store can keep is refused
before anything runs, or — where the text is informational (a failure, a progress message, a
docstring) — kept with those characters written as escapes. Otherwise the task runs while
every write of it fails: absent from the store, or shown ``running`` forever."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from chongming_core import ConfigurationError, TaskStatus, TaskStore, storable_text
from chongming_runtime import Controller, Pipeline
from chongming_runtime.testing import checkpoint_until
from chongming_store_sqlite import SqliteTaskStore

S = TaskStatus
WAIT = 10.0
BAD = "caf\udce9"  # os.fsdecode(b"caf\xe9"): a file name that was not UTF-8


@pytest.fixture
def sqlite() -> Iterator[Controller]:
    controller = Controller(store=SqliteTaskStore(":memory:"), max_parallel=2, graceful_stop=2.0)
    yield controller
    controller.close(timeout=WAIT)


@pytest.fixture
def pg(postgres_dsn: str, pg_schema: str) -> Iterator[Controller]:
    from chongming_store_postgres import PostgresTaskStore

    store: TaskStore = PostgresTaskStore(postgres_dsn, schema=pg_schema, max_size=4)
    controller = Controller(store=store, max_parallel=2, graceful_stop=2.0)
    yield controller
    controller.close(timeout=WAIT, close_store=True)


def _stored(controller: Controller, task_id: str) -> TaskStatus | None:
    assert controller._writer.flush(), controller._writer.failures
    snapshot = controller.store.get(task_id)
    return None if snapshot is None else snapshot.status


def test_storable_text_escapes_only_what_no_store_can_keep() -> None:
    assert storable_text("plain 名前") == "plain 名前"
    assert storable_text("a\x00b") == "a\\x00b"
    assert storable_text(f"read {BAD}") == "read caf\\udce9"


@pytest.mark.parametrize("bad", [BAD, "a\x00b"])
def test_registration_refuses_tags_and_descriptions_no_store_can_keep(
    sqlite: Controller, bad: str
) -> None:
    with pytest.raises(ConfigurationError, match="tag"):
        sqlite.register("tagged", lambda ctx: 1, tags={bad})
    with pytest.raises(ConfigurationError, match="description"):
        sqlite.register("described", lambda ctx: 1, description=bad)
    with pytest.raises(ConfigurationError, match="pipeline name"):
        Pipeline(f"p{bad}")
    with pytest.raises(ConfigurationError, match="owner"):
        Controller(store=SqliteTaskStore(":memory:"), owner=f"host{bad}")


def test_a_docstring_description_is_kept_escaped(sqlite: Controller) -> None:
    def body(ctx: Any) -> int:
        return 1

    body.__doc__ = f"Reads {BAD}."
    sqlite.register("documented", body)
    run = sqlite.submit("documented")
    assert run.wait(WAIT).ok
    stored = sqlite.get(run.task_id)
    assert stored is not None
    assert stored.description == "Reads caf\\udce9."


def test_stop_reasons_given_to_run_and_pipeline_handles_are_checked(sqlite: Controller) -> None:
    release = threading.Event()
    started = threading.Event()

    def loop(ctx: Any) -> None:
        started.set()
        checkpoint_until(ctx, release)

    sqlite.register("loop", loop)
    sqlite.register("noop", lambda ctx: 1)
    try:
        run = sqlite.submit("loop")
        assert started.wait(WAIT)
        with pytest.raises(ConfigurationError, match="reason"):
            run.stop(BAD)
        pipeline = Pipeline("p")
        head = pipeline.node("loop")
        pipeline.node("noop", node_id="after", depends_on=[head])
        prun = sqlite.submit_pipeline(pipeline)
        with pytest.raises(ConfigurationError, match="reason"):
            prun.stop(BAD)
        assert run.status is S.RUNNING  # nothing was changed by the refused stops
    finally:
        release.set()
    assert prun.wait(WAIT).ok


def test_a_failure_naming_text_no_store_can_keep_is_stored(sqlite: Controller) -> None:
    """The commonest source: an exception naming a file whose name was not UTF-8."""

    def body(ctx: Any) -> None:
        raise ValueError(f"cannot read {BAD}")

    sqlite.register("reads", body)
    run = sqlite.submit("reads")
    outcome = run.wait(WAIT)
    assert outcome.status is S.FAILED
    assert _stored(sqlite, run.task_id) is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.message == "ValueError: cannot read caf\\udce9"


@pytest.mark.postgres
def test_a_progress_message_no_store_can_keep_does_not_hide_the_end(pg: Controller) -> None:
    """The snapshot carries the progress: PostgreSQL refused the task's terminal write."""

    def body(ctx: Any) -> int:
        ctx.progress(1, total=2, unit=f"rows{BAD}", message=f"reading {BAD}\x00")
        return 1

    pg.register("progress", body)
    run = pg.submit("progress")
    assert run.wait(WAIT).ok
    assert _stored(pg, run.task_id) is S.SUCCEEDED


@pytest.mark.postgres
def test_postgres_refuses_nothing_the_checks_let_through(pg: Controller) -> None:
    def body(ctx: Any) -> None:
        raise OSError(f"cannot open {BAD}\x00")

    pg.register("opens", body)
    run = pg.submit("opens", label="名前")
    assert run.wait(WAIT).status is S.FAILED
    assert _stored(pg, run.task_id) is S.FAILED
