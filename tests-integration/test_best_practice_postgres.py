"""examples/11_best_practice.py against PostgreSQL (the SQLite run is in test_examples.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.postgres
def test_best_practice_on_postgres(postgres_dsn: str, tmp_path: Path) -> None:
    import psycopg
    from psycopg import sql

    schema = f"chongming_example_{uuid.uuid4().hex[:10]}"
    env = dict(
        os.environ,
        CHONGMING_EXAMPLE_DSN=postgres_dsn,
        CHONGMING_EXAMPLE_SCHEMA=schema,
        CHONGMING_EXAMPLE_TMP=str(tmp_path),
    )
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "11_best_practice.py")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        assert "all checks passed" in done.stdout
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
