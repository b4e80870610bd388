"""Text in and out of the console whatever its encoding: nothing the CLI writes raises
`UnicodeEncodeError`, and bytes that were not UTF-8 are told apart from text.

Out: a stdout that holds only ASCII (``PYTHONIOENCODING=ascii``, a Windows code page)
cannot take a CJK label, and no encoding takes a lone surrogate. The process's
streams get ``errors="backslashreplace"`` for the command's duration (a safety net
for every write, argparse's too); text is escaped for the stream *before* a table
measures it (`encodable`), so columns stay aligned; JSON falls back to
``ensure_ascii`` (``\\u4efb`` is JSON, backslashreplace's ``\\U0001f600`` is not).

In: on POSIX, argv and the environment are bytes, decoded by the locale with
``surrogateescape``: a byte it cannot decode arrives as a lone surrogate (``\\xff`` as
``\\udcff``). A file path may hold such bytes (`os.fsencode` gives them back, and the
store opens that file); a URL is text and may not. Text options that are valid UTF-8
under a locale that does not say so (``LC_ALL=C`` without UTF-8 mode) are read as the
UTF-8 they are (`recover_text`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shlex
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from chongming_runtime import encodable

__all__ = [
    "json_text",
    "protected_streams",
    "recover_arguments",
    "recover_environ",
    "recover_text",
    "shell_word",
    "stream_encoding",
    "undecodable",
    "undecodable_argument",
]


_RAISING = frozenset({"strict", "surrogateescape"})


def stream_encoding(stream: object) -> str | None:
    """The encoding `stream` writes with (None for an in-memory text stream: any text)."""
    encoding = getattr(stream, "encoding", None)
    return encoding if isinstance(encoding, str) and encoding else None


@contextlib.contextmanager
def protected_streams(*streams: TextIO | None) -> Iterator[None]:
    """Within the block, `streams` that would raise on a character they cannot encode
    write it as a backslash escape instead; their error handler is restored after."""
    changed: list[tuple[io.TextIOWrapper, str]] = []
    for stream in streams:
        # surrogateescape (a C locale's stdout) raises too, on anything but a lone surrogate
        if isinstance(stream, io.TextIOWrapper) and stream.errors in _RAISING:
            previous = stream.errors
            with contextlib.suppress(ValueError, OSError):  # detached or closed: left as is
                stream.reconfigure(errors="backslashreplace")
                changed.append((stream, previous))
    try:
        yield
    finally:
        for stream, errors in changed:
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors=errors)


def json_text(document: Any, encoding: str | None) -> str:
    """`document` as indented JSON: UTF-8 text kept as is when `encoding` holds it (labels
    in any script stay readable), else every non-ASCII character as a ``\\u`` escape."""
    text = json.dumps(document, ensure_ascii=False, indent=2, default=str)
    if encoding is not None and encodable(text, encoding) != text:
        text = json.dumps(document, ensure_ascii=True, indent=2, default=str)
    return text


def undecodable(text: str) -> tuple[int, str] | None:
    """Where `text` holds what is not text — a byte that was not UTF-8 (a lone surrogate):
    its position and how to name it (``byte 0xff``), or None."""
    for index, char in enumerate(text):
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            return index, f"byte 0x{code - 0xDC00:02x}"
        if 0xD800 <= code <= 0xDFFF:
            return index, f"lone surrogate U+{code:04X}"
    return None


_SHELL_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def shell_word(text: str) -> str:
    """`text` as one shell word that gives it back exactly: `shlex.quote` for printable
    text, else ANSI-C quoting (``$'\\xff.db'``, bash/zsh/ksh) for control characters and
    bytes that were not UTF-8, which no quoted printable form can carry."""
    if text.isprintable() and undecodable(text) is None:
        return shlex.quote(text)
    parts: list[str] = []
    for char in text:
        code = ord(char)
        if char in _SHELL_ESCAPES:
            parts.append(_SHELL_ESCAPES[char])
        elif 0xDC80 <= code <= 0xDCFF:
            parts.append(f"\\x{code - 0xDC00:02x}")
        elif char.isprintable() and not 0xD800 <= code <= 0xDFFF:
            parts.append(char)
        elif code < 0x100:
            parts.append(f"\\x{code:02x}")
        else:
            parts.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "$'" + "".join(parts) + "'"


def recover_text(text: str) -> str:
    """`text` decoded as UTF-8 when the locale left its bytes undecoded and they are UTF-8;
    else `text` as it is (bytes that are not UTF-8 stay lone surrogates)."""
    if undecodable(text) is None:
        return text
    try:
        return os.fsencode(text).decode("utf-8")
    except (UnicodeError, ValueError):
        return text


def recover_arguments(args: argparse.Namespace, *, paths: frozenset[str]) -> None:
    """`recover_text` on every text value of `args` but the file paths named by `paths`
    (dests), which keep the bytes `os.fsencode` turns back into the same file."""
    for name, value in vars(args).items():
        if name in paths:
            continue
        if isinstance(value, str):
            setattr(args, name, recover_text(value))
        elif isinstance(value, list):
            setattr(args, name, [recover_text(v) if isinstance(v, str) else v for v in value])


def recover_environ(environ: Mapping[str, str], *, paths: frozenset[str]) -> dict[str, str]:
    """A copy of `environ` with `recover_text` applied to every value but `paths`' (names)."""
    return {k: v if k in paths else recover_text(v) for k, v in environ.items()}


def undecodable_argument(
    args: argparse.Namespace, names: Mapping[str, str], *, skip: frozenset[str]
) -> str | None:
    """Why a text value of `args` (after `recover_arguments`) is refused: it still holds a
    byte that is not UTF-8, which no store keeps as text; None when every one is text.
    `names` gives each dest its name on the command line; the dests in `skip` (file
    paths, a module, a DSN: each checked where it is used) are not looked at."""
    for dest, value in vars(args).items():
        if dest in skip:
            continue
        for text in value if isinstance(value, list) else [value]:
            if not isinstance(text, str):
                continue
            found = undecodable(text)
            if found is None:
                continue
            index, what = found
            return (
                f"{names.get(dest, dest)} {shell_word(text)} holds {what} at position {index}, "
                "which is not UTF-8: ids, names, tags and reasons are stored as text; type it "
                "in UTF-8 (check that the terminal's encoding is UTF-8, e.g. LANG=C.UTF-8)"
            )
    return None
