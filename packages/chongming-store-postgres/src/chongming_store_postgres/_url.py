"""Open a `PostgresTaskStore` from a URL (the ``chongming.stores`` entry point for ``postgresql``).

``postgresql://user:pw@host:5432/db?schema=chongming`` — the ``schema`` query
parameter is chongming's own and is removed before the URL reaches libpq, which
rejects parameters it does not know.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from chongming_core import ConfigurationError
from chongming_store_postgres._dsn import check_url_userinfo, redact_dsn
from chongming_store_postgres._store import PostgresTaskStore

__all__ = ["store_from_url"]


def store_from_url(url: str, *, create: bool = True) -> PostgresTaskStore:
    """``postgresql://user:pw@host:5432/db[?schema=name]`` (``postgres://`` works too).

    ``schema`` names the schema that holds the tables (default ``chongming``). `create` is
    `PostgresTaskStore`'s: False opens only a schema that already holds them.
    """
    check_url_userinfo(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL", a bad port: the DSN is malformed
        raise ConfigurationError(
            f"cannot parse the DSN {redact_dsn(url)!r}: {exc}; write it as "
            "'postgresql://user:password@host:5432/dbname' (an IPv6 host in brackets: "
            "'[::1]')"
        ) from None
    params = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in params if key == "schema"]
    if not schemas:
        return PostgresTaskStore(url, create=create)
    rest = urlencode([(key, value) for key, value in params if key != "schema"])
    return PostgresTaskStore(
        urlunsplit(parts._replace(query=rest)), schema=schemas[-1], create=create
    )
