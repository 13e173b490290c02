"""The one table of failures a user can cause (`streaming.app.errors`): Java's and librdkafka's
words for each cause -- from the messages Kafka's clients really print -- classified to one line
and the documented exit code, secrets scrubbed from anything quoted; the option a client refuses
named.  The same failures end to end: tests/test_reliability/test_errors.py, tests/test_security."""

from __future__ import annotations

import pytest

from streaming.app.errors import (
    EXIT_AUTHENTICATION,
    EXIT_AUTHORIZATION,
    EXIT_CONFIG,
    EXIT_CONNECTOR,
    EXIT_TLS,
    EXIT_UNEXPECTED,
    EXIT_UNREACHABLE,
    StartupError,
    classify,
    client_options_error,
    exception_chain,
    first_line,
    scrub,
)
from streaming.jars import MissingArtifactsError
from streaming.pipeline.session import ConnectorVersionError

PY4J = "An error occurred while calling o77.get.\n: java.util.concurrent.ExecutionException: "
TRACE = "\n\tat org.apache.kafka.common.internals.KafkaFutureImpl.wrapAndThrow(KafkaFutureImpl.java:45)"


def test_java_timeouts_mean_the_cluster_is_unreachable() -> None:
    text = (
        "An error occurred while calling o77.get.\n: java.util.concurrent.ExecutionException: "
        "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. "
        "Call: describeCluster\n\tat org.apache.kafka.common.internals.KafkaFutureImpl.wrapAndThrow"
    )
    err = classify(RuntimeError(text), bootstrap="b:9092")
    assert err.exit_code == EXIT_UNREACHABLE
    assert "b:9092" in err.message and "\tat " not in err.message and "\n" not in err.message


def test_connector_problems_name_the_fix() -> None:
    for exc in (MissingArtifactsError("JVM artifacts not found in /x"), ConnectorVersionError("3.5 vs 4.0")):
        err = classify(exc)
        assert err.exit_code == EXIT_CONNECTOR and "make jars" in err.message


def test_a_startup_error_passes_through_and_anything_else_is_exit_1() -> None:
    mine = StartupError("checkpoint of another cluster", 2)
    try:
        raise RuntimeError("wrapped") from mine
    except RuntimeError as exc:
        assert classify(exc) is mine
    assert classify(ValueError("boom")).exit_code == EXIT_UNEXPECTED


@pytest.mark.parametrize(
    ("text", "code", "words"),
    [
        (
            "org.apache.kafka.common.errors.SslAuthenticationException: SSL handshake failed\nCaused by: "
            "sun.security.validator.ValidatorException: PKIX path building failed",
            EXIT_TLS,
            "not trusted",
        ),
        ("javax.net.ssl.SSLHandshakeException: Received fatal alert: bad_certificate", EXIT_TLS, "refused"),
        (
            "org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed during "
            "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
            EXIT_AUTHENTICATION,
            "SASL mechanism and credentials",
        ),
        (
            "javax.security.auth.login.LoginException: Cannot locate KDC",
            EXIT_AUTHENTICATION,
            "Kerberos (GSSAPI) login failed",
        ),
        (
            "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: "
            "[__consumer_offsets]",
            EXIT_AUTHORIZATION,
            "lacks an ACL",
        ),
        ("KafkaError{code=GROUP_AUTHORIZATION_FAILED}", EXIT_AUTHORIZATION, "lacks an ACL"),
        (
            "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment.",
            EXIT_UNREACHABLE,
            "cannot reach the Kafka cluster at b:9092",
        ),
        ("java.net.UnknownHostException: kafka.invalid", EXIT_UNREACHABLE, "cannot reach"),
        (
            "org.apache.spark.sql.AnalysisException: Failed to find data source: kafka.",
            EXIT_CONNECTOR,
            "make jars",
        ),
    ],
    ids=[
        "tls-untrusted",
        "tls-client-cert",
        "sasl",
        "kerberos",
        "acl-java",
        "acl-librdkafka",
        "timeout",
        "dns",
        "connector",
    ],
)
def test_each_cause_is_one_line_with_its_exit_code(text: str, code: int, words: str) -> None:
    err = classify(RuntimeError(PY4J + text + TRACE), bootstrap="b:9092")
    assert err.exit_code == code, err.message
    assert words in err.message
    assert "\n" not in err.message and "\tat " not in err.message


def test_security_causes_win_over_the_transport_they_also_read_as() -> None:
    """A refused SASL handshake can also surface as a timeout: the security row is read first."""
    text = (
        "org.apache.kafka.common.errors.TimeoutException: Timed out waiting to send the call\n"
        "Caused by: org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed"
    )
    assert classify(RuntimeError(text)).exit_code == EXIT_AUTHENTICATION


def test_a_cause_is_found_anywhere_in_the_exception_chain() -> None:
    try:
        try:
            raise OSError("java.net.ConnectException: Connection refused")
        except OSError as inner:
            raise RuntimeError("the query failed") from inner
    except RuntimeError as exc:
        assert classify(exc).exit_code == EXIT_UNREACHABLE
        assert [type(e) for e in exception_chain(exc)] == [RuntimeError, OSError]


def test_a_hidden_context_is_not_read() -> None:
    """``raise X from None``: a py4j error's context may not even be printable (its JVM is gone)."""
    try:
        try:
            raise OSError("java.net.ConnectException: Connection refused")
        except OSError:
            raise RuntimeError("plain") from None
    except RuntimeError as exc:
        assert exception_chain(exc) == [exc]
        assert classify(exc).exit_code == EXIT_UNEXPECTED


def test_quoted_detail_never_carries_a_secret() -> None:
    secret = "s3cr3t-pa55"
    text = f"SaslAuthenticationException: Authentication failed for user admin with password {secret}"
    err = classify(RuntimeError(text), secrets=[secret, "abc"])
    assert secret not in err.message and "***" in err.message
    assert scrub("a abc abcd abcde", ["abcd", "abc"]) == "a abc *** ***e"  # 3 characters or fewer: kept


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            PY4J + "java.lang.IllegalStateException: boom" + TRACE,
            "java.util.concurrent.ExecutionException: java.lang.IllegalStateException: boom",
        ),
        ("\n\n  first  \nsecond", "first"),
        ("x" * 400, "x" * 297 + "..."),
    ],
)
def test_first_line_is_the_informative_one(text: str, line: str) -> None:
    assert first_line(text) == line


@pytest.mark.parametrize(
    ("text", "options", "message"),
    [
        (
            "org.apache.kafka.common.KafkaException: Failed to load SSL keystore /etc/ts.p12 of type PKCS12\n"
            "Caused by: java.io.IOException: keystore password was incorrect",
            {"ssl.truststore.location": "/etc/ts.p12", "ssl.truststore.type": "PKCS12"},
            "kafka_options: ssl.truststore.password: Kafka's client cannot open /etc/ts.p12 "
            "(the password is wrong",
        ),
        (
            "org.apache.kafka.common.KafkaException: Failed to load SSL keystore /k.jks of type JKS\n"
            "Caused by: java.nio.file.NoSuchFileException: /k.jks",
            {"ssl.keystore.location": "/k.jks"},
            "kafka_options: ssl.keystore.location: Kafka's client cannot open /k.jks "
            "(the file does not exist",
        ),
        (
            "org.apache.kafka.common.config.ConfigException: Invalid value soon for configuration "
            "request.timeout.ms: Not a number of type INT",
            {"request.timeout.ms": "soon"},
            "kafka_options: request.timeout.ms: invalid value soon: Not a number of type INT",
        ),
        (
            "org.apache.kafka.common.config.ConfigException: Invalid value hunter2 for configuration "
            "ssl.key.password: bad",
            {"ssl.key.password": "hunter2"},
            "kafka_options: ssl.key.password: invalid value ***: bad",
        ),
        (
            "org.apache.kafka.common.config.ConfigException: Invalid value com.example.NoSuchHandler for "
            "configuration sasl.login.callback.handler.class: "
            "Class com.example.NoSuchHandler could not be found.",
            {"sasl.login.callback.handler.class": "com.example.NoSuchHandler"},
            "kafka_options: sasl.login.callback.handler.class: class com.example.NoSuchHandler "
            "is not on the class path",
        ),
    ],
    ids=["truststore-password", "keystore-missing", "invalid-value", "secret-value", "missing-class"],
)
def test_a_refused_client_option_is_named(text: str, options: dict[str, str], message: str) -> None:
    err = client_options_error("kafka_options", RuntimeError(text), options)
    assert err.exit_code == EXIT_CONFIG
    assert err.message.startswith(message), err.message
    assert "hunter2" not in err.message


def test_a_client_failure_that_is_not_about_the_options_is_classified_as_usual() -> None:
    text = "org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed"
    err = client_options_error("kafka_options", RuntimeError(text), {})
    assert err.exit_code == EXIT_AUTHENTICATION
    assert isinstance(err, StartupError) and str(err) == err.message
