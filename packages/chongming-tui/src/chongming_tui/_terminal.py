"""Whether the dashboard has a terminal to draw on and read keys from."""

from __future__ import annotations

from typing import TextIO

__all__ = ["terminal_problem"]


def terminal_problem(stdin: TextIO | None, stdout: TextIO | None) -> str | None:
    """Why the dashboard cannot run on these streams (one line), or None when both are a
    terminal."""
    missing = [
        name
        for name, stream in (("input", stdin), ("output", stdout))
        if stream is None or not _is_terminal(stream)
    ]
    if not missing:
        return None
    which = " and ".join(f"standard {name}" for name in missing)
    return (
        f"the dashboard needs a terminal, and its {which} "
        f"{'is' if len(missing) == 1 else 'are'} not one (a pipe, a file or /dev/null); "
        "run it in a terminal, or use chongming-task ps or status for output to pipe or save"
    )


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, OSError):  # closed or detached
        return False
