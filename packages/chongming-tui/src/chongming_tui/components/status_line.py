"""The one-line answer to the operator's last action ("pause requested, not confirmed")."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

__all__ = ["StatusLine"]


class StatusLine(Static):
    """The latest action result or warning, in its style."""

    def on_mount(self) -> None:
        """Show what the app said last (a screen opened later starts in sync)."""
        said = getattr(self.app, "last_said", None)
        if isinstance(said, tuple) and len(said) == 2:
            self.say(str(said[0]), str(said[1]))

    def say(self, text: str, style: str = "") -> None:
        """Show `text` in `style`."""
        self.update(Text(text, style=style))
