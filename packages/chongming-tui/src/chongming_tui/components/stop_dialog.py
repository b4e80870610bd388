"""The stop dialog: ask for a reason, then for confirmation.

A stop cannot be undone, so it takes two deliberate steps; the reason is
written into the task's history (and into the command row when another
process holds the task).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from chongming_core import TaskSnapshot
from chongming_tui._format import literal, status_text

__all__ = ["StopDialog"]


class StopDialog(ModalScreen[str | None]):
    """Returns the reason once confirmed, or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", tooltip="cancel: nothing is sent"),
        Binding("y", "confirm", "yes", show=False, tooltip="stop, once a reason is given"),
        Binding("n", "cancel", "no", show=False),
    ]

    def __init__(self, snapshot: TaskSnapshot, *, cursor_blink: bool = True) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.reason: str | None = None
        self._cursor_blink = cursor_blink

    def compose(self) -> ComposeResult:
        """Title, the reason box, the confirmation row."""
        s = self.snapshot
        title = Text("Stop task ", style="bold")
        title.append_text(literal(s.task_id, "bold"))
        title.append_text(literal(f"  {s.display_name}  "))
        title.append_text(status_text(s.status))
        with Vertical(id="stop-dialog"):
            yield Static(title, id="stop-title")
            yield Static("Why? The reason is recorded in the task's history.", id="stop-hint")
            reason = Input(placeholder="reason (required)", id="stop-reason")
            reason.cursor_blink = self._cursor_blink
            yield reason
            yield Static("", id="stop-confirm")
            with Horizontal(id="stop-buttons"):
                yield Button("Stop", variant="error", id="stop-yes", disabled=True)
                yield Button("Cancel", id="stop-no")

    def on_mount(self) -> None:
        """Start in the reason box."""
        self.query_one("#stop-reason", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter on the reason moves on to the confirmation step."""
        reason = event.value.strip()
        confirm = self.query_one("#stop-confirm", Static)
        if not reason:
            confirm.update(Text("A reason is required.", style="bold red"))
            return
        self.reason = reason
        question = Text("Stop ")
        question.append_text(literal(self.snapshot.task_id, "bold"))
        question.append(" with reason ")
        question.append_text(literal(reason, "bold"))
        question.append("?  y: stop  n: cancel")
        confirm.update(question)
        button = self.query_one("#stop-yes", Button)
        button.disabled = False
        button.focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Stop confirms, Cancel cancels."""
        if event.button.id == "stop-yes":
            self.action_confirm()
        else:
            self.action_cancel()

    def action_confirm(self) -> None:
        """Close with the reason (only once a reason was given)."""
        if self.reason is not None:
            self.dismiss(self.reason)

    def action_cancel(self) -> None:
        """Close without stopping."""
        self.dismiss(None)
