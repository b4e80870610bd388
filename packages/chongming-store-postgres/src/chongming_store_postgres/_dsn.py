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
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

from chongming_core import ConfigurationError

__all__ = [
    "REDACTED",
    "Target",
    "check_url_userinfo",
    "dsn_secrets",
    "parse_dsn",
    "redact_dsn",
    "scrub",
    "split_schema",
    "validate_options",
]

#: PostgreSQL truncates identifiers at this many bytes.
_MAX_IDENTIFIER_BYTES = 63
#: What a password is replaced with.
REDACTED = "****"

_URL_PREFIX = re.compile(r"^\s*(postgres|postgresql)://", re.IGNORECASE)
_URL_QUERY_PASSWORD = re.compile(r"(?P<key>[?&]password=)(?P<value>[^&#]*)", re.IGNORECASE)
# key=value form: a value is either single-quoted (backslash escapes) or runs to whitespace.
# Any case: libpq refuses "PASSWORD=" as an unknown keyword, and its value must not show
_KV_PASSWORD = re.compile(
    r"(?P<key>(?:^|(?<=\s))password\s*=\s*)(?P<value>'(?:\\.|[^'\\])*'?|(?:\\.|[^\s\\])*)",
    re.IGNORECASE,
)
#: Characters a URL's user info cannot hold as they are (they end it or start another part).
_NOT_IN_USERINFO = "/?#@"


def _url_password(rest: str) -> tuple[str, str, str] | None:
    """Split the part of a URL after ``scheme://`` into (user, password, the rest from
    the "@" on), or None when it has no password.

    The password is taken up to the *last* "@": a password holding "/" or "@" that was not
    percent-encoded (libpq would cut it at the first "/" and show the rest as a host or a
    database name) is hidden whole, together with anything up to that "@".
    """
    at = rest.rfind("@")
    if at < 0:
        return None
    userinfo = rest[:at]
    user, colon, password = userinfo.partition(":")
    if not colon:
        return None
    return user, password, rest[at:]


def split_schema(dsn: str) -> tuple[str, str | None]:
    """A URL's ``?schema=NAME`` (chongming's own parameter, which libpq would refuse) taken
    out: the DSN without it and the schema it named (None: none, or not a URL)."""
    if not _URL_PREFIX.match(dsn) or "schema=" not in dsn:
        return dsn, None
    try:
        parts = urlsplit(dsn)
    except ValueError as exc:  # "Invalid IPv6 URL", a bad port: the DSN is malformed
        raise ConfigurationError(
            f"cannot parse the DSN {redact_dsn(dsn)!r}: {exc}; write it as "
            "'postgresql://user:password@host:5432/dbname' (an IPv6 host in brackets: "
            "'[::1]')"
        ) from None
    params = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in params if key == "schema"]
    if not schemas:
        return dsn, None
    if len(set(schemas)) > 1:
        raise ConfigurationError(
            f"the DSN {redact_dsn(dsn)!r} names more than one schema "
            f"({', '.join(repr(s) for s in schemas)}); give ?schema= once"
        )
    rest = urlencode([(key, value) for key, value in params if key != "schema"])
    return urlunsplit(parts._replace(query=rest)), schemas[0]


def check_url_userinfo(dsn: str) -> None:
    """Refuse a URL DSN whose user or password holds "/", "?", "#" or "@" as they are.

    libpq splits such a URL elsewhere than its author meant (part of the password becomes
    the host or the database) and would show those parts in its messages. The error never
    holds the password.

    Raises:
        ConfigurationError: the user info is ambiguous; percent-encode it.
    """
    prefix = _URL_PREFIX.match(dsn)
    if prefix is None:
        return
    rest = dsn[prefix.end() :]
    at = rest.rfind("@")
    if at < 0 or not any(c in rest[:at] for c in _NOT_IN_USERINFO):
        return
    raise ConfigurationError(
        f"the user or password in the DSN {redact_dsn(dsn)!r} holds '/', '?', '#' or '@', "
        "which a URL cannot carry as they are; percent-encode them ('/' as %2F, '?' as %3F, "
        "'#' as %23, '@' as %40 — urllib.parse.quote(password, safe='') does it) or use the "
        "key=value form (password='...')"
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
        found = _url_password(rest)
        if found is not None:
            user, _, after = found
            rest = f"{user}:{REDACTED}{after}"
        rest = _URL_QUERY_PASSWORD.sub(lambda m: f"{m.group('key')}{REDACTED}", rest)
        return head + rest
    return _KV_PASSWORD.sub(lambda m: f"{m.group('key')}{REDACTED}", dsn)


def _raw_passwords(dsn: str) -> list[str]:
    """Every password written in `dsn`, found without a full parse (the DSN may be malformed)."""
    found: list[str] = []
    prefix = _URL_PREFIX.match(dsn)
    if prefix is not None:
        rest = dsn[prefix.end() :]
        userinfo = _url_password(rest)
        if userinfo is not None:
            password = userinfo[1]
            found.append(password)
            # libpq cuts a password holding "/" or "@" there: its parts show on their own
            found.extend(p for p in re.split(r"[/@?#]", password) if len(p) >= 3)
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
