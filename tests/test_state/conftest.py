"""Fixtures of the state tests: dedicated brokers (short retention; opt-in scenarios)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.brokers import CHECK_INTERVAL_MS, RETENTION_MINUTES, start_broker


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


@pytest.fixture(scope="module")
def extra_kafka(tmp_path_factory: pytest.TempPathFactory, kafka_version: str) -> Iterator[Any]:
    """A default-settings broker for the opt-in scenarios (kept off the session broker, whose
    groups other tests compare)."""
    broker = start_broker(tmp_path_factory, "kafka-extra", kafka_version=kafka_version)
    yield broker
    broker.stop()
