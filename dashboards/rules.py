"""The alerting rules (a standard Prometheus rules file), generated from documented thresholds.

Every threshold is a field of `Thresholds` with its default; users override them when rendering
(``python -m dashboards.build --rules-out my-alerts.yaml --set storm_rebalances=10``) instead of
editing the YAML, and the Helm chart takes them from its values (``prometheusRule.thresholds``):
the chart renders `rules_template()` -- these same rules with a token (``__T_<name>__``) where
each threshold goes -- so the chart and the rules file cannot drift apart (tests/test_helm renders
both with the same overrides and compares).  Metric names go through `dashboards.grafana.metric`,
so a rule cannot name a series the exporter does not have.  Every alert carries a ``runbook_url``
to its section of docs/runbooks.md.

Patterns worth knowing:

* **Counters whose first increase may predate the first scrape** (decode errors, unknown record
  types, read in the first catch-up batch after a start): ``increase()`` needs two samples, so the
  rule also fires when the counter is already above zero within one window of the exporter's
  start (``coordinator_mirror_start_time_seconds``).
* **Per-group counters vanish with their group**; groups deleted because their offsets expired are
  counted by the mirror-level ``coordinator_mirror_groups_deleted_total{reason="expired"}``.
* **Consumer health alerts are per group**, not per partition (a stopped 50-partition group pages
  once): the value is the number of partitions, the description lists them (a ``query`` in the
  annotation template, the first `PARTITIONS_LISTED`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from dashboards.grafana import metric

_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
#: the project's home; the runbooks are docs/runbooks.md there (Chart.yaml names the same home)
PROJECT_URL = "https://github.com/coordinator-mirror/coordinator-mirror"
RUNBOOK_URL = f"{PROJECT_URL}/blob/main/docs/runbooks.md"
#: partitions a consumer-health alert's description names at most
PARTITIONS_LISTED = 20
#: the groups of the rules file, in order
GROUP_NAMES = ("coordinator-mirror.groups", "coordinator-mirror.mirror")


@dataclass(frozen=True)
class Thresholds:
    """Alert thresholds and windows (Prometheus durations), and how the rules are rendered.  The
    defaults suit a production cluster scraped every 15-60 s; the live test renders the same rules
    with seconds-long windows."""

    #: RebalanceStorm: more rebalances of one group than this within storm_window ...
    storm_rebalances: float = 5.0
    #: RebalanceStorm: ... the window its rebalances are counted over ...
    storm_window: str = "10m"
    #: RebalanceStorm: ... sustained this long (a rolling deploy's burst is shorter)
    storm_for: str = "15m"
    #: Flapping: the group became Empty (its last member left) more often than this ...
    flapping_emptied: float = 2.0
    #: Flapping: ... within this window ...
    flapping_window: str = "30m"
    #: Flapping: ... sustained this long
    flapping_for: str = "5m"
    #: OffsetsExpiringSoon: an Empty group's next committed offset expires within this many hours ...
    expiring_hours: float = 24.0
    #: OffsetsExpiringSoon: ... sustained this long
    expiring_for: str = "10m"
    #: OffsetsExpired / GroupsExpired: any expiry within this window
    expired_window: str = "15m"
    #: DecodeErrors / UnknownRecordTypes: any such record within this window
    decode_window: str = "15m"
    #: NotReady: still catching up after this long (a large __consumer_offsets takes a while)
    not_ready_for: str = "30m"
    #: FallingBehind: more records than this behind the end of __consumer_offsets ...
    behind_records: float = 100_000.0
    #: FallingBehind: ... sustained this long
    behind_for: str = "15m"
    #: ConsumerLagOverSLO: the group's max lag in seconds above its SLO for this long
    lag_slo_for: str = "5m"
    #: ConsumerStopped: partitions of the group in Burrow's STOP for this long
    stopped_for: str = "5m"
    #: ConsumerStalled: partitions of the group in Burrow's STALL for this long
    stalled_for: str = "5m"
    #: QueryFailed: the streaming query not running (failed and restarting, or waiting) for this long
    query_failed_for: str = "2m"
    #: Down: the scrape job of the mirror (its ``up`` series)
    job: str = "coordinator-mirror"
    #: Down / SourceUnavailable: the scrape, or the mirror's check of the cluster, failing this long
    down_for: str = "2m"
    #: Absent: no series of the mirror at all for this long (never deployed, or the target vanished)
    absent_for: str = "10m"
    #: NoBatches: no trigger (a micro-batch, or a look for new records) for more seconds than this ...
    no_batch_seconds: float = 300.0
    #: NoBatches: ... sustained this long
    no_batch_for: str = "2m"
    #: RestartLoop: more process starts or query restarts than `restarts` within this window
    restart_window: str = "30m"
    #: RestartLoop: ... more than this many
    restarts: float = 2.0
    #: PermissionMissing: a feature lacking its ACL (topics not readable for lag, reconciliation
    #: off) for this long
    permission_for: str = "15m"
    #: SlowRebalance: a group's last rebalance timed from the log took more seconds than this ...
    slow_rebalance_seconds: float = 60.0
    #: SlowRebalance: ... and ended within this window
    slow_rebalance_window: str = "30m"
    #: RecordsLostToRetention: records deleted before the group read them within this window
    records_lost_window: str = "15m"
    #: RetentionMarginLow: retention reaches the group's committed offset in fewer seconds than this ...
    retention_margin_seconds: float = 3600.0
    #: RetentionMarginLow: ... sustained this long
    retention_margin_for: str = "10m"
    #: extra labels on every alert (e.g. team, or a different severity policy)
    extra_labels: dict[str, str] = field(default_factory=dict)
    #: alerts left out of the rendered file (by name)
    disabled: tuple[str, ...] = ()
    #: where the runbooks live: each alert's runbook_url is this + "#" + its lower-cased name
    runbook_url: str = RUNBOOK_URL

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name.endswith(("_window", "_for")) and not _DURATION.match(str(v)):
                raise ValueError(f"{f.name}: {v!r} is not a Prometheus duration (e.g. 30s, 10m, 1h)")
        object.__setattr__(self, "disabled", tuple(self.disabled))
        unknown = set(self.disabled) - set(alert_names()) if self.disabled else set()
        if unknown:
            known = ", ".join(alert_names())
            raise ValueError(f"disabled: no alert named {sorted(unknown)} (known: {known})")

    def up_matchers(self) -> str:
        """The label matchers of the mirror's own scrape series (``up``)."""
        return f'job="{self.job}"'

    @classmethod
    def with_overrides(cls, overrides: dict[str, Any]) -> Thresholds:
        """From ``name=value`` overrides (strings from the command line are converted)."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for name, raw in overrides.items():
            if name not in known:
                raise ValueError(f"unknown threshold {name!r} (known: {', '.join(sorted(known))})")
            kind = str(known[name].type)
            value = raw
            if isinstance(raw, str) and kind == "float":
                value = float(raw)
            elif isinstance(raw, str) and kind.startswith("dict"):
                value = json.loads(raw)  # extra_labels='{"team": "platform"}'
            elif isinstance(raw, str) and kind.startswith("tuple"):
                value = tuple(n.strip() for n in raw.split(",") if n.strip())  # disabled=A,B
            kwargs[name] = value
        return cls(**kwargs)


def threshold_fields() -> list[dataclasses.Field[Any]]:
    """The fields that are numbers or durations: what the Helm chart takes as
    ``prometheusRule.thresholds`` (the others -- job, extra labels, disabled alerts, the runbook
    address -- are chart values of their own)."""
    return [
        f for f in dataclasses.fields(Thresholds) if f.type == "float" or f.name.endswith(("_window", "_for"))
    ]


def is_duration(f: dataclasses.Field[Any]) -> bool:
    return f.name.endswith(("_window", "_for"))


def threshold_docs() -> dict[str, str]:
    """Each field's ``#:`` comment in `Thresholds`."""
    import inspect

    names = {f.name for f in dataclasses.fields(Thresholds)}
    docs: dict[str, str] = {}
    comment = ""
    for line in inspect.getsource(Thresholds).splitlines():
        text = line.strip()
        if text.startswith("#:"):
            comment = text[2:].strip()
        elif (m := re.match(r"^([a-z_]+): ", text)) and m.group(1) in names:
            docs[m.group(1)] = comment
            comment = ""
    return docs


class _Tokens:
    """`Thresholds` as the chart renders them: every threshold a token the chart's template
    replaces (``__T_<name>__``; ``__S_<name>__`` a duration in seconds)."""

    extra_labels: dict[str, str] = {}  # noqa: RUF012 - read-only, like Thresholds'
    disabled: tuple[str, ...] = ()
    runbook_url = "__T_runbook_url__"

    def __getattr__(self, name: str) -> str:
        if name in {f.name for f in threshold_fields()}:
            return f"__T_{name}__"
        raise AttributeError(name)

    def up_matchers(self) -> str:
        return "__T_up_matchers__"


def _num(x: float | str) -> str:
    if isinstance(x, str):  # a token
        return x
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _seconds(t: Thresholds | _Tokens, name: str) -> str:
    """A duration threshold in seconds (PromQL compares numbers with ``time()``)."""
    if isinstance(t, _Tokens):
        return f"__S_{name}__"
    return str(_window_seconds(getattr(t, name)))


def _appeared(name: str, t: Thresholds | _Tokens, window_name: str) -> str:
    """A counter that went up within the window -- or was already above 0 at the first scrapes
    after the exporter started (then ``increase()`` has no earlier sample to compare with)."""
    m = metric(name)
    start = metric("coordinator_mirror_start_time_seconds")
    window = getattr(t, window_name)
    return (
        f"sum by (cluster_name) (increase({m}[{window}])) > 0\n"
        f"or\n"
        f"(sum by (cluster_name) ({m}) > 0\n"
        f"  and on (cluster_name) (time() - max by (cluster_name) ({start})) < {_seconds(t, window_name)})"
    )


def _window_seconds(duration: str) -> int:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    return int(sum(int(n) * units[u] for n, u in re.findall(r"([0-9]+)(ms|s|m|h|d|w|y)", duration)))


def thresholds_by_alert() -> dict[str, list[str]]:
    """alert -> the thresholds its rule uses (the tokens the chart fills in for it)."""
    names = [f.name for f in threshold_fields()]
    used: dict[str, list[str]] = {}
    for group in _groups(_Tokens()):
        for rule in group["rules"]:
            text = repr(rule)
            used[rule["alert"]] = [n for n in names if f"__T_{n}__" in text or f"__S_{n}__" in text]
    return used


def runbook_anchor(alert: str) -> str:
    """The anchor of an alert's section in docs/runbooks.md (its heading is the alert's name)."""
    return alert.lower()


def _rule(  # noqa: PLR0917 - one positional row per alert reads like a table
    alert: str,
    expr: str,
    for_: str,
    severity: str,
    summary: str,
    description: str,
    t: Thresholds | _Tokens,
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": alert, "expr": expr}
    if for_ not in ("0s", "0m"):
        rule["for"] = for_
    rule["labels"] = {"severity": severity, **t.extra_labels}
    rule["annotations"] = {
        "summary": summary,
        "description": description,
        "runbook_url": f"{t.runbook_url}#{runbook_anchor(alert)}",
    }
    return rule


def _partitions(status: int) -> str:
    """An annotation template listing the group's partitions in Burrow status ``status``
    (topic[partition], topic-major), the first `PARTITIONS_LISTED` of them."""
    series = metric("coordinator_mirror_consumer_partition_status")
    query = f'printf "{series}{{cluster_name=%q,group=%q}} == {status}" $labels.cluster_name $labels.group'
    return (
        f'{{{{ with {query} | query | sortByLabel "partition" | sortByLabel "topic" }}}}'
        f"{{{{ range $i, $p := . }}}}{{{{ if lt $i {PARTITIONS_LISTED} }}}}{{{{ if $i }}}}, {{{{ end }}}}"
        "{{ $p.Labels.topic }}[{{ $p.Labels.partition }}]{{ end }}{{ end }}"
        f"{{{{ if gt (len .) {PARTITIONS_LISTED} }}}} (the first {PARTITIONS_LISTED}){{{{ end }}}}"
        "{{ end }}"
    )


def rule_groups(t: Thresholds | None = None) -> list[dict[str, Any]]:
    """The rule groups of the rules file (without the alerts ``t.disabled`` names)."""
    t = t or Thresholds()
    return [
        {"name": g["name"], "rules": [r for r in g["rules"] if r["alert"] not in t.disabled]}
        for g in _groups(t)
    ]


def alert_names() -> list[str]:
    return [r["alert"] for g in _groups(Thresholds()) for r in g["rules"]]


def _groups(t: Thresholds | _Tokens) -> list[dict[str, Any]]:
    rebalances = metric("coordinator_mirror_group_rebalances_total")
    emptied = metric("coordinator_mirror_group_emptied_total")
    expiry = metric("coordinator_mirror_group_next_offset_expiry_seconds")
    state = metric("coordinator_mirror_group_state")
    expired = metric("coordinator_mirror_group_offsets_expired_total")
    deleted = metric("coordinator_mirror_groups_deleted_total")
    ready = metric("coordinator_mirror_ready")
    behind = metric("coordinator_mirror_records_behind")
    healthy = metric("coordinator_mirror_query_healthy")
    start = metric("coordinator_mirror_start_time_seconds")
    source_up = metric("coordinator_mirror_source_up")
    last_trigger = metric("coordinator_mirror_last_trigger_timestamp_seconds")
    restarts = metric("coordinator_mirror_query_restarts_total")
    share_state = metric("coordinator_mirror_share_state_query_state")
    share_failures = metric("coordinator_mirror_share_state_query_failures_total")
    quarantined = metric("coordinator_mirror_groups_quarantined")
    mismatches = metric("coordinator_mirror_reconcile_mismatches")
    denied = metric("coordinator_mirror_topic_not_authorized")
    reconcile_rounds = metric("coordinator_mirror_reconcile_rounds_total")
    status = metric("coordinator_mirror_consumer_partition_status")
    rebalance_duration = metric("coordinator_mirror_group_rebalance_duration_seconds")
    last_rebalance = metric("coordinator_mirror_group_last_rebalance_timestamp_seconds")
    lost = metric("coordinator_mirror_group_records_lost_total")
    margin = metric("coordinator_mirror_group_retention_margin_seconds")
    groups = [
        _rule(
            "KafkaConsumerGroupRebalanceStorm",
            f"sum by (cluster_name, group) (increase({rebalances}[{t.storm_window}]))"
            f" > {_num(t.storm_rebalances)}",
            t.storm_for,
            "warning",
            "Consumer group {{ $labels.group }} is in a rebalance storm",
            f"Group {{{{ $labels.group }}}} on cluster {{{{ $labels.cluster_name }}}} completed "
            f"{{{{ $value | humanize }}}} rebalances in the last {t.storm_window} (more than "
            f"{_num(t.storm_rebalances)}, for {t.storm_for}). Every rebalance pauses consumption; "
            "look for members that keep joining and leaving (crash loops, max.poll.interval.ms "
            "exceeded, session timeouts) in the group detail dashboard.",
            t,
        ),
        _rule(
            "KafkaConsumerGroupSlowRebalance",
            f"max by (cluster_name, group) ({rebalance_duration}) > {_num(t.slow_rebalance_seconds)}\n"
            f"and on (cluster_name, group)\n"
            f"(time() - {last_rebalance} < {_seconds(t, 'slow_rebalance_window')})",
            "0m",
            "warning",
            "Consumer group {{ $labels.group }} rebalanced slowly",
            f"The last rebalance of group {{{{ $labels.group }}}} on cluster {{{{ $labels.cluster_name }}}} "
            f"took {{{{ $value | humanizeDuration }}}} (more than {_num(t.slow_rebalance_seconds)}s, "
            f"timed from the log within the last {t.slow_rebalance_window}); consumption pauses while a "
            "group rebalances. The insights dashboard shows which phase was slow: PreparingRebalance "
            "(members slow to rejoin: max.poll.interval.ms, long processing), CompletingRebalance (the "
            "leader's assignment), Assigning or Reconciling (KIP-848: members slow to release "
            "partitions).",
            t,
        ),
        _rule(
            "KafkaConsumerGroupFlapping",
            f"sum by (cluster_name, group) (increase({emptied}[{t.flapping_window}]))"
            f" > {_num(t.flapping_emptied)}",
            t.flapping_for,
            "warning",
            "Consumer group {{ $labels.group }} keeps flapping between Empty and Stable",
            f"Group {{{{ $labels.group }}}} on cluster {{{{ $labels.cluster_name }}}} lost its last member "
            f"{{{{ $value | humanize }}}} times in the last {t.flapping_window}: its consumers start, "
            "join and all leave again (a crash loop, or a job that exits after each poll).",
            t,
        ),
        _rule(
            "KafkaConsumerGroupOffsetsExpiringSoon",
            f"({expiry} < {_num(t.expiring_hours)} * 3600)\n"
            f'and on (cluster_name, group) ({state}{{state="Empty"}} == 1)',
            t.expiring_for,
            "warning",
            "Committed offsets of the Empty group {{ $labels.group }} expire soon",
            "Group {{ $labels.group }} on cluster {{ $labels.cluster_name }} has no members and its "
            "next committed offset expires in {{ $value | humanizeDuration }} (offsets.retention.minutes). "
            f"When the group restarts after that, it resumes from auto.offset.reset. Alert threshold: "
            f"{_num(t.expiring_hours)}h.",
            t,
        ),
        _rule(
            "KafkaConsumerGroupOffsetsExpired",
            f"sum by (cluster_name, group) (increase({expired}[{t.expired_window}])) > 0",
            "0m",
            "warning",
            "Committed offsets of {{ $labels.group }} expired",
            "{{ $value | humanize }} committed offsets of group {{ $labels.group }} on cluster "
            f"{{{{ $labels.cluster_name }}}} expired in the last {t.expired_window} (offsets of topics "
            "the group no longer consumes, or of an idle group). Consumers of those partitions will "
            "start from auto.offset.reset.",
            t,
        ),
        _rule(
            "KafkaConsumerGroupsExpired",
            f'sum by (cluster_name) (increase({deleted}{{reason="expired"}}[{t.expired_window}])) > 0',
            "0m",
            "warning",
            "Consumer groups were deleted because their offsets expired",
            f"{{{{ $value | humanize }}}} groups on cluster {{{{ $labels.cluster_name }}}} lost all "
            f"committed offsets to expiry in the last {t.expired_window} and were deleted (their own "
            "series are gone; the mirror's change events name them).",
            t,
        ),
        _rule(
            "KafkaConsumerLagOverSLO",
            f"{metric('kafka_consumergroup_group_max_lag_seconds')}\n"
            f"> on (cluster_name, group) {metric('coordinator_mirror_group_lag_slo_seconds')}",
            t.lag_slo_for,
            "warning",
            "Consumer group {{ $labels.group }} lags more than its SLO",
            "Group {{ $labels.group }} on cluster {{ $labels.cluster_name }} is "
            "{{ $value | humanizeDuration }} behind on its worst partition, over its SLO "
            f"(lag_slo_seconds / lag_slo_overrides) for {t.lag_slo_for}.",
            t,
        ),
        _rule(
            "KafkaConsumerRecordsLostToRetention",
            f"sum by (cluster_name, group) (increase({lost}[{t.records_lost_window}])) > 0\n"
            f"or\n"
            f"(sum by (cluster_name, group) ({lost}) > 0\n"
            f"  unless on (cluster_name, group)\n"
            f"  sum by (cluster_name, group) ({lost} offset {t.records_lost_window}))",
            "0m",
            "critical",
            "Consumer group {{ $labels.group }} lost records to retention",
            f"Retention deleted {{{{ $value | humanize }}}} records of group {{{{ $labels.group }}}} on "
            f"cluster {{{{ $labels.cluster_name }}}} before the group read them (its committed offset "
            f"was below the partition's log start offset), within the last {t.records_lost_window}. "
            "They are gone: the group resumes from the log start. "
            "coordinator_mirror_partition_records_lost_total names the partitions; the mirror's "
            "records_lost events say which offsets.",
            t,
        ),
        _rule(
            "KafkaConsumerRetentionMarginLow",
            f"{margin} < {_num(t.retention_margin_seconds)}",
            t.retention_margin_for,
            "warning",
            "Retention is about to delete records group {{ $labels.group }} has not read",
            f"At today's rates the log start offset reaches the committed offset of group "
            f"{{{{ $labels.group }}}} on cluster {{{{ $labels.cluster_name }}}} in "
            f"{{{{ $value | humanizeDuration }}}} (less than {_num(t.retention_margin_seconds)}s, for "
            f"{t.retention_margin_for}): its consumers are slower than retention. "
            "coordinator_mirror_group_retention_margin_records says how many records are left.",
            t,
        ),
        _rule(
            "KafkaConsumerStopped",
            f"count by (cluster_name, group) ({status} == 4)",
            t.stopped_for,
            "critical",
            "Consumer group {{ $labels.group }} stopped committing on {{ $value }} partition(s)",
            "Group {{ $labels.group }} on cluster {{ $labels.cluster_name }} has lag and has not committed "
            "for longer than its window of commits (Burrow's STOP, Rule 3) on {{ $value }} partition(s): "
            f"{_partitions(4)}.",
            t,
        ),
        _rule(
            "KafkaConsumerStalled",
            f"count by (cluster_name, group) ({status} == 5)",
            t.stalled_for,
            "critical",
            "Consumer group {{ $labels.group }} is stalled on {{ $value }} partition(s)",
            "Group {{ $labels.group }} on cluster {{ $labels.cluster_name }} keeps committing the same "
            "offset while it has lag (Burrow's STALL, Rule 4) on {{ $value }} partition(s): "
            f"{_partitions(5)}.",
            t,
        ),
        _rule(
            "KafkaConsumerRewound",
            f"count by (cluster_name, group) ({status} == 6)",
            "0m",
            "warning",
            "Consumer group {{ $labels.group }} rewound {{ $value }} partition(s)",
            "Group {{ $labels.group }} on cluster {{ $labels.cluster_name }} committed an offset lower than "
            "before (a seek back or offset reset; Burrow's REWIND, Rule 2) on {{ $value }} partition(s): "
            f"{_partitions(6)}. It reprocesses records.",
            t,
        ),
    ]
    mirror = [
        _rule(
            "CoordinatorMirrorDecodeErrors",
            _appeared("coordinator_mirror_decode_errors_total", t, "decode_window"),
            "0m",
            "warning",
            "The coordinator mirror cannot decode records of __consumer_offsets",
            f"The mirror of cluster {{{{ $labels.cluster_name }}}} skipped records it could not decode in "
            f"the last {t.decode_window} (GET /errors lists them with partition and offset; "
            "coordinator_mirror_skipped_records_total says which record type and why). A broker "
            "upgrade may have introduced a record version the mirror does not know yet.",
            t,
        ),
        _rule(
            "CoordinatorMirrorUnknownRecordTypes",
            _appeared("coordinator_mirror_unknown_records_total", t, "decode_window"),
            "0m",
            "warning",
            "__consumer_offsets holds record types the coordinator mirror does not know",
            f"The mirror of cluster {{{{ $labels.cluster_name }}}} read records of unknown types in the "
            f"last {t.decode_window}: the brokers write a record type newer than this mirror (upgrade "
            "it). The records are counted and skipped; the groups they belong to may be incomplete.",
            t,
        ),
        _rule(
            "CoordinatorMirrorNotReady",
            f"{ready} == 0",
            t.not_ready_for,
            "warning",
            "The coordinator mirror has not caught up with __consumer_offsets",
            f"The mirror of cluster {{{{ $labels.cluster_name }}}} is still catching up after "
            f"{t.not_ready_for}; its group state is incomplete until it is ready.",
            t,
        ),
        _rule(
            "CoordinatorMirrorFallingBehind",
            f"{behind} > {_num(t.behind_records)}\nand on (cluster_name) {ready} == 1",
            t.behind_for,
            "warning",
            "The coordinator mirror is falling behind __consumer_offsets",
            f"The mirror of cluster {{{{ $labels.cluster_name }}}} is {{{{ $value | humanize }}}} records "
            f"behind the end of __consumer_offsets (more than {_num(t.behind_records)} for {t.behind_for}): "
            "its view of the groups is late. Check its batch duration and resources.",
            t,
        ),
        _rule(
            "CoordinatorMirrorQueryFailed",
            f"{healthy} == 0",
            t.query_failed_for,
            "critical",
            "The coordinator mirror's streaming query stopped",
            "The streaming query of the mirror of cluster {{ $labels.cluster_name }} is not running "
            "(GET /healthz has the error; the mirror restarts it from the checkpoint with backoff). "
            "Group state and metrics are frozen until it runs again.",
            t,
        ),
        _rule(
            "CoordinatorMirrorDown",
            f"up{{{t.up_matchers()}}} == 0",
            t.down_for,
            "critical",
            "The coordinator mirror is down",
            "Prometheus cannot scrape the coordinator mirror ({{ $labels.instance }}, job "
            f"{{{{ $labels.job }}}}) for {t.down_for}: the process is gone or not answering. Nothing "
            "watches the groups meanwhile.",
            t,
        ),
        _rule(
            "CoordinatorMirrorSourceUnavailable",
            f"{source_up} == 0",
            t.down_for,
            "critical",
            "The coordinator mirror cannot reach its Kafka cluster",
            f"The mirror of cluster {{{{ $labels.cluster_name }}}} gets no answer from the brokers for "
            f"{t.down_for} (GET /ready says why). It keeps serving its last state and resumes from its "
            "checkpoint when the cluster is back.",
            t,
        ),
        _rule(
            "CoordinatorMirrorAbsent",
            f"absent({start})",
            t.absent_for,
            "critical",
            "No coordinator mirror reports to Prometheus",
            f"No series of the coordinator mirror for {t.absent_for}: it is not running, or Prometheus "
            "no longer discovers it.",
            t,
        ),
        _rule(
            "CoordinatorMirrorNoBatches",
            f"time() - {last_trigger} > {_num(t.no_batch_seconds)}",
            t.no_batch_for,
            "critical",
            "The coordinator mirror's query makes no progress",
            f"The mirror of cluster {{{{ $labels.cluster_name }}}} reported no trigger for more than "
            f"{_num(t.no_batch_seconds)} s although its query reports one at least every 10 s, busy or "
            "idle: it is stuck (source unavailable? see coordinator_mirror_source_up and GET /ready).",
            t,
        ),
        _rule(
            "CoordinatorMirrorRestartLoop",
            f"changes({start}[{t.restart_window}]) > {_num(t.restarts)}\n"
            f"or increase({restarts}[{t.restart_window}]) > {_num(t.restarts)}",
            "0m",
            "warning",
            "The coordinator mirror keeps restarting",
            f"The mirror of cluster {{{{ $labels.cluster_name }}}} (re)started its process or its query more "
            f"than {_num(t.restarts)} times in {t.restart_window}: a crash loop. Its log says why.",
            t,
        ),
        _rule(
            "CoordinatorMirrorShareStateQueryFailing",
            f"(\n  sum by (cluster_name) (increase({share_failures}[{t.restart_window}]))"
            f" > {_num(t.restarts)}\n"
            f'  or max by (cluster_name) ({share_state}{{state="failed"}}) == 1\n)\n'
            f'unless on (cluster_name) max by (cluster_name) ({share_state}{{state="not_authorized"}}) == 1',
            "0m",
            "warning",
            "The coordinator mirror's share-state query keeps failing",
            f"The __share_group_state query of the mirror of cluster {{{{ $labels.cluster_name }}}} failed "
            f"more than {_num(t.restarts)} times in {t.restart_window}, or with a cause no restart fixes: "
            "share groups' delivery state and share lag are stale. The main query and readiness are not "
            "affected. GET /ready (parts.share_state) and the log say why.",
            t,
        ),
        _rule(
            "CoordinatorMirrorGroupsQuarantined",
            f"{quarantined} > 0",
            "0m",
            "warning",
            "The coordinator mirror quarantined groups",
            "{{ $value }} group(s) of cluster {{ $labels.cluster_name }} failed to fold and keep their last "
            "good state (GET /groups/{id} has a quarantine object: exception, record partition/offset).",
            t,
        ),
        _rule(
            "CoordinatorMirrorReconcileMismatch",
            f"sum by (cluster_name) ({mismatches}) > 0",
            "0m",
            "warning",
            "The coordinator mirror disagrees with the coordinators' group list",
            "{{ $value }} group(s) of cluster {{ $labels.cluster_name }} are missing on one side of the "
            "reconciliation (Admin ListGroups) two rounds in a row; groups the coordinator no longer has "
            "show exists: false.",
            t,
        ),
        _rule(
            "CoordinatorMirrorPermissionMissing",
            f"count by (cluster_name) ({denied}) > 0\n"
            f'or sum by (cluster_name) (increase({reconcile_rounds}{{outcome="not_authorized"}}'
            f"[{t.permission_for}])) > 0\n"
            f'or max by (cluster_name) ({share_state}{{state="not_authorized"}}) == 1',
            t.permission_for,
            "warning",
            "The coordinator mirror lacks an ACL one of its features needs",
            "Cluster {{ $labels.cluster_name }}: the mirror's principal may not Describe some of the groups' "
            "topics (their lag is unknown: coordinator_mirror_topic_not_authorized), the cluster "
            "(reconciliation is off) or __share_group_state (share groups' delivery state is not "
            "read). docs/security.md lists the ACL of each feature.",
            t,
        ),
    ]
    return [{"name": GROUP_NAMES[0], "rules": groups}, {"name": GROUP_NAMES[1], "rules": mirror}]


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str)


def _dump(groups: list[dict[str, Any]]) -> str:
    return yaml.dump({"groups": groups}, Dumper=_Dumper, sort_keys=False, width=100_000, allow_unicode=True)


def rules_yaml(t: Thresholds | None = None) -> str:
    header = (
        "# Generated by `python -m dashboards.build` from dashboards/rules.py -- do not edit; override\n"
        "# thresholds with `python -m dashboards.build --rules-out FILE --set NAME=VALUE`\n"
        "# (docs/monitoring.md; the Helm chart takes them from its values).\n"
    )
    return header + _dump(rule_groups(t))


def rules_template() -> str:
    """The rules with a token where each threshold goes: what the Helm chart renders from its
    values (templates/prometheusrule.yaml replaces ``__T_<name>__`` with the value of
    ``prometheusRule.thresholds.<name>``, ``__S_<name>__`` with that duration in seconds,
    ``__T_up_matchers__`` with the ServiceMonitor's job and namespace, ``__T_runbook_url__`` with
    ``prometheusRule.runbookUrl``)."""
    header = (
        "# Generated by `python -m dashboards.build` from dashboards/rules.py -- do not edit. The rules\n"
        "# of dashboards/prometheus/alerts.yaml with tokens the chart's prometheusrule.yaml fills in.\n"
    )
    return header + _dump(_groups(_Tokens()))
