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


def past_the_first_batch(mirror: Any) -> bool:
    """The mirror is ready and its query ran a micro-batch after its first (batch 0: the seed, or
    the catch-up).  On a quiet cluster that batch comes only when something wakes the query, as
    the mirror's expiry wake does when a deadline is due: woken here (`ClusterMirror.nudge`, which
    writes nothing while a batch runs or records wait)."""
    if not mirror.status.ready or mirror.status.last_batch.batch_id < 0:
        return False
    if mirror.status.last_batch.batch_id >= 1:
        return True
    mirror.cluster.nudge()
    return False
