"""Global options: ``--version``, unknown options, help for every option, shell completion."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from chongming_cli import EXIT_FAILED, EXIT_OK, EXIT_OUTPUT_CLOSED, main
from chongming_cli._parser import build_parser

DISTRIBUTIONS = (
    "chongming-cli",
    "chongming-core",
    "chongming-runtime",
    "chongming-store-contract",
    "chongming-store-postgres",
    "chongming-store-sqlite",
    "chongming-task",
    "chongming-tui",
)


def test_version_names_every_installed_chongming_distribution(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--version"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines] == [[d, version(d)] for d in DISTRIBUTIONS]


@pytest.mark.parametrize(
    "argv", [["--bogus"], ["--bogus", "ps"], ["ps", "--bogus"]], ids=["alone", "before", "after"]
)
def test_an_unknown_option_is_named(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err.startswith("chongming-task: error: unrecognized arguments: --bogus")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [["--dsn", "postgresql://h/db", "--schema", "jobs", "ps"], ["ps", "--schema=jobs"]],
    ids=["before", "after"],
)
def test_a_schema_option_is_pointed_at_the_url(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_FAILED
    err = capsys.readouterr().err  # not "invalid choice: 'jobs'" for a command
    assert "--schema is not an option" in err
    assert "?schema=NAME" in err
    assert err.count("\n") == 1


def test_no_command_still_says_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_FAILED
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    found = {"chongming-task": parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def test_every_option_of_every_command_has_help() -> None:
    missing = [
        f"{name} {action.option_strings[0]}"
        for name, parser in _parsers().items()
        for action in parser._actions
        if action.option_strings and not action.help
    ]
    assert not missing, f"options without help text: {missing}"


def _complete(line: str, tmp_path: Path, shell: str = "bash") -> list[str]:
    """Ask the real console for completions, as a shell's completion function does."""
    out = tmp_path / "completions"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_SHELL": shell,
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
    }
    done = subprocess.run(
        [sys.executable, "-m", "chongming_cli"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # bash separates candidates with a vertical tab; fish and zsh put a description
    # after a tab (fish) or a colon (zsh) on lines of their own
    text = out.read_text(encoding="utf-8")
    words = text.split("\v") if shell == "bash" else text.splitlines()
    return sorted(w.split("\t")[0].split(":")[0].strip() for w in words if w.strip())


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_offers_commands_options_and_statuses(tmp_path: Path, shell: str) -> None:
    assert _complete("chongming-task st", tmp_path, shell) == ["stats", "status", "stop"]
    assert {"--db", "--dsn", "--debug"} <= set(_complete("chongming-task --d", tmp_path, shell))
    assert _complete("chongming-task ps --status ru", tmp_path, shell) == ["running"]
    assert _complete("chongming-task ps --status running,pa", tmp_path, shell) == [
        "running,paused",
        "running,pausing",
    ]
    assert _complete("chongming-task run x --tasks m --executor p", tmp_path, shell) == ["process"]


def test_the_documented_activation_registers_the_command() -> None:
    """docs/cli.md's lines: bash (and zsh) eval the script, fish sources its own."""
    register = Path(sys.executable).parent / "register-python-argcomplete"
    bash = subprocess.run(
        ["bash", "-c", f'eval "$({register} chongming-task)" && complete -p chongming-task'],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bash.returncode == 0, bash.stderr
    assert "chongming-task" in bash.stdout
    fish = subprocess.run(
        [str(register), "--shell", "fish", "chongming-task"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert fish.returncode == 0, fish.stderr
    assert "complete --command chongming-task" in fish.stdout


def test_an_option_of_a_command_before_its_name_is_said_to_go_after_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """argparse would take the option's value for the command ("invalid choice: '2'")."""
    assert main(["--max-parallel", "2", "worker", "--tasks", "x"]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err == (
        "chongming-task: error: --max-parallel is an option of the worker command, not of "
        "chongming-task itself: put it after the command's name, e.g. chongming-task worker "
        "--max-parallel ...\n"
    )
    assert main(["--max-paralel", "2", "worker", "--tasks", "x"]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err == (
        "chongming-task: error: unrecognized arguments: --max-paralel (the worker command has "
        "no such option either; see: chongming-task worker --help)\n"
    )


@pytest.mark.parametrize("command", [["ps"], ["reconcile", "--dry-run"], ["nodes"]])
def test_a_reader_that_closed_stdout_ends_the_command_quietly(
    tmp_path: Path, command: list[str]
) -> None:
    """``chongming-task ps | head -1`` (a reader that stopped reading): no error line that
    blames a file, and the code a shell reports for a program a closed pipe ended (D178)."""
    from chongming_store_sqlite import SqliteTaskStore

    db = tmp_path / "tasks.db"
    SqliteTaskStore(db).close()
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "chongming_cli", "--db", str(db), *command],
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr.decode()) == (EXIT_OUTPUT_CLOSED, "")
