"""End to end: a real Prometheus scrapes real mirrors during a rebalance storm, evaluates the generated
rules (seconds-long windows), and answers every dashboard query.

Two mirrors share the session's Spark context, both scraped by one Prometheus (scrape and rule
evaluation every second, loopback, tmp storage):

* ``live`` -- the session broker, where this test drives a rebalance storm (`Churn`: a member
  joins and leaves every second or so), a group flapping between Empty and Stable (its only member
  joins and leaves), a calm Stable group (`classic_range`), an Empty group with committed offsets
  (`kafka_python_empty`, expiring in 7 days), a KIP-848 group (`kip848_consumer`), a group
  behind on its topic (39 records of lag) and a group that stopped on a topic whose segments the
  broker deletes every few seconds while a producer writes on (records lost to retention);
* ``replay`` -- a capture file with a record type and a value version no broker wrote yet, and a
  good commit after them (what a broker upgrade would put in front of the mirror).

Asserted: the storm alert fires for the stormy group and never for the calm one; the flapping,
offsets-expiring-soon and records-lost-to-retention alerts fire for their groups; the decode-error
and unknown-type alerts fire for ``replay`` only; every dashboard panel's query and annotation
returns data (group detail: for at least one of the groups, the core panels for every one), and the
template variables resolve.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dashboards.build import main as build_main
from tests.support.prometheus import Prometheus
from tests.support.promql import dashboard_queries, dashboards, label_values, substitute
from tests.support.require import require

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.prometheus, pytest.mark.slow]

#: the rules as rendered for this test: windows of seconds instead of minutes
LIVE_THRESHOLDS = {
    "storm_rebalances": "3",
    "storm_window": "30s",
    "storm_for": "5s",
    "flapping_emptied": "1",
    "flapping_window": "60s",
    "flapping_for": "3s",
    "expiring_hours": "200",  # the Empty group's offsets expire in 7 days (168 h)
    "expiring_for": "3s",
    "decode_window": "60s",
    # any timed rebalance phase over 1 ms ending within 5 s: the storm's, never the calm group's
    "slow_rebalance_seconds": "0.001",
    "slow_rebalance_window": "5s",
}
#: panels of the group detail dashboard that must have data for every group of the workload
CORE_DETAIL_PANELS = {"State", "Kind · protocol", "Generation / epoch", "Members"}
#: series only a cluster with an authorizer makes (this workload's broker has none): checked on the
#: secured broker instead, from a real run with exactly the documented ACLs
#: (tests/test_security/test_secured_broker.py asserts the series in the mirror's exposition)
NEEDS_AUTHORIZER = {"coordinator_mirror_topic_not_authorized"}


# ------------------------------------------------------------------------------------- workload
def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def hostile_capture(path: Path) -> None:
    """A record type no broker wrote yet (K=99), an offset commit value version 42, then a good
    commit of the same group: counted, skipped, and the stream goes on.  Then a classic group
    whose second GroupMetadata names a leader outside its members: that group is quarantined
    (the fold-failures panel and alert have data), the others go on."""
    from streaming.pipeline.capture_format import CapturedRecord, CaptureHeader, write_capture
    from tests.support.records import classic_value, commit_key, commit_value, group_key

    t = int(time.time() * 1000)
    key = struct.pack(">h", 1) + _s("replayed-group") + _s("orders") + struct.pack(">i", 0)
    records = [
        CapturedRecord(0, 0, t, key, struct.pack(">hqi", 3, 41, -1) + _s("") + struct.pack(">q", t)),
        CapturedRecord(0, 1, t, struct.pack(">h", 99) + _s("from-the-future"), b"\x00\x00\x01"),
        CapturedRecord(0, 2, t, key, struct.pack(">h", 42) + b"\x00" * 20),
        CapturedRecord(0, 3, t, key, struct.pack(">hqi", 3, 42, -1) + _s("") + struct.pack(">q", t)),
        CapturedRecord(0, 4, t, commit_key("bad-leader", "orders", 0), commit_value(7, t)),
        CapturedRecord(0, 5, t, group_key("bad-leader"), classic_value("m-a", ["m-a"])),
        CapturedRecord(0, 6, t, group_key("bad-leader"), classic_value("m-x", ["m-a", "m-b"], 2)),
    ]
    write_capture(path, CaptureHeader(source="test_live"), records)


class Flapper:
    """A group whose only member joins and leaves, again and again: Empty <-> Stable."""

    def __init__(self, lab: Any, group: str, topic: str) -> None:
        self.lab, self.group, self.topic = lab, group, topic
        self.cycles = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"flap-{group}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            m = self.lab.member(self.group, [self.topic], name="flap")
            self._stop.wait(2.0)
            m.close()
            self.cycles += 1
            self._stop.wait(1.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)


@dataclass
class Live:
    prometheus: Prometheus
    groups: dict[str, str]  # role -> group id
    mirrors: dict[str, Any]  # cluster name -> Mirror
    started: float  # monotonic time Prometheus started scraping


@pytest.fixture(scope="module")
def live(
    kafka: Any, spark: Any, module_mirrors: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    from lab.lab import Lab
    from lab.scenarios import SCENARIOS, Churn
    from streaming.settings import load_settings

    require(shutil.which("prometheus") is not None, "prometheus (Debian package prometheus)")
    work = tmp_path_factory.mktemp("live")
    lab = Lab(kafka.bootstrap, kafka.settings.kafka_version, run_id=f"obs{int(time.time()) % 100000}")
    closables: list[Any] = []
    mirrors: dict[str, Any] = {}
    prometheus = None
    try:
        calm = SCENARIOS["classic_range"].fn(lab)
        empty = SCENARIOS["kafka_python_empty"].fn(lab)
        modern = SCENARIOS["kip848_consumer"].fn(lab)
        storm_group, flap_group = lab.name("storm"), lab.name("flap")
        churn = Churn(lab, storm_group, lab.topic("storm-t", partitions=2), period_s=1.0)
        closables.append(churn)
        closables.append(Flapper(lab, flap_group, lab.topic("flap-t", partitions=1)))

        # a topic deleted while the mirror runs: the Empty group committed to it (the broker
        # tombstones those offsets at once, so that flag is brief) and a KIP-848 consumer stays
        # subscribed to it (flagged for as long as it is: the deleted-topic panel's data)
        # a group behind on its topic: 39 records of lag on partition 0 (who is lagging)
        lagging_group = lab.name("lagging")
        commit_to(
            kafka.bootstrap, lagging_group, lab.topic("obs-lag", partitions=2, messages_per_partition=40)
        )

        gone = lab.topic("obs-gone", partitions=1, messages_per_partition=3)
        commit_to(kafka.bootstrap, next(iter(empty.groups)), gone)
        gone_group = lab.name("gone-sub")
        lab.member(gone_group, [gone], protocol="consumer", name="gone-sub")

        # issue 26 (the insights dashboard): offsets on a topic the group left and a commit
        # rhythm, a share consumer's delivery state, a timed KIP-848 rebalance (a late member)
        from lab.scenarios_insights import Abandoner, share_acks

        abandon = Abandoner(lab)
        closables.append(abandon)
        share = share_acks(lab)
        lab.member(next(iter(modern.groups)), modern.topics, protocol="consumer", name="k848-late")

        # issue 38: a group that committed and stopped on a topic whose segments the broker deletes
        # every few seconds while a producer writes on: records lost to retention, growing (the
        # records-lost panel's data and its alert)
        from lab.retention import SteadyProducer, commit_and_stop, short_retention_topic

        lost_group = lab.name("lost")
        lost_topic = short_retention_topic(lab, "obs-lost", 1, segment_ms=1000, retention_ms=3000)
        commit_and_stop(lab, lost_group, lost_topic, {0: 0})
        closables.append(SteadyProducer(lab, lost_topic, 1, rate=20.0))

        common = {"trigger_interval_s": 1.0, "shuffle_partitions": 2, "http_port": 0}
        mirrors["live"] = module_mirrors.start(
            load_settings(
                bootstrap_servers=kafka.bootstrap,
                checkpoint_location=str(work / "ckpt-live"),
                cluster_name="live",
                lag_interval_s=1.0,
                **common,
            )
        )
        capture = work / "in" / "hostile.jsonl"
        hostile_capture(capture)
        # a second session of the same context: its own streaming query manager (query names are
        # unique per session), the same executors and connector jars
        mirrors["replay"] = module_mirrors.start(
            load_settings(
                source="capture",
                capture_path=capture,
                checkpoint_location=str(work / "ckpt-replay"),
                cluster_name="replay",
                **common,
            ),
            spark=spark.newSession(),
        )
        assert mirrors["live"].wait_ready(180), mirrors["live"].status.readiness_json()
        # the topic goes while the mirror runs, after a lag round saw it (what operators meet)
        live_lag = mirrors["live"].lag
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            any(row.topic == gone for row in (live_lag.group_lag(next(iter(empty.groups))) or ()))
            and gone in live_lag.subscribed()
        ):
            time.sleep(0.5)
        delete_topic(kafka.bootstrap, gone)

        rules = work / "alerts-live.yaml"
        args = ["--rules-out", str(rules)]
        for k, v in LIVE_THRESHOLDS.items():
            args += ["--set", f"{k}={v}"]
        assert build_main(args) == 0
        targets = [urllib.parse.urlsplit(m.http.url).netloc for m in mirrors.values()]
        prometheus = Prometheus(work, targets, rules)
        groups = {
            "storm": storm_group,
            "flap": flap_group,
            "calm": next(iter(calm.groups)),
            "empty": next(iter(empty.groups)),
            "kip848": next(iter(modern.groups)),
            "gone": gone_group,
            "lagging": lagging_group,
            "abandoned": abandon.group,
            "share": share.group.group_id,
            "lost": lost_group,
        }
        yield Live(prometheus, groups, mirrors, time.monotonic())
    finally:
        if prometheus is not None:
            prometheus.stop()
        for c in closables:
            c.close()
        module_mirrors.close()  # before the lab's clients go, as they stopped before
        lab.close()


def commit_to(bootstrap: str, group: str, topic: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        c.close()


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client fails its futures
    for f in admin.delete_topics([topic]).values():
        f.result(60)


def _firing(alerts: list[dict[str, Any]], name: str, **labels: str) -> list[dict[str, Any]]:
    return [
        a
        for a in alerts
        if a["labels"]["alertname"] == name
        and a["state"] == "firing"
        and all(a["labels"].get(k) == v for k, v in labels.items())
    ]


def test_alerts_fire_for_the_storm_and_not_for_the_calm_group(live: Live) -> None:
    g = live.groups
    wanted = {
        "storm": ("KafkaConsumerGroupRebalanceStorm", {"cluster_name": "live", "group": g["storm"]}),
        "flapping": ("KafkaConsumerGroupFlapping", {"cluster_name": "live", "group": g["flap"]}),
        "expiring": ("KafkaConsumerGroupOffsetsExpiringSoon", {"cluster_name": "live", "group": g["empty"]}),
        "decode": ("CoordinatorMirrorDecodeErrors", {"cluster_name": "replay"}),
        "unknown": ("CoordinatorMirrorUnknownRecordTypes", {"cluster_name": "replay"}),
        "slow": ("KafkaConsumerGroupSlowRebalance", {"cluster_name": "live", "group": g["storm"]}),
        "lost": ("KafkaConsumerRecordsLostToRetention", {"cluster_name": "live", "group": g["lost"]}),
    }
    seen: dict[str, dict[str, Any]] = {}
    calm_ever: list[dict[str, Any]] = []
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and len(seen) < len(wanted):
        alerts = live.prometheus.alerts()
        calm_ever += [a for a in alerts if a["labels"].get("group") == g["calm"]]
        for key, (name, labels) in wanted.items():
            if key not in seen and (hits := _firing(alerts, name, **labels)):
                seen[key] = hits[0]
        time.sleep(1)
    missing = set(wanted) - set(seen)
    assert not missing, (
        f"never fired: {missing}; alerts now: {json.dumps(live.prometheus.alerts(), indent=1)[:4000]}"
    )
    # the storm alert's annotation names the group and renders its value
    assert g["storm"] in seen["storm"]["annotations"]["summary"]
    assert "rebalances in the last 30s" in seen["storm"]["annotations"]["description"]
    # the calm group never even reached pending, and the live cluster decodes cleanly
    assert not calm_ever, calm_ever
    alerts = live.prometheus.alerts()
    assert not _firing(alerts, "KafkaConsumerGroupRebalanceStorm", group=g["calm"])
    assert not _firing(alerts, "CoordinatorMirrorDecodeErrors", cluster_name="live")
    assert not _firing(alerts, "CoordinatorMirrorUnknownRecordTypes", cluster_name="live")
    assert not _firing(alerts, "CoordinatorMirrorQueryFailed")
    assert not _firing(alerts, "CoordinatorMirrorGroupsQuarantined", cluster_name="live")
    # the replay's invariant-breaking group is quarantined, and only that group
    assert set(live.mirrors["replay"].store.quarantined) == {"bad-leader"}
    # what Prometheus saw is what the mirror counted
    rebalances = live.prometheus.api(
        "query", query=f'coordinator_mirror_group_rebalances_total{{group="{g["storm"]}"}}'
    )["result"]
    snapshot = live.mirrors["live"].store.group(g["storm"])
    assert rebalances and snapshot is not None
    assert 3 < float(rebalances[0]["value"][1]) <= snapshot["counters"]["rebalances"]


def _has_data(result: dict[str, Any]) -> bool:
    if result["resultType"] in ("vector", "matrix"):
        return any(r.get("values") or r.get("value") for r in result["result"])
    return result["result"] is not None


def _evaluate(prometheus: Prometheus, expr: str, instant: bool, end: float) -> dict[str, Any]:
    if instant:
        return dict(prometheus.api("query", query=expr, time=end))
    return dict(prometheus.api("query_range", query=expr, start=end - 120, end=end, step=5))


def _variable_sets(live: Live, dash: dict[str, Any]) -> list[dict[str, str]]:
    """The variable values a dashboard's queries are checked with: "All" (.*) for multi-value
    variables; each group of the workload for the group detail, each topic its groups consume for
    the topic dashboard (a query must have data for at least one of them)."""
    variables = {v["name"]: v for v in dash["templating"]["list"] if v["type"] == "query"}
    base = {"cluster": ".*" if variables["cluster"]["multi"] else "live", "group": ".*", "topic": ".*"}
    if "group" in variables and not variables["group"]["multi"]:
        return [{**base, "group": g} for g in live.groups.values()]
    if "topic" in variables and not variables["topic"]["multi"]:
        ours = "|".join(re.escape(g) for g in live.groups.values())  # a raw string in PromQL: `...`
        topics = live.prometheus.api(
            "label/topic/values",
            **{"match[]": f'kafka_consumergroup_group_topic_sum_lag{{cluster_name="live",group=~`{ours}`}}'},
        )
        assert topics, "the workload's groups consume no topic Prometheus knows"
        return [{**base, "topic": t} for t in topics]
    return [base]


def test_every_dashboard_query_returns_data(live: Live) -> None:
    # the alerts test ran first (module order); make sure there are minutes of data in any case
    while time.monotonic() < live.started + 75:
        time.sleep(2)
    end = time.time()
    prom = live.prometheus
    empty_queries: list[str] = []
    per_panel: dict[tuple[str, int], set[str]] = {}  # group detail: groups with data, per panel
    excused: set[str] = set()
    checked = 0
    for name, dash in dashboards().items():
        detail = any(v["name"] == "group" and not v["multi"] for v in dash["templating"]["list"])
        candidates = _variable_sets(live, dash)
        for q in dashboard_queries(dash, name):
            if q.kind == "variable":
                continue  # test_template_variables_resolve
            with_data = set()
            for variables in candidates:
                if _has_data(_evaluate(prom, substitute(q.expr, variables), q.instant, end)):
                    with_data.add(variables["group"] if detail else variables["topic"])
                checked += 1
            if not with_data and not any(m in q.expr for m in NEEDS_AUTHORIZER):
                empty_queries.append(f"{name} / {q.where}: {q.expr}")
            excused.update(m for m in NEEDS_AUTHORIZER if m in q.expr)
            if detail and q.panel_id is not None and q.where in CORE_DETAIL_PANELS:
                per_panel.setdefault((q.where, q.panel_id), set()).update(with_data)
    assert not empty_queries, "queries without data:\n" + "\n".join(empty_queries)
    assert excused == NEEDS_AUTHORIZER, f"excused series no dashboard queries: {NEEDS_AUTHORIZER - excused}"
    assert len(per_panel) >= len(CORE_DETAIL_PANELS)
    # an offsets-only group (kind simple: commits, never a member) has no generation
    simple = {
        g for g in live.groups.values() if (live.mirrors["live"].store.group(g) or {}).get("kind") == "simple"
    }
    assert live.groups["lagging"] in simple
    for (title, _), groups in per_panel.items():
        missing = set(live.groups.values()) - groups - (simple if title == "Generation / epoch" else set())
        assert not missing, f"group detail / {title} has no data for {missing}"
    assert checked > 100


def test_lag_panels_show_the_lagging_group(live: Live) -> None:
    """The overview's lag panels name the workload's groups with lag: what "who is lagging" must
    answer, checked against the mirror's own lag figures."""
    dash = dashboards()["consumer-groups-overview.json"]
    [panel] = [p for p in dash["panels"] if p["title"] == "Top groups by lag (messages)"]
    expr = substitute(panel["targets"][0]["expr"], {"cluster": "live", "group": ".*", "topic": ".*"})
    shown = {
        r["metric"]["group"]: float(r["value"][1]) for r in live.prometheus.api("query", query=expr)["result"]
    }
    lag = live.mirrors["live"].lag
    ours = {
        g: sum(r.lag for r in (lag.group_lag(g) or ()) if r.lag == r.lag)
        for g in live.groups.values()  # NaN: unknown
    }
    assert ours[live.groups["lagging"]] == 39, ours
    assert shown.get(live.groups["lagging"]) == 39, (shown, ours)
    assert all(n >= 0 for n in shown.values())


def test_template_variables_resolve(live: Live) -> None:
    prom = live.prometheus
    for name, dash in dashboards().items():
        for v in dash["templating"]["list"]:
            if v["type"] != "query":
                continue
            selector, label = label_values(v["definition"])
            params: dict[str, Any] = {}
            if selector:
                params["match[]"] = substitute(selector, {"cluster": "live", "group": ".*"})
            values = prom.api(f"label/{label}/values", **params)
            if v["name"] == "cluster":
                assert {"live", "replay"} <= set(values), (name, values)
            if v["name"] == "group":
                assert set(live.groups.values()) <= set(values), (name, values)
            if v["name"] == "topic":
                assert values, (name, v["definition"])
