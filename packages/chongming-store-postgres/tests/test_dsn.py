"""`redact_dsn` and the DSN helpers (pure functions: no server needed)."""

from __future__ import annotations

import psycopg
import pytest

from chongming_core import ConfigurationError
from chongming_store_postgres import PostgresTaskStore, redact_dsn
from chongming_store_postgres._dsn import Target, dsn_secrets, parse_dsn, scrub
from chongming_store_postgres._errors import ErrorContext, RedactedDriverError
from chongming_store_postgres._watch import channel_name


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        (
            "postgresql://app:s3cr3t-pw@db.internal:5432/tasks",
            "postgresql://app:****@db.internal:5432/tasks",
        ),
        ("postgres://app:s3cr3t-pw@db/tasks", "postgres://app:****@db/tasks"),
        ("POSTGRESQL://app:pw@db/tasks", "POSTGRESQL://app:****@db/tasks"),
        ("postgresql://app@db:5432/tasks", "postgresql://app@db:5432/tasks"),
        ("postgresql://db/tasks", "postgresql://db/tasks"),
        ("postgresql://app:@db/tasks", "postgresql://app:****@db/tasks"),
        (
            "postgresql://app:p%40ss%3Aw@h1:5432,h2:5433/tasks?sslmode=require",
            "postgresql://app:****@h1:5432,h2:5433/tasks?sslmode=require",
        ),
        (
            "postgresql://db/tasks?user=app&password=s3cr3t-pw&sslmode=require",
            "postgresql://db/tasks?user=app&password=****&sslmode=require",
        ),
        (
            "postgresql://app:one@db/tasks?password=two",
            "postgresql://app:****@db/tasks?password=****",
        ),
        (
            "host=db port=5432 password=s3cr3t-pw dbname=tasks",
            "host=db port=5432 password=**** dbname=tasks",
        ),
        ("password=s3cr3t-pw host=db", "password=**** host=db"),
        ("host=db password = s3cr3t-pw user=app", "host=db password = **** user=app"),
        ("host=db password='s3cr3t pw' user=app", "host=db password=**** user=app"),
        (r"host=db password='it\'s \\ x' user=app", "host=db password=**** user=app"),
        (r"host=db password=back\ slash user=app", "host=db password=**** user=app"),
        ("host=db user=app", "host=db user=app"),
        # a password holding "/" or "@" as they are: hidden whole, up to the last "@"
        ("postgresql://app:ab/s3cr3t-pw@db:1/tasks", "postgresql://app:****@db:1/tasks"),
        ("postgresql://app:s3c@r3t-pw@db:1/tasks", "postgresql://app:****@db:1/tasks"),
        ("host=db PASSWORD=s3cr3t-pw", "host=db PASSWORD=****"),
        ("host=db passfile=/etc/pgpass user=app", "host=db passfile=/etc/pgpass user=app"),
        ("", ""),
    ],
)
def test_redact_dsn(dsn: str, expected: str) -> None:
    assert redact_dsn(dsn) == expected


def test_redact_dsn_hides_every_spelling_of_the_password() -> None:
    for dsn in [
        "postgresql://app:s3cr3t-pw@db/tasks",
        "postgresql://db/tasks?password=s3cr3t-pw",
        "host=db password=s3cr3t-pw",
        "host=db password='s3cr3t-pw'",
    ]:
        assert "s3cr3t" not in redact_dsn(dsn)


def test_secrets_cover_raw_decoded_and_quoted_forms() -> None:
    secrets = dsn_secrets("postgresql://app:p%40ss@db/tasks")
    assert "p%40ss" in secrets
    assert "p@ss" in secrets
    quoted = dsn_secrets(r"host=db password='a b\'c'")
    assert "a b'c" in quoted
    assert scrub("auth failed for 'a b'c' at db", quoted) == "auth failed for '****' at db"


def test_secrets_of_a_malformed_dsn_are_still_found() -> None:
    assert "s3cr3t-pw" in dsn_secrets("host=db password=s3cr3t-pw nonsense")


def test_target_describes_host_port_database_and_user_without_password() -> None:
    target = Target.of(parse_dsn("postgresql://app:s3cr3t-pw@db.internal:6543/tasks"))
    text = target.describe()
    assert text == "database 'tasks' on db.internal:6543 as user 'app'"
    defaults = Target.of(parse_dsn("dbname=tasks")).describe()
    assert "5432" in defaults
    assert "tasks" in defaults


def test_parse_error_never_shows_the_password() -> None:
    with pytest.raises(ValueError, match="missing") as info:
        parse_dsn("host=db password=s3cr3t-pw nonsense")
    assert "s3cr3t" not in str(info.value)


@pytest.mark.parametrize(
    "dsn",
    [
        "host=127.0.0.1 password=s3cr3t-pw nonsense",
        "host=127.0.0.1 password=s3cr3t-pw bogus_option=1",
        "postgresql://u:s3cr3t-pw@127.0.0.1/db?bogus=1",
    ],
)
def test_a_malformed_dsn_is_a_configuration_error_without_the_password(dsn: str) -> None:
    with pytest.raises(ConfigurationError, match="cannot parse the DSN") as info:
        PostgresTaskStore(dsn)
    assert "s3cr3t" not in str(info.value)
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"schema": ""}, "schema must be"),
        ({"schema": "x" * 64}, "63-byte"),
        ({"min_size": -1}, "min_size"),
        ({"max_size": 0}, "max_size"),
        ({"min_size": 3, "max_size": 2}, "max_size"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"connect_timeout": True}, "connect_timeout"),
    ],
)
def test_bad_options_are_configuration_errors(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        PostgresTaskStore("postgresql://u:s3cr3t-pw@127.0.0.1:1/db", **kwargs)  # type: ignore[arg-type]


def test_a_driver_error_holding_the_password_is_replaced_by_a_scrubbed_copy() -> None:
    dsn = "host=db password=s3cr3t-pw"
    errors = ErrorContext(
        store="PostgresTaskStore('host=db password=****')",
        target=Target.of(parse_dsn(dsn)),
        schema="chongming",
        secrets=dsn_secrets(dsn),
        connect_timeout=1.0,
    )
    leaky = psycopg.OperationalError('bad value near "s3cr3t-pw"')
    cause = errors.cause(leaky)
    assert isinstance(cause, RedactedDriverError)
    assert "psycopg.OperationalError" in str(cause)
    assert "****" in str(cause)
    assert "s3cr3t" not in str(cause)
    assert "s3cr3t" not in str(errors.failed(leaky, "reading task 'x'"))
    clean = psycopg.OperationalError("connection refused")
    assert errors.cause(clean) is clean
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = leaky
    assert isinstance(errors.cause(wrapped), RedactedDriverError)


def test_notify_channel_names_fit_postgres_identifier_limit() -> None:
    assert channel_name("chongming") == "chongming.commands"
    long_names = ["x" * 63, "数据" * 10, "x" * 60]
    channels = [channel_name(n) for n in long_names]
    assert all(len(c.encode("utf-8")) <= 63 for c in channels)
    assert len(set(channels)) == len(channels)


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://postgres:ab/S3cretPw@127.0.0.1:1/test",
        "postgresql://postgres:S3c@retPw@127.0.0.1:1/test",
        "postgresql://postgres:S3cretPw?x@127.0.0.1:1/test",
    ],
)
def test_a_password_that_is_not_percent_encoded_is_refused_before_connecting(dsn: str) -> None:
    """libpq would cut it at "/" or "@" and show the parts as a host or a database."""
    from chongming_store_postgres._url import store_from_url

    for open_store in (PostgresTaskStore, store_from_url):
        with pytest.raises(ConfigurationError, match="percent-encode") as caught:
            open_store(dsn)
        text = str(caught.value)
        assert "S3c" not in text
        assert "retPw" not in text
        assert "ab/" not in text


def test_a_malformed_url_is_a_configuration_error_without_the_password() -> None:
    from chongming_store_postgres._url import store_from_url

    with pytest.raises(ConfigurationError, match="cannot parse the DSN") as caught:
        store_from_url("postgres://u:S3cretPw@[::1:1/test")
    assert "S3cretPw" not in str(caught.value)
