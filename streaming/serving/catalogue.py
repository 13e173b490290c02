"""The one metric catalogue: every series the mirror exports -- name, type, help, labels, unit.

Read by the exporter (`streaming.serving.metrics`), the dashboard and alert-rule generator
(`dashboards/build.py`), their tests and the metrics table of docs/monitoring.md, so a name exists in
exactly one place.  Conventions (https://prometheus.io/docs/practices/naming/): base units (``_seconds``,
``_bytes``, Unix timestamps as ``_timestamp_seconds``), counters end in ``_total``, and every
series carries ``cluster_name`` (the setting of that name) so several mirrors can feed one
Prometheus.

Three scopes:

* ``group`` -- one series (or a few) per consumer group, rendered at scrape time from the group's
  latest snapshot.  Counters are the group's own counters from the log (`state.model.COUNTERS`):
  monotonic for the group's life, recovered from the checkpoint across mirror restarts, and gone
  with the group -- a deleted group's series disappear from the next scrape, and a group re-created
  under the same id starts again from 0 (Prometheus sees a new series after a gap; ``increase()``
  over a window spanning the gap treats it as a counter reset).
* ``partition`` -- committed offset and commit time per (group, topic, partition), under the names
  kafka-lag-exporter made familiar; switchable off and filterable by group regex (settings
  ``metrics_per_partition``, ``metrics_group_regex``).
* ``lag`` -- lag and consumer health, from the log offsets the driver reads every
  ``lag_interval_s`` and the groups' committed offsets (`streaming.serving.lag_metrics`):
  kafka-lag-exporter's names and labels, Burrow's status codes.
* ``mirror`` -- the mirror itself: what it read and decoded, how far behind it is, batches, state.
* ``share`` -- share groups' delivery state from `__share_group_state` (`state.share`,
  `streaming.serving.share`): per share-partition, and the group's total lag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from decoders import RECORD_TYPES, ErrorKind

MetricType = Literal["counter", "gauge", "histogram"]
Scope = Literal["group", "partition", "mirror", "lag", "share"]

CLUSTER: Final = "cluster_name"
GROUP: Final = "group"


@dataclass(frozen=True)
class MetricDef:
    """One metric family.  ``name`` is the name as exposed (counters with ``_total``)."""

    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]
    unit: str = ""
    scope: Scope = "mirror"
    #: where the value comes from (the metrics table of docs/monitoring.md)
    source: str = ""

    @property
    def family(self) -> str:
        """prometheus_client's family name (it appends ``_total`` to counters itself)."""
        return self.name.removesuffix("_total") if self.type == "counter" else self.name

    @property
    def sample_names(self) -> tuple[str, ...]:
        """Names that appear in the exposition for this family."""
        if self.type == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


# ----------------------------------------------------------------------------- label vocabularies
#: states exported (one series each, 1 for the current) per kind -- Kafka's names.  Classic groups
#: never show PreparingRebalance/CompletingRebalance: those states are never written to the log.
GROUP_STATES: Final[dict[str, tuple[str, ...]]] = {
    "classic": ("Empty", "Stable"),
    "simple": ("Empty", "Stable"),
    "consumer": ("Empty", "Assigning", "Reconciling", "Stable"),
    "share": ("Empty", "Stable"),
    "streams": ("Empty", "NotReady", "Assigning", "Reconciling", "Stable"),
}
#: ``window`` label values of the offsets-expiring gauge and their length in seconds
EXPIRY_WINDOWS: Final[tuple[tuple[str, int], ...]] = (("1h", 3600), ("24h", 86400))
#: batch duration histogram buckets, seconds
BATCH_DURATION_BUCKETS: Final[tuple[float, ...]] = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
#: the preview's delay (`coordinator_mirror_preview_delay_seconds`)
PREVIEW_DELAY_BUCKETS: Final[tuple[float, ...]] = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
#: rebalance duration histogram buckets, seconds (a rebalance's timeouts default to minutes)
REBALANCE_DURATION_BUCKETS: Final[tuple[float, ...]] = (
    0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
)  # fmt: skip
#: ``phase`` label values of the rebalance durations: the Kafka group state during each span
#: (classic: PreparingRebalance, CompletingRebalance; KIP-848/share/streams: Assigning,
#: Reconciling) and ``total`` (start to Stable) -- `state.timing.phases`
REBALANCE_PHASES: Final[tuple[str, ...]] = (
    "total", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling",
)  # fmt: skip
#: offset-commit (K=0/1) and group-metadata (K=2) value versions counted one by one
VERSIONED_RECORD_TYPES: Final[dict[int, tuple[int, ...]]] = {1: (0, 1, 2, 3, 4), 2: (0, 1, 2, 3, 4)}

#: per-group counters: snapshot ``counters`` key -> exported name
GROUP_COUNTERS: Final[dict[str, tuple[str, str]]] = {
    "records": ("coordinator_mirror_group_records_total", "Records of the group applied from the log."),
    "rebalances": (
        "coordinator_mirror_group_rebalances_total",
        "Completed rebalances: generation (classic) or target assignment epoch (KIP-848/share/streams) "
        "bumps seen in the log.",
    ),
    "skipped_generations": (
        "coordinator_mirror_group_skipped_generations_total",
        "Generations/epochs that never reached the log (rebalances that failed or were superseded).",
    ),
    "member_joins": ("coordinator_mirror_group_member_joins_total", "Members that joined the group."),
    "member_leaves": ("coordinator_mirror_group_member_leaves_total", "Members that left the group."),
    "member_replacements": (
        "coordinator_mirror_group_member_replacements_total",
        "Static members (group.instance.id) that came back with a new member id (KIP-345).",
    ),
    "leader_changes": ("coordinator_mirror_group_leader_changes_total", "Classic group leader changes."),
    "emptied": (
        "coordinator_mirror_group_emptied_total",
        "Times the group became Empty because its last member left (flapping Empty <-> Stable).",
    ),
    "commits": ("coordinator_mirror_group_commits_total", "Offset commits applied (every committed value)."),
    "offsets_expired": (
        "coordinator_mirror_group_offsets_expired_total",
        "Committed offsets that expired (by Kafka's retention rules, or broker tombstones past the "
        "deadline).",
    ),
    "offsets_deleted": (
        "coordinator_mirror_group_offsets_deleted_total",
        "Committed offsets deleted by an admin operation (OffsetDelete / DeleteGroups).",
    ),
    "expiry_disagreements": (
        "coordinator_mirror_group_expiry_disagreements_total",
        "Times the broker's expiry tombstones and the mirror's retention rules disagreed.",
    ),
}


def _g(name: str, type_: MetricType, help_: str, *labels: str, unit: str = "", source: str = "") -> MetricDef:
    return MetricDef(name, type_, help_, (CLUSTER, GROUP, *labels), unit, "group", source)


def _m(name: str, type_: MetricType, help_: str, *labels: str, unit: str = "", source: str = "") -> MetricDef:
    return MetricDef(name, type_, help_, (CLUSTER, *labels), unit, "mirror", source)


GROUP_METRICS: Final[tuple[MetricDef, ...]] = (
    _g(
        "coordinator_mirror_group_info",
        "gauge",
        "Always 1: the group's kind (classic, simple, consumer, share, streams), Kafka group type, "
        "protocol type and protocol (classic: the selected assignor; KIP-848: the server assignor).",
        "kind",
        "type",
        "protocol_type",
        "protocol",
        source="snapshot kind/type/protocol_type/assignor",
    ),
    _g(
        "coordinator_mirror_group_state",
        "gauge",
        "1 for the group's current state, 0 for the other states of its kind (Kafka's state names).",
        "state",
        source="snapshot state",
    ),
    _g(
        "coordinator_mirror_group_state_since_timestamp_seconds",
        "gauge",
        "When the group entered its current state (Unix time).",
        unit="seconds",
        source="snapshot state_since_ms",
    ),
    _g(
        "coordinator_mirror_group_epoch",
        "gauge",
        "Generation (classic) or group epoch (KIP-848/share/streams).",
        source="snapshot generation / group_epoch",
    ),
    _g(
        "coordinator_mirror_group_assignment_epoch",
        "gauge",
        "Target assignment epoch (KIP-848/share/streams groups only).",
        source="snapshot assignment_epoch",
    ),
    _g("coordinator_mirror_group_members", "gauge", "Members of the group.", source="snapshot members"),
    _g(
        "coordinator_mirror_group_last_rebalance_timestamp_seconds",
        "gauge",
        "Record time of the group's last completed rebalance (Unix time); absent until one is seen.",
        unit="seconds",
        source="snapshot last_rebalance_ms",
    ),
    *(
        _g(name, "counter", help_, source=f"snapshot counters.{key}")
        for key, (name, help_) in GROUP_COUNTERS.items()
    ),
    _g(
        "coordinator_mirror_group_offsets",
        "gauge",
        "Committed offsets (partitions) the group holds.",
        source="snapshot offsets",
    ),
    _g(
        "coordinator_mirror_group_last_commit_timestamp_seconds",
        "gauge",
        "Newest commit time over the group's committed offsets (Unix time).",
        unit="seconds",
        source="max(offsets[].commit_timestamp_ms)",
    ),
    _g(
        "coordinator_mirror_group_next_offset_expiry_seconds",
        "gauge",
        "Seconds until the group's next committed offset expires under the cluster's retention "
        "rules (0 when due); absent when no offset of the group can expire (e.g. a Stable group's "
        "subscribed topics).",
        unit="seconds",
        source="min(offsets[].expires_at_ms) - now",
    ),
    _g(
        "coordinator_mirror_group_offsets_expiring",
        "gauge",
        "Committed offsets of the group that expire within the window (1h, 24h).",
        "window",
        source="offsets[].expires_at_ms",
    ),
    *(
        # issue 26: what only the log can tell (docs/insights.md)
        _g(
            "coordinator_mirror_group_rebalance_duration_seconds",
            "gauge",
            "The group's last timed rebalance, per phase: total (start to Stable) and the Kafka "
            "state of each span (classic: PreparingRebalance -- known for a new group only -- and "
            "CompletingRebalance; KIP-848/share/streams: Assigning, Reconciling), from the log's "
            "records and their timestamps; absent until one was timed.",
            "phase",
            unit="seconds",
            source="snapshot rebalance_timing.last",
        ),
        _g(
            "coordinator_mirror_group_commits_per_second",
            "gauge",
            "Offset commits per second, measured in the log's own time over the last minute of "
            "commits and decaying to 0 when the group stops committing; absent before two windows "
            "of commits.",
            source="state.rhythm.commit_rate",
        ),
        _g(
            "coordinator_mirror_group_oldest_commit_timestamp_seconds",
            "gauge",
            "Oldest last-commit time over the group's partitions, abandoned ones left out (Unix "
            "time): with the last commit timestamp, the spread of a group that commits only some "
            "partitions.",
            unit="seconds",
            source="state.rhythm.oldest_commit_ms",
        ),
        _g(
            "coordinator_mirror_group_partitions_behind",
            "gauge",
            "Partitions (abandoned ones left out) whose last commit trails the group's newest commit "
            "by more than commit_behind_s: a consumer committing only some partitions, or stopped on "
            "one, before its lag shows it (an idle partition a client does not commit again trails "
            "too: read it with its lag).",
            source="state.rhythm.partitions_behind",
        ),
        _g(
            "coordinator_mirror_group_abandoned_offsets",
            "gauge",
            "Committed partitions of the topic that no member of the group subscribes to any more "
            "(classic subscriptions, KIP-848 names and resolved regexes, streams source topics): "
            "abandoned, their lag kept apart (coordinator_mirror_group_abandoned_lag).",
            "topic",
            source="state.abandoned",
        ),
        _g(
            "coordinator_mirror_group_epoch_bumps_total",
            "counter",
            "Generation and target assignment epoch bumps, by cause (issue 38): rebalance (counted in "
            "coordinator_mirror_group_rebalances_total too), static_rejoin (a static member came back "
            "and took its assignment again: streams groups on Kafka 4.4) and share_initialization (a "
            "share group's partitions were initialised) -- the last two are no rebalance; KIP-848, "
            "share and streams groups have all three, classic groups rebalance only.",
            "cause",
            source="snapshot counters.rebalances / static_rejoins / share_initializations",
        ),
        _g(
            "coordinator_mirror_group_abandoned_expiry_timestamp_seconds",
            "gauge",
            "When the broker will expire the topic's first abandoned offset (Unix time; Kafka counts "
            "an unsubscribed topic's offsets down from their commit time).",
            "topic",
            unit="seconds",
            source="min(offsets[abandoned].expires_at_ms)",
        ),
    ),
)

#: kafka-lag-exporter's per-partition labels (its ``Metrics.groupPartitionLabels``)
LAG_PARTITION_LABELS: Final = (
    CLUSTER,
    GROUP,
    "topic",
    "partition",
    "member_host",
    "consumer_id",
    "client_id",
)

PARTITION_METRICS: Final[tuple[MetricDef, ...]] = (
    MetricDef(
        "kafka_consumergroup_group_offset",
        "gauge",
        "Committed offset of the group for the partition (kafka-lag-exporter's name and labels; "
        "the owner labels are unknown when no member is assigned the partition).",
        LAG_PARTITION_LABELS,
        "",
        "partition",
        "offsets[].offset",
    ),
    MetricDef(
        "kafka_consumergroup_group_commit_timestamp_seconds",
        "gauge",
        "When the committed offset of the partition was committed (Unix time).",
        (CLUSTER, GROUP, "topic", "partition"),
        "seconds",
        "partition",
        "offsets[].commit_timestamp_ms",
    ),
)


def _l(name: str, help_: str, labels: tuple[str, ...], unit: str = "", source: str = "") -> MetricDef:
    return MetricDef(name, "gauge", help_, labels, unit, "lag", source)


#: lag and consumer health (`streaming.serving.lag_metrics`): kafka-lag-exporter's names, labels
#: and definitions (its Metrics.scala / ConsumerGroupCollector.scala), then the mirror's own
LAG_METRICS: Final[tuple[MetricDef, ...]] = (
    _l(
        "kafka_consumergroup_group_lag",
        "Group offset lag of a partition: end offset (LSO, or high watermark with "
        "lag_isolation=read_uncommitted) minus committed offset, never negative; NaN when nothing "
        "is committed yet (kafka-lag-exporter's name and labels).",
        LAG_PARTITION_LABELS,
        source="round end - offsets[].offset",
    ),
    _l(
        "kafka_consumergroup_group_lag_seconds",
        "Group time lag of a partition: the round's sample time minus the interpolated time the log "
        "end passed the committed offset (kafka-lag-exporter's lookup table); NaN with fewer than two "
        "samples.",
        LAG_PARTITION_LABELS,
        unit="seconds",
        source="LookupTable interpolation",
    ),
    _l(
        "kafka_consumergroup_group_max_lag",
        "Max group offset lag over the group's partitions.",
        (CLUSTER, GROUP),
        source="max(kafka_consumergroup_group_lag)",
    ),
    _l(
        "kafka_consumergroup_group_max_lag_seconds",
        "Max group time lag over the group's partitions.",
        (CLUSTER, GROUP),
        unit="seconds",
        source="max(kafka_consumergroup_group_lag_seconds)",
    ),
    _l(
        "kafka_consumergroup_group_sum_lag",
        "Sum of group offset lag over the group's partitions.",
        (CLUSTER, GROUP),
        source="sum(kafka_consumergroup_group_lag)",
    ),
    _l(
        "kafka_consumergroup_group_topic_sum_lag",
        "Sum of group offset lag over the group's partitions of the topic.",
        (CLUSTER, GROUP, "topic"),
        source="sum by topic(kafka_consumergroup_group_lag)",
    ),
    _l(
        "kafka_partition_latest_offset",
        "Latest offset of a partition: its high watermark (ListOffsets latest, read_uncommitted).",
        (CLUSTER, "topic", "partition"),
        source="ListOffsets latest",
    ),
    _l(
        "kafka_partition_earliest_offset",
        "Earliest offset of a partition: its log-start offset (ListOffsets earliest).",
        (CLUSTER, "topic", "partition"),
        source="ListOffsets earliest",
    ),
    _l(
        "coordinator_mirror_partition_stable_offset",
        "Last stable offset of a partition (ListOffsets latest, read_committed): the end a "
        "read_committed consumer can reach; equals the high watermark without open transactions.",
        (CLUSTER, "topic", "partition"),
        source="ListOffsets latest read_committed",
    ),
    _l(
        "coordinator_mirror_lag_sample_timestamp_seconds",
        "When the log offsets behind the lag series were read (Unix time): their freshness.",
        (CLUSTER,),
        unit="seconds",
        source="round sampled_at_ms",
    ),
    _l(
        "coordinator_mirror_lag_round_seconds",
        "Duration of the last round of log-offset reads.",
        (CLUSTER,),
        unit="seconds",
        source="round",
    ),
    _l(
        "coordinator_mirror_lag_partitions",
        "Topic-partitions whose log offsets the last round read.",
        (CLUSTER,),
        source="round",
    ),
    MetricDef(
        "coordinator_mirror_lag_rounds_total",
        "counter",
        "Rounds of log-offset reads, by outcome (ok, failed).",
        (CLUSTER, "outcome"),
        "",
        "lag",
        "offsets thread",
    ),
    _l(
        "coordinator_mirror_topic_deleted",
        "1 for a topic the cluster does not have (deleted, or never created) that the group commits "
        "to, is assigned or its members subscribe to by name (a topic id no one can name stays an id). "
        "The broker tombstones a deleted topic's committed offsets at once, so commits flag it only "
        "briefly; subscriptions flag it while the members keep them.",
        (CLUSTER, GROUP, "topic"),
        source="round missing topics",
    ),
    _l(
        "coordinator_mirror_topic_not_authorized",
        "1 for a topic of the group whose log offsets the mirror's principal may not read (ListOffsets "
        "answered TOPIC_AUTHORIZATION_FAILED: no Describe ACL on the topic), so its lag is unknown. "
        "Grant Describe on the groups' topics (docs: Security).",
        (CLUSTER, GROUP, "topic"),
        source="round denied topics",
    ),
    _l(
        "coordinator_mirror_topic_ids_unresolved",
        "Topic ids shown as ids because no name is known for them, by reason: unnamed (ids the "
        "mirrored groups use that neither the log nor the cluster's metadata names -- a deleted "
        "topic, or one not described yet), malformed (ids a Kafka client handed over in a form that "
        "is not Kafka's and could not be converted).",
        (CLUSTER, "reason"),
        source="lag rows + round topic ids",
    ),
    _l(
        "coordinator_mirror_group_abandoned_lag",
        "Lag (messages) of the group's abandoned partitions on the topic -- a topic no member "
        "subscribes to any more: kept out of kafka_consumergroup_group_lag and the group's max/sum "
        "lag, which would otherwise show ghost lag nobody will consume.",
        (CLUSTER, GROUP, "topic"),
        source="round end - offsets[abandoned].offset",
    ),
    _l(
        "coordinator_mirror_group_lag_slo_seconds",
        "The group's lag SLO in seconds (settings lag_slo_seconds / lag_slo_overrides), for the alert "
        "on kafka_consumergroup_group_max_lag_seconds.",
        (CLUSTER, GROUP),
        unit="seconds",
        source="settings",
    ),
    # issue 38: time to catch up, records lost to retention (docs/insights.md)
    _l(
        "coordinator_mirror_group_catch_up_seconds",
        "Seconds until the group's lag is worked off at today's rates: its slowest partition's lag "
        "left to read (less what the consumer read since its newest commit) / (consume rate - "
        "produce rate); 0 when caught up; absent when it is falling behind or the rates are not "
        "known yet (coordinator_mirror_group_catch_up_state says which).",
        (CLUSTER, GROUP),
        unit="seconds",
        source="streaming.health.catch_up",
    ),
    _l(
        "coordinator_mirror_group_catch_up_state",
        "1 for the group's catch-up state, 0 for the others: caught_up (no lag, or caught up at "
        "its newest commit while it commits), catching_up (consuming faster than produced), "
        "falling_behind (consuming at or below the produce rate, a stopped consumer included), "
        "unknown (too few samples).",
        (CLUSTER, GROUP, "state"),
        source="streaming.health.catch_up",
    ),
    _l(
        "coordinator_mirror_group_consume_rate",
        "Records per second the group commits past, summed over its partitions, from its window of "
        "commits (decays to 0 when it stops committing).",
        (CLUSTER, GROUP),
        source="Burrow's window of commits",
    ),
    _l(
        "coordinator_mirror_group_produce_rate",
        "Records per second appended to the group's partitions, summed, from the sampled log ends "
        "over the same window.",
        (CLUSTER, GROUP),
        source="lag lookup table",
    ),
    _l(
        "coordinator_mirror_group_topic_consume_rate",
        "The group's consume rate on the topic (records/s): with ..._produce_rate and "
        "kafka_consumergroup_group_topic_sum_lag, a recording rule's catch-up per topic.",
        (CLUSTER, GROUP, "topic"),
        source="Burrow's window of commits",
    ),
    _l(
        "coordinator_mirror_group_topic_produce_rate",
        "Records per second appended to the group's partitions of the topic.",
        (CLUSTER, GROUP, "topic"),
        source="lag lookup table",
    ),
    _l(
        "coordinator_mirror_partition_catch_up_seconds",
        "Seconds until the partition's lag is worked off at today's rates (0 when caught up; absent "
        "when falling behind or unknown); per-partition series obey metrics_per_partition and "
        "metrics_group_regex.",
        (CLUSTER, GROUP, "topic", "partition"),
        unit="seconds",
        source="streaming.health.catch_up",
    ),
    MetricDef(
        "coordinator_mirror_group_records_lost_total",
        "counter",
        "Records deleted by retention before the group read them (its committed offset was below "
        "the partition's log start offset), all its partitions; counted once per position, kept "
        "across mirror restarts.",
        (CLUSTER, GROUP),
        "",
        "lag",
        "streaming.health.retention",
    ),
    MetricDef(
        "coordinator_mirror_partition_records_lost_total",
        "counter",
        "Records of the partition deleted by retention before the group read them (only partitions "
        "that lost some).",
        (CLUSTER, GROUP, "topic", "partition"),
        "",
        "lag",
        "streaming.health.retention",
    ),
    _l(
        "coordinator_mirror_group_retention_margin_records",
        "Records between the group's committed offset and the log start offset, on its nearest "
        "partition: how many more records retention may delete before the group loses some.",
        (CLUSTER, GROUP),
        source="committed - log start",
    ),
    _l(
        "coordinator_mirror_group_retention_margin_seconds",
        "Seconds until retention reaches the group's committed offset on its nearest partition at "
        "today's rates (the log start advancing at the produce rate, the offset at the consume "
        "rate); absent when the gap is not closing.",
        (CLUSTER, GROUP),
        unit="seconds",
        source="margin / (produce - consume)",
    ),
    _l(
        "coordinator_mirror_consumer_status",
        "Burrow's group status code: 1 OK, 2 WARN, 3 ERR (a partition stopped, stalled or rewound).",
        (CLUSTER, GROUP),
        source="Burrow evaluation",
    ),
    _l(
        "coordinator_mirror_consumer_partition_status",
        "Burrow's partition status code: 1 OK, 2 WARN, 4 STOP, 5 STALL, 6 REWIND.",
        (CLUSTER, GROUP, "topic", "partition"),
        source="Burrow evaluation",
    ),
)

MIRROR_METRICS: Final[tuple[MetricDef, ...]] = (
    _m(
        "coordinator_mirror_start_time_seconds",
        "gauge",
        "When this mirror's exporter started counting (Unix time): the mirror-level counters count "
        "from here.",
        unit="seconds",
    ),
    _m(
        "coordinator_mirror_ready",
        "gauge",
        "1 once caught up with the end of __consumer_offsets seen at start.",
    ),
    _m(
        "coordinator_mirror_query_healthy",
        "gauge",
        "1 while the streaming query runs; 0 while it is down (failed, restarting from the checkpoint "
        "with backoff, or not started: waiting for __consumer_offsets).",
    ),
    _m(
        "coordinator_mirror_query_restarts_total",
        "counter",
        "Times the failed streaming query was restarted from the checkpoint (the process stays up).",
        source="supervisor",
    ),
    _m(
        "coordinator_mirror_source_up",
        "gauge",
        "1 while the Kafka cluster answers the driver's periodic check (and __consumer_offsets "
        "exists), else 0.",
        source="supervisor",
    ),
    _m(
        "coordinator_mirror_share_state_query_state",
        "gauge",
        "The share-state query's state, one series per state, 1 for the current one: waiting (for "
        "the catch-up, or for __share_group_state to exist), running, restarting (failed; restarted "
        "after the backoff), failed (a cause no restart fixes; tried again every "
        "query_restart_backoff_max_s), not_authorized (an ACL on __share_group_state is missing), "
        "stopped.  No series with share_state_enabled off.  Never gates /ready.",
        "state",
        source="share-state supervisor",
    ),
    _m(
        "coordinator_mirror_share_state_query_restarts_total",
        "counter",
        "Times the share-state query was started again after a failure.",
        source="share-state supervisor",
    ),
    _m(
        "coordinator_mirror_share_state_query_failures_total",
        "counter",
        "Times the share-state query failed (the failure is logged and in /ready's parts.share_state).",
        source="share-state supervisor",
    ),
    _m(
        "coordinator_mirror_groups_quarantined",
        "gauge",
        "Groups whose fold failed and which keep their last good state (GET /groups/{id} quarantine).",
        source="sink quarantine rows",
    ),
    _m(
        "coordinator_mirror_fold_failures_total",
        "counter",
        "Group folds that failed (each quarantines its group), by exception type.",
        "exception",
        source="sink quarantine rows",
    ),
    _m(
        "coordinator_mirror_preview_groups_total",
        "counter",
        "The preview's folds of a group's new records before their micro-batch (setting preview), by "
        "outcome: folded (served at once), left (to the group's micro-batch: a fold that failed, a "
        "quarantined group, or records a batch had already applied).",
        "outcome",
        source="the preview",
    ),
    _m(
        "coordinator_mirror_preview_delay_seconds",
        "histogram",
        "Seconds from a record's write (its timestamp in __consumer_offsets, the broker's clock) to "
        "its group's state served by the preview: one observation per poll that folded a group, "
        "its oldest record's (the driver's clock; a skew between the two shifts it).",
        unit="seconds",
        source="the preview",
    ),
    _m(
        "coordinator_mirror_preview_ahead_groups",
        "gauge",
        "Groups served with a state the preview folded and their micro-batch has not made yet (0 with "
        "the preview off; it rises with a long batch, such as a big backfill's seed batch).",
        source="the preview",
    ),
    _m(
        "coordinator_mirror_reconcile_mismatches",
        "gauge",
        "Groups on which the mirror and the coordinators' ListGroups disagreed for two rounds in a row, "
        "by side (missing_in_coordinator, missing_in_mirror).",
        "side",
        source="reconciliation",
    ),
    _m(
        "coordinator_mirror_reconcile_rounds_total",
        "counter",
        "Reconciliation rounds (the mirrored groups against the coordinators' ListGroups), by outcome: "
        "ok, error (ListGroups failed or a coordinator was still loading), not_authorized (the "
        "principal may not Describe the cluster, so ListGroups would leave groups out: no round).",
        "outcome",
        source="reconciliation",
    ),
    _m(
        "coordinator_mirror_drift_suspected_total",
        "counter",
        "Starts at which records may have been removed while the mirror was not reading, by reason "
        "(log_start: a __consumer_offsets log start offset past the checkpoint; downtime: down longer "
        "than delete.retention.ms); a reconciliation round follows the catch-up.",
        "reason",
        source="start-up checks",
    ),
    _m(
        "coordinator_mirror_catchup_progress_ratio",
        "gauge",
        "Fraction of the start-time backlog of __consumer_offsets consumed (1 when ready).",
        unit="ratio",
    ),
    _m(
        "coordinator_mirror_partition_records_behind",
        "gauge",
        "Records (log positions) between the query's position and the end of the __consumer_offsets "
        "partition.",
        "partition",
        source="readiness.behind()",
    ),
    _m(
        "coordinator_mirror_records_behind",
        "gauge",
        "Records (log positions) behind the end of __consumer_offsets, all partitions.",
        source="readiness.behind()",
    ),
    _m(
        "coordinator_mirror_records_read_total",
        "counter",
        "Records read from __consumer_offsets (a collapsed commit row counts as the records it stands for).",
        source="observed records",
    ),
    _m(
        "coordinator_mirror_records_total",
        "counter",
        "Records read, by record type (Kafka's name, or the number when unknown) and value version "
        "(offset commits and group metadata; 'other' = tombstones and versions not broken down).",
        "record_type",
        "value_version",
        source="observed type_K / type_K_vV",
    ),
    _m(
        "coordinator_mirror_prepared_rows_total",
        "counter",
        "Rows handed to the stateful step after collapsing repeated offset commits.",
        source="observed rows",
    ),
    _m(
        "coordinator_mirror_offset_commits_total",
        "counter",
        "Offset commit records read.",
        source="observed commits",
    ),
    _m(
        "coordinator_mirror_offset_tombstones_total",
        "counter",
        "Offset tombstones (deletions and expiries written by the broker) read.",
        source="observed offset_tombstones",
    ),
    _m(
        "coordinator_mirror_decode_errors_total",
        "counter",
        "Records of a known type that could not be decoded (counted, kept in GET /errors, skipped).",
        source="observed errors",
    ),
    _m(
        "coordinator_mirror_unknown_records_total",
        "counter",
        "Records of a type this mirror does not know (a newer broker; counted and skipped).",
        source="observed unknown",
    ),
    _m(
        "coordinator_mirror_skipped_records_total",
        "counter",
        "Records not applied, by status (error, unknown), record type and reason class.",
        "status",
        "record_type",
        "reason",
        source="sink error rows",
    ),
    _m(
        "coordinator_mirror_events_total",
        "counter",
        "Change events emitted, by type (every group, deleted ones included).",
        "type",
        source="sink event rows",
    ),
    _m(
        "coordinator_mirror_offsets_expired_total",
        "counter",
        "Committed offsets expired, all groups -- including groups deleted with them, whose own "
        "series are gone -- by origin (mirror: its retention rules; broker: a tombstone past the "
        "deadline).",
        "origin",
        source="offsets_expired events",
    ),
    _m(
        "coordinator_mirror_groups_deleted_total",
        "counter",
        "Groups deleted, by reason (tombstone: the coordinator deleted it; expired: its cleanup sweep "
        "deleted it, Empty with no offsets left).",
        "reason",
        source="group_deleted events",
    ),
    _m(
        "coordinator_mirror_groups",
        "gauge",
        "Groups mirrored, by state and kind.",
        "state",
        "kind",
        source="snapshots",
    ),
    _m("coordinator_mirror_batches_total", "counter", "Micro-batches completed.", source="query progress"),
    _m(
        "coordinator_mirror_input_rows_total",
        "counter",
        "Rows the query read from its source.",
        source="query progress numInputRows",
    ),
    _m(
        "coordinator_mirror_batch_input_rows",
        "gauge",
        "Rows read by the last micro-batch.",
        source="query progress numInputRows",
    ),
    _m(
        "coordinator_mirror_batch_duration_seconds",
        "histogram",
        "Micro-batch duration (Spark's triggerExecution).",
        unit="seconds",
        source="query progress durationMs",
    ),
    _m(
        "coordinator_mirror_rebalance_duration_seconds",
        "histogram",
        "Durations of the rebalances the log timed, all groups, by kind and phase (total, and the "
        "Kafka state of each span: PreparingRebalance, CompletingRebalance, Assigning, Reconciling).",
        "kind",
        "phase",
        unit="seconds",
        source="rebalance_timed events",
    ),
    _m(
        "coordinator_mirror_batch_phase_seconds_total",
        "counter",
        "Time spent per micro-batch phase (Spark's durationMs keys: addBatch, queryPlanning, ...).",
        "phase",
        unit="seconds",
        source="query progress durationMs",
    ),
    _m(
        "coordinator_mirror_last_batch_timestamp_seconds",
        "gauge",
        "When the last micro-batch finished (Unix time).",
        unit="seconds",
        source="status.last_batch",
    ),
    _m(
        "coordinator_mirror_last_trigger_timestamp_seconds",
        "gauge",
        "When the query last looked for new records (Unix time): a micro-batch, or a trigger that "
        "found none -- reported at least every 10 s while the query runs, busy or idle.",
        unit="seconds",
        source="query progress (idle triggers included)",
    ),
    _m(
        "coordinator_mirror_state_rows",
        "gauge",
        "Rows in the streaming state store (groups kept by the stateful operator).",
        source="query progress stateOperators",
    ),
    _m(
        "coordinator_mirror_state_bytes",
        "gauge",
        "Memory used by the streaming state store.",
        unit="bytes",
        source="query progress stateOperators",
    ),
    _m(
        "coordinator_mirror_exporter_series",
        "gauge",
        "Series in the previous /metrics exposition (watch the cardinality here).",
    ),
    _m(
        "coordinator_mirror_exporter_render_seconds",
        "gauge",
        "Time the previous /metrics exposition took to collect.",
        unit="seconds",
    ),
)


def _s(name: str, type_: MetricType, help_: str, labels: tuple[str, ...], source: str = "") -> MetricDef:
    return MetricDef(name, type_, help_, labels, "", "share", source)


_SHARE_PARTITION: Final = (CLUSTER, GROUP, "topic", "partition")

#: the states of a supervised part beside the main query (`streaming.serving.status.PartHealth`)
PART_STATES: Final[tuple[str, ...]] = (
    "waiting", "running", "restarting", "failed", "not_authorized", "stopped",
)  # fmt: skip

#: share groups (KIP-932) from `__share_group_state` (issue 26; docs/insights.md)
SHARE_METRICS: Final[tuple[MetricDef, ...]] = (
    _s(
        "coordinator_mirror_share_partition_start_offset",
        "gauge",
        "Share-partition start offset: every record before it is delivered and done with (absent "
        "until the share-partition is initialised).",
        _SHARE_PARTITION,
        "ShareSnapshot/ShareUpdate StartOffset",
    ),
    _s(
        "coordinator_mirror_share_partition_lag",
        "gauge",
        "Share-partition lag as Kafka computes it for kafka-share-groups --describe --offsets: log end "
        "(high watermark) minus start offset minus the records already delivered for good after it.",
        _SHARE_PARTITION,
        "round high watermark - start offset - DeliveryCompleteCount",
    ),
    _s(
        "coordinator_mirror_share_partition_records",
        "gauge",
        "Records of the share-partition's in-flight window by persisted delivery state: available "
        "(delivered, then released or its lock expired), acknowledged, archived (rejected, or out of "
        "delivery attempts).  Acquired records are not persisted: the log does not hold them.",
        (*_SHARE_PARTITION, "state"),
        "state batches",
    ),
    _s(
        "coordinator_mirror_share_partition_in_flight",
        "gauge",
        "Records from the start offset to the end of the last state batch: the window the share "
        "coordinator tracks.",
        _SHARE_PARTITION,
        "state batches",
    ),
    _s(
        "coordinator_mirror_share_partition_delivery_attempts",
        "gauge",
        "Delivery attempts of the records in the in-flight window (each record's delivery count, summed).",
        _SHARE_PARTITION,
        "state batches",
    ),
    _s(
        "coordinator_mirror_share_partition_delivery_count_max",
        "gauge",
        "Highest delivery count in the in-flight window (records redelivered this often; at "
        "group.share.delivery.count.limit they are archived).",
        _SHARE_PARTITION,
        "state batches",
    ),
    _s(
        "coordinator_mirror_share_group_lag",
        "gauge",
        "Total share-partition lag of the share group (sum of coordinator_mirror_share_partition_lag).",
        (CLUSTER, GROUP),
        "sum(coordinator_mirror_share_partition_lag)",
    ),
    _s(
        "coordinator_mirror_share_state_records_total",
        "counter",
        "Records read from __share_group_state, by status: ok, error (could not be decoded: counted, "
        "kept with partition and offset in GET /errors) and unknown (a record type this mirror does "
        "not know).",
        (CLUSTER, "status"),
        "share-state query",
    ),
)

CATALOGUE: Final[tuple[MetricDef, ...]] = (
    *GROUP_METRICS, *PARTITION_METRICS, *MIRROR_METRICS, *LAG_METRICS, *SHARE_METRICS,
)  # fmt: skip
BY_NAME: Final[dict[str, MetricDef]] = {m.name: m for m in CATALOGUE}
#: every name that can appear in the exposition (histogram series included) -> its family
SAMPLE_NAMES: Final[dict[str, MetricDef]] = {s: m for m in CATALOGUE for s in m.sample_names}


def reason_label(kind: str | None, status: str | None) -> str:
    """The ``reason`` label of a skipped record: the decoder's `ErrorKind` (a closed set: truncated,
    malformed, trailing_bytes, unknown_version, no_layout, internal), or ``unknown_record_type``."""
    if status == "unknown":
        return "unknown_record_type"
    return kind if kind in _ERROR_KINDS else "none"


_ERROR_KINDS: Final = frozenset(k.value for k in ErrorKind)


def record_type_label(record_type: int | None) -> str:
    """Kafka's record type name (OFFSET_COMMIT, GROUP_METADATA, ...), else the number."""
    if record_type is None:
        return "none"
    rt = RECORD_TYPES.get(int(record_type))
    return rt.name if rt is not None else str(int(record_type))


def metrics_table() -> str:
    """The metrics table of docs/monitoring.md (markdown), generated from the catalogue."""
    rows = [
        "| name | type | labels | unit | scope | help |",
        "|---|---|---|---|---|---|",
    ]
    for m in CATALOGUE:
        labels = ", ".join(f"`{label}`" for label in m.labels)
        text = m.help.replace("|", "\\|")
        rows.append(f"| `{m.name}` | {m.type} | {labels} | {m.unit or '-'} | {m.scope} | {text} |")
    return "\n".join(rows) + "\n"
