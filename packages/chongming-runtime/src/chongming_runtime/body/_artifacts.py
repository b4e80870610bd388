"""The artifact folder of an attempt: ``<root>/<folder of the task id>/attempt-<n>`` (§2.4).

A task id is any text, a folder name is not: ``x/y`` and ``..`` are paths, not names,
``Job`` and ``job`` are one folder on a case-insensitive file system, ``con`` is a
device on Windows, and a name longer than 255 bytes cannot be created at all. So an
id is used as its folder's name only when it is a plain name on every common file
system (lower-case ASCII letters, digits, ``.``, ``_``, ``-``; at most 64 characters;
no trailing dot; no device name). Any other id gets a readable prefix of itself
followed by ``~`` and 16 hex digits of the SHA-256 of the exact id. No plain name
holds ``~`` and every other name does, so two distinct ids never share a folder (but
for a 64-bit hash collision), and every name stays far below the 255-byte limit.

Folders are made owner-only (mode 0o700), like the database file: an attempt's
output is task data.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

__all__ = ["artifact_folder", "folder_name", "make_private_dirs"]

#: Mode of every folder made here (the umask cannot widen it; it is set after mkdir).
FOLDER_MODE = 0o700

_PLAIN = re.compile(r"[a-z0-9_][a-z0-9._-]{0,63}")
_DEVICES = frozenset(
    {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
)
_HASH_DIGITS = 16
_PREFIX_CHARS = 40
_PREFIX_BYTES = 120  # 40 CJK characters: the whole name stays under 140 bytes


def _is_plain(task_id: str) -> bool:
    return (
        _PLAIN.fullmatch(task_id) is not None
        and not task_id.endswith(".")
        and task_id.split(".", 1)[0] not in _DEVICES
    )


def _prefix(task_id: str) -> str:
    """The readable part: letters and digits of any script, ``_`` and ``-``; anything
    else (separators, dots, spaces, controls, lone surrogates) becomes ``_``."""
    kept: list[str] = []
    size = 0
    for char in task_id[:_PREFIX_CHARS]:
        shown = char if char.isalnum() or char in "_-" else "_"
        size += len(shown.encode("utf-8"))
        if size > _PREFIX_BYTES:
            break
        kept.append(shown)
    return "".join(kept) or "_"


def folder_name(task_id: str) -> str:
    """The name of `task_id`'s artifact folder: the id itself when it is a plain name,
    else ``<readable prefix>~<16 hex digits of its SHA-256>`` (see the module docstring)."""
    if _is_plain(task_id):
        return task_id
    digest = hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{_prefix(task_id)}~{digest[:_HASH_DIGITS]}"


def artifact_folder(root: Path, task_id: str, attempt: int) -> Path:
    """``<root>/<folder_name(task_id)>/attempt-<attempt>``, created owner-only if missing."""
    folder = root / folder_name(task_id) / f"attempt-{attempt}"
    make_private_dirs(folder)
    return folder


def make_private_dirs(folder: Path) -> None:
    """Create `folder` and its missing parents with mode 0o700; existing ones are kept as
    they are (their owner chose their mode)."""
    missing: list[Path] = []
    current = folder
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, FOLDER_MODE)
        except FileExistsError:
            if path.is_dir():
                continue  # another attempt or process made it first
            raise
        # the umask may have removed bits the owner needs; it must never have fewer
        os.chmod(path, FOLDER_MODE)
