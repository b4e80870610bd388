"""Shell completion (bash, zsh, fish) through argcomplete.

The shell runs ``chongming-task`` with ``_ARGCOMPLETE`` set (see docs/cli.md for
how to activate it); only then is argcomplete imported, so an ordinary command
pays nothing for it. Completion reads no store: commands, options and the
values of ``--status`` and ``--executor`` are known without one.
"""

from __future__ import annotations

import argparse
import os

__all__ = ["complete_if_asked"]


def complete_if_asked(parser: argparse.ArgumentParser) -> None:
    """Print the completions the shell asked for and exit; return at once otherwise."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete  # noqa: PLC0415 - only when a shell asks for completions

    argcomplete.autocomplete(parser)
