"""``python -m chongming_cli``: the same as the ``chongming-task`` command."""

from __future__ import annotations

from chongming_cli import main

raise SystemExit(main())
