"""Fixtures of the state tests: a dedicated short-retention broker for the real expiry test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import require

RETENTION_MINUTES = 1
CHECK_INTERVAL_MS = 1000


@pytest.fixture(scope="module")
def short_retention_kafka(tmp_path_factory: pytest.TempPathFactory, kafka_version: str) -> Iterator[Any]:
    """A broker that expires offsets after one minute and sweeps every second."""
    require(shutil.which("java") is not None, "java 17+ on PATH")
    from streaming.local.broker import BrokerSettings, BrokerStartError, LocalKafka

    settings = BrokerSettings(
        kafka_version=kafka_version,
        offsets_retention_minutes=RETENTION_MINUTES,
        offsets_retention_check_interval_ms=CHECK_INTERVAL_MS,
    )
    broker = None
    for attempt in range(3):
        broker = LocalKafka(settings, tmp_path_factory.mktemp(f"kafka-retention-{attempt}"))
        try:
            broker.start()
            break
        except BrokerStartError as exc:
            # The launcher's random KRaft cluster id can start with "-", which kafka-storage
            # reads as an option; a new id fixes it.  Anything else is a real failure.
            if "cluster-id" not in str(exc) or attempt == 2:
                raise
    assert broker is not None
    yield broker
    broker.stop()
