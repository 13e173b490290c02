"""Waiting for a live system to reach a state: poll a check until it answers, fail with what was seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    what: str, check: Callable[[], Any], timeout_s: float = 600.0, seen: Callable[[], Any] | None = None
) -> Any:
    """``check()``'s first truthy answer, polled every 0.5 s; an assertion naming ``what`` (and
    ``seen()``, what the system showed last) when none came within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        shown = f": {seen()}" if seen else ""
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s}s{shown}"
        time.sleep(0.5)
