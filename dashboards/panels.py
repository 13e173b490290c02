"""The three dashboards: consumer groups overview, group detail, mirror health.

What polling exporters cannot show and these do: generations/epochs, rebalances as they completed
(from the log, not sampled), members joining/leaving/replaced, leaders, state transitions
including the ones between two scrapes (``emptied``), and when offsets will expire.  There is no
lag panel: the end offsets of user topics are not in ``__consumer_offsets``.
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
    row,
    sel,
    stat,
    state_code,
    state_mappings,
    state_timeline,
    table,
    target,
    timeseries,
)
from dashboards.insights import insights

OVERVIEW_UID = "coordinator-mirror-groups"
DETAIL_UID = "coordinator-mirror-group"
HEALTH_UID = "coordinator-mirror-health"

RI = "$__rate_interval"
G = "$group"


def _top_rebalancing(n: int = 10) -> str:
    """The n groups with the most rebalances over the dashboard's whole time range (``@ end()``
    pins the set, so the rows of a timeline do not change along the x axis)."""
    r = sel("coordinator_mirror_group_rebalances_total")
    return f"topk({n}, sum by (cluster_name, group) (increase({r}[$__range] @ end())))"


def overview() -> dict[str, Any]:
    groups = "coordinator_mirror_groups"
    panels = [
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
            [target(f"sum({sel('coordinator_mirror_group_offsets_expiring', window='24h')}) or vector(0)")],
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
                    f"(rate({sel('coordinator_mirror_group_rebalances_total')}[{RI}])) * 60)",
                    "{{group}}",
                )
            ],
            "Completed rebalances per minute (generation / assignment epoch bumps) of the busiest groups.",
            unit="none",
        ),
        table(
            "Most rebalances in the time range",
            [
                target(
                    f"topk(20, sum by (cluster_name, group) "
                    f"(increase({sel('coordinator_mirror_group_rebalances_total')}[$__range])) > 0)",
                    table=True,
                )
            ],
            "Groups by rebalances completed in the dashboard's time range.",
            rename={"Value": "rebalances", "group": "group", "cluster_name": "cluster"},
            sort_by="rebalances",
            desc=True,
        ),
        state_timeline(
            "State of the most rebalancing groups",
            [target(f"{state_code({})}\nand on (cluster_name, group) {_top_rebalancing()}", "{{group}}")],
            "Kafka state of the 10 groups with the most rebalances in the time range.",
        ),
        table(
            "Flapping: groups that lost their last member most often",
            [
                target(
                    f"topk(20, sum by (cluster_name, group) "
                    f"(increase({sel('coordinator_mirror_group_emptied_total')}[$__range])) > 0)",
                    table=True,
                )
            ],
            "Times each group became Empty in the time range -- counted from the log, so a group that "
            "empties and refills between two scrapes is counted too.",
            rename={"Value": "times emptied", "cluster_name": "cluster"},
            sort_by="times emptied",
            desc=True,
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
                    f"(rate({sel('coordinator_mirror_group_records_total')}[{RI}])))",
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
                    f"sum by (window) ({sel('coordinator_mirror_group_offsets_expiring')})",
                    "within {{window}}",
                )
            ],
            "Committed offsets that expire within 1h / 24h under the cluster's retention rules.",
        ),
        table(
            "Stalest commits",
            [
                target(
                    f"topk(20, time() - "
                    f"{sel('coordinator_mirror_group_last_commit_timestamp_seconds')}"
                    f" and on (cluster_name, group) {sel('coordinator_mirror_group_members')} > 0)",
                    table=True,
                )
            ],
            "Groups with members whose newest commit is the oldest: consumers that stopped committing "
            "while still in the group (stuck, or not committing at all).",
            unit="dtdurations",
            rename={"Value": "since the last commit", "cluster_name": "cluster"},
            sort_by="since the last commit",
            desc=True,
        ),
        table(
            "Groups whose offsets expire soonest",
            [
                target(
                    f"bottomk(20, {sel('coordinator_mirror_group_next_offset_expiry_seconds')})",
                    table=True,
                )
            ],
            "Time until each group's next committed offset expires (groups whose offsets cannot expire, "
            "like a Stable group's subscribed topics, are not listed).",
            unit="dtdurations",
            hide=("Time", "__name__"),
            rename={"Value": "expires in", "cluster_name": "cluster"},
            sort_by="expires in",
        ),
        timeseries(
            "Offsets expired and deleted",
            [
                target(
                    f"sum by (origin) (increase({sel('coordinator_mirror_offsets_expired_total')}[{RI}]))",
                    "expired ({{origin}})",
                ),
                target(
                    f"sum(increase({sel('coordinator_mirror_group_offsets_deleted_total')}[{RI}]))",
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
        "Every consumer group of the cluster as the group coordinator holds it: states, rebalances, "
        "membership, offset expiry.",
        panels,
        [datasource_variable(), cluster_variable()],
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
        table(
            "Skipped records by type and reason",
            [
                target(
                    "sum by (cluster_name, status, record_type, reason) "
                    f"({sel(f'{m}skipped_records_total')})",
                    table=True,
                )
            ],
            "Records the mirror could not read since it started, by status, record type and reason "
            "class (a series appears with its first record: totals, not increase(), show it).",
            rename={"Value": "records", "cluster_name": "cluster"},
            sort_by="records",
            desc=True,
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
        row("Micro-batches"),
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
            [target(sel("coordinator_mirror_lag_partitions"), "partitions")],
            "Topic-partitions whose log offsets the last round read.",
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
    "mirror-health.json": health,
    "consumer-group-insights.json": insights,  # dashboards/insights.py (issue 26)
}
