"""A one-line prompt for a filter value (tag, bucket, name prefix)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

__all__ = ["PromptDialog"]


class PromptDialog(ModalScreen[str | None]):
    """Returns the text entered (empty: clear the filter), or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", tooltip="leave the filter as it was")
    ]

    def __init__(
        self,
        title: str,
        *,
        value: str = "",
        integer: bool = False,
        cursor_blink: bool = True,
    ) -> None:
        super().__init__()
        self._title = title
        self._value = value
        self._integer = integer
        self._cursor_blink = cursor_blink

    def compose(self) -> ComposeResult:
        """Title, box, hint."""
        with Vertical(id="prompt-dialog"):
            yield Static(self._title, id="prompt-title")
            box = Input(
                value=self._value, type="integer" if self._integer else "text", id="prompt-value"
            )
            box.cursor_blink = self._cursor_blink
            yield box
            yield Static("enter: apply (empty clears)  escape: cancel", id="prompt-hint")

    def on_mount(self) -> None:
        """Focus the box."""
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Apply."""
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        """Leave the filter as it was."""
        self.dismiss(None)
