"""The mirror against the secured listeners of the session broker: SASL_SSL (SCRAM-SHA-512) and
mutual TLS, with the StandardAuthorizer on -- and the one-line failures a user can cause there.

A user holding exactly the ACLs of docs/security.md runs the mirror to the live state and writes
both output topics; removing any one of those ACLs makes it fail at start with exit code 7 and a
message naming the refused resource (so the list is minimal).  A wrong password (exit 5), an
untrusted certificate on either side (exit 6) fail the same way: one line, no traceback, no secret.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.security import Acl, Security, readme_acls
from tests.support.waiting import past_the_first_batch

pytestmark = [pytest.mark.broker, pytest.mark.spark]

PASSWORD = "Scram-Pass-7f3b9c"
#: capture reads with Kafka's consumer, partitions assigned, no group: the topic's Read alone
CAPTURE_ACLS = [Acl("Topic", "__consumer_offsets", "Read")]


def _settings(kafka: Any, tmp: Path, listener: str, user: str, password: str = "", **extra: Any) -> Any:
    from streaming.settings import load_settings

    bootstrap = kafka.sasl_bootstrap if listener == "SASL_SSL" else kafka.ssl_bootstrap
    return load_settings(
        bootstrap_servers=bootstrap,
        kafka_options=kafka.client_options(listener, user, password),
        checkpoint_location=str(tmp / f"checkpoint-{uuid.uuid4().hex[:8]}"),
        trigger_interval_s=1.0,
        shuffle_partitions=2,
        http_port=0,
        **extra,
    )


def _live(m: Any) -> bool:
    return past_the_first_batch(m)


def _serve(settings: Any, spark: Any, until_ready_s: float = 240.0, done: Any = _live) -> tuple[int, Any]:
    """`run`'s serve() in a thread on the test session; stops once ``done(mirror)`` (by default: the
    mirror is live) or it failed.  Returns (exit code, the mirror that ran)."""
    from streaming.app.run_cmd import serve

    stop = threading.Event()
    box: dict[str, Any] = {}

    def started(mirror: Any) -> None:
        box["mirror"] = mirror

    def watch() -> None:
        deadline = time.monotonic() + until_ready_s
        while not stop.is_set() and time.monotonic() < deadline:
            m = box.get("mirror")
            if m is not None and done(m):
                break
            time.sleep(0.5)
        stop.set()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    code = serve(settings, stop, on_started=started, spark=spark)
    stop.set()
    t.join()
    return code, box.get("mirror")


@pytest.fixture(scope="module")
def outputs(security: Security) -> tuple[str, str]:
    events, offsets = "cm-sec-events", "cm-sec-offsets"
    security.create_topic(events)
    security.create_topic(offsets, compacted=True)
    return events, offsets


def test_readme_lists_the_acls(outputs: tuple[str, str]) -> None:
    acls = readme_acls(*outputs)
    assert Acl("Topic", "__consumer_offsets", "Read") in acls
    assert {a.name for a in acls if a.operation == "Write"} == set(outputs)


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_mirror_runs_with_exactly_the_readme_acls(
    listener: str, *, kafka: Any, spark: Any, scenarios: Any, security: Security,
    outputs: tuple[str, str], tmp_path: Path,
) -> None:  # fmt: skip
    user = f"mirror-{listener.lower().replace('_', '')}-{uuid.uuid4().hex[:6]}"
    if listener == "SASL_SSL":
        security.scram_user(user, PASSWORD)
    security.grant(user, readme_acls(*outputs))
    before = {t: security.count_records(t) for t in outputs}
    settings = _settings(
        kafka, tmp_path, listener, user, PASSWORD, events_topic=outputs[0], offsets_topic=outputs[1],
        lag_interval_s=1.0, reconcile_interval_s=1.0,
    )  # fmt: skip

    group = scenarios["classic_range"].group.group_id
    seen_at: list[int] = []

    def live_lag_round_and_reconcile_attempt(m: Any) -> bool:
        """Live, the group in the lag tracker and a round of log offsets since, and a
        reconciliation attempted."""
        if not _live(m) or m.lag.view(group) is None:
            return False
        seen_at[:] = seen_at or [m.lag.rounds]
        return m.lag.rounds > seen_at[0] and bool(m.status.view().reconcile_rounds)

    code, mirror = _serve(settings, spark, done=live_lag_round_and_reconcile_attempt)
    assert code == 0
    assert mirror is not None and mirror.status.ready
    assert len(mirror.store) > 10  # the scenario groups, read over the secured listener
    after = {t: security.count_records(t) for t in outputs}
    assert all(after[t] > before[t] for t in outputs), (before, after)
    # the optional features without their ACLs say so -- never a silent null or a wrong answer
    status, body = mirror._lag_route(f"/groups/{group}/lag")
    assert status == 200 and set(body["denied_topics"]) == set(scenarios["classic_range"].topics), body
    assert body["deleted_topics"] == [], body  # invisible to this principal is not deleted
    assert all(p["end_offset"] is None for p in body["partitions"])
    exposition = mirror.metrics_exposition()[0].decode()
    assert f'coordinator_mirror_topic_not_authorized{{cluster_name="default",group="{group}"' in exposition
    assert mirror.status.view().reconcile_rounds == {
        "not_authorized": mirror.status.view().reconcile_rounds["not_authorized"]
    }
    assert not mirror.store.gone  # no group taken for deleted because ListGroups could not see it


@pytest.mark.parametrize("missing", range(4))
def test_each_readme_acl_is_needed(
    missing: int, *, kafka: Any, spark: Any, security: Security, outputs: tuple[str, str],
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    acls = readme_acls(*outputs)
    assert len(acls) == 4, "one case per ACL of docs/security.md: update the parametrisation"
    dropped = acls[missing]
    user = f"mirror-less-{missing}-{uuid.uuid4().hex[:6]}"
    security.scram_user(user, PASSWORD)
    security.grant(user, [a for a in acls if a != dropped])
    settings = _settings(
        kafka, tmp_path, "SASL_SSL", user, PASSWORD, events_topic=outputs[0], offsets_topic=outputs[1]
    )
    code, _ = _serve(settings, spark)
    err = capsys.readouterr().err
    assert code == 7, err
    lines = [ln for ln in err.splitlines() if ln.startswith("coordinator-mirror:")]
    assert len(lines) == 1, err
    assert "lacks an ACL" in lines[0] and dropped.name in lines[0], lines[0]
    assert "Traceback" not in err and PASSWORD not in err


def test_wrong_password_fails_in_one_line(
    kafka: Any, spark: Any, security: Security, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user = f"mirror-pw-{uuid.uuid4().hex[:6]}"
    security.scram_user(user, PASSWORD)
    settings = _settings(kafka, tmp_path, "SASL_SSL", user, "Wrong-Pass-91d2")
    code, _ = _serve(settings, spark)
    err = capsys.readouterr().err
    assert code == 5, err
    assert "authentication failed" in err and "Traceback" not in err
    assert "Wrong-Pass-91d2" not in err


@pytest.mark.parametrize("case", ["wrong store password", "missing store"])
def test_a_key_store_kafka_cannot_open_names_the_option(
    case: str, *, kafka: Any, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 and one line naming the option, for run and capture alike; no secret printed."""

    settings = _settings(kafka, tmp_path, "SSL", "mirror-tls-store")
    options = {**kafka.client_options("SSL", "mirror-tls-store", keystore="JKS", truststore="JKS")}
    if case == "wrong store password":
        options["ssl.truststore.password"] = "Not-The-Store-Pass-4"
        expected = "kafka_options: ssl.truststore.password: Kafka's client cannot open"
    else:
        options["ssl.keystore.location"] = str(tmp_path / "nowhere" / "mirror.jks")
        expected = (
            f"kafka_options: ssl.keystore.location: {tmp_path / 'nowhere' / 'mirror.jks'}: no such file"
        )
    code, _ = _serve(settings.model_copy(update={"kafka_options": options}), spark)
    err = capsys.readouterr().err
    assert code == 2, err
    [line] = [ln for ln in err.splitlines() if ln.startswith("coordinator-mirror:")]
    assert expected in line and "Traceback" not in err and "Not-The-Store-Pass-4" not in err
    code, _, _ = _capture(kafka, tmp_path, "SSL", options)
    err = capsys.readouterr().err
    assert code == 2, err
    [line] = [ln for ln in err.splitlines() if ln.startswith("coordinator-mirror capture:")]
    assert expected in line and "Not-The-Store-Pass-4" not in err


def test_untrusted_client_certificate_fails_in_one_line(
    kafka: Any, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lab.pki import Pki

    rogue = Pki(tmp_path / "rogue", "rogue-ca").issue("mirror-rogue", "Rogue-Store-Pass")
    settings = _settings(kafka, tmp_path, "SSL", "mirror-tls-any")
    options = {
        **settings.kafka_options,
        "ssl.keystore.location": str(rogue.keystore),
        "ssl.keystore.password": rogue.password,
    }
    code, _ = _serve(settings.model_copy(update={"kafka_options": options}), spark)
    err = capsys.readouterr().err
    assert code == 6, err
    assert "TLS handshake failed" in err and "Traceback" not in err and "Rogue-Store-Pass" not in err


def test_untrusted_broker_certificate_fails_in_one_line(
    kafka: Any, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lab.pki import Pki

    other = Pki(tmp_path / "other", "other-ca")
    user = f"mirror-ca-{uuid.uuid4().hex[:6]}"
    settings = _settings(kafka, tmp_path, "SASL_SSL", user, PASSWORD)
    options = {**settings.kafka_options, "ssl.truststore.location": str(other.ca_cert)}
    code, _ = _serve(settings.model_copy(update={"kafka_options": options}), spark)
    err = capsys.readouterr().err
    assert code == 6, err
    assert "broker's certificate is not trusted" in err and "Traceback" not in err


# ------------------------------------------------------------------------------------------ capture
def _capture(kafka: Any, tmp: Path, listener: str, options: dict[str, str]) -> tuple[int, str, Path]:
    from streaming.app.cli import main

    out = tmp / f"capture-{uuid.uuid4().hex[:6]}.jsonl"
    bootstrap = kafka.sasl_bootstrap if listener == "SASL_SSL" else kafka.ssl_bootstrap
    argv = ["capture", "--bootstrap-servers", bootstrap, "--out", str(out), "--timeout", "30"]
    for k, v in options.items():  # the same Java-style options as `run`
        argv += ["--kafka-options", f"{k}={v}"]
    return main(argv), "", out


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_capture_over_secured_listeners(
    listener: str, *, kafka: Any, scenarios: Any, security: Security, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    user = f"capture-{listener.lower().replace('_', '')}-{uuid.uuid4().hex[:6]}"
    if listener == "SASL_SSL":
        security.scram_user(user, PASSWORD)
    security.grant(user, CAPTURE_ACLS)
    code, _, out = _capture(kafka, tmp_path, listener, kafka.client_options(listener, user, PASSWORD))
    assert code == 0, capsys.readouterr().err
    assert sum(1 for _ in out.open()) > 100


@pytest.mark.parametrize(
    ("case", "exit_code", "words"),
    [
        ("wrong password", 5, "authentication failed"),
        ("no ACL", 7, "lacks an ACL"),
        ("untrusted broker", 6, "broker's certificate is not trusted"),
        ("untrusted client", 6, "TLS handshake failed"),
    ],
)
def test_capture_failures_in_one_line(
    case: str, exit_code: int, words: str, *, kafka: Any, security: Security, tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from lab.pki import Pki

    user = f"capture-bad-{uuid.uuid4().hex[:6]}"
    security.scram_user(user, PASSWORD)
    listener = "SSL" if case == "untrusted client" else "SASL_SSL"
    secret = PASSWORD
    if case == "wrong password":
        secret = "Capture-Wrong-5e1"
        options = kafka.client_options(listener, user, secret)
    else:
        options = kafka.client_options(listener, user, PASSWORD)
    if case == "untrusted broker":
        options["ssl.truststore.location"] = str(Pki(tmp_path / "other", "other-ca").ca_cert)
    elif case == "untrusted client":
        rogue = Pki(tmp_path / "rogue", "rogue-ca").issue("capture-rogue", "x-pass")
        options.update(
            {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(rogue.keystore),
                "ssl.keystore.password": rogue.password,
            }
        )
    started = time.monotonic()
    code, _, _ = _capture(kafka, tmp_path, listener, options)
    out, err = capfd.readouterr()
    assert code == exit_code, err
    assert time.monotonic() - started < 25  # fails fast, not at the 30 s timeout
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0], lines
    assert secret not in out + err
