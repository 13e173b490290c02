"""The recording rules that give KMinion's, kafka_exporter's, Burrow's and burrow_exporter's metric
names and labels (dashboards/compat.py -> dashboards/prometheus/compat-rules.yaml): each peer's
names and labels as its source defines them, values from the mirror's series checked by promtool
against figures worked out by hand, the file up to date, the migration table complete."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboards import build, compat
from streaming.serving.catalogue import SAMPLE_NAMES
from tests.support.promql import REPO, metric_names
from tests.support.require import require

RULES_FILE = REPO / "dashboards" / "prometheus" / "compat-rules.yaml"
TESTS_DIR = REPO / "dashboards" / "prometheus" / "compat-tests"
MIGRATION = REPO / "docs" / "migration.md"

#: the peers' metrics the rules give, with their labels -- transcribed from the peers' sources:
#: KMinion prometheus/exporter.go (namespace "kminion"), kafka_exporter kafka_exporter.go
#: (namespace "kafka"), Burrow 1.9.5 core/internal/httpserver/prometheus.go, burrow_exporter
#: burrow_exporter/metrics.go
PEER_METRICS: dict[str, tuple[str, ...]] = {
    "kafka_consumergroup_current_offset": ("consumergroup", "topic", "partition"),
    "kafka_consumergroup_current_offset_sum": ("consumergroup", "topic"),
    "kafka_consumergroup_lag": ("consumergroup", "topic", "partition"),
    "kafka_consumergroup_lag_sum": ("consumergroup", "topic"),
    "kafka_consumergroup_members": ("consumergroup",),
    "kafka_topic_partition_current_offset": ("topic", "partition"),
    "kafka_topic_partition_oldest_offset": ("topic", "partition"),
    "kminion_kafka_consumer_group_topic_partition_lag": ("group_id", "topic_name", "partition_id"),
    "kminion_kafka_consumer_group_topic_lag": ("group_id", "topic_name"),
    "kminion_kafka_consumer_group_topic_offset_sum": ("group_id", "topic_name"),
    "kminion_kafka_topic_partition_high_water_mark": ("topic_name", "partition_id"),
    "kminion_kafka_topic_partition_low_water_mark": ("topic_name", "partition_id"),
    "kminion_kafka_topic_high_water_mark_sum": ("topic_name",),
    "kminion_kafka_topic_low_water_mark_sum": ("topic_name",),
    # KMinion's also carries coordinator_id, which the mirror cannot know (it reads the log)
    "kminion_kafka_consumer_group_info": ("group_id", "protocol", "protocol_type", "state"),
    "kminion_kafka_consumer_group_members": ("group_id",),
    "kminion_kafka_consumer_group_offset_commits_total": ("group_id",),
    "burrow_kafka_consumer_status": ("cluster", "consumer_group"),
    "burrow_kafka_consumer_lag_total": ("cluster", "consumer_group"),
    "burrow_kafka_topic_partition_status": ("cluster", "consumer_group", "topic", "partition"),
    "burrow_kafka_consumer_current_offset": ("cluster", "consumer_group", "topic", "partition"),
    "burrow_kafka_consumer_partition_lag": ("cluster", "consumer_group", "topic", "partition"),
    "burrow_kafka_topic_partition_offset": ("cluster", "topic", "partition"),
    "kafka_burrow_partition_lag": ("cluster", "group", "topic", "partition"),
    "kafka_burrow_partition_current_offset": ("cluster", "group", "topic", "partition"),
    "kafka_burrow_partition_status": ("cluster", "group", "topic", "partition"),
    "kafka_burrow_partition_max_offset": ("cluster", "group", "topic", "partition"),
    "kafka_burrow_total_lag": ("cluster", "group"),
    "kafka_burrow_status": ("cluster", "group"),
    "kafka_burrow_topic_partition_offset": ("cluster", "topic", "partition"),
}


def promtool(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    require(shutil.which("promtool") is not None, "promtool (Debian package prometheus)")
    return subprocess.run(
        ["promtool", *map(str, args)], capture_output=True, text=True, timeout=120, check=False, cwd=cwd
    )


def _cases() -> list[dict[str, Any]]:
    out = []
    for path in sorted(TESTS_DIR.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        assert doc["rule_files"] == ["../compat-rules.yaml"]
        for test in doc["tests"]:
            out.extend(test.get("promql_expr_test", []))
    return out


def test_the_rules_give_exactly_the_peers_names_and_labels() -> None:
    assert {r.record: r.labels for r in compat.RULES} == PEER_METRICS
    # the series promtool expects carry those labels, plus job and (no cluster label at the peer)
    # the mirror's cluster_name -- nothing of the mirror's own (group, owners, ...)
    for case in _cases():
        rule = next(r for r in compat.RULES if r.record == case["expr"])
        kept = {"job"} | (set() if "cluster" in rule.labels else {"cluster_name"})
        for sample in case["exp_samples"]:
            labels = {kv.split("=")[0] for kv in sample["labels"].split("{", 1)[1].rstrip("}").split(",")}
            assert labels == set(rule.labels) | kept, (rule.record, sample["labels"])


def test_the_rules_read_only_catalogue_series() -> None:
    recorded = {r.record for r in compat.RULES}
    for r in compat.RULES:
        names = metric_names(r.expr)
        assert names, r.record
        assert names - recorded <= set(SAMPLE_NAMES), (r.record, names - recorded - set(SAMPLE_NAMES))


def test_committed_file_is_what_the_generator_writes() -> None:
    assert RULES_FILE.read_text() == compat.rules_yaml()
    assert build.generated()[build.COMPAT_RULES_FILE] == compat.rules_yaml()
    groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    assert [g["name"] for g in groups] == [compat.GROUP_PREFIX + p for p in compat.PEERS]


#: the tests that run promtool
PROMTOOL = pytest.mark.prometheus


@PROMTOOL
def test_promtool_checks_the_rules_file() -> None:
    out = promtool("check", "rules", RULES_FILE)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(compat.RULES)} rules found" in out.stdout


@PROMTOOL
def test_promtool_unit_tests_pass_and_cover_every_rule() -> None:
    files = sorted(TESTS_DIR.glob("*.yaml"))
    out = promtool("test", "rules", *files)
    assert out.returncode == 0, out.stdout + out.stderr
    assert {c["expr"] for c in _cases()} == {r.record for r in compat.RULES}


@PROMTOOL
def test_a_broken_expectation_fails(tmp_path: Path) -> None:
    src = (TESTS_DIR / "compat_test.yaml").read_text()
    series = 'kminion_kafka_topic_high_water_mark_sum{cluster_name="c",job="cm",topic_name="orders"}'
    needle = f"{series}'\n            value: 320"
    assert needle in src
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "broken.yaml").write_text(src.replace(needle, needle[:-3] + "321"))
    shutil.copy(RULES_FILE, tmp_path / "compat-rules.yaml")
    out = promtool("test", "rules", tmp_path / "tests" / "broken.yaml")
    assert out.returncode != 0 and "FAILED" in out.stdout + out.stderr


@PROMTOOL
def test_one_peer_only(tmp_path: Path) -> None:
    out_file = tmp_path / "kminion.yaml"
    assert compat.main(["--peer", "kminion", "--out", str(out_file)]) == 0
    groups = yaml.safe_load(out_file.read_text())["groups"]
    assert [g["name"] for g in groups] == [compat.GROUP_PREFIX + "kminion"]
    assert all(r["record"].startswith("kminion_") for g in groups for r in g["rules"])
    check = promtool("check", "rules", out_file)
    assert check.returncode == 0, check.stdout + check.stderr
    assert compat.main(["--peer", "nope", "--out", str(tmp_path / "x.yaml")]) == 2
    assert not (tmp_path / "x.yaml").exists()


def test_the_migration_table_lists_every_rule() -> None:
    text = MIGRATION.read_text()
    for r in compat.RULES:
        assert f"`{r.record}{{{', '.join(r.labels)}}}`" in text, r.record
