"""Prometheus recording rules that give the metric names and labels of the tools users migrate
from -- KMinion, kafka_exporter, Burrow's own ``/metrics`` and burrow_exporter -- computed from
the mirror's series, so that their dashboards and alerts run unchanged beside (or instead of)
them.  (kafka-lag-exporter's names are the mirror's own.)

    .venv/bin/python -m dashboards.build                   # writes prometheus/compat-rules.yaml too
    .venv/bin/python -m dashboards.compat --peer kminion --out kminion-rules.yaml   # one peer only

Every rule names the peer's metric and labels as the peer's source defines them (KMinion
``prometheus/exporter.go``, kafka_exporter ``kafka_exporter.go``, Burrow 1.9.5
``core/internal/httpserver/prometheus.go``, burrow_exporter ``burrow_exporter/metrics.go``); the
mirror's series it reads go through `dashboards.grafana.metric`, so a rule cannot name a series
the exporter does not have.  Labels are renamed with ``label_replace`` and the mirror's own
dropped with ``without``; other labels (``job``, ``instance``, and ``cluster_name`` where the
peer has no cluster label) stay.  Where the mirror's figure differs from the peer's, `CompatRule.note`
says how (docs/migration.md prints them).  Load only the groups of the peers you replace: each
duplicates the per-partition series it covers.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from dashboards.grafana import metric

#: the mirror's owner labels on per-partition series (kafka-lag-exporter's), no peer has them
OWNERS = ("member_host", "consumer_id", "client_id")


@dataclass(frozen=True)
class CompatRule:
    peer: str
    record: str  # the peer's metric name
    labels: tuple[str, ...]  # the peer's labels (what the series carries besides job/instance)
    expr: str
    note: str = ""


def relabel(expr: str, renames: Mapping[str, str], drop: Iterable[str] = ()) -> str:
    """``expr`` with each label ``ours`` copied to ``theirs`` (``renames``: theirs -> ours), then
    ours and ``drop`` removed (``max without``: every series is already one per label set)."""
    out = expr
    for theirs, ours in renames.items():
        out = f'label_replace({out}, "{theirs}", "$1", "{ours}", "(.*)")'
    gone = [*renames.values(), *drop]
    return f"max without ({', '.join(gone)}) ({out})" if gone else out


def _known(expr: str) -> str:
    """A finite value: drops NaN (a partition nothing is committed to: no figure at the peers)."""
    return f"({expr} >= 0)"


m = metric  # every mirror series below is checked against the catalogue
LAG = _known(m("kafka_consumergroup_group_lag"))
OFFSET = m("kafka_consumergroup_group_offset")
LATEST = m("kafka_partition_latest_offset")
EARLIEST = m("kafka_partition_earliest_offset")

_KE = {"consumergroup": "group"}
_KMINION_GROUP = {"group_id": "group"}
_KMINION_PART = {"group_id": "group", "topic_name": "topic", "partition_id": "partition"}
_KMINION_TOPIC = {"topic_name": "topic", "partition_id": "partition"}
_BURROW = {"cluster": "cluster_name", "consumer_group": "group"}
_BURROW_TOPIC = {"cluster": "cluster_name"}
_BE = {"cluster": "cluster_name"}

HWM_NOTE = (
    "the mirror's lag is against the LSO by default (lag_isolation=read_committed); the peer reads the "
    "high watermark -- equal without open transactions, or set lag_isolation=read_uncommitted"
)
PARTITIONS_NOTE = (
    "only the partitions some mirrored group commits to or is assigned (the mirror reads no other ends)"
)

RULES: tuple[CompatRule, ...] = (
    # -- kafka_exporter (danielqsj/kafka_exporter) ------------------------------------------------
    CompatRule(
        "kafka_exporter",
        "kafka_consumergroup_current_offset",
        ("consumergroup", "topic", "partition"),
        relabel(OFFSET, _KE, OWNERS),
    ),
    CompatRule(
        "kafka_exporter",
        "kafka_consumergroup_current_offset_sum",
        ("consumergroup", "topic"),
        "sum without (partition) (kafka_consumergroup_current_offset)",
    ),
    CompatRule(
        "kafka_exporter",
        "kafka_consumergroup_lag",
        ("consumergroup", "topic", "partition"),
        relabel(LAG, _KE, OWNERS),
        "no series for a partition nothing is committed to (kafka_exporter: -1); " + HWM_NOTE,
    ),
    CompatRule(
        "kafka_exporter",
        "kafka_consumergroup_lag_sum",
        ("consumergroup", "topic"),
        "sum without (partition) (kafka_consumergroup_lag)",
    ),
    CompatRule(
        "kafka_exporter",
        "kafka_consumergroup_members",
        ("consumergroup",),
        relabel(m("coordinator_mirror_group_members"), _KE),
        "every group kind (classic, KIP-848 consumer, share, streams)",
    ),
    CompatRule(
        "kafka_exporter",
        "kafka_topic_partition_current_offset",
        ("topic", "partition"),
        LATEST,
        PARTITIONS_NOTE,
    ),
    CompatRule(
        "kafka_exporter",
        "kafka_topic_partition_oldest_offset",
        ("topic", "partition"),
        EARLIEST,
        PARTITIONS_NOTE,
    ),
    # -- KMinion (redpanda-data/kminion), namespace "kminion" -------------------------------------
    CompatRule(
        "kminion",
        "kminion_kafka_consumer_group_topic_partition_lag",
        ("group_id", "topic_name", "partition_id"),
        relabel(LAG, _KMINION_PART, OWNERS),
        HWM_NOTE,
    ),
    CompatRule(
        "kminion",
        "kminion_kafka_consumer_group_topic_lag",
        ("group_id", "topic_name"),
        "sum without (partition_id) (kminion_kafka_consumer_group_topic_partition_lag)",
    ),
    CompatRule(
        "kminion",
        "kminion_kafka_consumer_group_topic_offset_sum",
        ("group_id", "topic_name"),
        f"sum without (partition_id) ({relabel(OFFSET, _KMINION_PART, OWNERS)})",
    ),
    CompatRule(
        "kminion",
        "kminion_kafka_topic_partition_high_water_mark",
        ("topic_name", "partition_id"),
        relabel(LATEST, _KMINION_TOPIC),
        PARTITIONS_NOTE,
    ),
    CompatRule(
        "kminion",
        "kminion_kafka_topic_partition_low_water_mark",
        ("topic_name", "partition_id"),
        relabel(EARLIEST, _KMINION_TOPIC),
        PARTITIONS_NOTE,
    ),
    CompatRule(
        "kminion",
        "kminion_kafka_topic_high_water_mark_sum",
        ("topic_name",),
        "sum without (partition_id) (kminion_kafka_topic_partition_high_water_mark)",
        PARTITIONS_NOTE,
    ),
    CompatRule(
        "kminion",
        "kminion_kafka_topic_low_water_mark_sum",
        ("topic_name",),
        "sum without (partition_id) (kminion_kafka_topic_partition_low_water_mark)",
        PARTITIONS_NOTE,
    ),
    CompatRule(
        "kminion",
        "kminion_kafka_consumer_group_info",
        ("group_id", "protocol", "protocol_type", "state"),
        relabel(
            f"max without (kind, type) ({m('coordinator_mirror_group_info')})"
            f" * on (cluster_name, group) group_left (state) ({m('coordinator_mirror_group_state')} == 1)"
            f" * on (cluster_name, group) group_left () {m('coordinator_mirror_group_state')}"
            '{state="Stable"}',
            _KMINION_GROUP,
        ),
        "1 when the group is Stable, else 0, as KMinion's; no coordinator_id label (the mirror reads "
        "the log, not the coordinators); the state names are Kafka's (KIP-848 groups: Assigning, "
        "Reconciling); protocol is the selected assignor (KIP-848: the server assignor)",
    ),
    CompatRule(
        "kminion",
        "kminion_kafka_consumer_group_members",
        ("group_id",),
        relabel(m("coordinator_mirror_group_members"), _KMINION_GROUP),
    ),
    CompatRule(
        "kminion",
        "kminion_kafka_consumer_group_offset_commits_total",
        ("group_id",),
        relabel(m("coordinator_mirror_group_commits_total"), _KMINION_GROUP),
        "commits applied from the log since the group was created (KMinion: since it started)",
    ),
    # -- Burrow 1.9.5's own /metrics ------------------------------------------------------------
    CompatRule(
        "burrow",
        "burrow_kafka_consumer_status",
        ("cluster", "consumer_group"),
        relabel(m("coordinator_mirror_consumer_status"), _BURROW),
        "Burrow's codes (1 OK, 2 WARN, 3 ERR); cluster is the mirror's cluster_name",
    ),
    CompatRule(
        "burrow",
        "burrow_kafka_consumer_lag_total",
        ("cluster", "consumer_group"),
        relabel(m("kafka_consumergroup_group_sum_lag"), _BURROW),
        HWM_NOTE,
    ),
    CompatRule(
        "burrow",
        "burrow_kafka_topic_partition_status",
        ("cluster", "consumer_group", "topic", "partition"),
        relabel(m("coordinator_mirror_consumer_partition_status"), _BURROW),
        "Burrow's codes (1 OK, 2 WARN, 4 STOP, 5 STALL, 6 REWIND); Burrow exports it only once the "
        "partition's window is full, the mirror from the first commit",
    ),
    CompatRule(
        "burrow",
        "burrow_kafka_consumer_current_offset",
        ("cluster", "consumer_group", "topic", "partition"),
        relabel(OFFSET, _BURROW, OWNERS),
        "the committed offset (Burrow: the newest offset in its window, once the window is full)",
    ),
    CompatRule(
        "burrow",
        "burrow_kafka_consumer_partition_lag",
        ("cluster", "consumer_group", "topic", "partition"),
        relabel(LAG, _BURROW, OWNERS),
        "no series for a partition nothing is committed to (Burrow: 0); " + HWM_NOTE,
    ),
    CompatRule(
        "burrow",
        "burrow_kafka_topic_partition_offset",
        ("cluster", "topic", "partition"),
        relabel(LATEST, _BURROW_TOPIC),
        PARTITIONS_NOTE,
    ),
    # -- burrow_exporter (jirwin/burrow_exporter), reading Burrow's v3 API -----------------------
    CompatRule(
        "burrow_exporter",
        "kafka_burrow_partition_lag",
        ("cluster", "group", "topic", "partition"),
        relabel(LAG, _BE, OWNERS),
        HWM_NOTE,
    ),
    CompatRule(
        "burrow_exporter",
        "kafka_burrow_partition_current_offset",
        ("cluster", "group", "topic", "partition"),
        relabel(OFFSET, _BE, OWNERS),
    ),
    CompatRule(
        "burrow_exporter",
        "kafka_burrow_partition_status",
        ("cluster", "group", "topic", "partition"),
        relabel(f"{m('coordinator_mirror_consumer_partition_status')} + 1", _BE),
        "burrow_exporter's codes: Burrow's + 1 (2 OK, 3 WARN, 5 STOP, 6 STALL, 7 REWIND)",
    ),
    CompatRule(
        "burrow_exporter",
        "kafka_burrow_partition_max_offset",
        ("cluster", "group", "topic", "partition"),
        relabel(f"{OFFSET} * 0 + on (cluster_name, topic, partition) group_left () {LATEST}", _BE, OWNERS),
        "the partition's log end, as its help text says; against Burrow's v3 API (no max_offset) "
        "burrow_exporter exports 0",
    ),
    CompatRule(
        "burrow_exporter",
        "kafka_burrow_total_lag",
        ("cluster", "group"),
        relabel(m("kafka_consumergroup_group_sum_lag"), _BE),
        HWM_NOTE,
    ),
    CompatRule(
        "burrow_exporter",
        "kafka_burrow_status",
        ("cluster", "group"),
        relabel(f"{m('coordinator_mirror_consumer_status')} + 1", _BE),
        "burrow_exporter's codes: Burrow's + 1 (2 OK, 3 WARN, 4 ERR)",
    ),
    CompatRule(
        "burrow_exporter",
        "kafka_burrow_topic_partition_offset",
        ("cluster", "topic", "partition"),
        relabel(LATEST, _BE),
        PARTITIONS_NOTE,
    ),
)

PEERS: tuple[str, ...] = tuple(dict.fromkeys(r.peer for r in RULES))
GROUP_PREFIX = "coordinator-mirror-compat-"


def rule_groups(peers: Iterable[str] | None = None) -> list[dict[str, object]]:
    wanted = list(peers) if peers else list(PEERS)
    unknown = set(wanted) - set(PEERS)
    if unknown:
        raise ValueError(f"unknown peer(s) {sorted(unknown)}: choose from {', '.join(PEERS)}")
    return [
        {
            "name": GROUP_PREFIX + peer,
            "rules": [{"record": r.record, "expr": r.expr} for r in RULES if r.peer == peer],
        }
        for peer in PEERS
        if peer in wanted
    ]


def rules_yaml(peers: Iterable[str] | None = None) -> str:
    header = (
        "# Generated by dashboards/compat.py (python -m dashboards.build): do not edit.\n"
        "# Recording rules giving KMinion's, kafka_exporter's, Burrow's and burrow_exporter's metric\n"
        "# names and labels from the mirror's series; load the groups of the peers you replace.\n"
        "# What differs from each peer: docs/migration.md.\n"
    )
    body = yaml.safe_dump({"groups": rule_groups(peers)}, sort_keys=False, width=100)
    return header + body


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dashboards.compat", description=__doc__.split("\n\n")[0])
    p.add_argument("--peer", action="append", help=f"only this peer's rules ({', '.join(PEERS)})")
    p.add_argument("--out", help="write here (default: standard output)")
    args = p.parse_args(argv)
    try:
        text = rules_yaml(args.peer)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
