"""`chongming-task --help` and every subcommand's help agree with docs/cli.md and the guide."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [
    "tasks", "run", "ps", "status", "history", "stats", "buckets",
    "stop", "pause", "resume", "reconcile", "prune", "submit", "worker", "nodes",
    "dashboard",
]  # fmt: skip


def _help(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "chongming_cli", *args, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_documented_command_and_option_exists() -> None:
    top = _help()
    helps = {command: _help(command) for command in COMMANDS}
    for command in COMMANDS:
        assert re.search(rf"^\s+{command}\s", top, re.MULTILINE), f"{command} missing from --help"
    known = set(re.findall(r"--[a-z][a-z-]+", top))
    for text in helps.values():
        known |= set(re.findall(r"--[a-z][a-z-]+", text))
    for doc in (ROOT / "docs" / "cli.md", ROOT / "docs" / "guide.md"):
        prose = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.DOTALL)
        shell = "\n".join(re.findall(r"```sh\n(.*?)```", doc.read_text(encoding="utf-8"), re.S))
        documented = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", prose + shell))
        unknown = sorted(documented - known - {"--help"})
        assert not unknown, f"{doc.name} documents options the CLI does not have: {unknown}"


def test_environment_variables_are_documented_in_help() -> None:
    top = _help()
    for variable in ("CHONGMING_DB", "CHONGMING_DSN", "CHONGMING_OWNED_BUCKETS", "CHONGMING_OWNER"):
        assert variable in top, f"{variable} is not mentioned in --help"
    assert "JSON" in _help("run"), "the --arg parsing rule belongs in run --help"
