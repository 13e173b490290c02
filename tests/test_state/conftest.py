"""Fixtures of the state tests: dedicated brokers (short retention; opt-in scenarios)."""

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
    broker = start_broker(
        tmp_path_factory,
        "kafka-retention",
        kafka_version=kafka_version,
        offsets_retention_minutes=RETENTION_MINUTES,
        offsets_retention_check_interval_ms=CHECK_INTERVAL_MS,
    )
    yield broker
    broker.stop()


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


@pytest.fixture(scope="module")
def extra_kafka(tmp_path_factory: pytest.TempPathFactory, kafka_version: str) -> Iterator[Any]:
    """A default-settings broker for the opt-in scenarios (kept off the session broker, whose
    groups other tests compare)."""
    broker = start_broker(tmp_path_factory, "kafka-extra", kafka_version=kafka_version)
    yield broker
    broker.stop()
