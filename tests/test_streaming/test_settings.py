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


# -- many clusters ------------------------------------------------------------------------------
def _fleet(**top: object) -> list:
    return [
        {"cluster_name": "prod-eu1", "bootstrap_servers": "eu1:9093",
         "kafka_options": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}},
        {"cluster_name": "prod-us1", "bootstrap_servers": "us1:9092", "lag_interval_s": 5,
         "checkpoint_location": "/data/us1"},
    ]  # fmt: skip


def test_each_cluster_is_the_top_level_with_its_own_settings_in_place() -> None:
    s = load_settings(
        checkpoint_location="/data/cm", kafka_options={"client.id": "mirror"}, lag_interval_s=20,
        http_port=9000, clusters=_fleet(),
    )  # fmt: skip
    eu1, us1 = s.cluster_settings({})
    assert (eu1.cluster_name, eu1.bootstrap_servers, us1.bootstrap_servers) == (
        "prod-eu1",
        "eu1:9093",
        "us1:9092",
    )
    # a map an entry gives replaces the top level's whole (eu1's credentials never reach us1 and back)
    assert eu1.kafka_options == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}
    assert us1.kafka_options == {"client.id": "mirror"}
    assert (eu1.lag_interval_s, us1.lag_interval_s) == (20, 5)
    # a checkpoint of its own: <checkpoint_location>/<name> unless the entry names one
    assert (eu1.checkpoint_location, us1.checkpoint_location) == ("/data/cm/prod-eu1", "/data/us1")
    assert eu1.http_port == us1.http_port == 9000 and not eu1.clusters
    # one cluster given by today's settings: itself, its checkpoint where it always was
    one = load_settings(bootstrap_servers="x:9092", checkpoint_location="/data/cm")
    assert one.cluster_settings({}) == [one] and not one.multi_cluster


def test_a_clusters_secrets_come_from_its_own_environment_variables() -> None:
    s = load_settings(kafka_options={"client.id": "mirror"}, clusters=_fleet())
    env = {
        "CM_CLUSTERS__PROD_EU1__KAFKA_OPTIONS__SASL_JAAS_CONFIG": 'ScramLoginModule required password="eu";',
        "CM_CLUSTERS__PROD_US1__KAFKA_OPTIONS": json.dumps(
            {"sasl.jaas.config": 'PlainLoginModule required password="us";'}
        ),
        "CM_CLUSTERS__PROD_US1__LAG_ENABLED": "false",
        "CM_CLUSTERS__PROD_EU1__HTTP_PORT": "1",  # not a cluster's setting: ignored
    }
    eu1, us1 = s.cluster_settings(env)
    assert eu1.kafka_options["sasl.jaas.config"].endswith('password="eu";')
    assert eu1.kafka_options["security.protocol"] == "SASL_SSL"  # beside the entry's options
    assert us1.kafka_options == {"sasl.jaas.config": 'PlainLoginModule required password="us";'}
    assert not us1.lag_enabled and eu1.lag_enabled
    assert "eu" in eu1.secret_values() and "eu" not in us1.secret_values()


@pytest.mark.parametrize(
    ("clusters", "named"),
    [
        ([{"cluster_name": "a", "bootstrap_servers": "x:1"},
          {"cluster_name": "a", "bootstrap_servers": "y:1"}],
         "clusters[1].cluster_name: 'a' names clusters[0] too"),
        ([{"cluster_name": "a", "bootstrap_servers": "x:1", "checkpoint_location": "/c"},
          {"cluster_name": "b", "bootstrap_servers": "y:1", "checkpoint_location": "/c"}],
         "clusters[1].checkpoint_location: /c is clusters[0]'s"),
        ([{"cluster_name": "a", "bootstrap_servers": "x:1", "checkpoint_location": "/c"},
          {"cluster_name": "b", "bootstrap_servers": "y:1", "checkpoint_location": "/c/b"}],
         "clusters[1].checkpoint_location: /c/b is clusters[0]'s (/c) or inside it"),
        ([{"cluster_name": "a"}], "clusters[0] (a).bootstrap_servers: required"),
        ([{"bootstrap_servers": "x:1"}], "clusters[0].cluster_name: required"),
        ([{"cluster_name": "a", "bootstrap_servers": "x:1", "http_port": 1}],
         "http_port: not a per-cluster setting"),
        ([{"cluster_name": "a", "bootstrap_servers": "x:1", "lag_interval_s": "soon"}],
         "clusters[0] (a).lag_interval_s: Input should be a valid number"),
        ([{"cluster_name": "a", "bootstrap_servers": "x:1", "kafka_options": {"group.id": "g"}}],
         "clusters[0] (a).kafka_options: options the mirror sets itself"),
        (["prod"], "clusters: [0]: a map of settings, got str"),
    ],
)  # fmt: skip
def test_bad_clusters_fail_at_start_naming_the_cluster_and_the_setting(clusters: list, named: str) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings(clusters=clusters).cluster_settings({})
    assert named in str(err.value), str(err.value)


def test_clusters_are_kafka_clusters_and_keep_their_secrets_out_of_the_log(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    capture.write_text("")
    with pytest.raises(SettingsError, match="clusters: many clusters are read from Kafka"):
        load_settings(source="capture", capture_path=str(capture), clusters=_fleet())
    s = load_settings(clusters=[{**_fleet()[0], "kafka_options": {"sasl.jaas.config": 'x password="p";'}}])
    assert s.redacted()["clusters"][0]["kafka_options"]["sasl.jaas.config"] == "***"


def test_the_clusters_list_is_read_from_a_settings_file_and_no_flag_spells_it(tmp_path: Path) -> None:
    config = tmp_path / "mirror.yaml"
    config.write_text(json.dumps({"clusters": _fleet()}))
    s = load_settings(str(config))
    assert [c.cluster_name for c in s.cluster_settings({})] == ["prod-eu1", "prod-us1"]
    out = subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--clusters" not in out.stdout and "--bootstrap-servers" in out.stdout


def test_the_clusters_list_from_the_environment_beside_a_clusters_own_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``CM_CLUSTERS`` is the list (JSON); ``CM_CLUSTERS__<NAME>__...`` is that cluster's own and
    never read as a map under ``clusters`` (the chart exports both)."""
    monkeypatch.setenv("CM_CLUSTERS", json.dumps(_fleet()))
    monkeypatch.setenv("CM_CLUSTERS__PROD_US1__KAFKA_OPTIONS__SASL_MECHANISM", "PLAIN")
    eu1, us1 = load_settings().cluster_settings()
    assert us1.kafka_options == {"sasl.mechanism": "PLAIN"} and "sasl.mechanism" in eu1.kafka_options


def test_the_shared_jvms_allow_every_clusters_token_endpoint() -> None:
    """One client JVM and one Spark JVM serve every cluster: each cluster's OAUTHBEARER token
    endpoint must be allowed there (Kafka 4 refuses a URL the JVM property does not list)."""
    url = "sasl.oauthbearer.token.endpoint.url"
    s = load_settings(
        kafka_client_java_options=["-Xss2m"],
        clusters=[
            {
                "cluster_name": "a",
                "bootstrap_servers": "a:9093",
                "kafka_options": {url: "https://idp-a/token"},
            },
            {
                "cluster_name": "b",
                "bootstrap_servers": "b:9093",
                "kafka_options": {url: "https://idp-b/token"},
            },
        ],
    )
    options = s.process_java_options(s.cluster_settings({}))
    assert options == [
        "-Xss2m",
        "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=https://idp-a/token,https://idp-b/token",
    ]
