"""``docs/cli.md`` shows real output: regenerate its walkthrough and compare."""

from __future__ import annotations

import difflib

from cli_walkthrough import DOC, generate, normalise, region


def test_the_walkthrough_in_docs_cli_md_is_what_the_cli_prints() -> None:
    recorded = normalise(region(DOC.read_text(encoding="utf-8")))
    fresh = generate()
    diff = "\n".join(
        difflib.unified_diff(recorded.splitlines(), fresh.splitlines(), "docs/cli.md", "now")
    )
    assert recorded == fresh, (
        "docs/cli.md is out of date; run: python tests-integration/cli/cli_walkthrough.py "
        f"--write\n{diff}"
    )


def test_normalise_hides_volatile_parts() -> None:
    assert normalise("2025-01-02 03:04:05 UTC 12.3s 7 batch") == (
        "2026-10-02 08:00:00 UTC 0.1s 42 batch"
    )
