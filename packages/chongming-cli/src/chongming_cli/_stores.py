"""Where the tasks live: resolve ``--db``/``--dsn`` (and their environment variables) to a
store URL, open it through the ``chongming.stores`` entry points, and keep passwords out
of every message.

Precedence: ``--dsn`` > ``--db`` > ``$CHONGMING_DSN`` > ``$CHONGMING_DB`` > ``./chongming.db``
(R21: the default store is a SQLite file).
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from urllib.parse import quote, unquote, unquote_to_bytes, urlsplit

from chongming_cli._encoding import shell_word, undecodable
from chongming_cli._exit import CliError
from chongming_core import StoreNotFound, TaskStore

__all__ = [
    "DEFAULT_DB",
    "ENTRY_POINT_GROUP",
    "StoreLocation",
    "open_store",
    "redact_url",
    "resolve_location",
    "scrub",
    "sqlite_url",
    "store_words",
]

#: The entry-point group that maps a URL scheme to ``store_from_url(url) -> TaskStore``.
ENTRY_POINT_GROUP = "chongming.stores"
#: The SQLite file used when neither an option nor the environment names a store.
DEFAULT_DB = "chongming.db"
REDACTED = "****"

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
#: A libpq key=value connection string (``host=db dbname=tasks ...``).
_KEY_VALUE = re.compile(r"^\s*[A-Za-z_]+\s*=")
_PASSWORD_PARAM = re.compile(r"(?P<key>(?:^|[?&\s])password\s*=\s*)(?P<pw>'[^']*'|[^&\s#]*)", re.I)


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A store chosen by the user.

    Attributes:
        url: what the backend's ``store_from_url`` receives.
        label: the URL as it may be shown (password replaced by ``****``).
        source: where the choice came from (``--db``, ``CHONGMING_DSN``, ...), for messages.
        sqlite_path: the file, when the store was given as a SQLite path.
        secrets: every spelling of the password, scrubbed from all output.
    """

    url: str
    label: str
    source: str
    sqlite_path: Path | None = None
    secrets: tuple[str, ...] = ()


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """The ``sqlite:///`` URL of a file path (absolute paths give ``sqlite:////abs``).

    The path's bytes are percent-encoded, so a file name that is not UTF-8 (``\\xff.db``,
    a lone surrogate in Python) is ``%FF.db``, and the SQLite backend opens that file.
    """
    absolute = Path(path).expanduser().absolute().as_posix()
    return "sqlite:///" + quote(os.fsencode(absolute), safe="/:")


def _userinfo_password(url: str) -> tuple[str, str, str] | None:
    """(``scheme://user``, password, the rest from the "@" on), or None without a password.

    The password runs to the *last* "@", so one holding "/" or "@" that was not
    percent-encoded is hidden whole (with anything up to that "@")."""
    scheme = _SCHEME.match(url)
    if scheme is None:
        return None
    rest = url[scheme.end() :]
    at = rest.rfind("@")
    user, colon, password = rest[:at].partition(":") if at >= 0 else ("", "", "")
    if not colon:
        return None
    return url[: scheme.end()] + user, password, rest[at:]


def redact_url(url: str) -> str:
    """`url` with any password replaced by ``****`` (``://user:pw@`` and ``password=``)."""
    if url.lower().startswith(("postgresql://", "postgres://")):
        try:
            postgres = importlib.import_module("chongming_store_postgres")
        except ImportError:
            postgres = None
        if postgres is not None:
            return str(postgres.redact_dsn(url))
    found = _userinfo_password(url)
    text = url if found is None else f"{found[0]}:{REDACTED}{found[2]}"
    return _PASSWORD_PARAM.sub(lambda m: f"{m.group('key')}{REDACTED}", text)


def _secrets(url: str) -> tuple[str, ...]:
    found: set[str] = set()
    userinfo = _userinfo_password(url)
    if userinfo is not None:
        found.add(userinfo[1])
        # a password holding "/" or "@" is cut there by URL parsers: its parts show alone
        found.update(part for part in re.split(r"[/@?#]", userinfo[1]) if len(part) >= 3)
    found.update(m.group("pw").strip("'") for m in _PASSWORD_PARAM.finditer(url))
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        found.add(password)
    for value in list(found):
        found.add(unquote(value))
        found.add(quote(value, safe=""))
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """`text` with every secret replaced by ``****``."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def resolve_location(
    db: str | None, dsn: str | None, environ: Mapping[str, str] | None = None
) -> StoreLocation:
    """Choose the store from the options and the environment (see the module docstring)."""
    env = os.environ if environ is None else environ
    if db is not None and dsn is not None:
        raise CliError("--db and --dsn both name a store; pass only one of them")
    if dsn is not None:
        return _from_dsn(dsn, "--dsn")
    if db is not None:
        return _from_path(db, "--db")
    if env.get("CHONGMING_DSN"):
        return _from_dsn(env["CHONGMING_DSN"], "CHONGMING_DSN")
    if env.get("CHONGMING_DB"):
        return _from_path(env["CHONGMING_DB"], "CHONGMING_DB")
    return _from_path(DEFAULT_DB, f"the default ./{DEFAULT_DB}")


def _from_path(path: str, source: str) -> StoreLocation:
    if not path.strip():
        raise CliError(f"{source} is empty; give the path of a SQLite file, e.g. --db tasks.db")
    if _SCHEME.match(path):
        raise CliError(
            f"{source} takes a file path, got the URL {redact_url(path)!r}; pass URLs with --dsn"
        )
    url = sqlite_url(path)
    return StoreLocation(url=url, label=path, source=source, sqlite_path=Path(path))


def store_words(location: StoreLocation) -> list[str]:
    """The options that reach `location` from another shell, as shell words (quoted).

    A suggested command must work when pasted, so it names the store the user chose
    wherever the choice came from (an option or the environment; nothing for the default
    ``./chongming.db``). A DSN with a password is passed as ``--dsn "$CHONGMING_DSN"``:
    its redacted form could not authenticate, and the password is never printed.
    """
    if location.source in {"--db", "CHONGMING_DB"}:
        return ["--db", shell_word(location.label)]
    if location.source in {"--dsn", "CHONGMING_DSN"}:
        return ["--dsn", '"$CHONGMING_DSN"' if location.secrets else shell_word(location.url)]
    return []


def _from_dsn(dsn: str, source: str) -> StoreLocation:
    bad = undecodable(dsn)
    if bad is not None:  # told before anything parses it; the URL is never echoed
        raise CliError(
            f"{source} holds a {bad[1]} at position {bad[0]}, which is not UTF-8; a store "
            "URL is text: percent-encode that byte (e.g. %FF for 0xff), or give a SQLite "
            "file by its path with --db (or CHONGMING_DB), which may hold any bytes"
        )
    if not dsn.strip():
        raise CliError(
            f"{source} is empty; give the store URL, e.g. postgresql://user@host:5432/db (a "
            'suggested command that says --dsn "$CHONGMING_DSN" needs CHONGMING_DSN set to it: '
            "the password is never printed)"
        )
    secrets = _secrets(dsn)
    label = scrub(redact_url(dsn), secrets)
    if _SCHEME.match(dsn) is None:
        if _KEY_VALUE.match(dsn):  # libpq's key=value form, which a library user may pass
            raise CliError(
                f"{source} must be a store URL; {label!r} is libpq's key=value form, which "
                "the console does not take: write it as postgresql://USER:PASSWORD@HOST:PORT/"
                "DBNAME, percent-encoding in the password '@' as %40, '/' as %2F, '?' as %3F, "
                "'#' as %23 and a space as %20"
            )
        raise CliError(
            f"{source} must be a store URL such as postgresql://user@host:5432/db or "
            f"sqlite:///tasks.db, got {label!r}"
        )
    return StoreLocation(
        url=dsn, label=label, source=source, sqlite_path=_sqlite_file(dsn), secrets=secrets
    )


def _sqlite_file(url: str) -> Path | None:
    """The file a ``sqlite:///`` URL names (None for other schemes and ``:memory:``), so a
    query given a mistyped URL is refused like a mistyped --db instead of creating a file."""
    if not url.lower().startswith("sqlite://"):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None  # the backend reports it
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if parts.netloc or not path or unquote(path) == ":memory:":
        return None
    try:  # as the SQLite backend reads it: the percent-escapes are the file name's bytes
        return Path(os.fsdecode(unquote_to_bytes(path.encode("utf-8", "surrogateescape"))))
    except UnicodeEncodeError:
        return None  # the backend reports it


def _backends() -> dict[str, EntryPoint]:
    return {ep.name.lower(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def open_store(
    location: StoreLocation, *, create: bool, noted: Callable[[str], None] | None = None
) -> TaskStore:
    """Open the store at `location` through its scheme's ``chongming.stores`` entry point.

    Args:
        location: the resolved store.
        create: whether a missing store may be created and an older one migrated (``run``
            does). The other commands open only an existing store and change nothing, so a
            mistyped path or schema is reported instead of answered with a new empty store.
            The factory gets it as ``create=``; a backend whose factory takes no such
            keyword is opened as it opens.
        noted: with `create`, the store is opened as it is if it exists, and only
            otherwise created (or upgraded); `noted` then gets a line saying so (``submit``
            and ``worker``: a mistyped path would otherwise send work where no worker
            looks, or start a worker on an empty store, without a word).
    """
    if create and noted is not None:
        try:
            return open_store(location, create=False, noted=noted)
        except StoreNotFound as exc:
            store = open_store(location, create=True)
            path = location.sqlite_path
            where = str(path) if path is not None else location.label
            done = "upgraded" if exc.schema_version is not None else "created"
            noted(
                f"note: {done} the task database at {where!r} (from {location.source}); "
                "producers and workers must all name this store"
            )
            return store
    match = _SCHEME.match(location.url)
    assert match is not None
    scheme = match.group("scheme").lower()
    backends = _backends()
    entry = backends.get(scheme)
    if entry is None:
        known = ", ".join(sorted(backends)) or "none"
        hint = (
            'install the PostgreSQL backend: pip install "chongming-task[postgres]"'
            if scheme in {"postgresql", "postgres"}
            else "install a package that provides it"
        )
        raise CliError(
            f"no store backend handles {scheme}:// URLs (installed backends: {known}); {hint}"
        )
    try:
        factory = entry.load()
    except ImportError as exc:
        raise CliError(
            f"the {scheme} store backend cannot be loaded ({exc}); reinstall it, e.g. "
            'pip install "chongming-task[postgres]"'
        ) from exc
    try:
        store = (
            factory(location.url, create=create)
            if _takes_create(factory)
            else factory(location.url)
        )
    except StoreNotFound as exc:
        if noted is not None and create is not True:
            raise  # `open_or_create` creates it, and says so
        raise _no_store(location, exc) from exc
    if not isinstance(store, TaskStore):
        raise CliError(
            f"the {scheme} store backend ({entry.value}) returned {type(store).__name__}, "
            "not a TaskStore; fix or reinstall that backend"
        )
    return store


def _takes_create(factory: object) -> bool:
    try:
        parameters = inspect.signature(factory).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is p.VAR_KEYWORD or (p.name == "create" and p.kind is not p.POSITIONAL_ONLY)
        for p in parameters
    )


def _no_store(location: StoreLocation, exc: StoreNotFound) -> CliError:
    """What a command that opens only existing stores says when there is none (or an old one)."""
    path = location.sqlite_path
    where = str(path) if path is not None else location.label
    named = location.source.startswith(("--", "CHONGMING_"))
    option = location.source if named else "--db (or CHONGMING_DB)"
    create = " ".join(
        ["chongming-task", *store_words(location), "run", "TASK", "--tasks", "MODULE"]
    )
    if exc.schema_version is not None:
        return CliError(
            f"the task database at {where!r} (from {location.source}) holds {exc.found}, "
            "which this chongming reads only once it is migrated; nothing was changed. "
            f"Upgrade it by opening it for writing once: run, submit or worker do, e.g. "
            f"{create} (stop the processes of the older chongming first)"
        )
    thing = "file" if path is not None else "store"
    return CliError(
        f"no task database at {where!r} (from {location.source}): {exc.found}; point "
        f"{option} at an existing {thing}, or create one by running a task: {create}"
    )
