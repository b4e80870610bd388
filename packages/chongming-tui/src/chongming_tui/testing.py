"""Helpers for testing code that drives the dashboard headless (Textual's pilot).

Example::

    app = DashboardApp(controller, store_label="t.db", refresh_interval=None,
                       cursor_blink=False)

    async def scenario(pilot):
        await pilot.press("1")
        await wait_for(pilot, lambda: app.refresh_count >= 2, "the active view")

    drive(app, scenario)
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from chongming_tui._app import DashboardApp

__all__ = ["drive", "screen_text", "static_text", "wait_for"]


async def wait_for(
    pilot: Pilot[int], predicate: Callable[[], bool], what: str, *, timeout: float = 10.0
) -> None:
    """Let the app run until `predicate` holds; AssertionError naming `what` after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await pilot.pause(0.01)


def drive(
    app: DashboardApp,
    scenario: Callable[[Pilot[int]], Awaitable[None]],
    *,
    size: tuple[int, int] = (150, 36),
    timeout: float = 10.0,
) -> None:
    """Run `scenario` against `app` in a headless terminal, once the first refresh is shown."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda: app.refresh_count >= 1, "the first refresh",
                           timeout=timeout)  # fmt: skip
            await scenario(pilot)

    asyncio.run(main())


def static_text(widget: Static, *, width: int = 200) -> str:
    """The plain text a `Static` shows (Rich renderables rendered without colour)."""
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(widget.content)
    return console.export_text()


def screen_text(app: DashboardApp) -> list[str]:
    """The lines a terminal of the app's size shows now, as plain text (the screen is
    rendered the way Textual renders a screenshot)."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        record=True,
        color_system=None,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text().splitlines()
