"""Java-style client options -> librdkafka configuration: translated, or refused by name."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer

from streaming.cluster.client_config import ClientOptionError, librdkafka_config

SCRAM = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="s3cr=t;x";'
)
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required username=alice password=pw;"

TRANSLATED = [
    (
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"},
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"},
    ),
    ({"sasl.jaas.config": SCRAM}, {"sasl.username": "mirror", "sasl.password": "s3cr=t;x"}),
    ({"sasl.jaas.config": PLAIN}, {"sasl.username": "alice", "sasl.password": "pw"}),
    ({"ssl.truststore.location": "/ca.pem", "ssl.truststore.type": "PEM"}, {"ssl.ca.location": "/ca.pem"}),
    (
        {"ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"},
        {"ssl.ca.pem": "-----BEGIN CERTIFICATE-----"},
    ),
    (
        {"ssl.keystore.location": "/c.p12", "ssl.keystore.type": "PKCS12", "ssl.keystore.password": "k"},
        {"ssl.keystore.location": "/c.p12", "ssl.keystore.password": "k"},
    ),
    (
        {"ssl.keystore.location": "/c.pem", "ssl.keystore.type": "PEM", "ssl.key.password": "kp"},
        {"ssl.certificate.location": "/c.pem", "ssl.key.location": "/c.pem", "ssl.key.password": "kp"},
    ),
    ({"ssl.endpoint.identification.algorithm": ""}, {"ssl.endpoint.identification.algorithm": "none"}),
    ({"ssl.endpoint.identification.algorithm": "HTTPS"}, {"ssl.endpoint.identification.algorithm": "https"}),
    ({"librdkafka.debug": "broker", "request.timeout.ms": "5000"}, {"debug": "broker"}),
    ({"client.dns.lookup": "use_all_dns_ips"}, {"client.dns.lookup": "use_all_dns_ips"}),
]


@pytest.mark.parametrize(("java", "expected"), TRANSLATED)
def test_translation(java: dict[str, str], expected: dict[str, str]) -> None:
    assert librdkafka_config(java) == expected


REFUSED = [
    ({"ssl.truststore.location": "/t.jks"}, "ssl.truststore.location"),
    ({"ssl.truststore.location": "/t.p12", "ssl.truststore.type": "PKCS12"}, "ssl.truststore.location"),
    ({"ssl.keystore.location": "/k.jks"}, "ssl.keystore.location"),
    (
        {"sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"},
        "sasl.jaas.config",
    ),
    (
        {"sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required username=x;"},
        "password missing",
    ),
    ({"ssl.engine.factory.class": "com.example.Engine"}, "ssl.engine.factory.class"),
    ({"sasl.client.callback.handler.class": "com.example.Handler"}, "sasl.client.callback.handler.class"),
]


def test_java_consumer_tuning_is_left_out_and_dns_lookup_kept() -> None:
    java = {"max.poll.records": "10", "fetch.min.bytes": "1", "client.dns.lookup": "use_all_dns_ips"}
    assert librdkafka_config(java) == {"client.dns.lookup": "use_all_dns_ips"}


@pytest.mark.parametrize(("java", "named"), REFUSED)
def test_refused_with_the_option_named(java: dict[str, str], named: str) -> None:
    with pytest.raises(ClientOptionError, match=named.replace(".", r"\.")):
        librdkafka_config(java)


def test_no_secret_in_a_refusal() -> None:
    with pytest.raises(ClientOptionError) as info:
        librdkafka_config({"sasl.jaas.config": "com.example.Custom required password=hunter2;"})
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(("java", "expected"), TRANSLATED)
def test_librdkafka_accepts_every_translation(java: dict[str, str], expected: dict[str, str]) -> None:
    # librdkafka validates names and values when the client is created (files are read later,
    # so the PEM/PKCS12 cases are checked by name and type only where no file is needed)
    conf = {"group.id": "x", **expected}
    if "sasl.mechanism" in conf:  # librdkafka wants the credentials with the mechanism
        conf.setdefault("sasl.username", "u")
        conf.setdefault("sasl.password", "p")
    for needs_file in (
        "ssl.ca.location",
        "ssl.keystore.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.ca.pem",
    ):
        conf.pop(needs_file, None)
    if "ssl.keystore.password" in conf or "ssl.key.password" in conf:
        conf.pop("ssl.keystore.password", None)
    Consumer(conf).close()
