"""Prometheus exposition of lag and consumer health (`streaming.serving.catalogue.LAG_METRICS`).

Rendered from the `LagTracker` (groups' committed offsets and owners, the latest round of log
offsets) and the Burrow evaluator.  The text only changes when a round lands or a group changes,
so it is rendered once per tracker version and served from that cache in between (a scrape
between two rounds costs nothing).  Per-partition series obey the same settings as the
committed-offset series (``metrics_per_partition``, ``metrics_group_regex``).
"""

from __future__ import annotations

import math
import re
import threading
import time
from typing import Any

from streaming.health.catch_up import STATES, group_estimate
from streaming.health.lag import LagTracker, PartitionLag, iter_lag
from streaming.health.retention import RetentionWatch
from streaming.serving import lag_view
from streaming.serving.burrow import Burrow
from streaming.serving.catalogue import LAG_METRICS
from streaming.serving.text_format import escape, fmt, header
from streaming.settings import Settings


class LagExporter:
    def __init__(
        self,
        tracker: LagTracker,
        burrow: Burrow | None,
        settings: Settings,
        *,
        retention: RetentionWatch | None = None,
    ) -> None:
        self.tracker = tracker
        self.burrow = burrow
        #: records lost to retention (issue 38); None: not counted
        self.retention = retention
        self.settings = settings
        self.cluster: str = settings.cluster_name
        self.per_partition = bool(settings.metrics_per_partition)
        regex = settings.metrics_group_regex
        self.group_regex = re.compile(regex) if regex else None
        self._lock = threading.Lock()
        #: the text of the last render, for scrapes until the tracker changes -- dropped at the
        #: next round (`_forget`): the next scrape renders anew anyway (a round changes the
        #: version), and at 10k groups x 50 partitions the text is ~330 MB the driver would
        #: otherwise hold between scrapes
        self._cached: tuple[int, int, int, bytes] | None = None
        tracker.listeners.append(self._forget)
        self.last_series = 0
        self.last_render_seconds = 0.0

    def _partitions_for(self, group_id: str) -> bool:
        if not self.per_partition:
            return False
        return self.group_regex is None or self.group_regex.search(group_id) is not None

    def exposition(self) -> bytes:
        t = self.tracker
        with self._lock:
            statuses = len(self.burrow.watcher.groups) if self.burrow is not None else 0
            lost = self.retention.version if self.retention is not None else 0
            key = (t.version, statuses, lost)
            if self._cached is not None and self._cached[:3] == key:
                return self._cached[3]
            started = time.perf_counter()
            body = self._render()
            self._cached = (*key, body)
            self.last_render_seconds = time.perf_counter() - started
            return body

    def _forget(self, _round: object) -> None:
        # no lock: a render in progress holds it for seconds, and the lag round must not wait; a
        # text a render stores after this carries the old version and is not served again
        self._cached = None

    def _render(self) -> bytes:
        t = self.tracker
        c = f'cluster_name="{escape(self.cluster)}"'
        out: dict[str, list[str]] = {m.name: [] for m in LAG_METRICS}
        r = t.round
        watcher = self.burrow.watcher if self.burrow is not None else None
        history = self.burrow.history if self.burrow is not None else None
        retention = self.retention
        topics: set[str] = set()
        for gid, view, all_rows in iter_lag(t):
            topics.update(x.topic for x in all_rows)
            g = f'{c},group="{escape(gid)}"'
            out["coordinator_mirror_group_lag_slo_seconds"].append(f"{g}}} {fmt(self.settings.lag_slo(gid))}")
            rows = all_rows
            abandoned = [x for x in all_rows if x.abandoned]
            if abandoned:  # a topic the members left: its lag apart from the group's (issue 26)
                rows = [x for x in all_rows if not x.abandoned]
                ghost: dict[str, float] = {}
                for x in abandoned:
                    if not math.isnan(x.lag):
                        ghost[x.topic] = ghost.get(x.topic, 0.0) + x.lag
                for topic, v in sorted(ghost.items()):
                    out["coordinator_mirror_group_abandoned_lag"].append(
                        f'{g},topic="{escape(topic)}"}} {fmt(v)}'
                    )
            finite = [x for x in rows if not math.isnan(x.lag)]
            if finite:
                out["kafka_consumergroup_group_max_lag"].append(f"{g}}} {fmt(max(x.lag for x in finite))}")
                out["kafka_consumergroup_group_sum_lag"].append(f"{g}}} {fmt(sum(x.lag for x in finite))}")
                by_topic: dict[str, float] = {}
                for x in finite:
                    by_topic[x.topic] = by_topic.get(x.topic, 0.0) + x.lag
                for topic, v in sorted(by_topic.items()):
                    out["kafka_consumergroup_group_topic_sum_lag"].append(
                        f'{g},topic="{escape(topic)}"}} {fmt(v)}'
                    )
            secs = [x.lag_seconds for x in rows if not math.isnan(x.lag_seconds)]
            if secs:
                out["kafka_consumergroup_group_max_lag_seconds"].append(f"{g}}} {fmt(max(secs))}")
            for topic in t.deleted_topics(view, all_rows):
                out["coordinator_mirror_topic_deleted"].append(f'{g},topic="{escape(topic)}"}} 1')
            for topic in t.denied_topics(view):
                out["coordinator_mirror_topic_not_authorized"].append(f'{g},topic="{escape(topic)}"}} 1')
            if watcher is not None and gid in watcher.groups:
                out["coordinator_mirror_consumer_status"].append(f"{g}}} {watcher.groups[gid]}")
            estimates = self._catch_up(out, g, history, gid, all_rows)
            if retention is not None:
                lost = retention.lost_of(gid)
                out["coordinator_mirror_group_records_lost_total"].append(f"{g}}} {sum(lost.values())}")
                for (topic, p), n in sorted(lost.items()):
                    out["coordinator_mirror_partition_records_lost_total"].append(
                        f'{g},topic="{escape(topic)}",partition="{p}"}} {n}'
                    )
            if not self._partitions_for(gid):
                continue
            for x, est in zip(all_rows, estimates, strict=True):
                if est.seconds is not None and lag_view.counted(x):
                    out["coordinator_mirror_partition_catch_up_seconds"].append(
                        f'{g},topic="{escape(x.topic)}",partition="{x.partition}"}} {fmt(est.seconds)}'
                    )
            part_status = watcher.partitions.get(gid, {}) if watcher is not None else None
            for x in rows:
                if x.end is None:
                    continue  # end unknown (deleted topic, not read yet): no lag series, as they evict
                labels = _partition_labels(g, x)
                out["kafka_consumergroup_group_lag"].append(f"{labels}}} {fmt(x.lag)}")
                out["kafka_consumergroup_group_lag_seconds"].append(f"{labels}}} {fmt(x.lag_seconds)}")
                if part_status is not None:
                    st = part_status.get((x.topic, x.partition))
                    if st is not None:
                        out["coordinator_mirror_consumer_partition_status"].append(
                            f'{g},topic="{escape(x.topic)}",partition="{x.partition}"}} {st}'
                        )
        if r is not None:
            for (topic, p), ends in sorted(r.partitions.items()):
                tp = f'{c},topic="{escape(topic)}",partition="{p}"}}'
                out["kafka_partition_latest_offset"].append(f"{tp} {ends.high_watermark}")
                if ends.earliest is not None:
                    out["kafka_partition_earliest_offset"].append(f"{tp} {ends.earliest}")
                out["coordinator_mirror_partition_stable_offset"].append(f"{tp} {ends.stable}")
            out["coordinator_mirror_lag_sample_timestamp_seconds"].append(
                f"{c}}} {fmt(r.sampled_at_ms / 1000)}"
            )
            out["coordinator_mirror_lag_round_seconds"].append(f"{c}}} {fmt(r.round_seconds)}")
            out["coordinator_mirror_lag_partitions"].append(f"{c}}} {len(r.partitions)}")
            for reason, n in t.unresolved_topic_ids(topics).items():
                out["coordinator_mirror_topic_ids_unresolved"].append(f'{c},reason="{reason}"}} {n}')
        out["coordinator_mirror_lag_rounds_total"] = [
            f'{c},outcome="ok"}} {t.rounds}',
            f'{c},outcome="failed"}} {t.failed_rounds}',
        ]
        parts: list[str] = []
        series = 0
        for m in LAG_METRICS:
            parts.append(header(m))
            lines = out[m.name]
            series += len(lines)
            parts.extend(f"{m.name}{{{line}\n" for line in lines)
        self.last_series = series
        return "".join(parts).encode("utf-8")

    def _catch_up(
        self,
        out: dict[str, list[str]],
        g: str,
        history: Any,
        gid: str,
        rows: list[PartitionLag],
    ) -> list[Any]:
        """The group's catch-up and retention-margin series (issue 38); the rows' estimates."""
        t = self.tracker
        estimates = lag_view.catch_up(t, history, gid, rows)
        mine = [i for i, x in enumerate(rows) if lag_view.counted(x)]
        est = group_estimate(estimates[i] for i in mine)
        for state in STATES:
            out["coordinator_mirror_group_catch_up_state"].append(
                f'{g},state="{state}"}} {1 if state == est.state else 0}'
            )
        if est.seconds is not None:
            out["coordinator_mirror_group_catch_up_seconds"].append(f"{g}}} {fmt(est.seconds)}")
        if est.consume_rate is not None:
            out["coordinator_mirror_group_consume_rate"].append(f"{g}}} {fmt(est.consume_rate)}")
        if est.produce_rate is not None:
            out["coordinator_mirror_group_produce_rate"].append(f"{g}}} {fmt(est.produce_rate)}")
        by_topic: dict[str, list[float | None]] = {}
        for i in mine:
            x, e = rows[i], estimates[i]
            rates = by_topic.setdefault(x.topic, [None, None])
            if e.consume_rate is not None:
                rates[0] = (rates[0] or 0.0) + e.consume_rate
            if e.produce_rate is not None:
                rates[1] = (rates[1] or 0.0) + e.produce_rate
        for topic, (consume, produce) in sorted(by_topic.items()):
            if consume is not None:
                out["coordinator_mirror_group_topic_consume_rate"].append(
                    f'{g},topic="{escape(topic)}"}} {fmt(consume)}'
                )
            if produce is not None:
                out["coordinator_mirror_group_topic_produce_rate"].append(
                    f'{g},topic="{escape(topic)}"}} {fmt(produce)}'
                )
        margins = lag_view.margins(t, rows, estimates)
        gm = lag_view.group_margin([margins[i] for i in mine])
        if gm is not None:
            out["coordinator_mirror_group_retention_margin_records"].append(f"{g}}} {gm.records}")
            if gm.seconds is not None:
                out["coordinator_mirror_group_retention_margin_seconds"].append(f"{g}}} {fmt(gm.seconds)}")
        return estimates


def _partition_labels(g: str, x: PartitionLag) -> str:
    o = x.owner
    return (
        f'{g},topic="{escape(x.topic)}",partition="{x.partition}",member_host="{escape(o.member_host)}",'
        f'consumer_id="{escape(o.consumer_id)}",client_id="{escape(o.client_id)}"'
    )
