"""Store selection, URLs and redaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from chongming_cli import CliError, redact_url, sqlite_url
from chongming_cli._stores import open_store, resolve_location, scrub
from chongming_store_sqlite import SqliteTaskStore


def test_sqlite_urls_keep_absolute_paths(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "my tasks.db")
    assert url.startswith("sqlite:////")
    assert url.endswith("/my%20tasks.db")
    store = open_store(resolve_location(None, url, {}), create=True)
    try:
        assert isinstance(store, SqliteTaskStore)
    finally:
        store.close()
    assert (tmp_path / "my tasks.db").exists()


def test_precedence_options_then_environment_then_default() -> None:
    env = {"CHONGMING_DB": "env.db", "CHONGMING_DSN": "postgresql://u@h/db"}
    assert resolve_location("opt.db", None, env).label == "opt.db"
    assert resolve_location(None, "sqlite:///x.db", env).source == "--dsn"
    assert resolve_location(None, None, env).source == "CHONGMING_DSN"
    assert resolve_location(None, None, {"CHONGMING_DB": "env.db"}).label == "env.db"
    default = resolve_location(None, None, {})
    assert default.label == "chongming.db"
    assert default.url.endswith("/chongming.db")
    with pytest.raises(CliError, match="only one"):
        resolve_location("a.db", "sqlite:///b.db", {})
    with pytest.raises(CliError, match="pass URLs with --dsn"):
        resolve_location("postgresql://u:pw@h/db", None, {})
    with pytest.raises(CliError, match="must be a store URL") as refused:
        resolve_location(None, "host=db password=x", {})
    # the form the PostgreSQL store's own errors mention is named, with the URL to write
    assert "libpq's key=value form" in refused.value.message
    assert "postgresql://USER:PASSWORD@HOST:PORT/DBNAME" in refused.value.message
    assert "password=x" not in refused.value.message
    with pytest.raises(CliError, match="must be a store URL such as") as other:
        resolve_location(None, "db.example:5432/tasks", {})
    assert "key=value" not in other.value.message


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cret@db:5432/t", "postgresql://app:****@db:5432/t"),
        ("mystore://app:s3cret@db/t", "mystore://app:****@db/t"),
        ("mystore://db/t?password=s3cret&x=1", "mystore://db/t?password=****&x=1"),
        ("postgresql://app@db/t", "postgresql://app@db/t"),
        # not percent-encoded: hidden whole, up to the last "@"
        ("postgresql://app:ab/s3cret@db:1/t", "postgresql://app:****@db:1/t"),
        ("postgresql://app:s3c@s3cret@db:1/t", "postgresql://app:****@db:1/t"),
        ("mystore://app:ab/s3cret@db/t", "mystore://app:****@db/t"),
        ("mystore://app:s3c@s3cret@db/t", "mystore://app:****@db/t"),
    ],
)
def test_passwords_are_redacted(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    location = resolve_location(None, url, {})
    assert "s3cret" not in location.label
    assert scrub(f"could not connect to {url}", location.secrets).count("s3cret") == 0


def test_unknown_schemes_and_missing_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="no store backend handles nosuch://"):
        open_store(resolve_location(None, "nosuch://x", {}), create=False)
    missing = tmp_path / "typo.db"
    with pytest.raises(CliError, match="no task database"):
        open_store(resolve_location(str(missing), None, {}), create=False)
    assert not missing.exists()
