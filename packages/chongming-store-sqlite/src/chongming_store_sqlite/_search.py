"""The search key: what ``TaskQuery.search`` matches, stored case-folded per task."""

from __future__ import annotations

__all__ = ["SEARCH_KEY_FUNCTION", "UNSAFE_IN_NEEDLE", "search_key"]

#: The name of the SQL function `search_key` is registered as (used by a migration).
SEARCH_KEY_FUNCTION = "chongming_search_key"

#: Separates the three texts of a search key; a needle containing it (or a NUL or
#: U+FFFD, which the key uses in place of NUL) is matched by `search_matches` instead.
_KEY_SEPARATOR = "\x1f"
UNSAFE_IN_NEEDLE = ("\x00", "\ufffd", _KEY_SEPARATOR)


def search_key(task_id: str, name: str, label: str | None) -> str:
    """The case-folded text ``search`` looks in: id, name and label, NUL-free.

    SQLite's ``instr`` sees text as C strings, so a NUL becomes U+FFFD here; needles that
    could be affected by that (see `UNSAFE_IN_NEEDLE`) are matched in Python instead.
    """
    joined = _KEY_SEPARATOR.join((task_id, name, label or ""))
    return joined.casefold().replace("\x00", "\ufffd")
