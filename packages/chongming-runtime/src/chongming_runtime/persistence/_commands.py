"""The command channel, consumer side: `CommandPoller` claims control commands for this node.

A control (stop, pause, resume) for a task held by another process becomes a
command row in the shared store. Each holder polls: it claims commands (under a
lease, so a crash never loses one), hands each to its handler, and completes
it — or, when the task is not held here, releases it at once so the real holder
can claim it. A pure query client never polls, so it never takes anyone's
commands.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection

from chongming_core import Clock, Command, StoreError, TaskStore
from chongming_runtime.support._background import NOTIFIED_POLL, Report, carry_on, describe

__all__ = ["NOT_HELD", "CommandPoller", "new_command"]

_log = logging.getLogger("chongming_task.commands")

#: A handler returns this for a command whose task is not held by this process.
NOT_HELD = None


def new_command(
    *,
    task_id: str,
    action: str,
    issued_by: str,
    clock: Clock,
    reason: str | None = None,
    bucket: int | None = None,
) -> Command:
    """A fresh command row with a random id."""
    return Command(
        command_id=uuid.uuid4().hex,
        task_id=task_id,
        action=action,
        issued_by=issued_by,
        issued_at=clock.now(),
        reason=reason,
        bucket=bucket,
    )


class CommandPoller:
    """Claims and applies commands on a daemon thread.

    Nothing ends the thread but `stop`: whatever a round raises (a store failure, a
    store's bug) is logged and reported, and the next round follows (D65). A command
    row the store could not read whole (`Command.problem`) is never handed to the
    handler: it is completed as rejected, saying what is wrong with it (D64).

    Args:
        store: the shared store.
        owner: this node's name (the claimer).
        handler: applies one command; returns a short result ("applied", "rejected: ...")
            or `NOT_HELD` when the task is not held here.
        clock: gives "now" for leases.
        buckets: only commands for these buckets (None: all).
        interval: seconds between polls when nothing wakes the poller earlier.
        lease_seconds: how long a claimed command is reserved for this node.
        on_error: ``on_error(operation, what happened)`` records a failure where the
            operator sees it: the first of a run of failed polls (and each change of
            its error), an unreadable command row, anything else a round raised.
    """

    def __init__(
        self,
        store: TaskStore,
        *,
        owner: str,
        handler: Callable[[Command], str | None],
        clock: Clock,
        buckets: Collection[int] | None = None,
        interval: float = 0.1,
        lease_seconds: float = 30.0,
        on_error: Report | None = None,
    ) -> None:
        self._store = store
        self._owner = owner
        self._handler = handler
        self._clock = clock
        self._buckets = None if buckets is None else frozenset(buckets)
        self._interval = interval
        self._lease_seconds = lease_seconds
        self._on_error = on_error
        self._failing: str | None = None  # the error of the current run of failed polls
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        """True while the polling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def started(self) -> bool:
        """True once `start` was called (the thread may have ended since)."""
        return self._thread is not None

    def start(self) -> None:
        """Start polling (idempotent)."""
        with self._lock:
            if self._thread is not None or self._stopped.is_set():
                return
            self._thread = threading.Thread(
                target=self._serve, name=f"chongming-commands-{self._owner}", daemon=True
            )
            self._thread.start()

    def wake(self) -> None:
        """Poll now instead of at the next interval."""
        self._wake.set()
        self._cut_store_wait_short()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop polling and wait for the thread to finish."""
        self._stopped.set()
        self._wake.set()
        self._cut_store_wait_short()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def poll_once(self, limit: int = 100) -> int:
        """Claim and handle one batch; returns how many commands were completed here."""
        claimed = self._store.claim_commands(
            self._owner,
            now=self._clock.now(),
            lease_seconds=self._lease_seconds,
            limit=limit,
            buckets=self._buckets,
        )
        completed = 0
        batch = {command.command_id for command in claimed}
        waiting: set[str] = set()  # tasks with an earlier command elsewhere: theirs wait
        for command in claimed:
            if command.problem is not None:
                completed += self._reject_unreadable(command)
                continue
            if command.task_id in waiting or self._behind_another(command, batch):
                # an earlier command of the task is not in this batch (another node holds
                # it for a moment, to give it back): applied first, then this one (D187)
                waiting.add(command.task_id)
                self._store.release_command(command.command_id, owner=self._owner)
                continue
            try:
                result = self._handler(command)
            except Exception as exc:  # a bad command must not stop the channel
                _log.exception("command %s for task %r failed", command.action, command.task_id)
                result = f"rejected: {describe(exc)}"
                if self._on_error is not None:  # a bug of this node: the operator sees it (D67)
                    action = getattr(command.action, "value", command.action)
                    self._on_error(
                        f"the {action} command of task {command.task_id!r}", describe(exc)
                    )
            if result is NOT_HELD:
                self._store.release_command(command.command_id, owner=self._owner)
                continue
            if self._store.complete_command(
                command.command_id, owner=self._owner, now=self._clock.now(), result=result
            ):
                completed += 1
        return completed

    def _behind_another(self, command: Command, batch: set[str]) -> bool:
        """Whether an earlier open command of the same task is outside `batch` (the store
        lists a task's commands oldest first)."""
        for other in self._store.commands(task_id=command.task_id, include_complete=False):
            if other.command_id == command.command_id:
                return False
            if other.command_id not in batch and not other.is_complete:
                return True
        return False

    def _reject_unreadable(self, command: Command) -> int:
        """Complete a row that could not be read whole as rejected, with what is wrong
        (nothing of it is acted on: which half would be the command?). Returns 1 when
        this node completed it."""
        what = (
            f"command row {command.command_id!r} (task {command.task_id!r}) cannot be read: "
            f"{command.problem}"
        )
        _log.warning("%s; completed as rejected", what)
        if self._on_error is not None:
            self._on_error("command row", f"{what}; it was completed as rejected")
        if command.is_complete:  # a row whose id is not text: the store settled it
            return 0
        done = self._store.complete_command(
            command.command_id,
            owner=self._owner,
            now=self._clock.now(),
            result=f"rejected: the command row cannot be read: {command.problem}",
        )
        return 1 if done else 0

    def _serve(self) -> None:
        self._listen()  # before the first claim: a command sent meanwhile wakes the first wait
        while not self._stopped.is_set():
            try:
                self.poll_once()
                self._failing = None
            except BaseException as exc:  # of any kind: the channel must outlive it (D65)
                self._poll_failed(exc)
            if self._stopped.is_set():
                break
            try:
                self._idle()
            except BaseException as exc:
                self._poll_failed(exc)
                self._wake.wait(self._interval)
            self._wake.clear()

    def _listen(self) -> None:
        """Open a notifying store's listening connection (waiting for nothing)."""
        waiter = getattr(self._store, "wait_for_commands", None)
        if callable(waiter):
            with contextlib.suppress(StoreError):  # the first wait tries again; polls go on
                waiter(0)

    def _idle(self) -> None:
        """Wait for the next poll: a store's notification, a wake-up or the interval.

        A store that notifies of every command it takes (``wait_for_commands``) wakes
        the wait at once, so its fallback poll comes once a second (`NOTIFIED_POLL`), not
        at every poll interval: an idle controller then costs a query a second. A lost
        listening connection wakes the wait at once (a notification may be lost). When
        the store can also cut that wait short (``wake_command_waiters``), it is one wait;
        otherwise it is made in slices of the poll interval, so that `wake` and `stop`
        are heard."""
        waiter = getattr(self._store, "wait_for_commands", None)
        if not callable(waiter):
            self._wake.wait(self._interval)
            return
        longest = max(self._interval, NOTIFIED_POLL)
        if callable(getattr(self._store, "wake_command_waiters", None)):
            # `wake` and `stop` cut the store's wait short: one wait, not ten a second
            try:
                waiter(longest)
            except StoreError:
                self._wake.wait(self._interval)
            return
        # in slices of the poll interval, so that `wake` and `stop` are heard as before
        deadline = time.monotonic() + longest
        while not self._wake.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                if waiter(min(self._interval, left)):
                    return
            except StoreError:
                self._wake.wait(self._interval)
                return

    def _cut_store_wait_short(self) -> None:
        """Wake the store's wait for commands under way, when the store can."""
        waker = getattr(self._store, "wake_command_waiters", None)
        if callable(waker):
            try:
                waker()
            except Exception:  # a closed store: the wait ends at its timeout
                _log.debug("could not cut the command wait short", exc_info=True)

    def _poll_failed(self, exc: BaseException) -> None:
        """Log a failed round; record it for the operator once per run of the same error
        (a poll fails at every interval while the store is down or held)."""
        error = describe(exc)
        if isinstance(exc, StoreError):
            _log.warning("command poll failed, will retry: %s", exc)
            if self._on_error is not None and error != self._failing:
                self._on_error("command poll", f"{error}; polling goes on")
            self._failing = error
            return
        report = self._on_error if error != self._failing else None
        self._failing = error
        carry_on("the command poller", exc, _log, report)
