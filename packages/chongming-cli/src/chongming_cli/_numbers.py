"""Whole numbers typed on the command line: ASCII digits only.

Python's `int` also reads digits of other scripts (``١`` is 1), underscores (``1_0``), a
plus sign and surrounding blanks. A console that deletes tasks by a count (``prune
--keep-terminal``) reads only what it shows back the same way: an optional minus sign
and the digits 0-9.
"""

from __future__ import annotations

import re

__all__ = ["whole_number"]

_WHOLE = re.compile(r"-?[0-9]+")


def whole_number(text: str) -> int:
    """`text` as an integer: an optional ``-`` and the ASCII digits 0-9, nothing else.

    Raises:
        ValueError: anything else (``1e3``, ``0x10``, ``1_0``, ``+3``, `` 3``, ``١``).
    """
    if not _WHOLE.fullmatch(text):
        raise ValueError(f"{text!r} is not a whole number")
    return int(text)
