"""The driver's AdminClient (streaming.cluster.groups) takes its options through the one translation,
streaming.cluster.client_config: same result, same refusals."""

from __future__ import annotations

import pytest

from streaming.cluster.client_config import ClientOptionError, driver_config, librdkafka_config


def test_driver_config_is_the_translation_plus_bootstrap_and_timeouts() -> None:
    java = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="mirror" password="p\\"w";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/ca.pem",
    }
    conf = driver_config("b1:9092", java, 5.0)
    assert conf["bootstrap.servers"] == "b1:9092"
    assert conf["socket.connection.setup.timeout.ms"] == 5000
    assert {k: conf[k] for k in librdkafka_config(java)} == librdkafka_config(java)
    assert conf["sasl.password"] == 'p"w' and conf["ssl.ca.location"] == "/etc/ca.pem"


def test_an_option_librdkafka_cannot_honour_is_refused_by_name() -> None:
    with pytest.raises(ClientOptionError, match=r"ssl\.keystore\.location"):
        driver_config("b:9092", {"ssl.keystore.location": "/k.jks"}, 5.0)
