"""The one-line answer to the operator's last action ("pause requested, not confirmed")."""

from __future__ import annotations

from textual.widgets import Static

from chongming_tui._format import literal

__all__ = ["StatusLine"]


class StatusLine(Static):
    """The latest action result or warning, in its style."""

    def on_mount(self) -> None:
        """Show what the app said last (a screen opened later starts in sync)."""
        said = getattr(self.app, "last_said", None)
        if isinstance(said, tuple) and len(said) == 2:
            self.say(str(said[0]), str(said[1]))

    def say(self, text: str, style: str = "") -> None:
        """Show `text` in `style` (literally: it may quote a task's id or an error)."""
        self.update(literal(text, style))
