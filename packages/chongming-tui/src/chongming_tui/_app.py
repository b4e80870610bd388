"""`DashboardApp`: composes the screens and runs the refresh and the controls off the UI thread.

Every store call happens in a daemon thread of its own: the refresh (`fetch`),
each stop/pause/resume and the reconcile dry run. Their results come back as
messages, so a slow store makes the numbers older, never the keys slower, and
quitting never waits for a store that stopped answering (Textual's thread
workers are joined when the app ends: a hung PostgreSQL server held `q` and
Ctrl-C until its query returned).
"""

from __future__ import annotations

import asyncio
import functools
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.timer import Timer

from chongming_core import Clock, ConfigurationError, TaskSnapshot
from chongming_runtime import Controller, describe_buckets, printable
from chongming_runtime import waiting_reason as runtime_waiting_reason
from chongming_tui._data import PendingAction, Refresh, WaitingReason, fetch
from chongming_tui._filters import TaskFilter
from chongming_tui._format import assess, format_age
from chongming_tui._messages import ActionDone, Refreshed, RefreshFailed
from chongming_tui._notes import PASSING_SECONDS, Note
from chongming_tui._terminal import terminal_problem
from chongming_tui.components.detail import TaskDetailScreen
from chongming_tui.components.header import DashboardHeader, HeaderInfo
from chongming_tui.components.help import HelpScreen
from chongming_tui.components.nodes import NodesScreen
from chongming_tui.components.overview import OverviewScreen
from chongming_tui.components.prompt import PromptDialog
from chongming_tui.components.reconcile import ReconcileScreen
from chongming_tui.components.status_line import StatusLine
from chongming_tui.components.stop_dialog import StopDialog
from chongming_tui.components.task_table import TaskTable

__all__ = ["DashboardApp"]

_PROMPTS = {
    "tag": "Show tasks carrying the tag:",
    "bucket": "Show tasks in bucket (a number):",
    "name_prefix": "Show tasks whose registered name starts with:",
}


class DashboardApp(App[int]):
    """The live dashboard of one store, seen through one `Controller`.

    Example::

        app = DashboardApp(controller, store_label="tasks.db")
        app.run()

    Args:
        controller: reads go through its query side, controls through its control side.
        store_label: what to call the store in the header (a path or a redacted DSN).
        refresh_interval: seconds between refreshes; None: refresh only on demand (``g``).
        row_limit: rows fetched per refresh (the store query's limit).
        idle_threshold: a heartbeat older than this (seconds) is shown as a warning.
        clock: "now" for ages and elapsed times (default: the controller's clock).
        cursor_blink: blink the cursor of text boxes (off for reproducible screenshots).
        reconcile_command: the console command the reconcile view gives for applying what
            it shows (the console passes it with its store options, ready to paste).
        waiting_reason: says why a durable queued task waits (by default the runtime's
            `waiting_reason`, which `status` and `ps` show too); None: no reason is shown.
    """

    CSS_PATH = "dashboard.tcss"
    TITLE = "chongming"
    #: Screens get ``-narrow`` below 110 columns (a narrower search box, see the stylesheet).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012 (Textual's type)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "keys", "keys", tooltip="this list of every key"),
        Binding("q", "quit", "quit", tooltip="quit (SIGTERM quits the same way)"),
        # Textual only hints at ctrl+q; an operator's Ctrl-C ends the console (a text box
        # with a selection still copies it: its own binding comes first)
        Binding("ctrl+c", "quit", "quit", show=False),
        Binding("l", "toggle_live", "live", show=False, tooltip="live refresh off / on"),
        Binding("g", "refresh_now", "refresh", show=False, tooltip="refresh now"),
        Binding("w", "nodes", "workers", show=False, tooltip="the workers serving the store"),
        Binding("f5", "refresh_now", "refresh", show=False),
        Binding(
            "ctrl+p",
            "command_palette",
            "palette",
            show=False,
            tooltip="Textual's command palette (theme, screenshot, ...)",
        ),
    ]

    def run(self, *, headless: bool = False, **options: Any) -> int | None:
        """`App.run`, refused in one line unless standard input and output are a terminal
        (or `headless`): fed from a pipe or a file, the input thread spins on end-of-file,
        and a write to a pipe whose reader left blocks the main thread, so that not even
        SIGTERM ends the process."""
        if not headless:
            problem = terminal_problem(sys.stdin, sys.stdout)
            if problem is not None:
                raise ConfigurationError(problem)
        return super().run(headless=headless, **options)

    def __init__(
        self,
        controller: Controller,
        *,
        store_label: str,
        refresh_interval: float | None = 1.0,
        row_limit: int = 200,
        idle_threshold: float = 60.0,
        clock: Clock | None = None,
        cursor_blink: bool = True,
        reconcile_command: str = "chongming-task reconcile",
        waiting_reason: WaitingReason | None = runtime_waiting_reason,
    ) -> None:
        super().__init__()
        if refresh_interval is not None and not refresh_interval > 0:
            raise ValueError(
                f"refresh_interval must be > 0 seconds or None, got {refresh_interval!r}"
            )
        if not idle_threshold > 0:
            raise ValueError(f"idle_threshold must be > 0 seconds, got {idle_threshold}")
        self.controller = controller
        self.store_label = store_label
        self.reconcile_command = reconcile_command
        self.waiting_reason = waiting_reason
        self.refresh_interval = refresh_interval
        self.idle_threshold = float(idle_threshold)
        self.clock: Clock = clock if clock is not None else controller.clock
        self.cursor_blink = cursor_blink
        self.task_filter = TaskFilter(limit=row_limit)
        self.latest: Refresh | None = None
        self.refresh_count = 0
        self.last_said: tuple[str, str] = ("", "")
        self.note: Note | None = None
        self._requests = 0
        self.said: deque[str] = deque(maxlen=100)
        self.pending: dict[str, PendingAction] = {}
        self._generation = 0
        self._in_flight = False
        self._again = False
        self._error: str | None = None
        self._live_timer: Timer | None = None
        self._live = False
        self.overview = OverviewScreen()

    @property
    def buckets_label(self) -> str:
        """The console's buckets: ``all`` or runs like ``[0-15, 32]``."""
        owned = self.controller.owned_buckets
        return "all" if owned is None else describe_buckets(owned)

    @property
    def live(self) -> bool:
        """True while the periodic refresh runs."""
        return self._live

    def get_default_screen(self) -> Screen[Any]:
        """The overview."""
        return self.overview

    def on_mount(self) -> None:
        """Start the timers and the first refresh."""
        if self.refresh_interval is not None:
            self._live_timer = self.set_interval(self.refresh_interval, self.request_refresh)
            self._live = True
        self.set_interval(1.0, self._show_header)
        self._show_header()
        self.request_refresh()
        self._on_sigterm(install=True)

    def on_unmount(self) -> None:
        """Give SIGTERM back its default action."""
        self._on_sigterm(install=False)

    def _on_sigterm(self, *, install: bool) -> None:
        """SIGTERM (``kill``, a service manager) quits like ``q``: by default it would end the
        process at once and leave the terminal in the alternate screen with mouse reporting on.
        Only where the loop can take signals (the main thread, not Windows)."""
        try:
            loop = asyncio.get_running_loop()
            if install:
                loop.add_signal_handler(signal.SIGTERM, self.exit)
            else:
                loop.remove_signal_handler(signal.SIGTERM)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    # ------------------------------------------------------------------ refresh
    def set_filter(self, task_filter: TaskFilter) -> None:
        """Change the view and query the store for it at once."""
        if task_filter == self.task_filter:
            return
        self.task_filter = task_filter
        self._generation += 1
        self.request_refresh()

    def request_refresh(self) -> None:
        """Start a refresh in a worker thread (one at a time; a request meanwhile queues one)."""
        if self._in_flight:
            self._again = True
            return
        self._in_flight = True
        self._again = False
        self._requests += 1
        detail = self._detail_screen()
        watched = set(self.pending)
        if self.note is not None and self.note.task_id is not None:
            watched.add(self.note.task_id)  # is what the line says of it still true?
        job = functools.partial(
            self._fetch,
            self.task_filter,
            self._generation,
            None if detail is None else detail.task_id,
            tuple(sorted(watched)),
            self._requests,
        )
        self._in_background(job, "refresh")

    def _in_background(self, job: Callable[[], None], what: str) -> None:
        """Run `job` (store calls that post their result) in a daemon thread; a result that
        arrives after the app closed is dropped."""

        def run() -> None:
            try:
                job()
            except RuntimeError:  # posting to an app (and a loop) that closed meanwhile
                if self.is_running:
                    raise

        threading.Thread(target=run, name=f"chongming-dashboard-{what}", daemon=True).start()

    def _fetch(
        self,
        task_filter: TaskFilter,
        generation: int,
        detail_id: str | None,
        watched: tuple[str, ...],
        request: int,
    ) -> None:
        try:
            refresh = fetch(
                self.controller,
                task_filter,
                clock=self.clock,
                generation=generation,
                detail_id=detail_id,
                watched_ids=watched,
                request=request,
                waiting_reason=self.waiting_reason,
            )
        except Exception as exc:
            self.post_message(RefreshFailed(exc))
        else:
            self.post_message(Refreshed(refresh))

    def on_refreshed(self, message: Refreshed) -> None:
        """Apply a refresh to every screen that shows it."""
        self._in_flight = False
        self._error = None
        refresh = message.refresh
        if refresh.generation != self._generation:
            self._again = True  # the view changed while it ran: fetch the new one
        else:
            self._apply(refresh)
        if self._again:
            self.request_refresh()

    def on_refresh_failed(self, message: RefreshFailed) -> None:
        """Keep the last data, say what went wrong, try again on the next tick."""
        self._in_flight = False
        self._error = str(message.error)
        self._show_header()
        if self._again:
            self.request_refresh()

    def _apply(self, refresh: Refresh) -> None:
        assert refresh.now is not None
        self.latest = refresh
        self.refresh_count += 1
        # outcomes first: the detail must not show "pause requested, not confirmed yet"
        # beside the very refresh that confirmed the pause
        for task_id, snapshot in refresh.watched.items():
            pending = self.pending.get(task_id)
            if pending is None:
                continue
            outcome = pending.settle(snapshot)
            if outcome is not None:
                del self.pending[task_id]
                style = "green" if "confirmed" in outcome else "yellow"
                if snapshot is None:
                    self.say(outcome, style, passing=True)
                else:
                    self.say(outcome, style, about=task_id, version=snapshot.status_version)
        self.overview.show(refresh)
        for screen in self.screen_stack:
            if isinstance(screen, NodesScreen):
                screen.show(refresh.workers, refresh.now, refresh.active)
        detail = self._detail_screen()
        if detail is not None and detail.task_id == refresh.detail_id:
            detail.show(
                refresh.detail, refresh.history, refresh.now, self.pending.get(detail.task_id)
            )
        self._check_note(refresh)
        self._show_header()

    def _show_header(self) -> None:
        latest = self.latest
        age = None if latest is None else max(0.0, self.clock.monotonic() - latest.fetched_at)
        info = HeaderInfo(
            store_label=self.store_label,
            owner=self.controller.owner,
            buckets=self.buckets_label,
            stats=None if latest is None else latest.stats,
            age=age,
            live=self.live,
            error=self._error,
        )
        for screen in self.screen_stack:
            for header in screen.query(DashboardHeader):
                header.show(info)
        self._check_note(None)

    def _detail_screen(self) -> TaskDetailScreen | None:
        for screen in reversed(self.screen_stack):
            if isinstance(screen, TaskDetailScreen):
                return screen
        return None

    def action_refresh_now(self) -> None:
        """Refresh at once."""
        self.request_refresh()

    def action_toggle_live(self) -> None:
        """Pause or resume the periodic refresh."""
        if self._live_timer is None:
            self._live_timer = self.set_interval(self.refresh_interval or 1.0, self.request_refresh)
            self._live = True
            self.request_refresh()
        elif self._live:
            self._live_timer.pause()
            self._live = False
        else:
            self._live_timer.resume()
            self._live = True
            self.request_refresh()
        self._show_header()
        if self.live:
            self.say("live refresh on", passing=True)
        else:
            self.say("live refresh off: press l to resume", while_live_off=True)

    # ------------------------------------------------------------------ status line
    def say(
        self,
        text: str,
        style: str = "",
        *,
        about: str | None = None,
        version: int | None = None,
        while_pending: bool = False,
        passing: bool = False,
        while_live_off: bool = False,
    ) -> None:
        """Tell the operator `text` on every screen's status line, until it stops holding.

        Args:
            text: the sentence.
            style: its Rich style.
            about: the task it speaks of: it goes when a refresh shows that task changed
                (at another `version`; None: the one the next refresh shows) or gone.
            version: the task's ``status_version`` the sentence is true of (None: the one
                the next refresh shows).
            while_pending: it holds while the action on `about` awaits its effect.
            passing: a remark about no task; it goes after `PASSING_SECONDS`.
            while_live_off: it holds while the periodic refresh is off.
        """
        self.note = Note(
            text,
            style,
            task_id=about,
            version=version,
            known=version is not None,
            after=self._requests,
            while_pending=while_pending,
            expires_at=self.clock.monotonic() + PASSING_SECONDS if passing else None,
            while_live_off=while_live_off,
        )
        self.said.append(text)
        self._show_said(text, style)

    def _show_said(self, text: str, style: str) -> None:
        self.last_said = (text, style)
        for screen in self.screen_stack:
            for line in screen.query(StatusLine):
                line.say(text, style)

    def _check_note(self, refresh: Refresh | None) -> None:
        """Clear the status line once what it says no longer holds."""
        note = self.note
        if note is None:
            return
        if not note.holds(
            monotonic=self.clock.monotonic(),
            live=self.live,
            pending=self.pending,
            refresh=refresh,
        ):
            self.note = None
            self._show_said("", "")

    def action_nodes(self) -> None:
        """Show the workers that serve the store."""
        if not isinstance(self.screen, NodesScreen):
            self.push_screen(NodesScreen())

    def action_keys(self) -> None:
        """Show every key (the key bar shows the main ones only)."""
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.key_places()))

    def key_places(self) -> list[tuple[str, list[BindingType]]]:
        """Where each set of keys works, for the key screen."""
        return [
            ("everywhere", list(self.BINDINGS)),
            ("overview", [*TaskTable.BINDINGS, *OverviewScreen.BINDINGS]),
            ("detail", list(TaskDetailScreen.BINDINGS)),
            ("reconcile", list(ReconcileScreen.BINDINGS)),
            ("stop dialog", list(StopDialog.BINDINGS)),
            ("filter prompt", list(PromptDialog.BINDINGS)),
            ("keys", list(HelpScreen.BINDINGS)),
        ]

    # ------------------------------------------------------------------ navigation
    def open_detail(self, task_id: str) -> None:
        """Show one task in full."""
        self.push_screen(TaskDetailScreen(task_id))
        self.request_refresh()

    def prompt_filter(self, field: str) -> None:
        """Ask for the value of a tag, bucket or name-prefix filter."""
        current = getattr(self.task_filter, field)

        def apply(value: str | None) -> None:
            if value is None:
                return
            if field == "bucket" and value:
                try:
                    number = int(value)
                except ValueError:
                    self.say(
                        f"bucket must be a whole number, got {value!r}", "bold red", passing=True
                    )
                    return
                self.set_filter(self.task_filter.replace(bucket=number))
                return
            self.set_filter(self.task_filter.replace(**{field: value or None}))

        self.push_screen(
            PromptDialog(
                _PROMPTS[field],
                value="" if current is None else str(current),
                integer=field == "bucket",
                cursor_blink=self.cursor_blink,
            ),
            callback=apply,
        )

    def action_reconcile(self) -> None:
        """Show what a reconcile would do (a dry run)."""
        self.push_screen(ReconcileScreen())

    def run_reconcile(self, screen: ReconcileScreen) -> None:
        """Run ``reconcile(dry_run=True)`` off the UI thread and show it on `screen`."""

        def job() -> None:
            try:
                report = self.controller.reconcile(dry_run=True)
            except Exception as exc:
                self.call_from_thread(screen.show_error, exc)
            else:
                self.call_from_thread(screen.show, report, self.clock.now())

        self._in_background(job, "reconcile")

    # ------------------------------------------------------------------ controls
    def _target(self) -> str | None:
        screen = self.screen
        if isinstance(screen, TaskDetailScreen):
            return screen.task_id
        if isinstance(screen, OverviewScreen):
            return screen.selected_task_id()
        return None

    def _known(self, task_id: str) -> TaskSnapshot | None:
        latest = self.latest
        if latest is None:
            return None
        if latest.detail_id == task_id and latest.detail is not None:
            return latest.detail
        return next((s for s in latest.tasks if s.task_id == task_id), None)

    def _checked_target(self, action: str) -> TaskSnapshot | None:
        task_id = self._target()
        if task_id is None:
            self.say(f"select a task to {action}", "yellow", passing=True)
            return None
        snapshot = self._known(task_id)
        if snapshot is None:
            self.say(
                f"{task_id} is not loaded yet; try again after the refresh", "yellow", passing=True
            )
            return None
        if snapshot.is_terminal:
            self.say(
                f"{task_id} is already {snapshot.status.value}: nothing to {action}",
                "yellow",
                about=task_id,
                version=snapshot.status_version,
            )
            return None
        return snapshot

    def action_stop_task(self) -> None:
        """Ask for a reason and a confirmation, then request the stop."""
        snapshot = self._checked_target("stop")
        if snapshot is None:
            return
        task_id = snapshot.task_id

        def confirmed(reason: str | None) -> None:
            if reason is None:
                self.say(f"stop of {task_id} cancelled", passing=True)
            else:
                self._control("stop", task_id, reason)

        self.push_screen(StopDialog(snapshot, cursor_blink=self.cursor_blink), callback=confirmed)

    def action_pause_task(self) -> None:
        """Request a pause of the selected task."""
        snapshot = self._checked_target("pause")
        if snapshot is not None:
            self._control("pause", snapshot.task_id, None)

    def action_resume_task(self) -> None:
        """Request a resume of the selected task."""
        snapshot = self._checked_target("resume")
        if snapshot is not None:
            self._control("resume", snapshot.task_id, None)

    def _control(self, action: str, task_id: str, reason: str | None) -> None:
        self.say(f"{action} of {task_id}: sending…", "dim", about=task_id)
        elsewhere = "command sent to its holder"
        known, latest = self._known(task_id), self.latest
        if known is not None and latest is not None and latest.now is not None:
            health = assess(known, latest.now, self.idle_threshold)
            if health.lease_expired and health.lease_left is not None:
                elsewhere = (
                    f"command sent, but its holder {printable(repr(known.lease_owner or '-'))} "
                    f"stopped renewing its lease {format_age(-health.lease_left)} ago: it may "
                    "never be applied"
                )
        job = functools.partial(self._control_in_thread, action, task_id, reason, elsewhere)
        self._in_background(job, "control")

    def _control_in_thread(
        self, action: str, task_id: str, reason: str | None, elsewhere: str
    ) -> None:
        controller = self.controller
        here = controller.run(task_id) is not None
        where = "this process holds it" if here else elsewhere
        try:
            if action == "stop":
                sent = controller.stop(task_id, reason=reason)
                done = ActionDone(
                    task_id,
                    action,
                    f"stop of {task_id} requested ({where}), not confirmed yet"
                    if sent
                    else f"stop of {task_id} not sent: the task is unknown or already finished",
                    pending=sent,
                )
            elif action == "pause":
                confirmed = controller.pause(task_id)
                if confirmed:
                    done = ActionDone(task_id, action, f"pause of {task_id} confirmed: paused",
                                      pending=False)  # fmt: skip
                elif here:
                    done = ActionDone(
                        task_id,
                        action,
                        f"pause of {task_id} not reached in its window: the task runs on",
                        pending=False,
                    )
                else:
                    done = ActionDone(
                        task_id,
                        action,
                        f"pause of {task_id} requested ({where}), not confirmed",
                        pending=True,
                    )
            else:
                accepted = controller.resume(task_id)
                done = ActionDone(
                    task_id,
                    action,
                    f"resume of {task_id} requested ({where}), not confirmed yet"
                    if accepted
                    else f"resume of {task_id} not sent: the task is not paused",
                    pending=accepted,
                )
        except Exception as exc:
            done = ActionDone(task_id, action, f"{action} of {task_id} failed: {exc}",
                              pending=False, error=True)  # fmt: skip
        self.post_message(done)

    def on_action_done(self, message: ActionDone) -> None:
        """Report the call's result; watch for its effect when one is expected."""
        style = "bold red" if message.error else ("yellow" if message.pending else "green")
        self.say(message.text, style, about=message.task_id, while_pending=message.pending)
        if message.pending:
            self.pending[message.task_id] = PendingAction(message.task_id, message.action)
        self.request_refresh()
