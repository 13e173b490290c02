"""Session-wide fixtures: one real Kafka broker, one scenario run, one Spark session per test run.

Everything here is real.  A test that needs Java, the Maven artifacts, the broker, Spark or
Prometheus and cannot get them FAILS (it never skips): under CI=true a skipped test fails the run
too (see pytest_sessionfinish), so "green" always means "it ran".
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require(condition: bool, what: str) -> None:
    """Fail (never skip) when a real part of the test bench is missing."""
    if not condition:
        pytest.fail(f"missing test dependency: {what} (run `make setup`)", pytrace=False)


_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if CI and _skipped and session.exitstatus == 0:
        session.exitstatus = 1
        print(f"\nCI=true: {len(_skipped)} test(s) skipped, which CI treats as failure: {_skipped[:10]}")


# ------------------------------------------------------------------------------------------- Kafka
@pytest.fixture(scope="session")
def kafka_version() -> str:
    from streaming.pipeline.jars import kafka_version as v

    return v()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory, kafka_version: str) -> Iterator[Any]:
    """The test session's broker (newest 4.x), 5 partitions of __consumer_offsets.

    Secured too (`lab.broker`: SASL_SSL/SCRAM and mTLS listeners, the StandardAuthorizer): the
    tests of tests/test_security use those listeners; every other test speaks PLAINTEXT as the
    super user ANONYMOUS, so one broker serves the whole run."""
    require(shutil.which("java") is not None, "java 17+ on PATH")
    from lab.broker import BrokerSettings, LocalKafka
    from streaming.pipeline.jars import MissingArtifactsError, kafka_dir

    try:
        kafka_dir(kafka_version)
    except MissingArtifactsError as exc:
        pytest.fail(str(exc), pytrace=False)
    require(shutil.which("openssl") is not None, "openssl on PATH (the secured listeners' certificates)")
    broker = LocalKafka(
        BrokerSettings(kafka_version=kafka_version, secured=True), tmp_path_factory.mktemp("kafka")
    )
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def lab(kafka: Any) -> Iterator[Any]:
    from lab.lab import Lab

    lab = Lab(kafka.bootstrap, kafka.settings.kafka_version, run_id="t")
    yield lab
    lab.close()


@pytest.fixture(scope="session")
def scenarios(lab: Any) -> dict[str, Any]:
    """Every default scenario, run once per session against the session broker."""
    from lab.scenarios import run_scenarios

    return run_scenarios(lab)


@pytest.fixture(scope="session")
def share_acks_result(lab: Any) -> Any:
    """`lab.scenarios_insights.share_acks` run once per session: a share consumer that accepted,
    released and rejected records, with records left unconsumed (its facts say which)."""
    from lab.scenarios import run_scenarios
    from lab.scenarios_insights import share_acks  # noqa: F401 - registers the scenario

    return run_scenarios(lab, ["share_acks"])["share_acks"]


@pytest.fixture(scope="session")
def capture_file(tmp_path_factory: pytest.TempPathFactory, kafka: Any, scenarios: dict[str, Any]) -> Path:
    """`coordinator-mirror capture` of the session broker after every scenario ran."""
    from streaming.app.cli import main

    out = tmp_path_factory.mktemp("capture") / "consumer_offsets.jsonl"
    assert main(["capture", "--bootstrap-servers", kafka.bootstrap, "--out", str(out)]) == 0
    return out


# ------------------------------------------------------------------------------------------- Spark
@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local[2] Spark session with the Kafka connector for the whole run."""
    require(shutil.which("java") is not None, "java 17+ on PATH")
    from streaming.pipeline.jars import MissingArtifactsError
    from streaming.pipeline.session import build_session

    try:
        session = build_session(
            master="local[2]",
            app_name="coordinator-mirror-tests",
            conf={
                "spark.sql.shuffle.partitions": "2",
                "spark.ui.enabled": "false",
                "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
                "spark.driver.memory": "2g",
            },
        )
    except MissingArtifactsError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield session
    session.stop()
