"""`TaskFilter` is a store query with a limit; `PendingAction` waits for what is observed."""

from __future__ import annotations

import pytest

from chongming_core import TaskSnapshot, TaskStatus
from chongming_tui._data import PendingAction
from chongming_tui._filters import StatusGroup, TaskFilter

S = TaskStatus


def test_the_default_view_is_the_newest_tasks_with_a_limit() -> None:
    assert TaskFilter().query_kwargs() == {
        "status": None,
        "tag": None,
        "bucket": None,
        "name_prefix": None,
        "search": None,
        "limit": 200,
        "newest_first": True,
    }


def test_groups_become_status_lists() -> None:
    kwargs = TaskFilter(group=StatusGroup.FAILED, limit=50).query_kwargs()
    assert kwargs["status"] == [S.FAILED, S.LOST]
    assert kwargs["limit"] == 50
    active = set(TaskFilter(group=StatusGroup.ACTIVE).query_kwargs()["status"])
    assert active == {S.STARTING, S.RUNNING, S.PAUSING, S.STOPPING}


def test_empty_text_clears_a_filter_and_the_summary_says_what_is_on() -> None:
    view = TaskFilter().replace(tag="etl", search="转换", bucket=3, name_prefix="trans")
    assert view.describe() == (
        "status: all · tag: etl · bucket: 3 · name: trans* · search: 转换 · newest first"
        " · limit 200"
    )
    assert view.replace(tag="", search="").tag is None
    assert (
        view.replace(sort="elapsed", sort_reverse=True)
        .describe()
        .endswith("sorted by elapsed desc · limit 200")
    )


def test_a_bad_view_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        TaskFilter(limit=0)
    with pytest.raises(ValueError, match="sort column"):
        TaskFilter(sort="colour")


def _snap(status: TaskStatus) -> TaskSnapshot:
    return TaskSnapshot(task_id="t1", name="n", status=status)


def test_a_pause_is_confirmed_only_once_paused_is_seen() -> None:
    pending = PendingAction("t1", "pause")
    assert pending.settle(_snap(S.RUNNING)) is None
    assert pending.settle(_snap(S.PAUSING)) is None
    assert pending.settle(_snap(S.PAUSED)) == "pause of t1 confirmed: the task is paused"


def test_a_pause_that_rolled_back_or_ended_is_reported_as_such() -> None:
    rolled = PendingAction("t1", "pause")
    rolled.settle(_snap(S.PAUSING))
    assert "not reached" in (rolled.settle(_snap(S.RUNNING)) or "")
    ended = PendingAction("t1", "pause")
    assert ended.settle(_snap(S.SUCCEEDED)) == "pause of t1 not applied: the task ended succeeded"


def test_stop_and_resume_outcomes() -> None:
    stop = PendingAction("t1", "stop")
    assert stop.settle(_snap(S.STOPPING)) is None
    assert stop.settle(_snap(S.STOPPED)) == "stop of t1 confirmed: the task is stopped"
    raced = PendingAction("t1", "stop")
    assert raced.settle(_snap(S.SUCCEEDED)) == "stop of t1: the task ended succeeded first"
    resume = PendingAction("t1", "resume")
    assert resume.settle(_snap(S.PAUSED)) is None
    assert resume.settle(_snap(S.RUNNING)) == "resume of t1 confirmed: the task is running"
    assert PendingAction("t1", "resume").settle(None) is not None
