"""Generated task ids: 48 random bits each, without a system call per id.

`os.urandom` is a system call that also gives up the GIL, which under load costs a
thread switch per submitted task. Ids only need to be unique, not secret, so they
come from a private generator seeded from `os.urandom` and seeded again in every
forked child (a child must never repeat its parent's sequence). It is private so
that a program calling ``random.seed()`` cannot make two processes draw the same ids.
"""

from __future__ import annotations

import os
import random

__all__ = ["random_hex12"]

_generator = random.Random(os.urandom(32))


def _reseed() -> None:
    _generator.seed(os.urandom(32))


os.register_at_fork(after_in_child=_reseed)

_bits = _generator.getrandbits


def random_hex12() -> str:
    """12 lowercase hex digits (48 random bits)."""
    return f"{_bits(48):012x}"
