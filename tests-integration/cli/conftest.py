"""Fixtures of the CLI tests (the helpers live in `cli_support`, importable from the tests)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_support import Workspace, make_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """A fresh workspace per test."""
    return make_workspace(tmp_path / "ws")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """One workspace per module, for tests that only read."""
    return make_workspace(tmp_path_factory.mktemp("cli") / "ws")


@pytest.fixture
def pg_url(postgres_dsn: str) -> Iterator[str]:
    """A fresh database on the test server, as a postgresql:// URL."""
    name = f"chongming_cli_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(postgres_dsn)
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
