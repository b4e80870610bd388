"""Optional parts of the umbrella that are resolved on first use."""

from __future__ import annotations

import importlib
from typing import Any

#: name -> (module, attribute, the extra that provides it)
OPTIONAL: dict[str, tuple[str, str, str]] = {
    "PostgresTaskStore": ("chongming_store_postgres", "PostgresTaskStore", "postgres"),
    "redact_dsn": ("chongming_store_postgres", "redact_dsn", "postgres"),
}


def resolve(name: str) -> Any:
    """Import an optional name, or raise an ImportError that says what to install."""
    module_name, attribute, extra = OPTIONAL[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(
            f"chongming_task.{name} needs the {extra!r} extra, which is not installed "
            f'({exc}); install it with: pip install "chongming-task[{extra}]"',
            name=module_name,
        ) from exc
    return getattr(module, attribute)
