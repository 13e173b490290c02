"""Many clusters, one mirror: three real brokers -- the session broker read over its SASL_SSL listener
as a principal of its own (its password from the cluster's own environment variable), and two plain
brokers of this module -- with groups of every kind (classic, KIP-848 consumer, share, streams) on
each, mirrored by one in-process mirror.

Asserted, in the order a platform team lives it:
1. wrong credentials for one cluster: that cluster is reported (``/ready?cluster=``, naming the
   entry and ``kafka_options``), the others are live, ``/ready`` stays 200;
2. a cluster added to the settings: at the restart only it is read from its beginning, the others
   resume from their checkpoints;
3. each cluster's groups, committed offsets, lag and Burrow status equal Kafka's own answers; one
   group id on two clusters is kept apart in the API, the metrics and Burrow's paths;
4. one broker stopped for good: its cluster is reported down, the process keeps serving the other
   two, exact; the broker back: its cluster resumes from its checkpoint and mirrors new commits.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.http import get as get_json
from tests.support.http import request
from tests.support.live_mirror import live_settings
from tests.support.security import Acl, Security, doc_feature_acls, readme_acls
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow]

#: a group of each kind on each plain broker (`lab.scenarios`)
KINDS = ("classic_range", "kip848_consumer", "share_group", "streams_group")
SAME_ID = "fleet-same-id"
USER, PASSWORD = "fleet-mirror", "fleet-secret"


def get(url: str) -> Any:
    """The body of a GET, whatever its status: JSON, or bytes (``/metrics``)."""
    if "/metrics" in url:
        return request(url)[2]
    return get_json(url)[1]


_wait = wait_for


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        try:
            f.result(30)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    _wait(
        f"{topic} has a leader", lambda: admin.list_topics(topic, timeout=5).topics[topic].error is None, 30
    )
    done = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, offset)])]
    )
    for f in done.values():
        f.result(60)


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, kafka_version: str) -> Iterator[dict[str, Any]]:
    from lab.broker import BrokerSettings, LocalKafka

    started: dict[str, Any] = {}
    try:
        for name in ("b", "c"):
            broker = LocalKafka(
                BrokerSettings(kafka_version=kafka_version), tmp_path_factory.mktemp(f"fleet-{name}")
            )
            started[name] = broker.start()
        yield started
    finally:
        for broker in started.values():
            broker.cleanup()


@pytest.fixture(scope="module")
def fleet_groups(brokers: dict[str, Any], kafka_version: str) -> Iterator[dict[str, dict[str, Any]]]:
    """A group of every kind on each plain broker, and one group id on both (at offsets 5 and 9)."""
    from lab.lab import Lab
    from lab.scenarios import run_scenarios

    labs = {n: Lab(b.bootstrap, kafka_version, run_id=f"fleet-{n}") for n, b in brokers.items()}
    try:
        out = {n: run_scenarios(lab, KINDS) for n, lab in labs.items()}
        for n, offset in (("b", 5), ("c", 9)):
            _commit(brokers[n].bootstrap, SAME_ID, "fleet-same-t", offset)
        yield out
    finally:
        for lab in labs.values():
            lab.close()


@pytest.fixture(scope="module")
def principal(kafka: Any) -> dict[str, str]:
    """A SCRAM user on the session broker holding the ACLs docs/security.md lists (required rows
    and the features'), and its client options but the password."""
    sec = Security(kafka)
    sec.scram_user(USER, PASSWORD)
    sec.grant(USER, [*readme_acls("unused-events", "unused-offsets"), *doc_feature_acls()])
    sec.grant(USER, [Acl("Topic", "__share_group_state", "Read")])
    options = kafka.client_options("SASL_SSL", USER, PASSWORD)
    return {k: v for k, v in options.items() if k != "sasl.jaas.config"} | {
        "jaas": options["sasl.jaas.config"]
    }


def _clusters(kafka: Any, brokers: dict[str, Any], principal: dict[str, str], names: tuple[str, ...]) -> list:
    options = {k: v for k, v in principal.items() if k != "jaas"}
    entries = {
        "sec": {"cluster_name": "sec", "bootstrap_servers": kafka.sasl_bootstrap, "kafka_options": options},
        "b": {"cluster_name": "b", "bootstrap_servers": brokers["b"].bootstrap},
        "c": {"cluster_name": "c", "bootstrap_servers": brokers["c"].bootstrap},
        "bad": {
            "cluster_name": "bad",
            "bootstrap_servers": kafka.sasl_bootstrap,
            "kafka_options": {**options, "sasl.jaas.config": principal["jaas"].replace(PASSWORD, "wrong")},
        },
    }
    return [entries[n] for n in names]


def _url(mirror: Any, path: str, **params: str) -> str:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    return f"{mirror.http.url}{path}{query}"


def _group_url(mirror: Any, group: str, cluster: str, suffix: str = "") -> str:
    return _url(mirror, f"/groups/{urllib.parse.quote(group, safe='')}{suffix}", cluster=cluster)


def _live(mirror: Any, name: str) -> bool:
    c = mirror.by_name(name)
    return bool(c.status.ready and c.status.waiting_reason is None and c.query_running())


def _metric(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_fleet_of_three_clusters_in_one_mirror(  # noqa: PLR0917 - fixtures
    mirrors: Any,
    spark: Any,
    kafka: Any,
    scenarios: dict[str, Any],
    brokers: dict[str, Any],
    fleet_groups: dict[str, dict[str, Any]],
    principal: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("CM_CLUSTERS__SEC__KAFKA_OPTIONS__SASL_JAAS_CONFIG", principal["jaas"])
    common = {
        "source_check_interval_s": 2.0,
        "query_restart_backoff_s": 1.0,
        "query_restart_backoff_max_s": 4.0,
    }

    # -- 1. wrong credentials for one cluster: reported, the others live ------------------------
    first = live_settings(
        kafka.bootstrap,
        tmp_path,
        clusters=_clusters(kafka, brokers, principal, ("sec", "b", "bad")),
        **common,
    )
    mirror = mirrors.start(first, spark=spark.newSession())
    _wait("sec and b live", lambda: _live(mirror, "sec") and _live(mirror, "b"), 300)
    bad = _wait(
        "the bad cluster reported",
        lambda: (
            (body := get(_url(mirror, "/ready", cluster="bad")))
            and body["reason"]
            and "start failed" in body["reason"]
            and body
        ),
        120,
    )
    assert "clusters[2] (bad)" in bad["reason"] and "kafka_options" in bad["reason"], bad
    assert "authentication failed" in bad["reason"].lower() and PASSWORD not in bad["reason"]
    ready = get(_url(mirror, "/ready"))
    assert ready["ready"] is True and ready["clusters"]["bad"]["ready"] is False, ready
    text = get(_url(mirror, "/metrics")).decode()
    assert _metric(text, "coordinator_mirror_source_up", cluster_name="bad") == 0
    assert _metric(text, "coordinator_mirror_source_up", cluster_name="sec") == 1
    assert get(_url(mirror, "/healthz"))["healthy"] is True
    mirror.stop()

    # -- 2. a cluster added: only it is read from its beginning ----------------------------------
    second = live_settings(
        kafka.bootstrap, tmp_path, clusters=_clusters(kafka, brokers, principal, ("sec", "b", "c")), **common
    )
    mirror = mirrors.start(second, spark=spark.newSession())
    _wait("every cluster live", lambda: all(_live(mirror, n) for n in ("sec", "b", "c")), 300)
    fresh = {n: mirror.by_name(n).query.from_beginning for n in ("sec", "b", "c")}
    assert fresh == {"sec": False, "b": False, "c": True}, fresh
    assert get(_url(mirror, "/ready"))["ready"] is True

    # -- 3. each cluster exact; one id on two clusters kept apart -------------------------------
    from lab.lab import Lab

    for name, bootstrap in (
        ("b", brokers["b"].bootstrap),
        ("c", brokers["c"].bootstrap),
        ("sec", kafka.bootstrap),
    ):
        lab = Lab(bootstrap, kafka.settings.kafka_version, run_id=f"fleet-check-{name}")
        results = fleet_groups[name] if name != "sec" else {k: scenarios[k] for k in KINDS}
        try:
            for result in results.values():
                for group in result.groups:
                    _assert_group_exact(mirror, lab, name, group)
        finally:
            lab.close()
    status, _, body = request(_url(mirror, f"/groups/{SAME_ID}"))
    assert status == 409 and b'"clusters":["b","c"]' in body
    for name, offset in (("b", 5), ("c", 9)):
        snap = get(_group_url(mirror, SAME_ID, name))
        assert snap["cluster"] == name and [o["offset"] for o in snap["offsets"]] == [offset]
        burrow = get(_url(mirror, f"/v3/kafka/{name}/consumer/{SAME_ID}/lag"))
        assert burrow["status"]["cluster"] == name
        assert [p["end"]["offset"] for p in burrow["status"]["partitions"]] == [offset]
    text = get(_url(mirror, "/metrics")).decode()
    for name, offset in (("b", 5), ("c", 9)):
        assert _metric(text, "kafka_consumergroup_group_offset", cluster_name=name, group=SAME_ID) == offset
    assert len(re.findall(r"^# TYPE kafka_consumergroup_group_offset ", text, flags=re.MULTILINE)) == 1
    assert get(_url(mirror, "/v3/kafka"))["clusters"] == ["sec", "b", "c"]

    # -- 4. one broker gone for good, then back --------------------------------------------------
    brokers["c"].stop()
    _wait(
        "c reported down",
        lambda: (
            (body := get(_url(mirror, "/ready", cluster="c")))
            and not body["ready"]
            and "unavailable" in str(body["reason"])
        ),
        120,
    )
    assert get(_url(mirror, "/ready"))["ready"] is True  # sec and b serve on
    _commit(brokers["b"].bootstrap, SAME_ID, "fleet-same-t", 6)
    _wait(
        "b mirrors a new commit",
        lambda: [o["offset"] for o in get(_group_url(mirror, SAME_ID, "b"))["offsets"]] == [6],
        60,
    )
    text = get(_url(mirror, "/metrics")).decode()
    assert _metric(text, "coordinator_mirror_source_up", cluster_name="c") == 0
    assert _metric(text, "coordinator_mirror_source_up", cluster_name="b") == 1
    assert get(_url(mirror, "/healthz"))["healthy"] is True
    brokers["c"].restart()
    _wait("c answers again", lambda: get(_url(mirror, "/ready", cluster="c"))["ready"], 180)
    _commit(brokers["c"].bootstrap, SAME_ID, "fleet-same-t", 10)
    # 240 s: a query blocked in Spark's offset fetch through the outage (a consumer position call
    # bounded by Kafka's default.api.timeout.ms, 60 s) may fail once the broker is back and restart
    # from its checkpoint with the restart policy; once in a clean-clone CI run 120 s was short
    # (what the query showed is in the message when it is)
    _wait(
        "c mirrors a new commit",
        lambda: [o["offset"] for o in get(_group_url(mirror, SAME_ID, "c"))["offsets"]] == [10],
        240,
        lambda: _query_seen(mirror, "c"),
    )


def _query_seen(mirror: Any, name: str) -> str:
    """What a cluster's query showed last: for a wait's failure message."""
    c = mirror.by_name(name)
    q = c.run.query
    progress = q.lastProgress if q is not None else None
    return (
        f"ready={get(_url(mirror, '/ready', cluster=name))}, active={q is not None and q.isActive}, "
        f"exception={q.exception() if q is not None and not q.isActive else None}, "
        f"last progress={progress and (progress['batchId'], progress['timestamp'])}, "
        f"status={q.status if q is not None else None}, time={time.strftime('%H:%M:%S')}"
    )


def _log_ends(bootstrap: str, partitions: Any) -> dict[tuple[str, int], int]:
    """Each partition's log end as Kafka reports it (the high watermark)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fleet-ends", "log_level": 0})
    try:
        return {(t, p): c.get_watermark_offsets(TopicPartition(t, p), timeout=30)[1] for t, p in partitions}
    finally:
        c.close()


def _assert_group_exact(mirror: Any, lab: Any, cluster: str, group: str) -> None:
    """The mirror's group on ``cluster`` against Kafka's own description of it: type, state, members,
    committed offsets, and its lag against the log ends Kafka reports."""
    view = lab.describe(group)[group]
    snap = _wait(
        f"{cluster}/{group} as Kafka describes it",
        lambda: (s := get(_group_url(mirror, group, cluster))) and s.get("state") == view.state and s,
        60,
    )
    assert snap["cluster"] == cluster and snap["type"] == view.type, (cluster, group, snap["type"], view.type)
    assert len(snap["members"]) == len(view.members), (cluster, group)
    committed = {(o["topic"], o["partition"]): o["offset"] for o in snap["offsets"]}
    assert committed == {tp: o.offset for tp, o in view.offsets.items()}, (cluster, group)
    if view.type == "Share" or not committed:
        return
    ends = _log_ends(lab.bootstrap, committed)
    lag = _wait(
        f"{cluster}/{group}'s lag",
        lambda: (
            (b := get(_group_url(mirror, group, cluster, "/lag")))
            and all(p["end_offset"] is not None for p in b["partitions"])
            and b
        ),
        60,
        lambda: get(_group_url(mirror, group, cluster, "/lag")),
    )
    assert {(p["topic"], p["partition"]): p["lag"] for p in lag["partitions"]} == {
        tp: ends[tp] - off for tp, off in committed.items()
    }, (cluster, group)
    burrow = get(_url(mirror, f"/v3/kafka/{cluster}/consumer/{urllib.parse.quote(group, safe='')}/status"))
    assert burrow["status"]["cluster"] == cluster and burrow["status"]["group"] == group
