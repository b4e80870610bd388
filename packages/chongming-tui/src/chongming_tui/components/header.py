"""The dashboard header: where, who, how fresh, and how many tasks in each status.

It is laid out for its width: the first line gives way (a shorter form, then a cut
with ``…``) so that it never wraps into the lines below it, and the status counts
wrap between two counts, never inside one, so every count stays in sight.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.widgets import Static

from chongming_core import TaskStatus
from chongming_runtime import ControllerStats
from chongming_tui._format import STATUS_STYLES, format_age, literal, shortened

__all__ = ["DashboardHeader", "HeaderInfo", "header_text"]

_PAIR_GAP = "  "


@dataclass(frozen=True, slots=True)
class HeaderInfo:
    """What the header says.

    Attributes:
        store_label: the store (a path, or a redacted DSN).
        owner: this console's owner.
        buckets: the buckets it looks after (``all`` or runs).
        stats: per-status counts (None: not loaded yet).
        age: seconds since the data was read (None: loading).
        live: whether the periodic refresh runs.
        error: the last refresh's error (None: it worked).
    """

    store_label: str
    owner: str
    buckets: str
    stats: ControllerStats | None
    age: float | None
    live: bool
    error: str | None = None


def _where(info: HeaderInfo, *, compact: bool, store_width: int | None = None) -> Text:
    text = Text()
    if not compact:
        text.append("chongming", style="bold")
        text.append("  store ", style="dim")
    store = literal(info.store_label)
    if store_width is not None:
        store = shortened(info.store_label, store_width)
    text.append_text(store)
    text.append("  console " if not compact else "  ", style="dim")
    text.append_text(literal(info.owner))
    text.append("  buckets ", style="dim")
    text.append(info.buckets)
    text.append("  ")
    if info.age is None:
        text.append("loading…", style="dim")
    elif compact:
        text.append(f"{format_age(info.age)} ago", style="dim")
    else:
        text.append(f"refreshed {format_age(info.age)} ago", style="dim")
    if not info.live:
        text.append("  live refresh off", style="bold yellow")
    return text


def _first_line(info: HeaderInfo, width: int | None) -> Text:
    """The full line when it fits; else a compact one, its store label cut in the middle
    to make room; cut at the end with ``…`` as a last resort."""
    full = _where(info, compact=False)
    if width is None or full.cell_len <= width:
        return full
    compact = _where(info, compact=True)
    over = compact.cell_len - width
    if over > 0:
        store = cell_len(literal(info.store_label).plain)
        compact = _where(info, compact=True, store_width=max(12, store - over))
    compact.truncate(width, overflow="ellipsis")
    return compact


def _count_pairs(stats: ControllerStats) -> list[Text]:
    pairs: list[Text] = []
    for status in TaskStatus:
        count = stats.counts.get(status, 0)
        if count:
            pair = Text()
            pair.append(f"{status.value} ", style=STATUS_STYLES[status])
            pair.append(f"{count:,}")
            pairs.append(pair)
    for label, value in (("unfinished", stats.unfinished), ("total", stats.total)):
        pair = Text()
        pair.append(f"{label} ", style="dim")
        pair.append(f"{value:,}")
        pairs.append(pair)
    return pairs


def _wrapped(pairs: list[Text], width: int | None) -> list[Text]:
    """`pairs` on as few lines of `width` as they fit, never split inside a pair."""
    lines: list[Text] = [Text()]
    for pair in pairs:
        line = lines[-1]
        gap = _PAIR_GAP if line.plain else ""
        if width is not None and line.plain and line.cell_len + len(gap) + pair.cell_len > width:
            lines.append(Text())
            line, gap = lines[-1], ""
        line.append(gap)
        line.append_text(pair)
    return lines


def header_text(info: HeaderInfo, width: int | None = None) -> Text:
    """The store, the console and the refresh state on one line (an error on its own),
    then the status counts, laid out for `width` cells (None: one line each)."""
    lines = [_first_line(info, width)]
    if info.error is not None:
        error = literal(f"store error: {info.error}", "bold red")
        if width is not None:
            error.truncate(width, overflow="ellipsis")
        lines.append(error)
    if info.stats is not None:
        lines.extend(_wrapped(_count_pairs(info.stats), width))
    return Text("\n").join(lines)


class DashboardHeader(Static):
    """Shows `header_text` for its width; the app calls `show` on every refresh and every
    second, and a resize lays it out again."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._info: HeaderInfo | None = None

    def show(self, info: HeaderInfo) -> None:
        """Replace the content."""
        self._info = info
        self._lay_out()

    def on_resize(self, event: events.Resize) -> None:
        """Lay the lines out for the new width."""
        self._lay_out()

    def _lay_out(self) -> None:
        if self._info is None:
            return
        room = self.content_size.width
        self.update(header_text(self._info, room if room > 0 else None))
