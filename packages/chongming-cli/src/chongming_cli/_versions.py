"""``--version``: which chongming distributions are installed, and at which version."""

from __future__ import annotations

import re
from importlib.metadata import distributions

__all__ = ["chongming_versions", "versions_text"]

_CHONGMING = re.compile(r"^chongming[-_.]", re.IGNORECASE)


def chongming_versions() -> dict[str, str]:
    """Every installed distribution named ``chongming-*`` (third-party backends too), by
    normalised name, sorted."""
    found: dict[str, str] = {}
    for dist in distributions():
        name = dist.metadata["Name"] or ""
        if _CHONGMING.match(name):
            found[re.sub(r"[-_.]+", "-", name).lower()] = dist.version
    return dict(sorted(found.items()))


def versions_text() -> str:
    """One ``name version`` line per installed chongming distribution."""
    found = chongming_versions()
    if not found:  # run from a source tree without installing: say so, not nothing
        return "no chongming distribution is installed (running from sources?)"
    width = max(len(name) for name in found)
    return "\n".join(f"{name:<{width}}  {version}" for name, version in found.items())
