"""Debian's Chromium driven by Playwright for Python (``executable_path``: Playwright's own browser
download does not reach this machine), for the web UI's tests: a page opened with its console
errors collected, axe-core's accessibility check (vendored, injected into the page under test,
never served by the mirror) and screenshots kept as test artefacts."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.require import require

AXE = Path(__file__).with_name("vendor") / "axe.min.js"
#: where the pages' screenshots go (CI keeps the folder as the run's artefacts)
SCREENSHOTS = Path(os.environ.get("COORDINATOR_MIRROR_SCREENSHOTS", "var/screenshots"))


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    require(path is not None, "Debian's chromium (apt-get install chromium)")
    assert path is not None
    return path


@contextmanager
def browser() -> Iterator[Any]:
    """One headless Chromium (the caller opens pages with `open_page`)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # --no-sandbox: the tests run as root in a container, where Chromium's sandbox cannot start
        b = p.chromium.launch(executable_path=chromium_path(), headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


class Page:
    """A browser page with what went wrong in it: console errors, uncaught exceptions, dialogs
    (an ``alert`` opened by injected markup would land here) and failed requests."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("dialog", self._dialog)
        page.on("response", lambda r: self.errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def axe(self) -> list[dict[str, Any]]:
        """axe-core's violations on the page as it is (WCAG 2 A and AA rules)."""
        self.page.add_script_tag(content=AXE.read_text())
        result: dict[str, Any] = self.page.evaluate(
            "async () => await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa']})"
        )
        return [{"id": v["id"], "nodes": [n["target"] for n in v["nodes"]]} for v in result["violations"]]

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@contextmanager
def open_page(b: Any, **context: Any) -> Iterator[Page]:
    # bypass_csp: the tests evaluate their own scripts (axe, waits) in the page; the pages' policy
    # is asserted on the responses' headers, and the markup tests then hold without its safety net
    ctx = b.new_context(bypass_csp=True, **context)
    try:
        yield Page(ctx.new_page())
    finally:
        ctx.close()
