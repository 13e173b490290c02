"""The batch path: fold one group's micro-batch, a pandas frame shaped like ``decoders.OUTPUT_SCHEMA``.

This is what the streaming adapter calls from ``applyInPandasWithState``: one frame per group per
micro-batch (several chunks are concatenated by the caller), rows sorted by ``(source_partition,
source_offset)``.  Offset commits are ~99% of ``__consumer_offsets``, so a run of offset-commit rows
is applied column-wise: the columns are read once as Python lists and the loop does one tuple and
one dict store per row -- no typed record, no per-row pandas access.  Every other row goes through
``decoders.payload_to_record`` and the same `state.replay.apply_record` the per-record API uses;
a hypothesis property (tests/test_state/test_properties.py) asserts batch fold == per-record fold.

**Order.**  Rows are applied in log order: the frame is cut into runs of offset commits and single
other rows, and the runs are applied in sequence.  Nothing is reordered across a group record,
because that is where order is observable:

* a commit before a group tombstone keeps the id alive as a simple group (offsets survive their
  group object), after it creates one -- different events, different expiry rule;
* a classic group's Empty time (``currentStateTimestamp``) versus commit times decides Rule 2's
  base; a commit applied after the group record instead of before it could change which rule
  applies to it at the next sweep (e.g. a simple group becoming a consumer group);
* an offset tombstone is classified (expiry / admin delete / disagreement) against the group's
  state *at that position*.

**What the caller may collapse** (and the fold supports it, with an optional ``n_commits`` column
= how many commit values a row stands for): keeping only the newest offset-commit row per
(group, topic, partition) in a micro-batch, moved to that row's own position.  Only the newest
commit of a partition can be its stored value (newest log position wins), and every dropped row
sits *earlier* in the log than the kept one, so no kept row moves across a group record.  What it
changes, knowingly: the ``group_created`` event of a simple group is stamped with the first *kept*
commit; a dropped commit/tombstone pair of the same partition disappears (no ``offsets_deleted``
event for it, no disagreement check); ``records`` counts rows, ``commits`` counts ``n_commits``.
Commits must never be collapsed *across* a tombstone of the same partition into a row before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from decoders import payload_to_record
from decoders.records import DecodeError, Source, UnknownRecord
from state.expiry import check_pending, expire, next_deadline_ms
from state.model import Group, OffsetEntry
from state.replay import (
    FoldContext,
    FoldResult,
    apply_commit,
    apply_offset_tombstone,
    apply_record,
    create_simple,
    finish,
)
from state.settings import DEFAULT_SETTINGS, Settings

_COMMIT_TYPES = (0, 1)


HOT_COLUMNS = frozenset(
    {
        "status",
        "record_type",
        "group_id",
        "topic",
        "partition_num",
        "is_tombstone",
        "committed_offset",
        "leader_epoch",
        "metadata",
        "commit_timestamp_ms",
        "expire_timestamp_ms",
        "topic_id",
        "source_partition",
        "source_offset",
        "source_timestamp_ms",
        "n_commits",
    }
)


def columns(df: pd.DataFrame, want: frozenset[str] | None = None) -> dict[str, Any]:
    """Every column of ``df`` as its backing array (numpy 1-D view or pandas ExtensionArray).

    ``df[name]`` builds a Series per access (~20 us on a fresh frame, x14 columns = most of a
    50-row group's budget); walking the block manager once costs ~20 us for all columns.  The
    block manager is pandas-internal (stable through pandas 2.x, which pyproject pins), so any
    surprise falls back to the public per-column path -- a test asserts both agree.
    """
    try:
        out: dict[str, Any] = {}
        names = df.columns.tolist()
        for blk in df._mgr.blocks:
            vals = blk.values
            locs = blk.mgr_locs.as_array
            if getattr(vals, "ndim", 1) == 2:
                for j, loc in enumerate(locs.tolist()):
                    name = names[loc]
                    if want is None or name in want:
                        out[name] = vals[j]
            else:
                name = names[locs[0]]
                if want is None or name in want:
                    out[name] = vals
        if len(out) == (len(names) if want is None else len(want.intersection(names))):
            return out
    except (AttributeError, IndexError, TypeError):  # pragma: no cover - a future pandas
        pass
    return public_columns(df, want)


def public_columns(df: pd.DataFrame, want: frozenset[str] | None = None) -> dict[str, Any]:
    """The same through pandas' public API (the fallback, and the reference in tests)."""
    return {name: df[name].array for name in df.columns if want is None or name in want}


def _ints(cols: dict[str, Any], name: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None]:
    """(values as int64, null mask or None) for a pandas nullable, float-with-NaN or numpy column."""
    arr = cols[name]
    mask = getattr(arr, "_mask", None)  # pandas BaseMaskedArray (Int64, Int32, boolean ...)
    if mask is not None:
        return arr._data, (mask if mask.any() else None)
    values = np.asarray(arr)
    if values.dtype.kind == "f":  # Spark's Arrow->pandas: int columns with nulls become float64
        nan = np.isnan(values)
        if nan.all():
            return np.zeros(len(values), dtype=np.int64), nan
        return np.where(nan, 0, values).astype(np.int64), (nan if nan.any() else None)
    if values.dtype.kind == "O":  # object column of ints / None
        none = np.array([bool(pd.isna(v)) for v in values], dtype=bool)
        filled = np.array([0 if n else v for v, n in zip(values, none, strict=True)], dtype=np.int64)
        return filled, (none if none.any() else None)
    return values, None


def _opt_list(cols: dict[str, Any], name: str, lo: int, hi: int) -> list[Any]:
    """Python ints with None for nulls."""
    values, mask = _ints(cols, name)
    if mask is None:
        return values[lo:hi].tolist()  # type: ignore[no-any-return]
    m = mask[lo:hi]
    if m.all():
        return [None] * (hi - lo)
    out = values[lo:hi].tolist()
    for i in np.flatnonzero(m).tolist():
        out[i] = None
    return out  # type: ignore[no-any-return]


_STR_TYPES = frozenset({str, type(None)})


def _str_list(cols: dict[str, Any], name: str, lo: int, hi: int) -> list[Any]:
    """Python strings with None for nulls (None, NaN, pd.NA all mean null)."""
    out: list[Any] = np.asarray(cols[name], dtype=object)[lo:hi].tolist()
    if not set(map(type, out)) <= _STR_TYPES:  # C-level check; normalise only when needed
        out = [v if isinstance(v, str) else None for v in out]
    return out


def _bools(cols: dict[str, Any], name: str) -> np.ndarray[Any, Any]:
    """A boolean column as a numpy bool array (nulls -> False)."""
    arr = cols[name]
    mask = getattr(arr, "_mask", None)
    if mask is not None:
        return arr._data & ~mask  # type: ignore[no-any-return]
    values = np.asarray(arr)
    if values.dtype.kind == "b":
        return values
    return np.array([v is True or v is np.True_ or v == 1 for v in values], dtype=bool)


def _commit_mask(cols: dict[str, Any]) -> np.ndarray[Any, Any]:
    rt, rt_mask = _ints(cols, "record_type")
    is_commit = rt <= 1
    if rt_mask is not None:
        is_commit &= ~rt_mask
    status = np.asarray(cols["status"], dtype=object)
    if not (status == "ok").all():
        is_commit &= status == "ok"
    return is_commit


def _source(row: Sequence[Any]) -> Source:
    return Source(int(row[0]), int(row[1]), int(row[2]))


def _other_row(df: pd.DataFrame, i: int, src: Source) -> Any:
    """A typed record (or an UnknownRecord / DecodeError stand-in) for a non-commit row."""
    status = df["status"].iat[i]
    rt_raw: Any = df["record_type"].iat[i]
    rt = None if pd.isna(rt_raw) else int(rt_raw)
    if status == "ok":
        payload: Any = df["payload"].iat[i]
        rec = payload_to_record(payload)
        # the payload carries its own source; the frame's columns are authoritative
        return rec if rec.source == src else _with_source(rec, src)
    if status == "unknown":
        return UnknownRecord(src, rt if rt is not None else -1, b"", None)
    gid = df["group_id"].iat[i]
    key = _GroupIdKey(gid) if isinstance(gid, str) else None
    pos: Any = df["error_position"].iat[i]
    return DecodeError(
        src,
        rt,
        None,
        str(df["error_part"].iat[i]),
        str(df["error_field"].iat[i]),
        -1 if pd.isna(pos) else int(pos),
        str(df["error_reason"].iat[i]),
        key=key,
    )


class _GroupIdKey:
    __slots__ = ("group_id",)

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id


def _with_source(rec: Any, src: Source) -> Any:
    from dataclasses import replace

    return replace(rec, source=src)


class _Frame:
    """One group's frame, its columns, and its source columns as Python lists (read once per fold)."""

    __slots__ = ("cols", "df", "n_commits", "so", "sp", "st")

    def __init__(
        self,
        df: pd.DataFrame,
        *,
        cols: dict[str, Any],
        sp: list[int],
        so: list[int],
        st: list[int],
        n_commits: list[int] | None,
    ) -> None:
        self.df = df
        self.cols = cols
        self.sp = sp
        self.so = so
        self.st = st
        self.n_commits = n_commits


def _apply_commit_run(g: Group | None, f: _Frame, lo: int, hi: int, ctx: FoldContext) -> Group | None:
    """Apply rows [lo, hi) -- all offset commits (values or tombstones), positions already filtered."""
    df, cols, sp, so, st, n_commits = f.df, f.cols, f.sp, f.so, f.st, f.n_commits
    topics = _str_list(cols, "topic", lo, hi)
    parts = _opt_list(cols, "partition_num", lo, hi)
    tomb = _bools(cols, "is_tombstone")[lo:hi]
    offs = _opt_list(cols, "committed_offset", lo, hi)
    les = _opt_list(cols, "leader_epoch", lo, hi)
    mds = _str_list(cols, "metadata", lo, hi)
    cts = _opt_list(cols, "commit_timestamp_ms", lo, hi)
    ets = _opt_list(cols, "expire_timestamp_ms", lo, hi)
    tids = _str_list(cols, "topic_id", lo, hi)
    counts = n_commits[lo:hi] if n_commits is not None else None
    if (g is None or not g.pending) and not tomb.any():
        if g is None:
            g = Group(str(np.asarray(cols["group_id"], dtype=object)[lo]))
        if g.kind is None:
            create_simple(g, (sp[lo], so[lo], st[lo]), ctx)
        # The hot path: no Python loop -- dict.update over zipped columns runs in C.
        g.offsets.update(
            zip(
                zip(topics, parts, strict=True),
                zip(offs, les, mds, cts, ets, tids, sp[lo:hi], so[lo:hi], strict=True),
                strict=True,
            )
        )
        if tids.count(None) != hi - lo:
            g.topic_names.update({tid: t for tid, t in zip(tids, topics, strict=True) if tid is not None})
        n = hi - lo
        committed = sum(counts) if counts is not None else n
        ctx.commits += committed
        g.counters["commits"] += committed
        ctx.committed.update(zip(topics, parts, strict=True))
        ctx.commit_topics.update(topics)
        last = (sp[hi - 1], so[hi - 1], st[hi - 1])
        ctx.last_src["commit"] = last
        g.counters["records"] += n
        g.last_position = (last[0], last[1])
        g.last_change_ms = last[2]
        return g
    for i in range(hi - lo):
        src = (sp[lo + i], so[lo + i], st[lo + i])
        if g is None:
            g = Group(str(df["group_id"].iat[lo + i]))
        if g.pending:
            check_pending(g, src[2], ctx.settings, ctx.events, (src[0], src[1]))
        tp = (topics[i], parts[i])
        if tomb[i]:
            apply_offset_tombstone(g, tp, src, ctx)
        else:
            entry: OffsetEntry = (offs[i], les[i], mds[i], cts[i], ets[i], tids[i], src[0], src[1])
            if g.kind is None:
                create_simple(g, src, ctx)
            apply_commit(g, tp, entry, src, ctx)
            c = counts[i] if counts is not None else 1
            ctx.commits += c
            g.counters["commits"] += c
        if g.kind is None and not g.offsets and not g.pending:
            g = None  # as apply_record: nothing left for this id
            continue
        g.counters["records"] += 1
        g.last_position = (src[0], src[1])
        g.last_change_ms = src[2]
    return g


def fold_frame(
    group: Group | None,
    df: pd.DataFrame,
    *,
    group_id: str | None = None,
    settings: Settings = DEFAULT_SETTINGS,
) -> FoldResult:
    """Fold one group's rows (OUTPUT_SCHEMA columns, sorted by source partition/offset; optional
    ``n_commits``) into ``group``.  Same result as `state.replay.fold` over the decoded records."""
    ctx = FoldContext(settings)
    g = group
    cols = columns(df, HOT_COLUMNS)
    sp_v, _ = _ints(cols, "source_partition")
    n = len(sp_v)
    if n == 0:
        return finish(g, ctx)
    so_v, _ = _ints(cols, "source_offset")
    st_v, _ = _ints(cols, "source_timestamp_ms")
    lo = 0
    if g is not None and g.last_position is not None:
        # idempotence: skip what the group already applied (rows are sorted)
        last = g.last_position
        while lo < n and (int(sp_v[lo]), int(so_v[lo])) <= last:
            lo += 1
        if lo == n:
            return finish(g, ctx)
    sp: list[int] = sp_v.tolist()
    so: list[int] = so_v.tolist()
    st: list[int] = st_v.tolist()
    is_commit = _commit_mask(cols)
    n_commits = None
    if "n_commits" in cols:
        nc, nc_mask = _ints(cols, "n_commits")
        n_commits = np.where(nc_mask, 1, nc).tolist() if nc_mask is not None else nc.tolist()
    if is_commit[lo:].all():
        g = _apply_commit_run(g, _Frame(df, cols=cols, sp=sp, so=so, st=st, n_commits=n_commits), lo, n, ctx)
        return finish(g, ctx)
    frame = _Frame(df, cols=cols, sp=sp, so=so, st=st, n_commits=n_commits)
    i = lo
    while i < n:
        if is_commit[i]:
            j = i
            while j < n and is_commit[j]:
                j += 1
            g = _apply_commit_run(g, frame, i, j, ctx)
            i = j
        else:
            src = Source(sp[i], so[i], st[i])
            g = apply_record(g, _other_row(df, i, src), ctx, group_id)
            i += 1
    return finish(g, ctx)


def step(
    group: Group | None,
    df: pd.DataFrame | None,
    now_ms: int,
    *,
    group_id: str | None = None,
    settings: Settings = DEFAULT_SETTINGS,
) -> tuple[Group | None, list[Any], int | None]:
    """What the adapter calls per group and trigger: fold the rows (if any), then apply the expiry
    rules at ``now_ms``.  Returns ``(group or None, events, next deadline or None)`` -- ``None``
    group: remove the state row; deadline: set the timeout to ``deadline - now_ms``."""
    events: list[Any] = []
    g = group
    if df is not None and len(df):
        res = fold_frame(g, df, group_id=group_id, settings=settings)
        g = res.group
        events.extend(res.events)
    if g is not None:
        g, more = expire(g, now_ms, settings)
        events.extend(more)
    return g, events, (None if g is None else next_deadline_ms(g, settings))
