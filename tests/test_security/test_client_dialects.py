"""One Kafka client dialect from end to end: every store type and SASL mechanism a Java client takes
works, with the same options given once, for every part of the mirror that talks to Kafka.

Each case runs, against the session broker's secured listeners, with certificates and stores made
at test time (openssl, keytool), tokens from a local OIDC endpoint (`lab.oidc`) and Kerberos
principals of a local KDC (`lab.kdc`, MIT krb5):

* the driver's reads -- cluster id, the coordinators' groups, log offsets, a lag round -- through
  Kafka's Admin client in the Spark driver's JVM, as ``run`` opens it;
* Spark's Kafka source reading ``__consumer_offsets`` with the source's own options
  (`streaming.pipeline.source.kafka_options`);
* the output topics: the sink's writer (`streaming.pipeline.sinks.MirrorSink`) with Spark's Kafka sink;
* ``capture`` with every option from the environment (``CM_KAFKA_OPTIONS``), none as a flag.

The whole mirror (`run`) goes live with a JKS trust store and with OIDC in
`test_secured_broker.py` / here; PEM and PKCS12 have done so there since the first secured round.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.security import Security, doc_feature_acls, readme_acls
from tests.support.waiting import past_the_first_batch

pytestmark = [pytest.mark.broker, pytest.mark.spark]

PASSWORD = "Dialect-Pass-3c8e52"
#: Kafka's config provider for a directory of files, one value per file (a mounted Secret)
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"

CASES = [
    ("SASL_SSL", {"truststore": "PEM"}),
    ("SASL_SSL", {"truststore": "PKCS12"}),
    ("SASL_SSL", {"truststore": "JKS"}),
    ("SSL", {"truststore": "PKCS12", "keystore": "PKCS12"}),
    ("SSL", {"truststore": "JKS", "keystore": "JKS"}),
    ("SSL", {"truststore": "PEM", "keystore": "PEM"}),
    ("OAUTHBEARER", {"truststore": "PEM"}),
    ("OIDC", {"truststore": "JKS"}),
    ("GSSAPI", {"truststore": "PKCS12"}),
]

#: what a user running every feature needs beyond the required rows (docs/security.md): Describe on
#: the groups' topics (lag) and on the cluster (reconciliation's complete ListGroups)
FEATURE_ACLS = doc_feature_acls()


def _user(security: Security, kafka: Any, listener: str, tag: str) -> tuple[str, str]:
    """A principal on ``listener`` -- SCRAM user, certificate CN, unsecured JWT sub or OIDC client
    id are all ``User:<name>`` -- holding the README's ACLs and the feature ACLs."""
    name = f"{tag}-{listener.lower().replace('_', '')}-{uuid.uuid4().hex[:6]}"
    if listener == "SASL_SSL":
        security.scram_user(name, PASSWORD)
    return name, PASSWORD


@pytest.fixture(scope="module")
def outputs(security: Security) -> tuple[str, str]:
    events, offsets = "cm-dialect-events", "cm-dialect-offsets"
    security.create_topic(events)
    security.create_topic(offsets, compacted=True)
    return events, offsets


@pytest.mark.parametrize(
    ("listener", "stores"), CASES, ids=[f"{ls}-{'-'.join(s.values())}" for ls, s in CASES]
)
def test_every_part_speaks_the_same_options(
    listener: str, stores: dict[str, str], *, kafka: Any, spark: Any, scenarios: Any,
    security: Security, outputs: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from state.events import DriftSuspected
    from streaming.app.cli import main
    from streaming.cluster.groups import ClusterClient
    from streaming.cluster.jvm import Jvm
    from streaming.cluster.offsets import OffsetReader
    from streaming.pipeline.sinks import DRIVER_EVENTS, MirrorSink
    from streaming.pipeline.source import kafka_options
    from streaming.serving.status import MirrorStatus
    from streaming.serving.store import SnapshotStore
    from streaming.settings import load_settings

    user, password = _user(security, kafka, listener, "dialect")
    security.grant(user, readme_acls(*outputs) + FEATURE_ACLS)
    options = kafka.client_options(listener, user, password, **stores)
    bootstrap = kafka.bootstrap_of(listener)
    topic = next(t for r in scenarios.values() for t in r.topics)

    # the driver's reads, in a client JVM as `run` opens them -- first, as `run` does: Spark's
    # source below logs in after it (two kafka-clients versions in one JVM broke exactly that)
    # (Kerberos: every client JVM is told where the realm is -- kafka_client_java_options here and
    # for capture, the session's Spark driver by spark.driver.extraJavaOptions, tests/conftest.py)
    java_options = [f"-Djava.security.krb5.conf={kafka.kdc.krb5_conf}"] if listener == "GSSAPI" else []
    settings = load_settings(
        bootstrap_servers=bootstrap, kafka_options=options, events_topic=outputs[0],
        checkpoint_location=str(tmp_path / "checkpoint"), kafka_client_java_options=java_options,
    )  # fmt: skip
    jvm = Jvm.launch(java_options=settings.kafka_java_options(), quick_start=False)
    client = ClusterClient(jvm, bootstrap, options)
    try:
        assert client.cluster_id() == kafka.cluster_id
        assert client.may_list_every_group()
        listed = client.list_groups()
        assert listed.complete and set(scenarios["classic_range"].groups) <= set(listed.groups)
        _starts, ends = client.partition_offsets("__consumer_offsets")
        assert sum(ends.values()) > 100
        r = OffsetReader(client).read([(topic, 0)])
        assert (topic, 0) in r.partitions and not r.denied_topics and r.error is None
    finally:
        client.close()
        jvm.close()

    # Spark's Kafka source with the source's own options
    source = kafka_options(settings, sorted(ends))
    source.pop("maxOffsetsPerTrigger")
    # a batch read names its group spark-kafka-relation-...; the streaming source's prefix is the
    # one the README's ACL grants
    source["groupIdPrefix"] = "spark-kafka-source"
    rows = spark.read.format("kafka").options(**source, endingOffsets="latest").load().count()
    assert rows > 100

    # an output topic, written by the sink's own writer
    before = security.count_records(outputs[0])
    event = DriftSuspected("", None, None, None, reason="test", partitions=(), at_ms=int(time.time() * 1000))
    MirrorSink(settings, SnapshotStore(), MirrorStatus(), spark).write_driver_events(
        [event.to_json()], 1, DRIVER_EVENTS
    )
    assert security.count_records(outputs[0]) == before + 1

    # capture, every option (secrets included) from the environment
    monkeypatch.setenv("CM_KAFKA_OPTIONS", json.dumps(options))
    out = tmp_path / "capture.jsonl"
    argv = ["capture", "--bootstrap-servers", bootstrap, "--out", str(out), "--timeout", "30"]
    if java_options:
        # a JVM that does not know the realm (no krb5.conf, or the system's, of another realm):
        # one line naming the cause and the setting
        capsys.readouterr()
        assert main(argv) == 5
        err = capsys.readouterr().err
        assert "Kerberos (GSSAPI) login failed" in err and "kafka_client_java_options" in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        monkeypatch.setenv("CM_KAFKA_CLIENT_JAVA_OPTIONS", json.dumps(java_options))
    assert main(argv) == 0
    assert sum(1 for _ in out.open()) > 100
    if listener == "OIDC":
        assert kafka.oidc.issued.get(user, 0) >= 3  # the driver, Spark's consumers and capture logged in
    if listener == "GSSAPI":  # the same three, each with a ticket for the broker from the KDC
        assert kafka.kdc.tickets(user, "kafka/localhost") >= 3


def _serve_until(settings: Any, spark: Any, done: Any, until_s: float = 240.0) -> tuple[int, Any]:
    """`run`'s serve() on the test session until ``done(mirror)`` holds (or ``until_s`` passed)."""
    from streaming.app.run_cmd import serve

    stop = threading.Event()
    box: dict[str, Any] = {}

    def watch() -> None:
        deadline = time.monotonic() + until_s
        while not stop.is_set() and time.monotonic() < deadline:
            m = box.get("mirror")
            if m is not None and done(m):
                break
            time.sleep(0.5)
        stop.set()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    code = serve(settings, stop, on_started=lambda m: box.__setitem__("mirror", m), spark=spark)
    stop.set()
    t.join()
    return code, box.get("mirror")


@pytest.mark.parametrize("listener", ["OIDC", "SASL_SSL"])
def test_the_mirror_goes_live(
    listener: str, *, kafka: Any, spark: Any, scenarios: Any, security: Security,
    outputs: tuple[str, str], tmp_path: Path,
) -> None:  # fmt: skip
    """``run`` to the live state over OIDC (JKS trust store) and over SCRAM with a JKS trust store
    whose password comes from a mounted file through Kafka's own config provider."""
    from streaming.settings import load_settings

    user, password = _user(security, kafka, listener, "live")
    security.grant(user, readme_acls(*outputs) + FEATURE_ACLS)
    options = kafka.client_options(listener, user, password, truststore="JKS")
    if listener == "SASL_SSL":  # a Kubernetes Secret mounted as files: DirectoryConfigProvider
        secrets = tmp_path / "secrets"
        secrets.mkdir()
        (secrets / "truststore-password").write_text(options["ssl.truststore.password"])
        options.update(
            {
                "config.providers": "dir",
                "config.providers.dir.class": DIRECTORY_PROVIDER,
                "ssl.truststore.password": f"${{dir:{secrets}:truststore-password}}",
            }
        )
    settings = load_settings(
        bootstrap_servers=kafka.bootstrap_of(listener), kafka_options=options,
        events_topic=outputs[0], offsets_topic=outputs[1],
        checkpoint_location=str(tmp_path / "checkpoint"), trigger_interval_s=1.0,
        shuffle_partitions=2, http_port=0, reconcile_interval_s=2, lag_interval_s=1,
    )  # fmt: skip

    def live_and_reconciled(m: Any) -> bool:
        return bool(past_the_first_batch(m) and m.status.view().reconcile_rounds.get("ok"))

    code, mirror = _serve_until(settings, spark, live_and_reconciled)
    assert code == 0
    assert mirror is not None and live_and_reconciled(mirror), mirror.status.view().reconcile_rounds
    assert len(mirror.store) > 10
    assert not mirror.status.view().mismatches.get("missing_in_coordinator")


#: AWS MSK IAM as its README gives it (aws-msk-iam-auth): the options a user sets for an MSK cluster
MSK_IAM_OPTIONS = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "AWS_MSK_IAM",
    "sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
    "sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
}


def test_a_vendors_login_module_reaches_every_client(
    kafka: Any, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AWS MSK IAM cannot be reached from here; what is local is checked.  Without the vendor's jar
    the mirror names the missing class (exit 2); with it in ``kafka_plugin_jars`` the options pass
    through to the driver's client, capture and Spark's source, and each gets as far as the SASL
    handshake -- where the test broker refuses the mechanism (exit 5), which it can only do once
    the IAM login module and callback handler loaded."""
    from streaming.app.cli import main
    from streaming.jars import jars_root
    from streaming.pipeline.source import kafka_options
    from streaming.settings import load_settings

    [jar] = [str(p) for p in (jars_root() / "test-plugins").glob("aws-msk-iam-auth-*-all.jar")]
    options = {**MSK_IAM_OPTIONS, **{k: v for k, v in kafka.client_options("OAUTHBEARER", "x").items()
                                     if k.startswith("ssl.")}}  # fmt: skip
    base = dict(
        bootstrap_servers=kafka.sasl_bootstrap, kafka_options=options, http_port=0,
        checkpoint_location=str(tmp_path / "checkpoint"),
    )  # fmt: skip
    code, _ = _serve_until(load_settings(**base), spark, lambda m: True, until_s=60)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "software.amazon.msk.auth.iam.IAMClientCallbackHandler is not on the class path" in err

    code, _ = _serve_until(load_settings(**base, kafka_plugin_jars=[jar]), spark, lambda m: True, until_s=60)
    err = capsys.readouterr().err
    assert code == 5, err
    assert "AWS_MSK_IAM" in err and "Traceback" not in err

    argv = ["capture", "--bootstrap-servers", kafka.sasl_bootstrap, "--out", str(tmp_path / "c.jsonl"),
            "--kafka-plugin-jars", jar, "--timeout", "20"]  # fmt: skip
    for k, v in options.items():
        argv += ["--kafka-options", f"{k}={v}"]
    assert main(argv) == 5
    assert "AWS_MSK_IAM" in capsys.readouterr().err

    spark.sql(f"ADD JAR '{jar}'")  # what Mirror.start does with kafka_plugin_jars
    settings = load_settings(**base, kafka_plugin_jars=[jar])
    with pytest.raises(Exception, match="AWS_MSK_IAM") as info:
        spark.read.format("kafka").options(
            **kafka_options(settings, [0]), endingOffsets="latest"
        ).load().count()
    assert "ClassNotFoundException" not in str(info.value)


def test_the_docs_helm_example_for_sasl_ssl_connects(
    kafka: Any, security: Security, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/kubernetes.md's SASL_SSL example, rendered by the chart as a user would install it, with
    its Secrets given real values (a SCRAM user's JAAS line, a PKCS12 trust store and its password)
    and its mounted file at the path the chart mounts it: the application loads the rendered
    settings, its start-up checks pass, and its Kafka client reaches the secured broker."""
    import re

    import yaml

    from streaming.cluster.groups import ClusterClient
    from streaming.cluster.jvm import Jvm
    from streaming.settings import load_settings
    from tests.support.helm import REPO, Helm, _container

    doc = (REPO / "docs" / "kubernetes.md").read_text()
    section = doc.split("## Secrets", 1)[1]
    example = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert example is not None and "kafkaSecretOptions" in example.group(1)
    values = tmp_path / "example.yaml"
    values.write_text(example.group(1))
    rendered = Helm().render(values, sets=[f"settings.bootstrap_servers={kafka.sasl_bootstrap}"])

    user, password = _user(security, kafka, "SASL_SSL", "helm")
    security.grant(user, readme_acls("unused-events", "unused-offsets"))
    store, store_password = kafka.pki.truststore("PKCS12", "keystore-Secret-0")
    secrets = {
        ("kafka-client", "sasl.jaas.config"): kafka.client_options("SASL_SSL", user, password)[
            "sasl.jaas.config"
        ],
        ("kafka-truststore", "password"): store_password,
    }
    mounts = {"/etc/coordinator-mirror/secrets/kafka-truststore/truststore.p12": str(store)}
    settings_file = tmp_path / "settings.yaml"
    text = rendered.settings_yaml()
    for path, real in mounts.items():
        assert path in text
        text = text.replace(path, real)  # the Secret mounted where the chart mounts it
    settings_file.write_text(text)
    for name in [n for n in __import__("os").environ if n.startswith("CM_")]:
        monkeypatch.delenv(name)
    for var in _container(rendered)["env"]:
        if "secretKeyRef" in var.get("valueFrom", {}):
            ref = var["valueFrom"]["secretKeyRef"]
            monkeypatch.setenv(var["name"], secrets[(ref["name"], ref["key"])])
        elif var["name"].startswith("CM_") and "value" in var:
            monkeypatch.setenv(var["name"], str(var["value"]))
    settings = load_settings(config_file=str(settings_file))
    given = {
        k: mounts.get(v, v) for k, v in yaml.safe_load(example.group(1))["settings"]["kafka_options"].items()
    }
    assert given.items() <= settings.kafka_options.items()  # the example's options, as the pod sees them
    settings.check_client_files()
    jvm = Jvm.launch(java_options=settings.kafka_java_options())
    client = ClusterClient(jvm, settings.bootstrap_servers or "", settings.kafka_options)
    try:
        assert client.cluster_id() == kafka.cluster_id
        assert client.topic_partitions("__consumer_offsets")
    finally:
        client.close()
        jvm.close()
