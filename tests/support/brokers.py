"""Extra brokers of the test run's own (beside the session broker): `start_broker`, and the short
retention the expiry tests give theirs."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from tests.support.require import require

RETENTION_MINUTES = 1


CHECK_INTERVAL_MS = 1000


def start_broker(tmp_path_factory: pytest.TempPathFactory, name: str, **settings: Any) -> Any:
    """A dedicated broker.  The launcher's random KRaft cluster id can start with "-", which
    kafka-storage reads as an option: a new id fixes it, anything else is a real failure."""
    require(shutil.which("java") is not None, "java 17+ on PATH")
    from lab.broker import BrokerSettings, BrokerStartError, LocalKafka

    for attempt in range(3):
        broker = LocalKafka(BrokerSettings(**settings), tmp_path_factory.mktemp(f"{name}-{attempt}"))
        try:
            return broker.start()
        except BrokerStartError as exc:
            if "cluster-id" not in str(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")
