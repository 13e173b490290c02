"""Synthetic but real mirrors for the exporter's tests and `bench/series.py`.

Groups are built the way the mirror builds them: typed `decoders` records (the state tests'
`Log` builder) folded by `state.replay.fold`, then applied to a real `SnapshotStore` as the query's
sink applies them -- state bytes (`state.codec`) and summary.  `exporter` builds the real exporter
(`streaming.serving.metrics.MirrorMetrics`) over the real inputs `streaming.app.mirror.Mirror`
hands it: store, run status, lag exporter (`feed_lag` feeds its tracker and Burrow evaluator).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from lab.records import DAY, HOUR, MIN, Log, cm, tip
from state import codec
from state.config import OffsetConfig
from state.model import Group
from state.replay import fold
from state.snapshot import summary
from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.health.retention import RetentionWatch
from streaming.serving.burrow import Burrow
from streaming.serving.lag_metrics import LagExporter
from streaming.serving.metrics import MirrorMetrics
from streaming.serving.render import snapshot_renderer
from streaming.serving.run_status import RunStatus
from streaming.serving.share import ShareStateStore
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore
from streaming.settings import Settings, load_settings

#: 7-day retention, 4.x rules (Kafka's defaults)
STATE_SETTINGS = OffsetConfig(retention_ms=7 * DAY, semantics="4.x", confirm_grace_ms=11 * MIN)
#: the driver's renderer for the same settings (state bytes -> snapshot, as `streaming.serving.store` uses it)
RENDERER = snapshot_renderer(STATE_SETTINGS, "uniform")


def exporter(
    settings: Settings, store: SnapshotStore | None = None, status: MirrorStatus | None = None
) -> MirrorMetrics:
    """The real exporter over real inputs, wired as `Mirror` wires them: a store, a status, a run status
    (observed counts, progress history; no query: healthy while no failure is recorded), the lag
    tracker, Burrow evaluator and lag exporter (`feed_lag` feeds them), an empty share store."""
    lag = LagTracker(settings.lag_isolation, settings.lag_lookup_points)
    burrow = Burrow(lag, settings.cluster_name, settings.burrow_intervals, 0)
    return MirrorMetrics(
        settings,
        STATE_SETTINGS,
        store if store is not None else SnapshotStore(renderer=RENDERER),
        status if status is not None else MirrorStatus(),
        RunStatus(),
        lag=LagExporter(lag, burrow, settings, retention=RetentionWatch(lag)),
        share=ShareStateStore(),
    )


def tracker_of(m: MirrorMetrics) -> tuple[LagTracker, Burrow]:
    """The lag tracker and Burrow evaluator behind an `exporter`."""
    assert m.lag is not None and m.lag.burrow is not None
    return m.lag.tracker, m.lag.burrow


def feed_lag(
    m: MirrorMetrics,
    groups: Iterable[Group],
    deleted_topics: Iterable[str] = (),
    denied_topics: Iterable[str] = (),
    *,
    moving: bool = False,
) -> None:
    """The groups into the lag tracker and Burrow's window, then two rounds of log offsets
    (10 s apart, every end at 2000 then 2100; ``deleted_topics`` missing from the cluster,
    ``denied_topics`` not readable by the mirror's principal) and one evaluation: every lag
    family gets samples.  ``moving``: between the rounds each group commits again 5 s after its
    commits, 200 records on (catching up) -- every other group only 4 on its odd partitions
    (falling behind, the retention margin closing) -- and the second round's log start passes the
    first partition's committed offset (records lost to retention): the issue-38 families."""
    lag, burrow = tracker_of(m)
    groups = list(groups)
    now_ms = int(time.time() * 1000)
    if moving:  # commits of 10 and 5 seconds ago: a live consumer's rate
        groups = [moved(g, 0, now_ms - 10_000, slow=False) for g in groups]
    views = lag.apply_groups((g.group_id, g) for g in groups)
    burrow.history.record(views, lag)
    gone = frozenset(deleted_topics)
    denied = frozenset(denied_topics)
    wanted = sorted(tp for tp in lag.wanted() if tp[0] not in gone | denied)
    for k, at_ms in enumerate((now_ms - 10_000, now_ms)):
        end = 2000 + 100 * k
        parts = {tp: PartitionEnds(3, end, end) for tp in wanted}
        if moving and k == 1:
            views = lag.apply_groups(
                (g.group_id, moved(g, 200, now_ms - 5000, slow=i % 2 == 1)) for i, g in enumerate(groups)
            )
            burrow.history.record(views, lag)
            first = next((tp for tp in wanted if any(tp in v.offsets for _, v in views if v)), None)
            if first is not None:
                parts[first] = PartitionEnds(end - 10, end, end)
        lag.apply_round(
            LogOffsets(at_ms, parts, {}, gone, round_seconds=0.01, requests=4, denied_topics=denied)
        )
    burrow.evaluate_all(now_ms)


def moved(g: Group, by: int, at_ms: int, *, slow: bool) -> Group:
    """``g`` committing again at ``at_ms``: every partition ``by`` records further -- or, ``slow``,
    the odd ones only 4 (`feed_lag`'s ``moving``)."""
    out = g.copy()
    out.offsets = {
        tp: (e[0] + (4 if slow and tp[1] % 2 else by), *e[1:3], at_ms, *e[4:]) for tp, e in g.offsets.items()
    }
    return out


def add_progress(m: MirrorMetrics, batch_id: int, input_rows: int, trigger_ms: int, **phases: int) -> None:
    """One completed batch into the run status, as the progress follower adds it."""
    m.run.add_batch(
        {
            "batch_id": batch_id,
            "input_rows": input_rows,
            "duration_ms": {"triggerExecution": trigger_ms, **phases},
            "timestamp": "",
            "state_rows": [len(m.store)],
            "state_bytes": [1000 * len(m.store)],
        }
    )


def settings(**overrides: Any) -> Settings:
    base: dict[str, Any] = {"bootstrap_servers": "localhost:9092", "cluster_name": "synthetic"}
    return load_settings(**{**base, **overrides})


def to_store_row(g: Group) -> tuple[str, bytes, dict[str, Any]]:
    """A group as the sink applies it: state bytes and summary."""
    return g.group_id, codec.encode(g), summary(g, STATE_SETTINGS)


def stable_classic(
    group_id: str, partitions: int, topics: int = 2, members: int = 2, generation: int = 3
) -> Group:
    """A Stable classic consumer group with ``partitions`` committed offsets over ``topics`` topics."""
    log = Log(partition=hash(group_id) % 50)
    names = [f"{group_id}.t{j}" for j in range(topics)]
    ms = [cm(f"{group_id}-m{i}", names, instance_id=None) for i in range(members)]
    for gen in range(1, generation + 1):
        log.tick(MIN).classic(group_id, gen, ms, protocol="cooperative-sticky")
    for p in range(partitions):
        log.commit(group_id, names[p % topics], p // topics, 1000 + p)
    g = fold(None, log.records, group_id=group_id).group
    assert g is not None
    return g


def empty_classic(group_id: str, partitions: int, idle_ms: int) -> Group:
    """A classic group whose last member left ``idle_ms`` ago (wall clock): its offsets expire
    (Rule 2) 7 days after that."""
    left_at = int(time.time() * 1000) - idle_ms
    log = Log(partition=hash(group_id) % 50, now_ms=left_at - HOUR)
    log.classic(group_id, 1, [cm(f"{group_id}-m0", ["e"])])
    for p in range(partitions):
        log.commit(group_id, "e", p, 5 + p)
    log.tick(HOUR).classic(group_id, 2, [])
    g = fold(None, log.records, group_id=group_id).group
    assert g is not None
    return g


def abandoning_classic(group_id: str) -> Group:
    """A Stable classic group whose member left a topic it had committed to (issue 26: abandoned
    offsets, their lag apart), timed rebalances and a commit window of a minute."""
    log = Log(partition=hash(group_id) % 50)
    log.new_empty_group(group_id)
    log.tick(200).classic(group_id, 1, [cm(f"{group_id}-m0", ["a.t", "old.t"])], state_ts=log.now_ms - 50)
    for i in range(12):
        log.commit(group_id, "a.t", 0, 10 + i)
        log.commit(group_id, "old.t", 0, 3)
        log.tick(5_000)
    log.tick(MIN).classic(group_id, 2, [cm(f"{group_id}-m0", ["a.t"])], state_ts=log.now_ms - 20)
    g = fold(None, log.records, group_id=group_id).group
    assert g is not None
    return g


def kip848(group_id: str, partitions: int) -> Group:
    log = Log(partition=hash(group_id) % 50)
    log.k848_partition_metadata(group_id, {"TID": "k.t"})
    log.k848_stable_group(
        group_id, {"m1": (["k.t"], [tip("TID", *range(0, partitions, 2))]), "m2": (["k.t"], [tip("TID", 1)])}
    )
    for p in range(partitions):
        log.commit(group_id, "k.t", p, 7 + p, topic_id="TID")
    g = fold(None, log.records, group_id=group_id).group
    assert g is not None
    return g


def synthetic_groups(n_groups: int, partitions: int) -> Iterator[Group]:
    """A mixed population: 80% Stable classic, 15% Empty classic (expiring), 5% KIP-848."""
    template_stable = stable_classic("tmpl", partitions)
    for i in range(n_groups):
        gid = f"group-{i:05d}"
        if i % 20 == 0:
            yield kip848(gid, partitions)
        elif i % 20 < 4:
            yield empty_classic(gid, partitions, idle_ms=(i % 7) * HOUR)
        else:
            g = template_stable.copy()  # folding 500k records per run costs more than the bench
            g.group_id = gid
            yield g


def filled_store(n_groups: int, partitions: int) -> SnapshotStore:
    store = SnapshotStore(renderer=RENDERER)
    store.apply(0, (to_store_row(g) for g in synthetic_groups(n_groups, partitions)))
    return store
