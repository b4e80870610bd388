"""examples/17_workers.py on PostgreSQL: a producer and two worker processes sharing a schema.

(`test_examples.py` runs it on a SQLite file, as every example.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.postgres
def test_the_workers_example_runs_on_postgres(postgres_dsn: str, tmp_path: Path) -> None:
    env = dict(
        os.environ, CHONGMING_EXAMPLE_TMP=str(tmp_path), CHONGMING_EXAMPLE_POSTGRES=postgres_dsn
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "17_workers.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "both workers left cleanly" in done.stdout
