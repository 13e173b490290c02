"""The insights dashboard (issue 26): what only the log can tell -- how long rebalances took, how
often groups commit and which partitions trail, offsets on topics the members left, share-group
delivery state.  Cluster-wide panels, then the ``group`` variable's own (docs/insights.md).
"""

from __future__ import annotations

from typing import Any

from dashboards.grafana import (
    cluster_variable,
    dashboard,
    datasource_variable,
    metric,
    query_variable,
    ranked,
    row,
    sel,
    stat,
    target,
    timeseries,
)

INSIGHTS_UID = "coordinator-mirror-insights"

RI = "$__rate_interval"
G = "$group"
_REBALANCE = "coordinator_mirror_rebalance_duration_seconds"
_LAST = "coordinator_mirror_group_rebalance_duration_seconds"


def _rebalance_panels() -> list[dict[str, Any]]:
    bucket = sel(f"{_REBALANCE}_bucket")
    return [
        row("Rebalance timings (from the log's records and their timestamps)"),
        stat(
            "Rebalances timed / min",
            [
                target(
                    f"sum(rate({sel(f'{_REBALANCE}_count', phase='~CompletingRebalance|Reconciling')}[{RI}]))"
                    " * 60 or vector(0)"
                )
            ],
            "Rebalances the log timed per minute, all groups (each has its last phase: "
            "CompletingRebalance for classic groups, Reconciling for KIP-848/share/streams).",
        ),
        timeseries(
            "Rebalance duration p95 by kind and phase",
            [
                target(
                    f"histogram_quantile(0.95, sum by (le, kind, phase) (rate({bucket}[{RI}])))",
                    "{{kind}} {{phase}}",
                )
            ],
            "95th percentile of the timed rebalances' phases: total (start to Stable; classic only for "
            "a new group's first generation), PreparingRebalance / CompletingRebalance (classic join / "
            "sync), Assigning / Reconciling (KIP-848, share, streams).",
            unit="s",
            w=10,
        ),
        ranked(
            "Slowest last rebalance per group",
            f"topk(20, max by (cluster_name, group, phase) ({sel(_LAST)}))",
            "Each group's last timed rebalance, longest phase first (total where the log gives its start).",
            column="seconds",
            unit="s",
            w=10,
        ),
    ]


def _commit_panels() -> list[dict[str, Any]]:
    rate = sel("coordinator_mirror_group_commits_per_second")
    return [
        row("Commit rhythm"),
        timeseries(
            "Commits per second (log time), busiest groups",
            [target(f"topk(10, {rate})", "{{group}}")],
            "Offset commits per second measured in the log's own time (a mirror catching up measures "
            "the same rate as a live one); decays to 0 when a group stops committing.",
            unit="ops",
        ),
        ranked(
            "Partitions behind their group's newest commit",
            f"topk(20, {sel('coordinator_mirror_group_partitions_behind')})",
            "Partitions whose last commit trails the group's newest by more than commit_behind_s: a "
            "consumer committing only some partitions, or stopped on one, before its lag shows it.",
            column="partitions behind",
        ),
    ]


def _abandoned_panels() -> list[dict[str, Any]]:
    return [
        row("Abandoned offsets (topics no member subscribes to any more)"),
        ranked(
            "Abandoned partitions per topic",
            sel("coordinator_mirror_group_abandoned_offsets"),
            "Committed partitions of topics the group's members left (classic subscriptions, KIP-848 "
            "names and resolved regexes, streams source topics).",
            column="abandoned partitions",
            w=8,
        ),
        ranked(
            "Ghost lag: lag of abandoned partitions",
            sel("coordinator_mirror_group_abandoned_lag"),
            "Lag of the abandoned partitions per topic -- kept out of kafka_consumergroup_group_lag and "
            "the group's max/sum lag, since no member will consume it.",
            column="ghost lag",
            w=8,
        ),
        ranked(
            "Abandoned offsets expire in",
            f"{sel('coordinator_mirror_group_abandoned_expiry_timestamp_seconds')} - time()",
            "When the broker deletes the topic's first abandoned offset (offsets.retention.minutes "
            "after its commit): a consumer coming back to the topic after that starts from "
            "auto.offset.reset.",
            column="expires in",
            unit="s",
            w=8,
            desc=False,  # the soonest first
        ),
    ]


def _share_panels() -> list[dict[str, Any]]:
    part = "coordinator_mirror_share_partition_"
    return [
        row("Share groups (__share_group_state)"),
        stat(
            "Share-state records / s",
            [
                target(
                    f"sum by (status) (rate({sel('coordinator_mirror_share_state_records_total')}[{RI}]))",
                    "{{status}}",
                )
            ],
            "Records read from __share_group_state by status (ok, error: undecodable, kept in "
            "GET /errors with partition and offset; unknown: a record type this mirror does not know).",
            unit="ops",
            w=6,
        ),
        ranked(
            "Share group lag",
            sel("coordinator_mirror_share_group_lag"),
            "Kafka's share-group lag (kafka-share-groups --describe --offsets): per share-partition the "
            "log end minus the start offset minus the records already delivered for good, summed.",
            column="lag",
            w=6,
        ),
        timeseries(
            "Share-partition lag and start offset",
            [
                target(sel(f"{part}lag"), "lag {{group}} {{topic}}[{{partition}}]"),
                target(sel(f"{part}start_offset"), "start {{group}} {{topic}}[{{partition}}]"),
            ],
            "Per share-partition: the lag, and the start offset (before it every record is done with).",
            w=12,
        ),
        ranked(
            "In-flight records by delivery state",
            sel(f"{part}records"),
            "The in-flight window's records: available (released or lock expired, waiting for "
            "redelivery), acknowledged, archived (rejected or out of delivery attempts).  Records a "
            "consumer holds right now (acquired) are not persisted, so not in the log.",
            column="records",
            w=12,
        ),
        timeseries(
            "Delivery attempts in flight",
            [
                target(sel(f"{part}delivery_attempts"), "attempts {{group}} {{topic}}[{{partition}}]"),
                target(sel(f"{part}delivery_count_max"), "max count {{group}} {{topic}}[{{partition}}]"),
                target(sel(f"{part}in_flight"), "in flight {{group}} {{topic}}[{{partition}}]"),
            ],
            "Delivery attempts summed over the in-flight window, the highest delivery count (records "
            "redelivered this often), and the window's size.",
            w=12,
        ),
    ]


def _catch_up_panels() -> list[dict[str, Any]]:
    """Issue 38: time to catch up, records lost to retention and the margin, epoch bumps by cause."""
    behind = sel("coordinator_mirror_group_catch_up_state", state="falling_behind")
    return [
        row("Time to catch up and retention"),
        stat(
            "Groups falling behind",
            [target(f"count({behind} == 1) or vector(0)")],
            "Groups consuming at or below the rate their partitions are produced to (a stopped "
            "consumer with lag included): their lag does not shrink.",
            w=4,
        ),
        ranked(
            "Catch-up estimate (slowest groups)",
            f"topk(20, {sel('coordinator_mirror_group_catch_up_seconds')})",
            "Seconds until the group's lag is worked off at today's rates: its slowest partition's "
            "lag / (consume rate - produce rate); 0 caught up; falling-behind groups have none.",
            column="catches up in",
            unit="s",
            w=10,
        ),
        timeseries(
            "Consume vs produce rate, the groups with most lag",
            [
                target(
                    f"{sel('coordinator_mirror_group_consume_rate')} and on (cluster_name, group) "
                    f"topk(5, {sel('kafka_consumergroup_group_sum_lag')})",
                    "consume {{group}}",
                ),
                target(
                    f"{sel('coordinator_mirror_group_produce_rate')} and on (cluster_name, group) "
                    f"topk(5, {sel('kafka_consumergroup_group_sum_lag')})",
                    "produce {{group}}",
                ),
            ],
            "Records per second the group commits past and appended to its partitions, over the "
            "window of commits: the lag shrinks while consume is above produce.",
            unit="ops",
            w=10,
        ),
        ranked(
            "Records lost to retention (last 24h)",
            f"topk(20, increase({sel('coordinator_mirror_partition_records_lost_total')}[24h]) > 0)",
            "Records retention deleted before the group read them, per partition.",
            column="records lost",
            w=8,
        ),
        ranked(
            "Retention margin (nearest groups)",
            f"bottomk(20, {sel('coordinator_mirror_group_retention_margin_seconds')})",
            "Seconds until the log start offset reaches the group's committed offset at today's "
            "rates (records: coordinator_mirror_group_retention_margin_records).",
            column="retention reaches it in",
            unit="s",
            w=8,
            desc=False,
        ),
        timeseries(
            "Epoch bumps by cause / min",
            [
                target(
                    f"sum by (cause) (rate({sel('coordinator_mirror_group_epoch_bumps_total')}[{RI}])) * 60",
                    "{{cause}}",
                )
            ],
            "Generation and target assignment epoch bumps: rebalances, and the bumps that are none -- "
            "a static member's rejoin (streams, Kafka 4.4), a share group's partitions initialised.",
            w=8,
        ),
    ]


def _group_panels() -> list[dict[str, Any]]:
    return [
        row("This group ($group)"),
        timeseries(
            "Last rebalance by phase",
            [target(sel(_LAST, group=G), "{{phase}}")],
            "The group's last timed rebalance: total and the Kafka state of each span.",
            unit="s",
            w=8,
        ),
        timeseries(
            "Commits per second",
            [target(sel("coordinator_mirror_group_commits_per_second", group=G), "commits/s")],
            "The group's commit rate in log time.",
            unit="ops",
            w=8,
        ),
        timeseries(
            "Commit spread",
            [
                target(
                    f"{sel('coordinator_mirror_group_last_commit_timestamp_seconds', group=G)}"
                    f" - {sel('coordinator_mirror_group_oldest_commit_timestamp_seconds', group=G)}",
                    "newest - oldest partition commit",
                ),
                target(sel("coordinator_mirror_group_partitions_behind", group=G), "partitions behind"),
            ],
            "How far the group's oldest partition commit trails its newest (abandoned partitions left "
            "out), and how many partitions trail by more than commit_behind_s.",
            unit="s",
            w=8,
        ),
        timeseries(
            "Catch-up estimate",
            [target(sel("coordinator_mirror_group_catch_up_seconds", group=G), "seconds")],
            "Seconds until the group's lag is worked off at today's rates (gaps: falling behind).",
            unit="s",
            w=8,
        ),
        timeseries(
            "Consume and produce rate per topic",
            [
                target(sel("coordinator_mirror_group_topic_consume_rate", group=G), "consume {{topic}}"),
                target(sel("coordinator_mirror_group_topic_produce_rate", group=G), "produce {{topic}}"),
            ],
            "The group's rates per topic (records/s).",
            unit="ops",
            w=8,
        ),
        timeseries(
            "Partitions: catch-up estimate and retention margin",
            [
                target(
                    sel("coordinator_mirror_partition_catch_up_seconds", group=G),
                    "catch up {{topic}}[{{partition}}]",
                ),
                target(sel("coordinator_mirror_group_retention_margin_records", group=G), "margin (records)"),
            ],
            "Per partition the catch-up estimate; the group's nearest retention margin in records.",
            w=8,
        ),
    ]


def insights() -> dict[str, Any]:
    panels = [
        *_rebalance_panels(),
        *_commit_panels(),
        *_abandoned_panels(),
        *_share_panels(),
        *_catch_up_panels(),
        *_group_panels(),
    ]
    group_query = (
        f'label_values({metric("coordinator_mirror_group_info")}{{cluster_name=~"$cluster"}}, group)'
    )
    variables = [
        datasource_variable(),
        cluster_variable(),
        query_variable("group", "Group", group_query, multi=False, include_all=False),
    ]
    return dashboard(
        INSIGHTS_UID,
        "Kafka consumer group insights (coordinator-mirror)",
        "What only __consumer_offsets tells: rebalance durations by phase, commit rhythm, offsets on "
        "topics the members left (ghost lag), share-group delivery state.",
        panels,
        variables,
        time_from="now-3h",
    )
