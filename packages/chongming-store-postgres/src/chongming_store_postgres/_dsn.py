"""DSN handling: show a connection string without its password, and describe its target.

A DSN comes in two forms and both may carry a password:

* URL form: ``postgresql://user:PASSWORD@host:5432/db?password=PASSWORD``
* key=value form: ``host=db port=5432 password=PASSWORD`` or ``password='with spaces'``

Nothing in this package ever prints, logs or raises a DSN without passing it
through `redact_dsn` first, and driver messages are passed through `scrub`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict

from chongming_core import ConfigurationError

__all__ = [
    "REDACTED",
    "Target",
    "dsn_secrets",
    "parse_dsn",
    "redact_dsn",
    "scrub",
    "validate_options",
]

#: PostgreSQL truncates identifiers at this many bytes.
_MAX_IDENTIFIER_BYTES = 63
#: What a password is replaced with.
REDACTED = "****"

_URL_PREFIX = re.compile(r"^\s*(postgres|postgresql)://", re.IGNORECASE)
# libpq: the user info ends at the first "@" met before any "/".
_URL_USERINFO = re.compile(r"^(?P<user>[^@/:]*):(?P<password>[^@/]*)@")
_URL_QUERY_PASSWORD = re.compile(r"(?P<key>[?&]password=)(?P<value>[^&#]*)", re.IGNORECASE)
# key=value form: a value is either single-quoted (backslash escapes) or runs to whitespace.
_KV_PASSWORD = re.compile(
    r"(?P<key>(?:^|(?<=\s))password\s*=\s*)(?P<value>'(?:\\.|[^'\\])*'?|(?:\\.|[^\s\\])*)"
)
_KV_VALUE_QUOTED = re.compile(r"\\(.)")


def redact_dsn(dsn: str) -> str:
    """`dsn` with every password replaced by ``****`` (URL and key=value forms).

    Example::

        >>> redact_dsn("postgresql://app:s3cret@db:5432/tasks")
        'postgresql://app:****@db:5432/tasks'
        >>> redact_dsn("host=db password='a b' dbname=tasks")
        'host=db password=**** dbname=tasks'
    """
    prefix = _URL_PREFIX.match(dsn)
    if prefix is not None:
        head, rest = dsn[: prefix.end()], dsn[prefix.end() :]
        rest = _URL_USERINFO.sub(lambda m: f"{m.group('user')}:{REDACTED}@", rest, count=1)
        rest = _URL_QUERY_PASSWORD.sub(lambda m: f"{m.group('key')}{REDACTED}", rest)
        return head + rest
    return _KV_PASSWORD.sub(lambda m: f"{m.group('key')}{REDACTED}", dsn)


def _raw_passwords(dsn: str) -> list[str]:
    """Every password written in `dsn`, found without a full parse (the DSN may be malformed)."""
    found: list[str] = []
    prefix = _URL_PREFIX.match(dsn)
    if prefix is not None:
        rest = dsn[prefix.end() :]
        userinfo = _URL_USERINFO.match(rest)
        if userinfo is not None:
            found.append(userinfo.group("password"))
        found.extend(m.group("value") for m in _URL_QUERY_PASSWORD.finditer(rest))
    else:
        for match in _KV_PASSWORD.finditer(dsn):
            value = match.group("value")
            found.append(value)
            if value.startswith("'"):
                found.append(_KV_VALUE_QUOTED.sub(r"\1", value.strip("'")))
    return found


def dsn_secrets(dsn: str) -> tuple[str, ...]:
    """The password of `dsn` in every spelling that might show up in a message.

    Longest first, so that `scrub` replaces a quoted or encoded form before its parts.
    """
    candidates = set(_raw_passwords(dsn))
    try:
        parsed = conninfo_to_dict(dsn)
    except psycopg.Error:
        parsed = {}
    password = parsed.get("password")
    if isinstance(password, str):
        candidates.add(password)
    for value in list(candidates):
        candidates.add(unquote(value))
        candidates.add(quote(value, safe=""))
    return tuple(sorted((c for c in candidates if c), key=len, reverse=True))


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """`text` with every secret replaced by ``****``."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def parse_dsn(dsn: str) -> dict[str, str]:
    """The DSN's parameters (via libpq's own parser).

    Raises:
        ValueError: the DSN cannot be parsed; the message never holds the password.
    """
    try:
        parsed = conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        detail = scrub(str(exc).strip(), dsn_secrets(dsn))
        # libpq quotes the offending token verbatim: keep the message on one line
        raise ValueError(detail.replace("\r", "\\r").replace("\n", "\\n")) from None
    return {key: str(value) for key, value in parsed.items() if value is not None}


@dataclass(frozen=True, slots=True)
class Target:
    """Where a DSN points, for messages: host, port, database and user (never the password)."""

    host: str
    port: str
    dbname: str
    user: str

    @classmethod
    def of(cls, params: dict[str, str]) -> Target:
        """The target described by parsed DSN parameters (libpq defaults where absent)."""
        host = params.get("host") or params.get("hostaddr") or "the local socket"
        user = params.get("user") or "(the login user)"
        return cls(
            host=host,
            port=params.get("port") or "5432",
            dbname=params.get("dbname") or user,
            user=user,
        )

    def describe(self) -> str:
        """Short text such as ``database 'tasks' on db.internal:5432 as user 'app'``."""
        return f"database {self.dbname!r} on {self.host}:{self.port} as user {self.user!r}"


def validate_options(
    schema: object, min_size: object, max_size: object, connect_timeout: object, dsn: str
) -> None:
    """Check the constructor's options (`dsn` is the redacted DSN, for messages)."""
    if not isinstance(schema, str) or not schema or "\x00" in schema:
        raise ConfigurationError(f"schema must be a non-empty name, got {schema!r} (DSN {dsn!r})")
    if len(schema.encode("utf-8")) > _MAX_IDENTIFIER_BYTES:
        raise ConfigurationError(
            f"schema {schema!r} is longer than PostgreSQL's {_MAX_IDENTIFIER_BYTES}-byte "
            "identifier limit; choose a shorter name"
        )
    for name, value, least in (("min_size", min_size, 0), ("max_size", max_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigurationError(f"{name} must be an integer >= {least}, got {value!r}")
    assert isinstance(min_size, int)
    assert isinstance(max_size, int)
    if max_size < min_size:
        raise ConfigurationError(f"max_size ({max_size}) must be >= min_size ({min_size})")
    if (
        isinstance(connect_timeout, bool)
        or not isinstance(connect_timeout, int | float)
        or not connect_timeout > 0
    ):
        raise ConfigurationError(
            f"connect_timeout must be a positive number of seconds, got {connect_timeout!r}"
        )
