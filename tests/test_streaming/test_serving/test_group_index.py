"""``GET /groups``'s filters, sort and paging (`streaming.serving.group_index`) over two clusters'
summaries with ids from both base64 alphabets, ``/``, unicode and HTML, joined with lag totals and
Burrow's statuses; every answer checked against a plain recomputation from the same rows."""

from __future__ import annotations

import random
from typing import Any

import pytest

from streaming.health.rules import STATUS_NAMES
from streaming.serving.group_index import MAX_LIMIT, BadParameterError, GroupsQuery, Joined, answer

KINDS = ("classic", "consumer", "share", "streams", "simple")
STATES = ("Stable", "Empty", "PreparingRebalance", "Dead")
IDS = [
    "orders",
    "Orders",
    "a+b/c=",
    "a-b_c",
    "team/orders",
    "ünïcödé-グループ",
    "<img src=x onerror=alert(1)>",
    "",
    "x" * 300,
    *(f"g{i:04d}" for i in range(200)),
]


def _clusters(seed: int) -> list[tuple[list[dict[str, Any]], Joined]]:
    rnd = random.Random(seed)
    out = []
    for name in ("east", "west"):
        summaries: list[dict[str, Any]] = [
            {
                "group_id": gid,
                "kind": rnd.choice(KINDS),
                "state": rnd.choice(STATES),
                "members": rnd.randrange(0, 5),
                "last_rebalance_ms": rnd.choice((None, rnd.randrange(10**12))),
            }
            for gid in sorted(IDS)
        ]
        totals = {
            s["group_id"]: (
                rnd.choice((None, 0, rnd.randrange(10**9))),
                rnd.choice((None, rnd.random() * 99)),
            )
            for s in summaries
            if rnd.random() < 0.8
        }
        statuses = {s["group_id"]: rnd.randrange(len(STATUS_NAMES)) for s in summaries if rnd.random() < 0.7}
        out.append((summaries, Joined(name, totals, statuses)))
    return out


def _all_rows(clusters: list[tuple[list[dict[str, Any]], Joined]]) -> list[dict[str, Any]]:
    rows = []
    for summaries, j in clusters:
        for s in summaries:
            lag, secs = j.totals.get(s["group_id"], (None, None))
            code = j.statuses.get(s["group_id"])
            status = None if code is None else STATUS_NAMES[code]
            rows.append(
                {**s, "cluster": j.cluster, "lag": lag, "lag_seconds": secs, "consumer_status": status}
            )
    return rows


def _query(**params: Any) -> GroupsQuery:
    given = {k: v if isinstance(v, list) else [str(v)] for k, v in params.items()}
    return GroupsQuery.parse(lambda name: given.get(name, []))


def test_without_parameters_every_row_cluster_after_cluster_joined() -> None:
    clusters = _clusters(1)
    body = answer(clusters, _query())
    assert body["groups"] == _all_rows(clusters)
    assert body["count"] == body["total"] == 2 * len(IDS) and body["offset"] == 0 and body["limit"] is None


@pytest.mark.parametrize("seed", range(8))
def test_filters_sort_and_paging_match_a_plain_recomputation(seed: int) -> None:
    rnd = random.Random(seed)
    clusters = _clusters(seed)
    kinds = rnd.sample(KINDS, rnd.randrange(0, 3))
    states = rnd.sample(STATES, rnd.randrange(0, 3))
    statuses = rnd.sample(STATUS_NAMES, rnd.randrange(0, 3))
    name = rnd.choice(("", "ORD", "/", "<img", "グ", "g00"))
    min_lag = rnd.choice((None, 0, 10**8))
    sort = rnd.choice(
        (None, "group_id", "lag", "lag_seconds", "consumer_status", "members", "last_rebalance_ms")
    )
    order = rnd.choice(("asc", "desc"))
    offset, limit = rnd.randrange(0, 50), rnd.randrange(1, 60)
    params: dict[str, Any] = {"kind": kinds, "state": states, "consumer_status": statuses, "order": order}
    params.update({"offset": offset, "limit": limit})
    if name:
        params["q"] = name
    if min_lag is not None:
        params["min_lag"] = min_lag
    if sort is not None:
        params["sort"] = sort
    body = answer(clusters, _query(**params))

    rows = [
        r
        for r in _all_rows(clusters)
        if (not kinds or r["kind"] in kinds)
        and (not states or r["state"] in states)
        and (not statuses or r["consumer_status"] in statuses)
        and name.casefold() in r["group_id"].casefold()
        and (min_lag is None or (r["lag"] is not None and r["lag"] >= min_lag))
    ]
    if sort is not None:

        def rank(r: dict[str, Any]) -> Any:
            v = r[sort]
            return STATUS_NAMES.index(v) if sort == "consumer_status" else v

        present = [r for r in rows if r[sort] is not None]
        present.sort(key=rank, reverse=order == "desc")
        rows = present + [r for r in rows if r[sort] is None]
    assert body["total"] == len(rows)
    assert body["groups"] == rows[offset : offset + limit] and body["count"] == len(body["groups"])


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"sort": "nope"}, "sort"),
        ({"order": "up"}, "order"),
        ({"consumer_status": ["OK", "FINE"]}, "consumer_status"),
        ({"min_lag": "-1"}, "min_lag"),
        ({"min_lag": "ten"}, "min_lag"),
        ({"min_lag_seconds": "nan"}, "min_lag_seconds"),
        ({"limit": "0"}, "limit"),
        ({"limit": str(MAX_LIMIT + 1)}, "limit"),
        ({"offset": "-3"}, "offset"),
        ({"q": ["a", "b"]}, "q"),
    ],
)
def test_a_bad_parameter_is_named(params: dict[str, Any], named: str) -> None:
    with pytest.raises(BadParameterError) as caught:
        _query(**params)
    body = caught.value.to_json()
    assert body["error"] == "bad_parameter" and body["parameter"] == named and named in body["message"]
