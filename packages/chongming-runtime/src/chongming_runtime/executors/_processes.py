"""Small process facts for `ProcessExecutor`: a process's descendants, a class's name.

A force stop ends what the body started too, so it needs the child's descendants:
read from ``/proc`` (Linux), each with its start time, so that a pid reused later
is never signalled. Elsewhere the list is empty and the child alone is signalled.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["descendants", "qualified_name", "same_process"]

_PROC = Path("/proc")


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of `pid`, or None when it is gone."""
    try:
        fields = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19])


def descendants(pid: int) -> list[tuple[int, int]]:
    """Every live descendant of `pid` as (pid, start time), children first; empty where
    ``/proc`` is not available."""
    if not _PROC.is_dir():
        return []
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.scandir(_PROC):
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is not None:
            children.setdefault(stat[0], []).append((int(entry.name), stat[1]))
    found: list[tuple[int, int]] = []
    frontier = [pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.append(child)
            frontier.append(child[0])
    return found


def same_process(pid: int, started: int) -> bool:
    """True when `pid` still names the process that started at `started` (not a reuse)."""
    stat = _stat(pid)
    return stat is not None and stat[1] == started


def qualified_name(cls: type) -> str:
    """``module.QualName`` of `cls`, with the name ``spawn`` gives a re-imported main script
    (``__mp_main__``) read as ``__main__``, as the parent knows it."""
    module = "__main__" if cls.__module__ == "__mp_main__" else cls.__module__
    return f"{module}.{cls.__qualname__}"
