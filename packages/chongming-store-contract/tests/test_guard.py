"""The completeness guard catches backends that drop or silently override contract tests."""

from __future__ import annotations

import pytest

from chongming_core import InMemoryTaskStore, TaskStore
from chongming_store_contract import StoreContract, check_contract_complete
from chongming_store_contract._guard import contract_test_names


class _Complete(StoreContract):
    def make_store(self) -> TaskStore:
        return InMemoryTaskStore()


class _SetToNone(_Complete):
    test_get_unknown_task_returns_none = None  # type: ignore[assignment]


class _SetToNonCallable(_Complete):
    test_status_counts = 42  # type: ignore[assignment]


class _OverriddenSilently(_Complete):
    def test_append_is_idempotent_on_task_and_version(self) -> None:
        pass


class _OverriddenWithXfailWithoutReason(_Complete):
    @pytest.mark.xfail
    def test_append_is_idempotent_on_task_and_version(self) -> None:
        raise AssertionError("not yet")


class _OverriddenWithBlankReason(_Complete):
    @pytest.mark.xfail(reason="  ")
    def test_append_is_idempotent_on_task_and_version(self) -> None:
        raise AssertionError("not yet")


class _OverriddenWithSkip(_Complete):
    @pytest.mark.skip(reason="later")
    def test_append_is_idempotent_on_task_and_version(self) -> None:
        raise AssertionError("not yet")


class _OverriddenWithXfailReason(_Complete):
    @pytest.mark.xfail(reason="this backend keeps the last duplicate, fixed in #12")
    def test_append_is_idempotent_on_task_and_version(self) -> None:
        raise AssertionError("not yet")


class _ReplacesTheGuard(_Complete):
    def test_contract_is_complete(self) -> None:
        pass


def test_a_complete_backend_has_no_problems() -> None:
    assert check_contract_complete(_Complete) == []
    assert check_contract_complete(StoreContract) == []


def test_the_contract_has_a_test_for_every_store_method() -> None:
    names = contract_test_names(StoreContract)
    assert len(names) > 80
    assert "test_contract_is_complete" in names
    methods = [
        "create", "save", "save_many", "get", "query", "status_counts", "bucket_counts",
        "append", "history", "touch", "touch_many", "claim", "complete", "release",
        "commands", "prune", "archive", "close",
    ]  # fmt: skip
    for method in methods:
        assert any(method in name for name in names), method


@pytest.mark.parametrize(
    ("backend", "name", "needle"),
    [
        (_SetToNone, "test_get_unknown_task_returns_none", "was dropped"),
        (_SetToNonCallable, "test_status_counts", "was dropped"),
        (_OverriddenSilently, "test_append_is_idempotent_on_task_and_version", "without an xfail"),
        (
            _OverriddenWithXfailWithoutReason,
            "test_append_is_idempotent_on_task_and_version",
            "without an xfail",
        ),
        (
            _OverriddenWithBlankReason,
            "test_append_is_idempotent_on_task_and_version",
            "without an xfail",
        ),
        (_OverriddenWithSkip, "test_append_is_idempotent_on_task_and_version", "without an xfail"),
    ],
)
def test_the_guard_reports_each_bad_override(backend: type, name: str, needle: str) -> None:
    problems = check_contract_complete(backend)
    assert len(problems) == 1, problems
    assert name in problems[0]
    assert needle in problems[0]
    assert "xfail(reason=" in problems[0]


def test_the_guard_test_fails_for_a_bad_backend() -> None:
    case = _OverriddenSilently()
    with pytest.raises(AssertionError, match="does not run the whole store contract"):
        case.test_contract_is_complete()


def test_an_override_marked_xfail_with_a_reason_is_accepted() -> None:
    assert check_contract_complete(_OverriddenWithXfailReason) == []
    _OverriddenWithXfailReason().test_contract_is_complete()


def test_replacing_the_guard_itself_fails_every_test() -> None:
    case = _ReplacesTheGuard()
    with pytest.raises(AssertionError, match="replaces test_contract_is_complete"):
        case.setup_method(None)


def test_a_mark_on_the_shared_contract_function_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shared = StoreContract.test_status_counts
    monkeypatch.setattr(shared, "pytestmark", [pytest.mark.skip(reason="x").mark], raising=False)
    problems = check_contract_complete(_Complete)
    assert len(problems) == 1, problems
    assert "test_status_counts" in problems[0]
    assert "shared contract test" in problems[0]


def test_a_class_that_is_not_a_contract_is_reported() -> None:
    assert check_contract_complete(int) == [f"{int!r} is not a subclass of StoreContract"]
