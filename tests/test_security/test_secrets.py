"""Secrets are never printed, and another output cluster never gets the source's credentials.

The end-to-end test runs ``coordinator-mirror run`` as users do -- a separate process -- over the
session broker's SASL_SSL listener with a secret in every option family and from every source
(a flag, the environment, the settings file, the API token file), takes it to the live state,
serves an authenticated request, writes an output topic, stops it with SIGTERM, and then
searches everything it printed and every file it wrote for each secret.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.security import Acl, Security, readme_acls

MIRROR_PASSWORD = "Src-Pass-2b8e41"
WRITER_PASSWORD = "Out-Pass-9c7d03"
S3_SECRET = "s3-Secret-Key-55aa71"
API_TOKEN = "api-Token-0f9e22"


# ------------------------------------------------------------------------------------- redaction
def test_redaction_masks_every_family_and_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streaming.settings import load_settings

    config = tmp_path / "mirror.yaml"
    config.write_text(yaml.safe_dump({"spark_conf": {"spark.hadoop.fs.s3a.secret.key": "from-file-1"}}))
    monkeypatch.setenv("CM_OUTPUT_KAFKA_OPTIONS", json.dumps({"sasl.jaas.config": 'x password="env-2";'}))
    s = load_settings(
        str(config),
        bootstrap_servers="b:9092",
        kafka_options={"ssl.keystore.password": "flag-3", "SASL.OAUTHBEARER.TOKEN": "flag-4",
                       "security.protocol": "SASL_SSL"},
        spark_conf={"spark.hadoop.fs.s3a.secret.key": "from-file-1",
                    "spark.executorEnv.AWS_SECRET_ACCESS_KEY": "flag-5",
                    "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "flag-6",
                    "spark.hadoop.google.cloud.auth.service.account.json.keyfile": "/path",
                    "spark.app.name": "visible"},
    )  # fmt: skip
    text = json.dumps(s.redacted())
    for secret in ("from-file-1", "env-2", "flag-3", "flag-4", "flag-5", "flag-6"):
        assert secret not in text
    assert "SASL_SSL" in text and "visible" in text
    assert {"env-2", "flag-3", "flag-5"} <= set(s.secret_values())


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("ssl.keystore.password", True),
        ("ssl.truststore.password", True),
        ("ssl.key.password", True),
        ("ssl.keystore.key", True),  # a PEM private key itself
        ("sasl.jaas.config", True),
        ("sasl.oauthbearer.client.credentials.client.secret", True),
        ("sasl.oauthbearer.assertion.private.key.passphrase", True),
        ("spark.hadoop.fs.s3a.access.key", True),
        ("spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net", True),
        ("spark.executorEnv.AWS_SECRET_ACCESS_KEY", True),
        # what a person debugging a setup needs to see
        ("ssl.keystore.type", False),
        ("ssl.keystore.location", False),
        ("ssl.truststore.type", False),
        ("ssl.truststore.location", False),
        ("ssl.truststore.certificates", False),
        ("ssl.keystore.certificate.chain", False),
        ("ssl.keymanager.algorithm", False),
        ("sasl.oauthbearer.token.endpoint.url", False),
        ("sasl.login.callback.handler.class", False),
        ("sasl.mechanism", False),
        ("spark.hadoop.google.cloud.auth.service.account.json.keyfile", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    from streaming.settings import is_secret

    assert is_secret(name) is secret
    assert is_secret(name.upper()) is secret


def test_logged_settings_show_store_types_and_places(tmp_path: Path) -> None:
    from streaming.settings import load_settings

    s = load_settings(
        bootstrap_servers="b:9093",
        kafka_options={"ssl.keystore.type": "JKS", "ssl.keystore.location": "/etc/k/mirror.jks",
                       "ssl.keystore.password": "ks-Pass-77", "ssl.key.password": "key-Pass-78"},
    )  # fmt: skip
    shown = s.redacted()["kafka_options"]
    assert shown["ssl.keystore.type"] == "JKS" and shown["ssl.keystore.location"] == "/etc/k/mirror.jks"
    assert shown["ssl.keystore.password"] == shown["ssl.key.password"] == "***"


def test_output_cluster_never_inherits_credentials_silently() -> None:
    from streaming.settings import SettingsError, load_settings

    creds = {"security.protocol": "SASL_SSL", "sasl.jaas.config": 'x password="p";'}
    base = {"bootstrap_servers": "a:9092,b:9092", "kafka_options": creds, "events_topic": "e"}
    # same cluster (any order of hosts): the source's options are the output's
    same = load_settings(**base, output_bootstrap_servers="b:9092, a:9092")
    assert same.output_options() == creds
    with pytest.raises(SettingsError, match="output_kafka_options: output_bootstrap_servers names another"):
        load_settings(**base, output_bootstrap_servers="other:9092")
    explicit = load_settings(
        **base, output_bootstrap_servers="other:9092", output_kafka_options={"security.protocol": "PLAINTEXT"}
    )
    assert explicit.output_options() == {"security.protocol": "PLAINTEXT"}
    opted = load_settings(**base, output_bootstrap_servers="other:9092", output_inherit_kafka_options=True)
    assert opted.output_options() == creds


# ----------------------------------------------------------------------------------- end to end
class _Reader:
    """Collects a pipe's lines in a thread (so the child never blocks on a full pipe)."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: Any) -> None:
        for line in iter(stream.readline, ""):
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)


def _wait(predicate: Any, timeout_s: float, what: str, proc: subprocess.Popen[str], err: _Reader) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            pytest.fail(f"mirror exited ({proc.returncode}) before {what}:\n{err.text()[-3000:]}")
        time.sleep(0.5)
    pytest.fail(f"no {what} within {timeout_s}s:\n{err.text()[-3000:]}")


@pytest.mark.broker
@pytest.mark.spark
def test_run_process_prints_no_secret(kafka: Any, scenarios: Any, security: Security, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    mirror_user, writer_user, events = f"sec-mirror-{suffix}", f"sec-writer-{suffix}", f"cm-sec-ev-{suffix}"
    security.scram_user(mirror_user, MIRROR_PASSWORD)
    security.scram_user(writer_user, WRITER_PASSWORD)
    security.create_topic(events)
    # the ACL table's rows for reading (the writer user holds the events topic's)
    security.grant(mirror_user, [a for a in readme_acls(events, events) if a.operation == "Read"])
    security.grant(writer_user, [Acl("Topic", events, "Write")])

    work = tmp_path / "work"
    work.mkdir()
    token_file = work / "api-token"
    token_file.write_text(API_TOKEN + "\n")
    config = work / "mirror.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "spark_conf": {"spark.hadoop.fs.s3a.secret.key": S3_SECRET, "spark.ui.enabled": "false"},
                "http_auth_token_file": str(token_file),
            }
        )
    )
    source = kafka.client_options("SASL_SSL", mirror_user, MIRROR_PASSWORD)
    output = kafka.client_options("SASL_SSL", writer_user, WRITER_PASSWORD)
    argv = [sys.executable, "-m", "streaming.app.cli", "run", "--config", str(config),
            "--bootstrap-servers", kafka.sasl_bootstrap,
            "--checkpoint-location", str(work / "checkpoint"), "--events-topic", events,
            "--trigger-interval-s", "1", "--shuffle-partitions", "2", "--http-port", "0",
            "--log-level", "DEBUG"]  # fmt: skip
    for key, value in source.items():
        argv += ["--kafka-options", f"{key}={value}"]
    env = {**os.environ, "CM_OUTPUT_KAFKA_OPTIONS": json.dumps(output)}
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=work
    )
    out, err = _Reader(proc.stdout), _Reader(proc.stderr)
    try:
        # the secrets are in use: the source password reads the log, the token guards the API,
        # the writer's password writes the events topic
        _wait(lambda: "live: caught up" in err.text(), 300, "the live state", proc, err)
        base = next(ln.split("API: ")[1].split("/groups")[0] for ln in err.lines if "API: " in ln)
        with pytest.raises(urllib.error.HTTPError) as unauthorized:
            urllib.request.urlopen(f"{base}/groups", timeout=30)
        assert unauthorized.value.code == 401
        req = urllib.request.Request(f"{base}/groups", headers={"Authorization": f"Bearer {API_TOKEN}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert json.loads(resp.read())["count"] > 10
        _wait(lambda: security.count_records(events) > 0, 120, "events in the output topic", proc, err)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(30)
        out.thread.join(10)
        err.thread.join(10)
    assert code == 0, err.text()[-3000:]
    printed = out.text() + err.text()
    assert "settings: {" in printed  # the settings were logged (masked)
    written = "".join(
        p.read_text(errors="replace")
        for p in work.rglob("*")
        if p.is_file() and p not in (config, token_file)
    )
    for secret in (MIRROR_PASSWORD, WRITER_PASSWORD, S3_SECRET, API_TOKEN):
        assert secret not in printed, f"{secret} printed"
        assert secret not in written, f"{secret} written under the work dir"


@pytest.mark.broker
@pytest.mark.spark
def test_run_process_wrong_password_is_one_line(kafka: Any, security: Security, tmp_path: Path) -> None:
    user = f"sec-wrong-{uuid.uuid4().hex[:6]}"
    security.scram_user(user, MIRROR_PASSWORD)
    argv = [sys.executable, "-m", "streaming.app.cli", "run", "--bootstrap-servers", kafka.sasl_bootstrap,
            "--checkpoint-location", str(tmp_path / "checkpoint"), "--http-port", "0"]  # fmt: skip
    for key, value in kafka.client_options("SASL_SSL", user, "Wrong-Pass-3a1f").items():
        argv += ["--kafka-options", f"{key}={value}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    printed = proc.stdout + proc.stderr
    assert proc.returncode == 5, printed[-3000:]
    mine = [ln for ln in printed.splitlines() if ln.startswith("coordinator-mirror:")]
    assert len(mine) == 1 and "authentication failed" in mine[0], printed[-3000:]
    assert "Traceback" not in printed and "Wrong-Pass-3a1f" not in printed
