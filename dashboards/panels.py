"""The four dashboards: consumer groups overview, group detail, topic, mirror health.

The overview opens with who is lagging -- the first page users of kafka-lag-exporter, KMinion and
kafka_exporter open -- filtered by cluster, group and topic; the topic dashboard shows one topic's
consumers and partitions.  Lag comes from the log offsets the driver reads every lag_interval_s
(kafka-lag-exporter's series).  What polling exporters cannot show and these do: generations/epochs,
rebalances as they completed (from the log, not sampled), members joining/leaving/replaced,
leaders, state transitions including the ones between two scrapes (``emptied``), and when offsets
will expire.
"""

from __future__ import annotations

from typing import Any

from dashboards.grafana import (
    bargauge,
    cluster_variable,
    dashboard,
    datasource_variable,
    metric,
    prometheus_annotation,
    query_variable,
    ranked,
    row,
    sel,
    stat,
    state_code,
    state_mappings,
    state_timeline,
    target,
    timeseries,
)
from dashboards.insights import insights

OVERVIEW_UID = "coordinator-mirror-groups"
DETAIL_UID = "coordinator-mirror-group"
TOPIC_UID = "coordinator-mirror-topic"
HEALTH_UID = "coordinator-mirror-health"

RI = "$__rate_interval"
G = "$group"
T = "$topic"
#: the overview's filters: every selected group / topic (multi-value variables, "All" = .*)
GROUPS = "~$group"
TOPICS = "~$topic"


def gsel(name: str, **matchers: str) -> str:
    """`sel` of a per-group series filtered by the overview's group variable."""
    return sel(name, group=GROUPS, **matchers)


def _top_rebalancing(n: int = 10) -> str:
    """The n groups with the most rebalances over the dashboard's whole time range (``@ end()``
    pins the set, so the rows of a timeline do not change along the x axis)."""
    r = sel("coordinator_mirror_group_rebalances_total", group=GROUPS)
    return f"topk({n}, sum by (cluster_name, group) (increase({r}[$__range] @ end())))"


def _top_lagging(n: int = 10) -> str:
    """The n groups with the largest lag in seconds at the end of the time range (a fixed set for
    a time series panel)."""
    lag = sel("kafka_consumergroup_group_max_lag_seconds", group=GROUPS)
    return f"topk({n}, max by (cluster_name, group) ({lag} @ end()))"


def lagging() -> list[dict[str, Any]]:
    """The overview's first row: who is lagging, filtered by the cluster, group and topic
    variables (lag in seconds is per group: kafka-lag-exporter's max over the group's partitions)."""
    max_s = sel("kafka_consumergroup_group_max_lag_seconds", group=GROUPS)
    slo = sel("coordinator_mirror_group_lag_slo_seconds", group=GROUPS)
    topic_sum = sel("kafka_consumergroup_group_topic_sum_lag", group=GROUPS, topic=TOPICS)
    return [
        row("Who is lagging"),
        stat(
            "Groups over their lag SLO",
            [target(f"count(({max_s}) > on (cluster_name, group) ({slo})) or vector(0)")],
            "Groups whose worst partition lags more seconds than their SLO (settings lag_slo_seconds, "
            "lag_slo_overrides): what KafkaConsumerLagOverSLO alerts on.",
            thresholds=[(None, "green"), (1, "red")],
        ),
        stat(
            "Groups in ERR",
            [target(f"count({gsel('coordinator_mirror_consumer_status')} == 3) or vector(0)")],
            "Groups Burrow's rules rate ERR: a partition stopped, stalled or rewound.",
            thresholds=[(None, "green"), (1, "red")],
        ),
        stat(
            "Worst lag",
            [target(f"max({max_s})")],
            "The largest lag in seconds of any selected group's partition.",
            unit="s",
        ),
        stat(
            "Lag (messages)",
            [target(f"sum({topic_sum})")],
            "Records the selected groups have yet to consume from the selected topics.",
        ),
        stat(
            "Lag figures age",
            [target(f"time() - max({sel('coordinator_mirror_lag_sample_timestamp_seconds')})")],
            "Seconds since the log offsets behind the lag were read (every lag_interval_s).",
            unit="s",
            thresholds=[(None, "green"), (60, "orange"), (300, "red")],
        ),
        stat(
            "Groups with lag",
            [target(f"count(sum by (cluster_name, group) ({topic_sum}) > 0) or vector(0)")],
            "Selected groups with any lag on the selected topics.",
        ),
        bargauge(
            "Top groups by lag (seconds)",
            [target(f"topk(10, max by (cluster_name, group) ({max_s}))", "{{group}}", instant=True)],
            "How far behind each group's worst partition is, in seconds (the time the log end passed "
            "its committed offset).",
            unit="s",
            w=12,
        ),
        bargauge(
            "Top groups by lag (messages)",
            [target(f"topk(10, sum by (cluster_name, group) ({topic_sum}))", "{{group}}", instant=True)],
            "Records each group has yet to consume, summed over the selected topics.",
            w=12,
        ),
        timeseries(
            "Lag (seconds) of the most lagging groups",
            [
                target(
                    f"max by (cluster_name, group) ({max_s})\nand on (cluster_name, group) {_top_lagging()}",
                    "{{group}}",
                )
            ],
            "The 10 groups with the largest lag at the end of the time range, over time.",
            unit="s",
        ),
        timeseries(
            "Lag (messages) by topic",
            [target(f"topk(10, sum by (cluster_name, topic) ({topic_sum}))", "{{topic}}")],
            "Records the selected groups have yet to consume, per topic (the 10 largest).",
        ),
        ranked(
            "Lag against the SLO",
            f"topk(20, max by (cluster_name, group) ({max_s}) / on (cluster_name, group) "
            f"max by (cluster_name, group) ({slo}))",
            "The groups closest to (or over) their lag SLO: worst lag in seconds divided by the SLO "
            "(over 1: KafkaConsumerLagOverSLO fires after lag_slo_for).",
            unit="percentunit",
            column="lag / SLO",
        ),
        ranked(
            "Lag by group and topic",
            f"topk(50, sum by (cluster_name, group, topic) ({topic_sum}))",
            "Records each group has yet to consume per topic (the 50 largest); the topic dashboard "
            "shows one topic's partitions and consumers.",
            column="lag (messages)",
        ),
    ]


def overview_variables() -> list[dict[str, Any]]:
    """cluster, group and topic filters (multi-value, "All" by default)."""
    groups = f'label_values({metric("coordinator_mirror_group_info")}{{cluster_name=~"$cluster"}}, group)'
    topics = (
        f"label_values({metric('kafka_consumergroup_group_topic_sum_lag')}"
        f'{{cluster_name=~"$cluster",group=~"$group"}}, topic)'
    )
    return [
        datasource_variable(),
        cluster_variable(),
        query_variable("group", "Group", groups, multi=True, include_all=True),
        query_variable("topic", "Topic", topics, multi=True, include_all=True),
    ]


def overview() -> dict[str, Any]:
    groups = "coordinator_mirror_groups"
    panels = [
        *lagging(),
        row("Groups"),
        stat("Groups", [target(f"sum({sel(groups)})")], "Consumer groups the mirror holds (every kind)."),
        stat(
            "Stable",
            [target(f"sum({sel(groups, state='Stable')}) or vector(0)")],
            "Groups whose members all hold their assignment.",
            thresholds=[(None, "green")],
        ),
        stat(
            "Empty",
            [target(f"sum({sel(groups, state='Empty')}) or vector(0)")],
            "Groups without members (committed offsets only): their offsets age towards expiry.",
            thresholds=[(None, "orange")],
        ),
        stat(
            "Rebalancing",
            [target(f"sum({sel(groups, state='~Assigning|Reconciling|NotReady')}) or vector(0)")],
            "KIP-848/streams groups between a new epoch and every member reconciled (classic groups "
            "never log their rebalancing states).",
            thresholds=[(None, "green"), (1, "blue")],
        ),
        stat(
            "Rebalances / min",
            [
                target(
                    "sum(rate("
                    f"{sel('coordinator_mirror_events_total', type='rebalance_completed')}[{RI}])) * 60"
                )
            ],
            "Completed rebalances per minute over all groups, from the log (not sampled).",
            unit="none",
        ),
        stat(
            "Offsets expiring within 24h",
            [target(f"sum({gsel('coordinator_mirror_group_offsets_expiring', window='24h')}) or vector(0)")],
            "Committed offsets that Kafka's retention rules will delete within a day.",
            thresholds=[(None, "green"), (1, "orange")],
        ),
        bargauge(
            "Groups by state and kind",
            [target(f"sum by (kind, state) ({sel(groups)})", "{{kind}} {{state}}", instant=True)],
            "Current groups per kind (classic, simple = offsets only, consumer = KIP-848, share, "
            "streams) and Kafka state.",
        ),
        timeseries(
            "Groups by state",
            [target(f"sum by (state) ({sel(groups)})", "{{state}}")],
            "Groups per state over time.",
            w=16,
            stack=True,
        ),
        row("Rebalances"),
        timeseries(
            "Top groups by rebalance rate",
            [
                target(
                    f"topk(10, sum by (cluster_name, group) "
                    f"(rate({gsel('coordinator_mirror_group_rebalances_total')}[{RI}])) * 60)",
                    "{{group}}",
                )
            ],
            "Completed rebalances per minute (generation / assignment epoch bumps) of the busiest groups.",
            unit="none",
        ),
        ranked(
            "Most rebalances in the time range",
            f"topk(20, sum by (cluster_name, group) "
            f"(increase({gsel('coordinator_mirror_group_rebalances_total')}[$__range])) > 0)",
            "Groups by rebalances completed in the dashboard's time range.",
            column="rebalances",
        ),
        state_timeline(
            "State of the most rebalancing groups",
            [
                target(
                    f"{state_code({'group': GROUPS})}\nand on (cluster_name, group) {_top_rebalancing()}",
                    "{{group}}",
                )
            ],
            "Kafka state of the 10 groups with the most rebalances in the time range.",
        ),
        ranked(
            "Flapping: groups that lost their last member most often",
            f"topk(20, sum by (cluster_name, group) "
            f"(increase({gsel('coordinator_mirror_group_emptied_total')}[$__range])) > 0)",
            "Times each group became Empty in the time range -- counted from the log, so a group that "
            "empties and refills between two scrapes is counted too.",
            column="times emptied",
        ),
        timeseries(
            "Membership changes (all groups)",
            [
                target(
                    "sum by (type) (rate("
                    + sel(
                        "coordinator_mirror_events_total",
                        type="~member_joined|member_left|member_replaced|leader_changed",
                    )
                    + f"[{RI}])) * 60",
                    "{{type}}",
                )
            ],
            "Members joining, leaving, static members replaced and leader changes per minute.",
            unit="none",
        ),
        timeseries(
            "Busiest groups in __consumer_offsets",
            [
                target(
                    f"topk(10, sum by (cluster_name, group) "
                    f"(rate({gsel('coordinator_mirror_group_records_total')}[{RI}])))",
                    "{{group}}",
                )
            ],
            "Records per second each group writes to __consumer_offsets (commits, membership, "
            "assignments): the groups that load the coordinator most.",
            unit="ops",
        ),
        row("Commits and offset expiry"),
        timeseries(
            "Offset commits (all groups)",
            [
                target(
                    f"sum by (cluster_name) (rate({sel('coordinator_mirror_offset_commits_total')}[{RI}]))",
                    "{{cluster_name}}",
                )
            ],
            "Offset commit records per second written to __consumer_offsets.",
            unit="ops",
        ),
        timeseries(
            "Offsets expiring (all groups)",
            [
                target(
                    f"sum by (window) ({gsel('coordinator_mirror_group_offsets_expiring')})",
                    "within {{window}}",
                )
            ],
            "Committed offsets that expire within 1h / 24h under the cluster's retention rules.",
        ),
        ranked(
            "Stalest commits",
            f"topk(20, time() - "
            f"{gsel('coordinator_mirror_group_last_commit_timestamp_seconds')}"
            f" and on (cluster_name, group) {gsel('coordinator_mirror_group_members')} > 0)",
            "Groups with members whose newest commit is the oldest: consumers that stopped committing "
            "while still in the group (stuck, or not committing at all).",
            unit="dtdurations",
            column="since the last commit",
        ),
        ranked(
            "Groups whose offsets expire soonest",
            f"bottomk(20, {gsel('coordinator_mirror_group_next_offset_expiry_seconds')})",
            "Time until each group's next committed offset expires (groups whose offsets cannot expire, "
            "like a Stable group's subscribed topics, are not listed).",
            unit="dtdurations",
            hide=("Time", "__name__"),
            column="expires in",
            desc=False,
        ),
        timeseries(
            "Offsets expired and deleted",
            [
                target(
                    f"sum by (origin) (increase({sel('coordinator_mirror_offsets_expired_total')}[{RI}]))",
                    "expired ({{origin}})",
                ),
                target(
                    f"sum(increase({gsel('coordinator_mirror_group_offsets_deleted_total')}[{RI}]))",
                    "deleted (admin)",
                ),
                target(
                    f"sum by (reason) (increase({sel('coordinator_mirror_groups_deleted_total')}[{RI}]))",
                    "groups deleted ({{reason}})",
                ),
            ],
            "Offsets expired (all groups, deleted ones included) and deleted by admin operations; "
            "groups deleted.",
            bars=True,
        ),
    ]
    return dashboard(
        OVERVIEW_UID,
        "Kafka consumer groups (coordinator-mirror)",
        "Every consumer group of the cluster: who is lagging, and the groups as the group coordinator "
        "holds them -- states, rebalances, membership, offset expiry.",
        panels,
        overview_variables(),
    )


def detail() -> dict[str, Any]:
    panels = [
        row("Now"),
        stat(
            "State",
            [target(state_code({"group": G}))],
            "The group's Kafka state.",
            mappings=state_mappings(),
            thresholds=[(None, "grey"), (1, "orange"), (2, "blue"), (3, "purple"), (4, "green"), (5, "red")],
        ),
        stat(
            "Kind · protocol",
            [
                target(
                    sel("coordinator_mirror_group_info", group=G),
                    "{{kind}} · {{protocol_type}} · {{protocol}}",
                )
            ],
            "Group kind (classic, simple, consumer = KIP-848, share, streams), protocol type and the "
            "selected assignor.",
            text_mode="name",
            w=6,
        ),
        stat(
            "Generation / epoch",
            [target(sel("coordinator_mirror_group_epoch", group=G))],
            "Generation (classic) or group epoch (KIP-848/share/streams).",
            w=3,
        ),
        stat("Members", [target(sel("coordinator_mirror_group_members", group=G))], "Members now.", w=3),
        stat(
            "Since the last rebalance",
            [target(f"time() - {sel('coordinator_mirror_group_last_rebalance_timestamp_seconds', group=G)}")],
            "Time since the last completed rebalance (the record time in __consumer_offsets).",
            unit="dtdurations",
            w=4,
        ),
        stat(
            "Next offset expiry",
            [target(sel("coordinator_mirror_group_next_offset_expiry_seconds", group=G))],
            "Time until the next committed offset of the group expires (no value: none can expire).",
            unit="dtdurations",
            thresholds=[(None, "red"), (3600, "orange"), (86400, "green")],
        ),
        row("Rebalances and membership"),
        state_timeline(
            "State",
            [target(state_code({"group": G}), "{{group}}")],
            "The group's Kafka state over time.",
            h=5,
        ),
        timeseries(
            "Generation / epoch",
            [
                target(sel("coordinator_mirror_group_epoch", group=G), "generation / group epoch"),
                target(sel("coordinator_mirror_group_assignment_epoch", group=G), "assignment epoch"),
            ],
            "Generation (classic) or group epoch, and the KIP-848 target assignment epoch.",
            w=8,
        ),
        timeseries(
            "Members",
            [target(sel("coordinator_mirror_group_members", group=G), "members")],
            "Members over time.",
            w=8,
        ),
        timeseries(
            "Rebalances",
            [
                target(
                    f"increase({sel('coordinator_mirror_group_rebalances_total', group=G)}[{RI}])",
                    "completed",
                ),
                target(
                    f"increase({sel('coordinator_mirror_group_skipped_generations_total', group=G)}[{RI}])",
                    "skipped generations",
                ),
            ],
            "Completed rebalances, and generations/epochs that never reached the log (failed or "
            "superseded rebalances).",
            w=8,
            bars=True,
        ),
        timeseries(
            "Membership changes",
            [
                target(f"increase({sel(f'coordinator_mirror_group_{name}_total', group=G)}[{RI}])", legend)
                for name, legend in (
                    ("member_joins", "joined"),
                    ("member_leaves", "left"),
                    ("member_replacements", "static member replaced"),
                    ("leader_changes", "leader changed"),
                    ("emptied", "became Empty"),
                )
            ],
            "Members joining and leaving, static members coming back with a new member id, leader "
            "changes, and the times the last member left.",
            w=24,
            bars=True,
        ),
        row("Committed offsets"),
        timeseries(
            "Committed offset per partition",
            [
                target(  # one line per partition whoever owns it (the owner labels change on rebalance)
                    f"max by (topic, partition) ({sel('kafka_consumergroup_group_offset', group=G)})",
                    "{{topic}} [{{partition}}]",
                )
            ],
            "The committed offset of each partition (needs per-partition series: settings "
            "metrics_per_partition / metrics_group_regex).",
        ),
        timeseries(
            "Committed progress per partition",
            [
                target(
                    "sum by (topic, partition) "
                    f"(rate({sel('kafka_consumergroup_group_offset', group=G)}[{RI}]))",
                    "{{topic}} [{{partition}}]",
                )
            ],
            "How fast each partition's committed offset advances (records/s consumed and committed).",
            unit="ops",
        ),
        timeseries(
            "Time since the last commit per partition",
            [
                target(
                    f"time() - {sel('kafka_consumergroup_group_commit_timestamp_seconds', group=G)}",
                    "{{topic}} [{{partition}}]",
                )
            ],
            "Age of each partition's committed offset: a partition whose age keeps growing while the "
            "group is Stable has a stuck consumer.",
            unit="s",
        ),
        timeseries(
            "Commits",
            [
                target(f"rate({sel('coordinator_mirror_group_commits_total', group=G)}[{RI}])", "commits/s"),
                target(sel("coordinator_mirror_group_offsets", group=G), "partitions with an offset"),
                target(
                    f"time() - {sel('coordinator_mirror_group_last_commit_timestamp_seconds', group=G)}",
                    "seconds since the newest commit",
                ),
            ],
            "Offset commits per second, how many partitions hold a committed offset, and the age of "
            "the group's newest commit.",
        ),
        row("Offset expiry"),
        timeseries(
            "Expiry countdown",
            [target(sel("coordinator_mirror_group_next_offset_expiry_seconds", group=G), "next expiry in")],
            "Seconds until the group's next committed offset expires under the cluster's retention rules.",
            unit="s",
            w=8,
        ),
        timeseries(
            "Offsets expiring",
            [target(sel("coordinator_mirror_group_offsets_expiring", group=G), "within {{window}}")],
            "Committed offsets that expire within 1h / 24h.",
            w=8,
        ),
        timeseries(
            "Expired, deleted, disagreements",
            [
                target(f"increase({sel(f'coordinator_mirror_group_{name}_total', group=G)}[{RI}])", legend)
                for name, legend in (
                    ("offsets_expired", "expired"),
                    ("offsets_deleted", "deleted (admin)"),
                    ("expiry_disagreements", "broker disagreed"),
                )
            ],
            "Offsets expired by the retention rules, deleted by admin operations, and times the broker's "
            "tombstones disagreed with the mirror's prediction.",
            w=8,
            bars=True,
        ),
        row("Lag and consumer health"),
        timeseries(
            "Lag (messages) per partition",
            [
                target(
                    sel("kafka_consumergroup_group_lag", group=G), "{{topic}}[{{partition}}] {{consumer_id}}"
                )
            ],
            "End offset (LSO, or the high watermark with lag_isolation=read_uncommitted) minus the "
            "committed offset, per partition (kafka-lag-exporter's series).",
        ),
        timeseries(
            "Lag (seconds) per partition",
            [target(sel("kafka_consumergroup_group_lag_seconds", group=G), "{{topic}}[{{partition}}]")],
            "How long ago the log end passed the committed offset (interpolated over sampled ends).",
            unit="s",
        ),
        timeseries(
            "Group lag",
            [
                target(sel("kafka_consumergroup_group_max_lag", group=G), "max"),
                target(sel("kafka_consumergroup_group_sum_lag", group=G), "sum"),
                target(sel("kafka_consumergroup_group_topic_sum_lag", group=G), "sum {{topic}}"),
            ],
            "Max and sum of the group's partition lags, and the sum per topic.",
            w=8,
        ),
        timeseries(
            "Max lag (seconds) vs SLO",
            [
                target(sel("kafka_consumergroup_group_max_lag_seconds", group=G), "max lag"),
                target(sel("coordinator_mirror_group_lag_slo_seconds", group=G), "SLO"),
            ],
            "The group's worst partition lag in seconds against its SLO (lag_slo_seconds).",
            unit="s",
            w=8,
        ),
        timeseries(
            "Consumer status (Burrow)",
            [
                target(sel("coordinator_mirror_consumer_status", group=G), "group"),
                target(
                    sel("coordinator_mirror_consumer_partition_status", group=G), "{{topic}}[{{partition}}]"
                ),
            ],
            "Burrow's codes: 1 OK, 2 WARN, 3 ERR (group); 4 STOP, 5 STALL, 6 REWIND (partition).",
            w=8,
        ),
        timeseries(
            "Log offsets of the group's topics",
            [
                target(
                    f"{sel('kafka_partition_latest_offset')} and on (cluster_name, topic, partition) "
                    f"{sel('kafka_consumergroup_group_lag', group=G)}",
                    "{{topic}}[{{partition}}] high watermark",
                ),
                target(
                    f"{sel('coordinator_mirror_partition_stable_offset')} and on (cluster_name, topic, "
                    f"partition) {sel('kafka_consumergroup_group_lag', group=G)}",
                    "{{topic}}[{{partition}}] LSO",
                ),
                target(
                    f"{sel('kafka_partition_earliest_offset')} and on (cluster_name, topic, partition) "
                    f"{sel('kafka_consumergroup_group_lag', group=G)}",
                    "{{topic}}[{{partition}}] log start",
                ),
            ],
            "High watermark, last stable offset and log-start offset of the partitions the group lags on.",
        ),
        timeseries(
            "Deleted topics still used",
            [target(sel("coordinator_mirror_topic_deleted", group=G), "{{topic}}")],
            "Topics the cluster does not have that the group's members still subscribe to (or, until the "
            "broker's offset tombstones are folded, commits to or is assigned).",
        ),
        timeseries(
            "Topics the mirror may not read",
            [target(sel("coordinator_mirror_topic_not_authorized", group=G), "{{topic}}")],
            "Topics of the group whose log offsets the mirror's principal may not Describe: their lag is "
            "unknown until that ACL is granted (docs/security.md).",
        ),
    ]
    annotations = [
        prometheus_annotation(
            "Rebalances",
            f"increase({sel('coordinator_mirror_group_rebalances_total', group=G)}[$__interval]) > 0",
            "Rebalance",
            "{{group}}: {{value}} rebalance(s) completed",
            "orange",
        ),
        prometheus_annotation(
            "State changes",
            "changes("
            f"{sel('coordinator_mirror_group_state_since_timestamp_seconds', group=G)}[$__interval]) > 0",
            "State changed",
            "{{group}} entered a new state",
            "purple",
        ),
        prometheus_annotation(
            "Members joined or left",
            f"increase({sel('coordinator_mirror_group_member_joins_total', group=G)}[$__interval]) > 0\n"
            f"or increase({sel('coordinator_mirror_group_member_leaves_total', group=G)}[$__interval]) > 0",
            "Membership",
            "{{group}}: members joined or left",
            "blue",
        ),
    ]
    group_query = (
        f'label_values({metric("coordinator_mirror_group_info")}{{cluster_name=~"$cluster"}}, group)'
    )
    variables = [
        datasource_variable(),
        query_variable(
            "cluster",
            "Cluster",
            f"label_values({metric('coordinator_mirror_ready')}, cluster_name)",
            multi=False,
            include_all=False,
        ),
        query_variable("group", "Group", group_query, multi=False, include_all=False),
    ]
    return dashboard(
        DETAIL_UID,
        "Kafka consumer group detail (coordinator-mirror)",
        "One consumer group: state, generations/epochs, rebalances and membership changes (as "
        "annotations too), committed offsets, expiry.",
        panels,
        variables,
        annotations=annotations,
        time_from="now-3h",
    )


def topic() -> dict[str, Any]:
    """One topic: its consumers' lag (messages and seconds, Burrow's status per partition) and its
    partitions' log offsets, produce and consume rates, and how much room the consumers have before
    retention deletes what they have not read."""
    tsum = sel("kafka_consumergroup_group_topic_sum_lag", topic=T)
    lag_s = sel("kafka_consumergroup_group_lag_seconds", topic=T)
    committed = sel("kafka_consumergroup_group_offset", topic=T)
    panels = [
        row("Consumers"),
        stat(
            "Consumer groups",
            [target(f"count(count by (cluster_name, group) ({tsum})) or vector(0)")],
            "Groups with a committed offset on the topic (or assigned one of its partitions).",
        ),
        stat("Lag (messages)", [target(f"sum({tsum})")], "Records all its groups have yet to consume."),
        stat(
            "Worst lag",
            [target(f"max({lag_s})")],
            "The largest lag in seconds of any group on any partition of the topic (needs per-partition "
            "series: metrics_per_partition / metrics_group_regex).",
            unit="s",
        ),
        stat(
            "Partitions",
            [target(f"count({sel('kafka_partition_latest_offset', topic=T)})")],
            "Partitions of the topic whose log offsets the mirror reads.",
        ),
        stat(
            "Produced / s",
            [target(f"sum(rate({sel('kafka_partition_latest_offset', topic=T)}[{RI}]))")],
            "Records per second appended to the topic (its high watermarks' rate).",
            unit="ops",
        ),
        stat(
            "Partitions not OK",
            [
                target(
                    f"count({sel('coordinator_mirror_consumer_partition_status', topic=T)} > 1) or vector(0)"
                )
            ],
            "Group partitions Burrow's rules rate WARN, STOP, STALL or REWIND.",
            thresholds=[(None, "green"), (1, "orange")],
        ),
        bargauge(
            "Groups by lag (messages)",
            [target(f"topk(20, sum by (cluster_name, group) ({tsum}))", "{{group}}", instant=True)],
            "Records each group has yet to consume from the topic.",
            w=12,
        ),
        bargauge(
            "Groups by lag (seconds)",
            [target(f"topk(20, max by (cluster_name, group) ({lag_s}))", "{{group}}", instant=True)],
            "Each group's worst partition of the topic, in seconds behind.",
            unit="s",
            w=12,
        ),
        timeseries(
            "Lag per group (messages)",
            [target(f"sum by (cluster_name, group) ({tsum})", "{{group}}")],
            "Records each group has yet to consume from the topic, over time.",
        ),
        timeseries(
            "Lag per group (seconds)",
            [target(f"max by (cluster_name, group) ({lag_s})", "{{group}}")],
            "Each group's worst partition of the topic, in seconds behind, over time.",
            unit="s",
        ),
        ranked(
            "Consumer status per partition (Burrow)",
            f"max by (cluster_name, group, partition) "
            f"({sel('coordinator_mirror_consumer_partition_status', topic=T)})",
            "Burrow's partition status per group: 1 OK, 2 WARN, 4 STOP, 5 STALL, 6 REWIND.",
            column="status",
        ),
        row("Partitions"),
        timeseries(
            "Produce and consume rate",
            [
                target(f"sum(rate({sel('kafka_partition_latest_offset', topic=T)}[{RI}]))", "produced"),
                target(
                    f"sum by (cluster_name, group) (rate({committed}[{RI}]))",
                    "consumed by {{group}}",
                ),
            ],
            "Records per second appended to the topic, and committed by each group (its committed "
            "offsets' rate: a group that keeps below the produce rate falls further behind).",
            unit="ops",
        ),
        timeseries(
            "Log offsets per partition",
            [
                target(sel("kafka_partition_latest_offset", topic=T), "[{{partition}}] high watermark"),
                target(sel("coordinator_mirror_partition_stable_offset", topic=T), "[{{partition}}] LSO"),
                target(sel("kafka_partition_earliest_offset", topic=T), "[{{partition}}] log start"),
            ],
            "High watermark, last stable offset and log-start offset of each partition.",
        ),
        ranked(
            "Room before retention",
            f"bottomk(20, min by (cluster_name, group, partition) ({committed} - on (cluster_name, "
            f"topic, partition) group_left max by (cluster_name, topic, partition) "
            f"({sel('kafka_partition_earliest_offset', topic=T)})))",
            "Records between each group's committed offset and the partition's log start: how far "
            "retention may advance before it deletes records the group has not read (below 0 it has).",
            column="records before retention",
            desc=False,
        ),
        ranked(
            "Lag per group and partition",
            f"topk(50, max by (cluster_name, group, partition) "
            f"({sel('kafka_consumergroup_group_lag', topic=T)}))",
            "Records each group has yet to consume per partition (the 50 largest).",
            column="lag (messages)",
        ),
    ]
    variables = [
        datasource_variable(),
        query_variable(
            "cluster",
            "Cluster",
            f"label_values({metric('coordinator_mirror_ready')}, cluster_name)",
            multi=False,
            include_all=False,
        ),
        query_variable(
            "topic",
            "Topic",
            f'label_values({metric("kafka_partition_latest_offset")}{{cluster_name=~"$cluster"}}, topic)',
            multi=False,
            include_all=False,
        ),
    ]
    return dashboard(
        TOPIC_UID,
        "Kafka topic consumers (coordinator-mirror)",
        "One topic: its consumer groups' lag and health, its partitions' offsets, produce and consume "
        "rates, and the room left before retention deletes unread records.",
        panels,
        variables,
        time_from="now-3h",
    )


def health() -> dict[str, Any]:
    m = "coordinator_mirror_"
    panels = [
        row("Status"),
        stat(
            "Ready",
            [target(sel(f"{m}ready"), "{{cluster_name}}")],
            "Caught up with the end of __consumer_offsets seen at start (GET /ready).",
            mappings=[{"type": "value", "options": {"0": {"text": "catching up"}, "1": {"text": "ready"}}}],
            thresholds=[(None, "orange"), (1, "green")],
        ),
        stat(
            "Streaming query",
            [target(sel(f"{m}query_healthy"), "{{cluster_name}}")],
            "Whether the Structured Streaming query runs (GET /healthz).",
            mappings=[{"type": "value", "options": {"0": {"text": "failed"}, "1": {"text": "running"}}}],
            thresholds=[(None, "red"), (1, "green")],
        ),
        stat(
            "Share-state query",
            [
                target(
                    f"max by (cluster_name, state) ({sel(f'{m}share_state_query_state')}) == 1",
                    "{{cluster_name}} {{state}}",
                )
            ],
            "The __share_group_state query beside the main one (GET /ready's parts.share_state says "
            "why it waits or failed); it never gates readiness.",
            text_mode="name",
        ),
        stat(
            "Records behind",
            [target(f"sum({sel(f'{m}records_behind')})")],
            "Records between the query's position and the end of __consumer_offsets.",
        ),
        stat(
            "Catch-up progress",
            [target(f"min({sel(f'{m}catchup_progress_ratio')})")],
            "Share of the start-time backlog consumed.",
            unit="percentunit",
        ),
        stat("Groups", [target(f"sum({sel(f'{m}groups')})")], "Groups mirrored."),
        stat(
            "Exporter series",
            [target(f"sum({sel(f'{m}exporter_series')})")],
            "Series in the last /metrics exposition: the mirror's cardinality.",
        ),
        row("Throughput"),
        timeseries(
            "Records read by type",
            [
                target(
                    f"sum by (cluster_name, record_type) (rate({sel(f'{m}records_total')}[{RI}]))",
                    "{{record_type}}",
                )
            ],
            "__consumer_offsets records per second by record type.",
            unit="ops",
            stack=True,
        ),
        timeseries(
            "Records read, rows after collapsing commits",
            [
                target(
                    f"sum by (cluster_name) (rate({sel(f'{m}records_read_total')}[{RI}]))", "records read"
                ),
                target(
                    f"sum by (cluster_name) (rate({sel(f'{m}prepared_rows_total')}[{RI}]))",
                    "rows to the fold",
                ),
                target(
                    f"sum by (cluster_name) (rate({sel(f'{m}offset_tombstones_total')}[{RI}]))",
                    "offset tombstones",
                ),
            ],
            "Repeated commits of a partition within a batch collapse to one row before the stateful step; "
            "offset tombstones are the broker's deletions and expiries.",
            unit="ops",
        ),
        timeseries(
            "Value versions (offset commits, group metadata)",
            [
                target(
                    "sum by (record_type, value_version) (rate("
                    + sel(f"{m}records_total", record_type="~OFFSET_COMMIT|GROUP_METADATA")
                    + f"[{RI}]))",
                    "{{record_type}} v{{value_version}}",
                )
            ],
            "Which record versions the brokers write (a rolling upgrade shows here).",
            unit="ops",
        ),
        timeseries(
            "Batches and input rows",
            [
                target(sel(f"{m}batch_input_rows"), "rows in the last batch {{cluster_name}}"),
                target(
                    f"sum by (cluster_name) (rate({sel(f'{m}input_rows_total')}[{RI}]))",
                    "rows/s {{cluster_name}}",
                ),
                target(
                    f"sum by (cluster_name) (rate({sel(f'{m}batches_total')}[{RI}])) * 60",
                    "batches/min {{cluster_name}}",
                ),
            ],
            "Rows the last micro-batch read, rows read per second, micro-batches per minute.",
        ),
        row("Errors"),
        timeseries(
            "Decode errors and unknown record types",
            [
                target(
                    f"sum by (cluster_name) (increase({sel(f'{m}decode_errors_total')}[{RI}]))",
                    "decode errors {{cluster_name}}",
                ),
                target(
                    f"sum by (cluster_name) (increase({sel(f'{m}unknown_records_total')}[{RI}]))",
                    "unknown types {{cluster_name}}",
                ),
            ],
            "Records counted and skipped (GET /errors lists the recent ones with partition and offset).",
            bars=True,
        ),
        ranked(
            "Skipped records by type and reason",
            f"sum by (cluster_name, status, record_type, reason) ({sel(f'{m}skipped_records_total')})",
            "Records the mirror could not read since it started, by status, record type and reason "
            "class (a series appears with its first record: totals, not increase(), show it).",
            column="records",
        ),
        timeseries(
            "Group fold failures by exception",
            [
                target(
                    f"sum by (cluster_name, exception) (increase({sel(f'{m}fold_failures_total')}[{RI}]))",
                    "{{exception}} {{cluster_name}}",
                )
            ],
            "Group folds that failed; each quarantines its group with its last good state "
            "(GET /groups/{id} shows the quarantine object).",
            bars=True,
        ),
        timeseries(
            "Share-state query failures and restarts",
            [
                target(
                    f"sum by (cluster_name) (increase({sel(f'{m}share_state_query_failures_total')}[{RI}]))",
                    "failures {{cluster_name}}",
                ),
                target(
                    f"sum by (cluster_name) (increase({sel(f'{m}share_state_query_restarts_total')}[{RI}]))",
                    "restarts {{cluster_name}}",
                ),
            ],
            "The share-state query failed and was restarted with the main query's backoff (its last "
            "failure: GET /ready, parts.share_state.failure).",
            bars=True,
        ),
        row("Position in __consumer_offsets"),
        timeseries(
            "Records behind per partition",
            [target(sel(f"{m}partition_records_behind"), "{{cluster_name}} p{{partition}}")],
            "Records between the query's position and the end of each __consumer_offsets partition.",
        ),
        timeseries(
            "Catch-up progress",
            [target(sel(f"{m}catchup_progress_ratio"), "{{cluster_name}}")],
            "Share of the start-time backlog consumed.",
            unit="percentunit",
        ),
        timeseries(
            "Drift suspected at start",
            [
                target(
                    f"sum by (cluster_name, reason) ({sel(f'{m}drift_suspected_total')})",
                    "{{cluster_name}} {{reason}}",
                )
            ],
            "Starts at which records may have been removed while the mirror was down (log_start: a "
            "log start offset past the checkpoint; downtime: longer than delete.retention.ms); a "
            "reconciliation round follows the catch-up.",
        ),
        timeseries(
            "Reconciliation rounds",
            [
                target(
                    f"sum by (cluster_name, outcome) (increase({sel(f'{m}reconcile_rounds_total')}[{RI}]))",
                    "{{cluster_name}} {{outcome}}",
                )
            ],
            "Rounds comparing the mirrored groups with the coordinators' ListGroups, by outcome; "
            "not_authorized: the principal may not Describe the cluster, so no round runs "
            "(docs/security.md).",
        ),
        row("Micro-batches"),
        timeseries(
            "Preview",
            [
                target(
                    f"sum by (cluster_name, outcome) (increase({sel(f'{m}preview_groups_total')}[{RI}]))",
                    "{{cluster_name}} {{outcome}}",
                ),
                target(sel(f"{m}preview_ahead_groups"), "{{cluster_name}} ahead of their batch"),
                target(
                    f"histogram_quantile(0.99, sum by (cluster_name, le) "
                    f"(rate({sel(f'{m}preview_delay_seconds_bucket')}[{RI}])))",
                    "{{cluster_name}} p99 delay (s)",
                ),
            ],
            "The driver's preview (setting preview): groups whose new records it folded before their "
            "micro-batch (folded), left to the batch (left: a fold that failed, a quarantined group, "
            "records a batch had applied), the groups served ahead of their batch now, and the p99 of "
            "the seconds from a record's write to its group served.",
        ),
        timeseries(
            "Batch duration",
            [
                target(
                    f"histogram_quantile({q}, sum by (cluster_name, le) "
                    f"(rate({sel(f'{m}batch_duration_seconds_bucket')}[{RI}])))",
                    f"p{int(q * 100)} {{{{cluster_name}}}}",
                )
                for q in (0.5, 0.9, 0.99)
            ]
            + [
                target(
                    f"sum by (cluster_name) (rate({sel(f'{m}batch_duration_seconds_sum')}[{RI}]))\n"
                    f"/ sum by (cluster_name) (rate({sel(f'{m}batch_duration_seconds_count')}[{RI}]))",
                    "mean {{cluster_name}}",
                )
            ],
            "Micro-batch duration (Spark's triggerExecution); above the trigger interval, the mirror lags.",
            unit="s",
        ),
        timeseries(
            "Time per phase",
            [target(f"sum by (phase) (rate({sel(f'{m}batch_phase_seconds_total')}[{RI}]))", "{{phase}}")],
            "Seconds per second spent in each phase of the micro-batches (addBatch = decode + fold + sinks).",
            unit="s",
            stack=True,
        ),
        timeseries(
            "Since the last batch",
            [target(f"time() - {sel(f'{m}last_batch_timestamp_seconds')}", "{{cluster_name}}")],
            "Time since a micro-batch last finished (batches run when records or expiry deadlines arrive).",
            unit="s",
        ),
        timeseries(
            "Change events by type",
            [target(f"sum by (type) (rate({sel(f'{m}events_total')}[{RI}])) * 60", "{{type}}")],
            "Change events per minute (also written to the events topic / files).",
            stack=True,
        ),
        row("State"),
        timeseries(
            "State store rows",
            [target(sel(f"{m}state_rows"), "{{cluster_name}}")],
            "Groups kept by the stateful operator.",
            w=8,
        ),
        timeseries(
            "State store memory",
            [target(sel(f"{m}state_bytes"), "{{cluster_name}}")],
            "Memory of the streaming state store.",
            unit="bytes",
            w=8,
        ),
        timeseries(
            "Exporter",
            [
                target(sel(f"{m}exporter_series"), "series {{cluster_name}}"),
                target(sel(f"{m}exporter_render_seconds"), "render seconds {{cluster_name}}"),
            ],
            "Series per scrape and the time one exposition takes.",
            w=8,
            overrides=[
                {
                    "matcher": {"id": "byRegexp", "options": "render.*"},
                    "properties": [
                        {"id": "unit", "value": "s"},
                        {"id": "custom.axisPlacement", "value": "right"},
                    ],
                }
            ],
        ),
        row("Lag reads"),
        timeseries(
            "Age of the lag figures",
            [
                target(
                    f"time() - {sel('coordinator_mirror_lag_sample_timestamp_seconds')}", "{{cluster_name}}"
                )
            ],
            "Seconds since the log offsets behind the lag series were read (lag_interval_s apart).",
            unit="s",
            w=8,
        ),
        timeseries(
            "Log-offset rounds",
            [
                target(sel("coordinator_mirror_lag_round_seconds"), "round duration"),
                target(f"rate({sel('coordinator_mirror_lag_rounds_total')}[{RI}])", "{{outcome}} /s"),
            ],
            "Duration of the last ListOffsets round, and rounds per second by outcome.",
            w=8,
        ),
        timeseries(
            "Partitions read per round",
            [
                target(sel("coordinator_mirror_lag_partitions"), "partitions"),
                target(
                    sel("coordinator_mirror_topic_ids_unresolved"), "topic ids without a name: {{reason}}"
                ),
            ],
            "Topic-partitions whose log offsets the last round read; topic ids shown as ids (unnamed: "
            "no name known -- a deleted topic; malformed: a client's id not in Kafka's form).",
            w=8,
        ),
    ]
    return dashboard(
        HEALTH_UID,
        "coordinator-mirror health",
        "The mirror itself: throughput, decode errors and unknown records, position in "
        "__consumer_offsets, micro-batches, state size, exporter cardinality.",
        panels,
        [datasource_variable(), cluster_variable()],
        time_from="now-3h",
    )


DASHBOARDS = {
    "consumer-groups-overview.json": overview,
    "consumer-group-detail.json": detail,
    "kafka-topic.json": topic,
    "mirror-health.json": health,
    "consumer-group-insights.json": insights,  # dashboards/insights.py (issue 26)
}
