"""Prometheus exposition of the mirror, written at scrape time from the groups' state.

Nothing is registered per group: every scrape walks the store's groups, so a deleted group's
series vanish from the next scrape without bookkeeping.  What a scrape reads and what it costs at
10k groups x 50 partitions:

* a `GroupNumbers` per group -- the numbers and label values its series need (state, epochs,
  counters; committed offsets, commit times and expiry deadlines as int arrays) -- decoded from the
  group's state bytes (`state.codec`), never from its rendered HTTP snapshot (the owner labels of
  ``kafka_consumergroup_group_offset`` too: from the decoded members' assignments).  It is built when a
  scrape first meets the group's current bytes and kept while the store holds that same bytes
  object (the sink replaces a group's bytes only when the group changed), so a scrape decodes only
  the groups that changed.  It holds no exposition text: ~2 KB for 50 partitions where the text
  is ~30 KB, and arrays rather than tuples (millions of GC-tracked objects would cost the
  collector's full-heap passes more than rendering);
* the text, written at every scrape straight from those numbers (~0.15 us a line --
  prometheus_client's `generate_latest` formats each sample in Python at ~5 us) into one buffer
  that becomes the response body without a copy;
* time-dependent series (seconds to the next expiry, offsets expiring within 1h/24h) from each
  view's sorted deadlines with a bisect;
* families other modules compute (`MirrorMetrics.providers`), written after the mirror's own;
* the lag families (`streaming.serving.lag_metrics`) last: that text changes only when a round
  of log offsets lands or a group changes, and is cached in between.

The exporter's inputs are typed and handed in by the composition root (`streaming.app.mirror`):
the store, the run status (`streaming.serving.run_status`: observed counts, progress history,
whether the query runs), the lag exporter and the share-state store.  The per-group writer lives
in `streaming.serving.group_series`.

Names, types, help and labels come from `streaming.serving.catalogue` only.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from state.config import OffsetConfig
from state.events import EVENT_TYPES
from streaming.serving.catalogue import (
    BATCH_DURATION_BUCKETS,
    BY_NAME,
    MIRROR_METRICS,
    PART_STATES,
    PREVIEW_DELAY_BUCKETS,
    REBALANCE_DURATION_BUCKETS,
    REBALANCE_PHASES,
    SHARE_METRICS,
    VERSIONED_RECORD_TYPES,
    MetricDef,
    record_type_label,
)
from streaming.serving.group_series import Body, GroupNumbers, Samples, write_groups
from streaming.serving.lag_metrics import LagExporter
from streaming.serving.run_status import RunStatus
from streaming.serving.share import ShareStateStore, share_families
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore
from streaming.serving.text_format import escape, fmt
from streaming.settings import Settings

__all__ = ["GroupNumbers", "MirrorMetrics", "Samples", "exposition", "openmetrics_exposition"]

#: a family another module contributes: its catalogue entry and its samples (all label values)
Family = tuple[MetricDef, Samples]
#: called at every scrape (under the exporter's lock) for the families it contributes
SampleProvider = Callable[[], Iterable[Family]]

_REBALANCE_HISTOGRAM: Final = "coordinator_mirror_rebalance_duration_seconds"


class MirrorMetrics:
    """The per-mirror exporter state: the group views and what is folded from query progress."""

    def __init__(
        self,
        settings: Settings,
        config: OffsetConfig,
        store: SnapshotStore,
        status: MirrorStatus,
        run: RunStatus,
        *,
        lag: LagExporter | None = None,
        share: ShareStateStore | None = None,
    ) -> None:
        self.store = store
        self.status = status
        self.run = run
        #: the lag families (their own cached text); None: the mirror reads no lag
        self.lag = lag
        #: __share_group_state's groups (issue 26); None: no share families' samples
        self.share = share
        self.cluster: str = settings.cluster_name
        self.per_partition: bool = bool(settings.metrics_per_partition)
        regex = settings.metrics_group_regex
        self.group_regex: re.Pattern[str] | None = re.compile(regex) if regex else None
        #: the state layer's configuration the mirror built once (expiry deadlines)
        self.config = config
        self.behind_ms = int(settings.commit_behind_s * 1000)
        self.default_assignor: str = settings.default_server_assignor
        #: families computed elsewhere, written after the mirror's own at every scrape
        self.providers: list[SampleProvider] = []
        self.start_time = time.time()
        self._lock = threading.Lock()
        self._views: dict[str, GroupNumbers] = {}
        # folded from the run status's progress history (which keeps the last 100 batches only)
        self._last_batch_id = -1
        self.batches = 0
        self.input_rows = 0
        self.buckets = [0] * len(BATCH_DURATION_BUCKETS)
        self.duration_sum = 0.0
        self.phase_seconds: dict[str, float] = {}
        self.last_series = 0
        self.last_render_seconds = 0.0
        self._last_size = 0

    # -- groups ------------------------------------------------------------------------------
    def _wants_partitions(self, group_id: str) -> bool:
        if not self.per_partition:
            return False
        return self.group_regex is None or self.group_regex.search(group_id) is not None

    def views(self) -> list[GroupNumbers]:
        """Current views, one per group in the store; a group whose bytes did not change keeps its view."""
        old = self._views
        new: dict[str, GroupNumbers] = {}
        for gid, blob in self.store.states():
            v = old.get(gid)
            if v is None or v.blob is not blob:
                v = GroupNumbers(
                    gid,
                    blob,
                    self.config,
                    self.default_assignor,
                    self._wants_partitions(gid),
                    behind_ms=self.behind_ms,
                )
            new[gid] = v
        self._views = new
        return list(new.values())

    # -- the mirror --------------------------------------------------------------------------
    def _fold_progress(self) -> dict[str, Any] | None:
        history = self.run.history()
        for entry in history:
            if entry["batch_id"] <= self._last_batch_id:
                continue
            self._last_batch_id = entry["batch_id"]
            self.batches += 1
            self.input_rows += int(entry.get("input_rows") or 0)
            durations = entry.get("duration_ms") or {}
            seconds = durations.get("triggerExecution", 0) / 1000
            self.duration_sum += seconds
            for i, bound in enumerate(BATCH_DURATION_BUCKETS):
                if seconds <= bound:
                    self.buckets[i] += 1
            for phase, ms in durations.items():
                self.phase_seconds[phase] = self.phase_seconds.get(phase, 0.0) + ms / 1000
        return history[-1] if history else None

    def mirror_samples(self, views: Sequence[GroupNumbers]) -> dict[str, Samples]:
        store = self.store
        c = self.cluster
        obs = self.run.observed_counts()
        status = self.status.view()
        out: dict[str, Samples] = {}
        out["coordinator_mirror_start_time_seconds"] = [((c,), self.start_time)]
        out["coordinator_mirror_ready"] = [((c,), 1 if status.ready else 0)]
        healthy = self.run.healthy(status.failure)
        out["coordinator_mirror_query_healthy"] = [((c,), 1 if healthy else 0)]
        out["coordinator_mirror_query_restarts_total"] = [((c,), status.query_restarts)]
        out["coordinator_mirror_source_up"] = [((c,), 1 if status.source_up else 0)]
        share = status.parts.get("share_state")
        out["coordinator_mirror_share_state_query_state"] = (
            [((c, state), 1 if share.state == state else 0) for state in PART_STATES]
            if share is not None and share.state != "off"
            else []
        )
        out["coordinator_mirror_share_state_query_restarts_total"] = [
            ((c,), share.restarts if share is not None else 0)
        ]
        out["coordinator_mirror_share_state_query_failures_total"] = [
            ((c,), share.failures if share is not None else 0)
        ]
        out["coordinator_mirror_groups_quarantined"] = [((c,), len(store.quarantined))]
        out["coordinator_mirror_preview_groups_total"] = [
            ((c, outcome), n) for outcome, n in store.preview_counts.items()
        ]
        out["coordinator_mirror_preview_ahead_groups"] = [((c,), store.ahead())]
        out["coordinator_mirror_reconcile_mismatches"] = [
            ((c, side), len(status.mismatches.get(side, ())))
            for side in ("missing_in_coordinator", "missing_in_mirror")
        ]
        out["coordinator_mirror_reconcile_rounds_total"] = [
            ((c, outcome), status.reconcile_rounds.get(outcome, 0))
            for outcome in ("ok", "error", "not_authorized")
        ]
        out["coordinator_mirror_drift_suspected_total"] = [
            ((c, reason), status.drift_suspected.get(reason, 0)) for reason in ("log_start", "downtime")
        ]
        out["coordinator_mirror_catchup_progress_ratio"] = [((c,), status.progress)]
        behind = status.behind
        out["coordinator_mirror_partition_records_behind"] = [
            ((c, str(p)), n) for p, n in sorted(behind.items())
        ]
        out["coordinator_mirror_records_behind"] = [((c,), sum(behind.values()))]
        out["coordinator_mirror_records_read_total"] = [((c,), obs.get("records", 0))]
        out["coordinator_mirror_records_total"] = _records_by_type(c, obs)
        out["coordinator_mirror_prepared_rows_total"] = [((c,), obs.get("rows", 0))]
        out["coordinator_mirror_offset_commits_total"] = [((c,), obs.get("commits", 0))]
        out["coordinator_mirror_offset_tombstones_total"] = [((c,), obs.get("offset_tombstones", 0))]
        out["coordinator_mirror_decode_errors_total"] = [((c,), obs.get("errors", 0))]
        out["coordinator_mirror_unknown_records_total"] = [((c,), obs.get("unknown", 0))]
        tallies = self.status.tallies()
        out["coordinator_mirror_skipped_records_total"] = [
            ((c, *k[1:]), n) for k, n in sorted(tallies.items()) if k[0] == "skipped"
        ]
        out["coordinator_mirror_events_total"] = _seeded(c, tallies, "event", EVENT_TYPES)
        out["coordinator_mirror_offsets_expired_total"] = _seeded(
            c, tallies, "offsets_expired", ("mirror", "broker")
        )
        out["coordinator_mirror_groups_deleted_total"] = _seeded(
            c, tallies, "group_deleted", ("tombstone", "expired")
        )
        out["coordinator_mirror_fold_failures_total"] = _seeded(c, tallies, "fold_failure", ())
        by_state = Counter((v.state, v.kind) for v in views)
        out["coordinator_mirror_groups"] = [((c, s, k), n) for (s, k), n in sorted(by_state.items())]
        last = self._fold_progress()
        out["coordinator_mirror_batches_total"] = [((c,), self.batches)]
        out["coordinator_mirror_input_rows_total"] = [((c,), self.input_rows)]
        out["coordinator_mirror_batch_input_rows"] = [((c,), int(last["input_rows"]))] if last else []
        out["coordinator_mirror_batch_phase_seconds_total"] = [
            ((c, phase), s) for phase, s in sorted(self.phase_seconds.items())
        ]
        finished = status.last_batch.finished_at_ms
        out["coordinator_mirror_last_batch_timestamp_seconds"] = [((c,), finished / 1000)] if finished else []
        triggered = status.last_trigger_ms
        out["coordinator_mirror_last_trigger_timestamp_seconds"] = (
            [((c,), triggered / 1000)] if triggered else []
        )
        out["coordinator_mirror_state_rows"] = [((c,), sum(last["state_rows"]))] if last else []
        out["coordinator_mirror_state_bytes"] = [((c,), sum(last["state_bytes"]))] if last else []
        out["coordinator_mirror_exporter_series"] = [((c,), self.last_series)]
        out["coordinator_mirror_exporter_render_seconds"] = [((c,), self.last_render_seconds)]
        return out

    def histogram_samples(
        self, name: str = "coordinator_mirror_batch_duration_seconds"
    ) -> list[tuple[str, dict[str, str], float]]:
        if name == _REBALANCE_HISTOGRAM:
            return self.rebalance_histogram()
        c = self.cluster
        if name == "coordinator_mirror_preview_delay_seconds":
            counts, total, n = self.store.preview_delay()
            samples = [
                (f"{name}_bucket", {"cluster_name": c, "le": fmt_le(b)}, float(k))
                for b, k in zip(PREVIEW_DELAY_BUCKETS, counts, strict=True)
            ]
            return [
                *samples,
                (f"{name}_bucket", {"cluster_name": c, "le": "+Inf"}, float(n)),
                (f"{name}_sum", {"cluster_name": c}, total),
                (f"{name}_count", {"cluster_name": c}, float(n)),
            ]
        out = [
            (f"{name}_bucket", {"cluster_name": c, "le": fmt_le(b)}, float(n))
            for b, n in zip(BATCH_DURATION_BUCKETS, self.buckets, strict=True)
        ]
        out.append((f"{name}_bucket", {"cluster_name": c, "le": "+Inf"}, float(self.batches)))
        out.append((f"{name}_sum", {"cluster_name": c}, self.duration_sum))
        out.append((f"{name}_count", {"cluster_name": c}, float(self.batches)))
        return out

    def share_samples(self) -> list[Family]:
        """The share families (issue 26), from the mirror's `ShareStateStore` (none: no samples):
        share-partitions named with the lag tracker's topic names, lag against its latest round."""
        store = self.share
        if store is None or self.lag is None:
            return [(m, []) for m in SHARE_METRICS]
        lag = self.lag.tracker

        def names() -> dict[str, str]:
            return dict(lag.topic_names)

        def ends() -> dict[tuple[str, int], int]:
            r = lag.round
            return {} if r is None else {tp: e.high_watermark for tp, e in r.partitions.items()}

        return share_families(store, self.cluster, names, ends, self._wants_partitions)

    def rebalance_histogram(self) -> list[tuple[str, dict[str, str], float]]:
        """`coordinator_mirror_rebalance_duration_seconds` from the timed rebalances' tallies
        (`streaming.pipeline.sinks.observe_rebalance`), per kind and phase seen."""
        tallies = self.status.tallies()
        seen = sorted(
            {(k[1], k[2]) for k in tallies if k[0] == "rebalance_seconds"},
            key=lambda kp: (kp[0], REBALANCE_PHASES.index(kp[1]) if kp[1] in REBALANCE_PHASES else 99, kp[1]),
        )
        name = _REBALANCE_HISTOGRAM
        out: list[tuple[str, dict[str, str], float]] = []
        for kind, phase in seen:
            labels = {"cluster_name": self.cluster, "kind": kind, "phase": phase}
            base = ("rebalance_seconds", kind, phase)
            count = float(tallies.get((*base, "count"), 0))
            for bound in REBALANCE_DURATION_BUCKETS:
                n = tallies.get((*base, f"le:{bound}"), 0)
                out.append((f"{name}_bucket", {**labels, "le": fmt_le(bound)}, float(n)))
            out.append((f"{name}_bucket", {**labels, "le": "+Inf"}, count))
            out.append((f"{name}_sum", labels, tallies.get((*base, "sum_ms"), 0) / 1000))
            out.append((f"{name}_count", labels, count))
        return out

    # -- the exposition ----------------------------------------------------------------------
    def exposition(self) -> bytes:
        """The text format (version 0.0.4)."""
        with self._lock:
            started = time.perf_counter()
            now_ms = int(time.time() * 1000)
            views = self.views()
            body = Body(self._last_size + self._last_size // 8 + 2**16 if self._last_size else 0)
            write_groups(body, views, self.cluster, now_ms)
            mirror = self.mirror_samples(views)
            for m in MIRROR_METRICS:
                body.header(m)
                if m.type == "histogram":
                    for sname, labels, value in self.histogram_samples(m.name):
                        ls = ",".join(f'{k}="{escape(x)}"' for k, x in labels.items())
                        body.parts.append(f"{sname}{{{ls}}} {fmt(value)}\n")
                        body.series += 1
                else:
                    body.samples(m, mirror[m.name])
            for provider in (*self.providers, self.share_samples):
                for m, samples in provider():
                    body.header(m)
                    body.samples(m, samples)
            # the lag families: their own cached text, written into the same buffer so the body
            # is never copied; their series count too (at 10k groups x 50 partitions they are
            # 3 M of the 4.3 M)
            body.flush()
            lag_series = 0
            if self.lag is not None:
                body.out.write(self.lag.exposition())
                lag_series = self.lag.last_series
            out = body.getvalue()
            self._last_size = len(out)
            self.last_series = body.series + lag_series
            self.last_render_seconds = time.perf_counter() - started
            return out


def fmt_le(bound: float) -> str:
    """Bucket bounds as prometheus_client writes them (``1.0``, ``0.25``)."""
    return repr(float(bound))


def _records_by_type(cluster: str, obs: dict[str, int]) -> Samples:
    out: Samples = []
    for key, n in obs.items():
        if not n or not key.startswith("type_") or "_v" in key:
            continue
        k = int(key[5:])
        versions = VERSIONED_RECORD_TYPES.get(k, ())
        label = record_type_label(k)
        counted = 0
        for ver in versions:
            nv = obs.get(f"type_{k}_v{ver}", 0)
            if nv:
                out.append(((cluster, label, str(ver)), nv))
                counted += nv
        if n - counted:
            out.append(((cluster, label, "other"), n - counted))
    return sorted(out)


def _seeded(cluster: str, tallies: dict[tuple[str, ...], int], kind: str, seed: Iterable[str]) -> Samples:
    """Counters whose label values are known in advance start at 0 (so ``increase()`` sees the
    first occurrence), plus any other value that turned up."""
    values = dict.fromkeys(seed, 0)
    for key, n in tallies.items():
        if key[0] == kind:
            values[key[1]] = values.get(key[1], 0) + n
    return [((cluster, k), n) for k, n in sorted(values.items())]


#: the text format's content type (version 0.0.4)
TEXT_CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4
OPENMETRICS_CONTENT_TYPE: Final = "application/openmetrics-text; version=1.0.0; charset=utf-8"
#: "# HELP x_total" / "# TYPE x_total counter": OpenMetrics names a counter family without _total
_COUNTER_HEADER: Final = re.compile(rb"^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*)_total\b", re.MULTILINE)


def to_openmetrics(text: bytes) -> bytes:
    """The text format (0.0.4) as OpenMetrics 1.0: for the series of this catalogue the two differ
    only in the counter families' names (without ``_total`` in HELP and TYPE; samples keep it) and
    the closing ``# EOF``."""
    counters = {m.name.encode() for m in BY_NAME.values() if m.type == "counter"}

    def family(match: re.Match[bytes]) -> bytes:
        name = match.group(2) + b"_total"
        return b"# %s %s" % (match.group(1), match.group(2) if name in counters else name)

    return _COUNTER_HEADER.sub(family, text) + b"# EOF\n"


def openmetrics_exposition(metrics: MirrorMetrics) -> tuple[bytes, str]:
    """``(body, content type)`` in OpenMetrics 1.0, for scrapers that ask for it."""
    return to_openmetrics(metrics.exposition()), OPENMETRICS_CONTENT_TYPE


def exposition(metrics: MirrorMetrics) -> tuple[bytes, str]:
    """``(body, content type)`` for ``GET /metrics``."""
    return metrics.exposition(), CONTENT_TYPE_PLAIN_0_0_4
