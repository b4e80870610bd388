"""`ContractBase`: the per-test life cycle every contract mixin builds on."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from chongming_core import Command, FakeClock, StoreError, TaskStatus, TaskStore
from chongming_store_contract._builders import (
    BASE_TIME,
    BuiltTask,
    build_command,
    build_task,
)
from chongming_store_contract._malformed_values import Malformed, malformed_command

__all__ = ["ContractBase"]


class ContractBase:
    """Creates a fresh, empty store before each test and closes it (and every extra
    handle) after.

    Subclasses implement `make_store`; stores whose data outlives one handle
    (a file, a server) also implement `open_same_store` so that the concurrency
    cases run across independent handles.

    `make_store` runs inside pytest's ``setup_method``, before any fixture of the
    subclass: read configuration from the environment or class attributes (and
    call ``pytest.skip`` there when the backend is not available). A subclass
    that overrides ``setup_method`` or ``teardown_method`` must call ``super()``.
    """

    store: TaskStore
    clock: FakeClock

    # ------------------------------------------------------------------ hooks
    def make_store(self) -> TaskStore:
        """A new, empty store. Every backend's test class overrides this."""
        raise NotImplementedError(
            f"{type(self).__name__} must override make_store() to return a new, empty store"
        )

    def open_same_store(self, store: TaskStore) -> TaskStore:
        """A second, independent handle on `store`'s data (a new connection or pool).

        The default returns `store` itself, which suits stores that live in one
        process's memory. The contract closes every handle it opens this way.
        """
        return store

    def write_malformed_command(self, command: Command, column: str, bad: Malformed) -> bool:
        """Write `command` as a row of this store whose `column` holds `bad` instead of its
        value, as another program writing into the shared table could.

        The default hands `submit_command` a `Command` holding the bad value as a Python
        object (`malformed_command`), which suits a store that keeps the objects it is
        given (the in-memory store). A backend with typed columns overrides this and
        writes the row by its own means (SQL), bypassing the store's code.

        Returns:
            False when this backend cannot hold such a value at all (a typed column
            refuses it, or would convert it into a valid one); the case is then left
            out. Every backend holds at least one (see `MalformedCommandsContract`).
        """
        malformed = malformed_command(command, column, bad)
        if malformed is None:
            return False
        try:
            self.store.submit_command(malformed)
        except StoreError:
            return False
        return True

    # ------------------------------------------------------------------ life cycle
    def setup_method(self, method: object) -> None:
        """Give the test a fresh, empty store and a fake clock at `BASE_TIME`."""
        self._extra_handles: list[TaskStore] = []
        self._scratch: Path | None = None
        self.clock = FakeClock(BASE_TIME)
        self.store = self.make_store()

    def teardown_method(self, method: object) -> None:
        """Close every handle the test used and remove its scratch files."""
        handles = [*self._extra_handles, self.store]
        self._extra_handles = []
        try:
            for handle in handles:
                # A test may have closed it already; a second close() is allowed anyway.
                with contextlib.suppress(StoreError):
                    handle.close()
        finally:
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = None

    # ------------------------------------------------------------------ helpers
    def other_handle(self) -> TaskStore:
        """A second handle on this test's store (closed by the contract after the test)."""
        handle = self.open_same_store(self.store)
        if handle is not self.store:
            self._extra_handles.append(handle)
        return handle

    def scratch_dir(self) -> Path:
        """A temporary directory for this test (removed after it)."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="chongming-contract-"))
        return self._scratch

    def task(
        self, task_id: str, status: TaskStatus = TaskStatus.PENDING, **kwargs: Any
    ) -> BuiltTask:
        """`build_task` on this test's clock (so later tasks finish later)."""
        return build_task(task_id, status, clock=self.clock, **kwargs)

    def stored(
        self, task_id: str, status: TaskStatus = TaskStatus.PENDING, **kwargs: Any
    ) -> BuiltTask:
        """Build a task with `task` and create it in the store."""
        built = self.task(task_id, status, **kwargs)
        self.store.create(built.snapshot, built.transitions)
        return built

    def command(self, command_id: str, task_id: str, **kwargs: Any) -> Command:
        """`build_command` issued at this test's current fake time (unless given)."""
        kwargs.setdefault("issued_at", self.clock.now())
        return build_command(command_id, task_id, **kwargs)
