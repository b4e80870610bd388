"""Put this folder on sys.path so the tests can share `run_helpers` (and the process executor's
children can import `runtime_proc_tasks`)."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
