"""Checks on text that becomes part of a task's record."""

from __future__ import annotations

from chongming_core import ConfigurationError

__all__ = ["refuse_nul"]


def refuse_nul(field: str, value: object) -> None:
    """Refuse text with a NUL byte: not every store can keep it (PostgreSQL cannot), and a task
    that reached one store but not another would tell two stories."""
    if isinstance(value, str) and "\x00" in value:
        raise ConfigurationError(
            f"{field} {value!r} contains a NUL byte (\\x00), which not every store can keep "
            "(PostgreSQL cannot); remove it or replace it, e.g. with value.replace('\\x00', '')"
        )
