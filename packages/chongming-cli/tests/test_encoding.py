"""Console text in and out: escapes for narrow streams, shell words, bytes that are not UTF-8."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from chongming_cli._commands import Console
from chongming_cli._encoding import (
    json_text,
    protected_streams,
    recover_text,
    shell_word,
    undecodable,
)
from chongming_cli._output import render_rows
from chongming_cli._progress import ProgressReporter
from chongming_cli._stores import _sqlite_file, sqlite_url
from chongming_core import Progress, TaskSnapshot, TaskStatus
from chongming_runtime import display_width

NOT_UTF8 = os.fsdecode(b"\xff")


def _ascii_stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict", newline="")


def _written(stream: io.TextIOWrapper) -> bytes:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue()


def test_console_lines_never_raise_on_a_strict_ascii_stream() -> None:
    out, err = _ascii_stream(), _ascii_stream()
    console = Console(out=out, err=err, environ={})
    console.say("标签 😀")
    console.note(f"no such file {NOT_UTF8}.db")
    assert _written(out) == b"\\u6807\\u7b7e \\U0001f600\n"
    assert _written(err) == b"no such file \\udcff.db\n"


def test_protected_streams_escape_inside_the_block_and_restore_the_handler() -> None:
    stream = _ascii_stream()
    with protected_streams(stream, None):
        assert stream.errors == "backslashreplace"
        stream.write("任")
    assert stream.errors == "strict"
    assert _written(stream) == b"\\u4efb"
    with pytest.raises(UnicodeEncodeError):
        stream.write("任")


def test_json_falls_back_to_ascii_escapes_that_parse_back() -> None:
    document = {"label": "加法😀", "id": "t-1"}
    assert json_text(document, "utf-8") == json.dumps(document, ensure_ascii=False, indent=2)
    narrow = json_text(document, "ascii")
    assert narrow.isascii()
    assert json.loads(narrow) == document
    assert json.loads(json_text(document, None)) == document  # an in-memory stream
    lone = {"name": NOT_UTF8}  # no encoding holds a lone surrogate as it is
    assert json.loads(json_text(lone, "utf-8")) == lone


def test_tables_are_measured_on_the_escaped_text() -> None:
    rows = [["加法😀", "x"], ["ab", "y"]]
    lines = render_rows(("NAME", "V"), rows, "ascii").splitlines()
    assert all(line.isascii() for line in lines)
    assert lines[2] == "\\u52a0\\u6cd5\\U0001f600  x"
    assert lines[3].index("y") == lines[2].index("x") == lines[0].index("V")
    wide = render_rows(("NAME", "V"), rows).splitlines()  # any character goes
    assert display_width(wide[2][: wide[2].index("x")]) == wide[0].index("V") == 8


def _progress(message: str) -> TaskSnapshot:
    return TaskSnapshot(
        "t", "n", status=TaskStatus.RUNNING, progress=Progress(1, unit="行", message=message)
    )


def test_the_progress_line_is_escaped_and_cleared_by_display_width() -> None:
    stream = _ascii_stream()
    clock = iter([0.0, 1.0, 2.0])
    reporter = ProgressReporter(stream, tty=True, monotonic=lambda: next(clock))
    assert reporter.update(_progress("进度\x1b[2J"))  # a control sequence from the body
    assert reporter.update(_progress("ok"))
    reporter.finish()
    first, second = _written(stream).decode("ascii").split("\r")[1:]
    assert first == "1 \\u884c  \\u8fdb\\u5ea6\\x1b[2J"
    # the second line covers every cell the first one took
    assert second.rstrip("\n") == "1 \\u884c  ok" + " " * (len(first) - len("1 \\u884c  ok"))

    wide = io.StringIO()
    ticks = iter([0.0, 1.0])
    reporter = ProgressReporter(wide, tty=True, monotonic=lambda: next(ticks))
    reporter.update(_progress("进度进度"))
    reporter.update(_progress("ok"))
    first, second = wide.getvalue().split("\r")[1:]
    assert display_width(second) == display_width(first)  # CJK takes two cells each


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for $'...' words")
@pytest.mark.parametrize(
    "text",
    ["plain", "two words", "it's", f"{NOT_UTF8}.db", "a\nb", "tab\there", "e\x1b[0m", "任务"],
)
def test_a_shell_word_gives_the_exact_bytes_back(text: str) -> None:
    word = shell_word(text)
    done = subprocess.run(
        ["bash", "-c", f"printf %s {word}"], capture_output=True, timeout=10, check=True
    )
    assert done.stdout == os.fsencode(text)


def test_shell_words_stay_plain_for_plain_text() -> None:
    assert shell_word("t-1") == "t-1"
    assert shell_word(f"{NOT_UTF8}.db") == "$'\\xff.db'"


def test_utf8_left_undecoded_by_the_locale_is_recovered_other_bytes_are_kept() -> None:
    undecoded = os.fsencode("任务").decode("ascii", "surrogateescape")  # as LC_ALL=C reads it
    assert undecodable(undecoded) == (0, "byte 0xe4")
    assert recover_text(undecoded) == "任务"
    assert recover_text(f"{NOT_UTF8}.db") == f"{NOT_UTF8}.db"
    assert recover_text("plain") == "plain"


def test_a_path_that_is_not_utf8_round_trips_through_its_sqlite_url(tmp_path: Path) -> None:
    path = tmp_path / f"{NOT_UTF8}.db"
    url = sqlite_url(path)
    assert url.endswith("/%FF.db")
    assert _sqlite_file(url) == path
    assert _sqlite_file(f"sqlite:///{tmp_path}/%E4%BB%BB.db") == tmp_path / "任.db"
