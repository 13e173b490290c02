"""``GET /groups``: every group's summary joined with what the driver knows beside the state --
its cluster, the group's lag in messages and seconds at the newest lag round
(`streaming.health.lag_history.LagHistory`), Burrow's consumer status -- filtered, sorted and
paged on the server, so that a page of 50 rows out of 100k groups costs the browser 50 rows.

Without parameters it answers what it always did: every group, cluster after cluster, each's
sorted by id, ``count`` of them; the rows carry the joined fields too.  A bad parameter is a 400
naming it.  ``?cluster=`` is the API's own selection (`streaming.serving.api`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from streaming.health.rules import STATUS_NAMES

#: the fields ``sort`` accepts; a row without the field (null) sorts after every row with it
SORT_FIELDS: Final = (
    "group_id",
    "cluster",
    "kind",
    "state",
    "members",
    "offsets",
    "epoch",
    "lag",
    "lag_seconds",
    "consumer_status",
    "last_rebalance_ms",
    "last_change_ms",
)
#: at most this many rows in one page
MAX_LIMIT: Final = 10_000
_STATUS_CODES: Final = {name: code for code, name in enumerate(STATUS_NAMES)}


class BadParameterError(ValueError):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name

    def to_json(self) -> dict[str, Any]:
        return {"error": "bad_parameter", "parameter": self.name, "message": str(self)}


@dataclass(frozen=True)
class GroupsQuery:
    """The parameters of ``GET /groups`` (each filter optional; repeated values are alternatives)."""

    kinds: frozenset[str] = frozenset()
    states: frozenset[str] = frozenset()
    statuses: frozenset[str] = frozenset()
    name: str | None = None
    min_lag: int | None = None
    min_lag_seconds: float | None = None
    sort: str | None = None
    descending: bool = False
    offset: int = 0
    limit: int | None = None

    @classmethod
    def parse(cls, params: Callable[[str], Sequence[str]]) -> GroupsQuery:
        """From the query string (``params(name)``: every value given for ``name``)."""

        def one(name: str) -> str | None:
            values = list(params(name))
            if len(values) > 1:
                raise BadParameterError(name, f"{name}: given {len(values)} times, at most once")
            return values[0] if values else None

        def number(name: str, kind: type[int] | type[float], low: float, high: float | None = None) -> Any:
            text = one(name)
            if text is None:
                return None
            try:
                value = kind(text)
            except ValueError:
                raise BadParameterError(name, f"{name}: {text!r} is not a {kind.__name__}") from None
            if math.isnan(value) or math.isinf(value) or value < low or (high is not None and value > high):
                bound = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
                raise BadParameterError(name, f"{name}: {text!r} must be {bound}")
            return value

        sort = one("sort")
        if sort is not None and sort not in SORT_FIELDS:
            raise BadParameterError("sort", f"sort: {sort!r} is not one of {', '.join(SORT_FIELDS)}")
        order = one("order")
        order = "asc" if order is None else order
        if order not in ("asc", "desc"):
            raise BadParameterError("order", f"order: {order!r} is not asc or desc")
        statuses = frozenset(params("consumer_status"))
        unknown = sorted(statuses - set(STATUS_NAMES))
        if unknown:
            raise BadParameterError(
                "consumer_status", f"consumer_status: {unknown[0]!r} is not one of {', '.join(STATUS_NAMES)}"
            )
        return cls(
            kinds=frozenset(params("kind")),
            states=frozenset(params("state")),
            statuses=statuses,
            name=one("q"),
            min_lag=number("min_lag", int, 0),
            min_lag_seconds=number("min_lag_seconds", float, 0),
            sort=sort,
            descending=order == "desc",
            offset=number("offset", int, 0) or 0,
            limit=number("limit", int, 1, MAX_LIMIT),
        )


@dataclass(frozen=True)
class Joined:
    """What ``GET /groups`` adds to each of a cluster's summaries: the cluster's name, the newest
    lag round's totals (group id -> (lag, lag in seconds)), Burrow's latest statuses (group id ->
    status code)."""

    cluster: str
    totals: Mapping[str, tuple[int | None, float | None]]
    statuses: Mapping[str, int]

    def row(self, summary: Mapping[str, Any]) -> dict[str, Any]:
        gid = summary.get("group_id")
        lag, secs = self.totals.get(gid, (None, None)) if isinstance(gid, str) else (None, None)
        code = self.statuses.get(gid) if isinstance(gid, str) else None
        return {
            **summary,
            "cluster": self.cluster,
            "lag": lag,
            "lag_seconds": secs,
            "consumer_status": None if code is None else STATUS_NAMES[code],
        }


def answer(clusters: Sequence[tuple[list[dict[str, Any]], Joined]], query: GroupsQuery) -> dict[str, Any]:
    """The body of ``GET /groups``: ``groups`` (the page), ``count`` (rows in it), ``total`` (rows
    matching the filters), ``offset``, ``limit``.  ``clusters``: each selected cluster's summaries
    (sorted by group id) and what is joined to them, in the settings' order -- the order of the
    rows without ``sort``."""
    q = query
    rows: list[dict[str, Any]] = []
    for summaries, joined in clusters:
        part = summaries
        # the summaries' own fields first: a page of 50 out of 100k groups joins only what matches
        if q.kinds:
            part = [r for r in part if r.get("kind") in q.kinds]
        if q.states:
            part = [r for r in part if r.get("state") in q.states]
        if q.name:
            needle = q.name.casefold()
            part = [r for r in part if needle in str(r.get("group_id", "")).casefold()]
        rows.extend(joined.row(r) for r in part)
    if q.statuses:
        rows = [r for r in rows if r["consumer_status"] in q.statuses]
    if q.min_lag is not None:
        low = q.min_lag
        rows = [r for r in rows if r["lag"] is not None and r["lag"] >= low]
    if q.min_lag_seconds is not None:
        low_s = q.min_lag_seconds
        rows = [r for r in rows if r["lag_seconds"] is not None and r["lag_seconds"] >= low_s]
    rows = _sorted(rows, q)
    total = len(rows)
    page = rows[q.offset :] if q.limit is None else rows[q.offset : q.offset + q.limit]
    return {"groups": page, "count": len(page), "total": total, "offset": q.offset, "limit": q.limit}


def _sorted(rows: list[dict[str, Any]], q: GroupsQuery) -> list[dict[str, Any]]:
    """Rows with the field first, sorted by it (ties in the order given: by cluster, then by
    group id -- Python's sort is stable, reversed or not), then the rows without it in that order.
    No ``sort``: the order given."""
    field = q.sort
    if field is None:
        return rows
    key: Callable[[dict[str, Any]], Any]
    if field == "consumer_status":

        def key(r: dict[str, Any]) -> Any:
            status = r["consumer_status"]
            return None if status is None else _STATUS_CODES[status]

    else:

        def key(r: dict[str, Any]) -> Any:
            return r.get(field)

    keyed = [(key(r), r) for r in rows]
    present = [kr for kr in keyed if kr[0] is not None]
    present.sort(key=lambda kr: kr[0], reverse=q.descending)
    return [r for _, r in present] + [r for k, r in keyed if k is None]
