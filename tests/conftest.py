"""Session-wide fixtures: one real Kafka broker, one scenario run, one Spark session per test run.

Everything here is real.  A test that needs Java, the Maven artifacts, the broker, Spark or
Prometheus and cannot get them FAILS (it never skips): under CI=true a skipped test fails the run
too (see pytest_sessionfinish), so "green" always means "it ran".
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.require import CI, require

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
    from streaming.jars import kafka_version as v

    return v()


@pytest.fixture(scope="session")
def krb5_conf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the session broker's KDC (`lab.kdc`) writes its ``krb5.conf``: chosen before anything
    starts, so that the session's Spark driver is told as a user tells theirs -- with
    ``-Djava.security.krb5.conf`` in ``spark.driver.extraJavaOptions`` -- while the KDC starts with
    the broker (a JVM reads the file at its first Kerberos login)."""
    return tmp_path_factory.mktemp("kerberos") / "krb5.conf"


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory, kafka_version: str, krb5_conf: Path) -> Iterator[Any]:
    """The test session's broker (newest 4.x), 5 partitions of __consumer_offsets.

    Secured too (`lab.broker`: SASL_SSL/SCRAM, OAUTHBEARER, OIDC, Kerberos and mTLS listeners, the
    StandardAuthorizer): the tests of tests/test_security use those listeners; every other test
    speaks PLAINTEXT as the super user ANONYMOUS, so one broker serves the whole run."""
    require(shutil.which("java") is not None, "java 17+ on PATH")
    from lab.broker import BrokerSettings, LocalKafka
    from lab.kdc import Kdc, KdcError, find_tools
    from streaming.jars import MissingArtifactsError, kafka_dir

    try:
        kafka_dir(kafka_version)
    except MissingArtifactsError as exc:
        pytest.fail(str(exc), pytrace=False)
    require(shutil.which("openssl") is not None, "openssl on PATH (the secured listeners' certificates)")
    try:
        find_tools()
    except KdcError as exc:
        require(False, f"a Kerberos KDC for the GSSAPI listener: {exc}")
    kdc = Kdc(krb5_conf.parent)
    assert kdc.krb5_conf == krb5_conf
    broker = LocalKafka(
        BrokerSettings(kafka_version=kafka_version, secured=True), tmp_path_factory.mktemp("kafka"), kdc=kdc
    )
    broker.start()
    yield broker
    broker.cleanup()  # the broker, its token endpoint and its KDC


@pytest.fixture(scope="session")
def driver_jvm() -> Iterator[Any]:
    """A JVM with the driver's Kafka clients (`streaming.cluster.jvm.Jvm.launch`, as `capture` starts
    one) for tests of the cluster room that need no Spark."""
    require(shutil.which("java") is not None, "java 17+ on PATH")
    from streaming.cluster.jvm import Jvm
    from streaming.jars import MissingArtifactsError, driver_client_jars

    try:
        driver_client_jars()
    except MissingArtifactsError as exc:
        pytest.fail(str(exc), pytrace=False)
    jvm = Jvm.launch()
    yield jvm
    jvm.close()


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
def spark(tmp_path_factory: pytest.TempPathFactory, krb5_conf: Path) -> Iterator[Any]:
    """One local[2] Spark session with the Kafka connector for the whole run (its JVM told where the
    session's Kerberos realm is, as docs/security.md tells users to)."""
    require(shutil.which("java") is not None, "java 17+ on PATH")
    from streaming.jars import MissingArtifactsError
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
                "spark.driver.extraJavaOptions": f"-Djava.security.krb5.conf={krb5_conf}",
                "spark.executor.extraJavaOptions": f"-Djava.security.krb5.conf={krb5_conf}",
            },
        )
    except MissingArtifactsError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield session
    session.stop()


# ------------------------------------------------------------------------------ running mirrors
@pytest.fixture
def mirrors(spark: Any) -> Iterator[Any]:
    """Start in-process mirrors on the session's Spark -- ``mirrors.start(settings, ready_s=...)``
    (`tests.support.live_mirror.RunningMirrors`) -- each stopped after the test, pass or fail."""
    from tests.support.live_mirror import RunningMirrors

    with RunningMirrors(spark) as running:
        yield running


@pytest.fixture(scope="module")
def module_mirrors(spark: Any) -> Iterator[Any]:
    """`mirrors` for a module's shared mirror: stopped after the module's last test."""
    from tests.support.live_mirror import RunningMirrors

    with RunningMirrors(spark) as running:
        yield running
