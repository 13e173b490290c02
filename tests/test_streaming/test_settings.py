"""The settings model: sources and precedence, validation naming the setting, the settings table
of docs/operating.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.settings import SettingsError, load_settings, settings_table_markdown

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("CM_"):
            monkeypatch.delenv(key)


def test_defaults_and_derived_values() -> None:
    s = load_settings(bootstrap_servers="b:9092")
    assert (s.source, s.topic, s.offsets_retention_minutes, s.expiry_semantics) == (
        "kafka",
        "__consumer_offsets",
        10080,
        "4.x",
    )
    assert s.retention_ms == 7 * 24 * 3600 * 1000
    assert s.confirm_grace_ms == 600_000 + 60_000
    assert s.output_bootstrap() == "b:9092"


def test_precedence_flags_over_env_over_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "mirror.yaml"
    cfg.write_text(
        "bootstrap_servers: file:9092\ncluster_name: from-file\nhttp_port: 9000\n"
        "kafka_options:\n  security.protocol: SSL\n"
    )
    monkeypatch.setenv("CM_CLUSTER_NAME", "from-env")
    monkeypatch.setenv("CM_KAFKA_OPTIONS__SASL_MECHANISM", "PLAIN")
    s = load_settings(str(cfg), http_port=9100)
    assert (s.bootstrap_servers, s.cluster_name, s.http_port) == ("file:9092", "from-env", 9100)
    # maps merge key by key across the sources
    assert s.kafka_options == {"security.protocol": "SSL", "sasl.mechanism": "PLAIN"}
    # the file belonged to that call: a later load_settings() in the process does not read it
    monkeypatch.delenv("CM_KAFKA_OPTIONS__SASL_MECHANISM")
    later = load_settings(bootstrap_servers="b:9092")
    assert later.kafka_options == {} and later.http_port != 9000


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({}, "bootstrap_servers"),
        ({"bootstrap_servers": "b", "shuffle_partitions": 0}, "shuffle_partitions"),
        ({"bootstrap_servers": "b", "http_port": 70000}, "http_port"),
        ({"bootstrap_servers": "b", "expiry_semantics": "5.x"}, "expiry_semantics"),
        (
            {"bootstrap_servers": "b", "kafka_options": {"isolation.level": "read_uncommitted"}},
            "kafka_options",
        ),
        ({"bootstrap_servers": "b", "metrics_group_regex": "("}, "metrics_group_regex"),
        ({"source": "capture"}, "capture_path"),
        ({"source": "capture", "capture_path": "/nope.jsonl"}, "capture_path"),
        ({"bootstrap_servers": "b", "no_such_setting": 1}, "no_such_setting"),
    ],
)
def test_invalid_settings_name_the_setting(overrides: dict[str, object], named: str) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings(**overrides)
    assert f"{named}:" in str(err.value)


def test_missing_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="config: file"):
        load_settings(str(tmp_path / "missing.yaml"))


def test_secrets_are_redacted_in_the_logged_settings() -> None:
    s = load_settings(
        bootstrap_servers="b",
        kafka_options={"sasl.jaas.config": "... password=hunter2;", "security.protocol": "SASL_SSL"},
    )
    shown = json.dumps(s.redacted())
    assert "hunter2" not in shown and "SASL_SSL" in shown


def test_run_command_rejects_bad_settings_with_exit_2() -> None:
    cmd = [
        sys.executable,
        "-m",
        "streaming.app.cli",
        "run",
        "--bootstrap-servers",
        "b:1",
        "--shuffle-partitions",
        "-1",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert "shuffle_partitions:" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", "run", "--kafka-options", "novalue"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2 and "KEY=VALUE" in out.stderr


def test_readme_settings_table_is_generated_from_the_model() -> None:
    readme = (ROOT / "docs" / "operating.md").read_text()
    start, end = "<!-- settings-table:start -->", "<!-- settings-table:end -->"
    assert start in readme and end in readme
    table = readme.split(start, 1)[1].split(end, 1)[0].strip()
    assert table == settings_table_markdown(), "regenerate: python docs/generate.py"
