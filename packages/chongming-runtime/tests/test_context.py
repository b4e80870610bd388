"""The task context: checkpoint, heartbeat, progress, logs, artifacts, upstream (§2, §8.13)."""

from __future__ import annotations

import enum
import logging
import re
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from chongming_core import (
    ConfigurationError,
    FakeClock,
    FixedBackoff,
    Progress,
    RetryPolicy,
    TaskCancelled,
    TaskStatus,
)
from chongming_core import TaskContext as TaskContextProtocol
from chongming_runtime import InlineExecutor, RuntimeContext, TaskContext, TaskRun, run_task
from chongming_runtime.body._control import AttemptControl

S = TaskStatus


def stop_flag(ctx: RuntimeContext) -> bool:
    return ctx.is_stop_requested


def pause_flag(ctx: RuntimeContext) -> bool:
    return ctx.is_pause_requested


def make_ctx(clock: FakeClock, **kwargs: object) -> tuple[RuntimeContext, AttemptControl]:
    control = AttemptControl()
    ctx = RuntimeContext(
        task_id="t1",
        task_name="demo",
        attempt=1,
        control=control,
        monotonic=clock.monotonic,
        **kwargs,  # type: ignore[arg-type]
    )
    return ctx, control


def test_task_context_is_the_runtime_context_and_satisfies_the_core_protocol(
    tmp_path: Path,
) -> None:
    assert TaskContext is RuntimeContext
    ctx, _ = make_ctx(FakeClock(), artifact_root=tmp_path)
    assert isinstance(ctx, TaskContextProtocol)


def test_checkpoint_refreshes_the_heartbeat_and_passes_when_nothing_is_requested() -> None:
    clock = FakeClock()
    ctx, _ = make_ctx(clock)
    first = ctx.last_beat
    clock.advance(3)
    ctx.checkpoint()
    assert ctx.last_beat == first + 3
    clock.advance(2)
    ctx.heartbeat.beat()
    assert ctx.last_beat == first + 5


def test_checkpoint_raises_after_a_stop_and_the_probes_never_block() -> None:
    ctx, control = make_ctx(FakeClock())
    assert not stop_flag(ctx)
    assert not pause_flag(ctx)
    control.request_stop("release window")
    assert stop_flag(ctx)
    with pytest.raises(TaskCancelled) as caught:
        ctx.checkpoint()
    assert caught.value.reason == "release window"
    assert caught.value.task_id == "t1"


def test_a_pause_request_is_visible_without_blocking() -> None:
    ctx, control = make_ctx(FakeClock())
    control.request_pause()
    assert pause_flag(ctx)
    control.clear_pause()
    assert not pause_flag(ctx)
    ctx.checkpoint()  # nothing pending any more: passes


def test_progress_goes_to_the_snapshot_without_version_bump_or_heartbeat() -> None:
    clock = FakeClock()
    seen: dict[str, object] = {}
    reported = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> str:
        ctx.checkpoint()
        seen["beat"] = ctx.last_beat
        clock.advance(0)  # nothing due; keeps the fake time where it is
        ctx.progress(3, total=10, unit="rows", message="part-3")
        seen["beat_after_progress"] = ctx.last_beat
        reported.set()
        release.wait(10)
        return "done"

    run = TaskRun(body, clock=clock)
    run.start()
    assert reported.wait(10)
    version = run.snapshot.status_version
    snap = run.snapshot
    assert snap.progress is not None
    assert (snap.progress.done, snap.progress.total, snap.progress.unit) == (3, 10, "rows")
    assert snap.progress.message == "part-3"
    assert snap.status_version == version  # the side path never bumps the version
    assert seen["beat"] == seen["beat_after_progress"]  # progress never beats
    release.set()
    outcome = run.wait(10)
    assert outcome.snapshot.progress is not None
    assert outcome.snapshot.progress.done == 3


def test_progress_refuses_non_numbers() -> None:
    ctx, _ = make_ctx(FakeClock())
    with pytest.raises(ConfigurationError, match="must be a number"):
        ctx.progress("3")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="NaN"):
        ctx.progress(float("nan"))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda ctx: ctx.progress(float("inf")), "progress done must be a finite number, got inf"),
        (lambda ctx: ctx.progress(1, total=float("-inf")), "progress total must be a finite"),
        (lambda ctx: ctx.progress(10**400), "progress done must fit a float, got an int of 401"),
        (lambda ctx: ctx.progress(1, total=10**5000), "an int of 5001 digits"),
        (lambda ctx: ctx.progress(True), "progress done must be a number, got True"),
        (lambda ctx: ctx.progress(1, unit=b"rows"), "progress unit must be a str or None"),
        (lambda ctx: ctx.progress(1, message=3), "progress message must be a str or None"),
    ],
)
def test_progress_no_store_can_keep_is_refused_at_the_call(
    call: Callable[[RuntimeContext], None], message: str
) -> None:
    """PostgreSQL refused an infinite progress at every flush while the report itself was
    accepted; a huge int broke every display of it (a fraction needs a float)."""
    reports: list[Progress] = []
    ctx, _ = make_ctx(FakeClock(), progress_sink=reports.append)
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        call(ctx)
    assert reports == []


def test_progress_keeps_plain_numbers_and_text_every_reader_sees_alike() -> None:
    class Rows(enum.IntEnum):
        ALL = 500

    class Ratio(float):
        pass

    class Unit(str):
        pass

    reports: list[Progress] = []
    ctx, _ = make_ctx(FakeClock(), progress_sink=reports.append)
    ctx.progress(2**1023, total=Rows.ALL, unit=Unit("rows"))
    ctx.progress(Ratio(0.5), total=1.5e308)
    first, second = reports
    assert (first.done, first.total, first.unit) == (2**1023, 500, "rows")
    assert (type(first.total), type(first.unit)) == (int, str)
    assert type(second.done) is float


def test_heartbeat_appears_in_the_snapshot_in_wall_time() -> None:
    clock = FakeClock()
    beaten = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> None:
        ctx.checkpoint()
        beaten.set()
        release.wait(10)

    run = TaskRun(body, clock=clock)
    run.start()
    assert beaten.wait(10)
    at_beat = clock.now()
    clock.advance(7)
    snap = run.snapshot
    assert snap.last_heartbeat_at == at_beat
    release.set()
    run.wait(10)


def test_heartbeat_is_the_start_until_the_first_beat_and_then_follows_the_beats() -> None:
    clock = FakeClock()
    started = threading.Event()
    beat = threading.Event()
    beaten = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> None:
        started.set()
        assert beat.wait(10)
        ctx.checkpoint()
        beaten.set()
        assert release.wait(10)

    run = TaskRun(body, clock=clock)
    run.start()
    assert started.wait(10)
    at_start = clock.now()
    running = run.snapshot
    assert running.status is TaskStatus.RUNNING
    assert running.last_heartbeat_at == at_start  # recorded with the running transition
    clock.advance(5)
    assert run.snapshot.last_heartbeat_at == at_start  # no beat yet: still the start
    beat.set()
    assert beaten.wait(10)
    assert run.snapshot.last_heartbeat_at == at_start + timedelta(seconds=5)
    clock.advance(3)
    release.set()
    final = run.wait(10).snapshot
    assert final.status is TaskStatus.SUCCEEDED
    assert final.last_heartbeat_at == at_start + timedelta(seconds=5)  # the last beat


def test_log_uses_the_task_logger_with_extras_and_keeps_the_latest_200_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def body(ctx: TaskContext) -> tuple[str, ...]:
        ctx.log("开始处理")
        ctx.warning("分区为空，跳过")
        ctx.error("写入失败")
        for index in range(250):
            ctx.log(f"line {index}", level=logging.DEBUG)
        return ctx.logs

    caplog.set_level(logging.DEBUG, logger="chongming_task.task")
    run = TaskRun(body, task_id="job-7", name="抽取", executor=InlineExecutor())
    run.start()
    outcome = run.wait(1)
    records = [r for r in caplog.records if r.name == "chongming_task.task.job-7"]
    assert [r.getMessage() for r in records[:3]] == ["开始处理", "分区为空，跳过", "写入失败"]
    assert [r.levelno for r in records[:3]] == [logging.INFO, logging.WARNING, logging.ERROR]
    first = records[0]
    assert (first.task_id, first.task_name, first.attempt) == ("job-7", "抽取", 1)  # type: ignore[attr-defined]
    assert len(outcome.value) == 200
    assert outcome.value[-1] == "DEBUG line 249"
    assert run.logs == tuple(outcome.value)


def test_artifact_dir_is_a_separate_lazily_created_folder_per_attempt(tmp_path: Path) -> None:
    folders: list[Path] = []

    def body(ctx: TaskContext) -> str:
        folder = ctx.artifact_dir
        folders.append(folder)
        (folder / "part-0.txt").write_text(f"attempt {ctx.attempt}")
        if ctx.attempt < 2:
            raise RuntimeError("first try fails")
        return str(folder)

    outcome = run_task(
        body,
        task_id="job-a",
        executor=InlineExecutor(),
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),
        artifact_dir=tmp_path,
    )
    assert outcome.ok
    assert folders == [tmp_path / "job-a" / "attempt-1", tmp_path / "job-a" / "attempt-2"]
    assert (folders[0] / "part-0.txt").read_text() == "attempt 1"
    assert (folders[1] / "part-0.txt").read_text() == "attempt 2"


def test_artifact_dir_is_not_created_until_used_and_needs_a_root(tmp_path: Path) -> None:
    outcome = run_task(
        lambda ctx: 1, task_id="job-b", executor=InlineExecutor(), artifact_dir=tmp_path
    )
    assert outcome.ok
    assert not (tmp_path / "job-b").exists()
    ctx, _ = make_ctx(FakeClock())
    with pytest.raises(ConfigurationError, match="artifact_dir="):
        _ = ctx.artifact_dir


def test_input_and_upstream_are_read_only_and_empty_for_a_single_task() -> None:
    def body(ctx: TaskContext) -> list[object]:
        with pytest.raises(TypeError):
            ctx.upstream["x"] = 1  # type: ignore[index]
        return [dict(ctx.upstream), ctx.input("extract", "none")]

    assert run_task(body, executor=InlineExecutor()).value == [{}, "none"]
    outcome = run_task(body, executor=InlineExecutor(), upstream={"extract": [1, 2]})
    assert outcome.value == [{"extract": [1, 2]}, [1, 2]]


def test_each_attempt_gets_a_fresh_context_and_token() -> None:
    contexts: list[RuntimeContext] = []

    def body(ctx: TaskContext) -> None:
        contexts.append(ctx)
        raise RuntimeError("again")

    outcome = run_task(
        body,
        executor=InlineExecutor(),
        retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)),
    )
    assert outcome.status is S.FAILED
    assert [c.attempt for c in contexts] == [1, 2, 3]
    assert len({id(c) for c in contexts}) == 3
    assert len({id(c._control) for c in contexts}) == 3
