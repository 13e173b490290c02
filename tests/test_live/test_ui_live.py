"""The web UI against a live mirror on the test run's broker, opened in Debian's Chromium: real
consumers commit for a group whose id holds HTML and for a plain one; the groups list shows both as
``GET /groups`` answers them, the group page shows each partition's committed offset and lag as
``GET /groups/{id}/lag`` does, and a commit made while the page is open shows on it without a
reload.  The markup in the id is text and runs nothing; the console stays clean."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import browser, open_page
from tests.support.live_mirror import get, group_url, live_settings
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.broker, pytest.mark.spark]


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def _history(mirror: Any, group: str) -> Any:
    try:
        return get(group_url(mirror, group, "/history")).get("lag")
    except urllib.error.HTTPError as exc:  # 404 no_lag until a lag round measured the group
        if exc.code != 404:
            raise
        return None


@pytest.fixture(scope="module")
def world(
    module_mirrors: Any, kafka: Any, lab: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    topic = lab.topic("ui-live", partitions=2, messages_per_partition=0)
    lab.produce(topic, 2, 100)
    groups = {"xss": lab.name("<img src=x onerror=alert(1)>-ui"), "plain": lab.name("ui-orders/eu")}
    for g in groups.values():
        _commit(kafka.bootstrap, g, topic, {0: 10, 1: 20})
    work: Path = tmp_path_factory.mktemp("ui-live")
    try:
        mirror = module_mirrors.start(live_settings(kafka.bootstrap, work, cluster_name="ui"), ready_s=300)
        for g in groups.values():  # held, and measured by a lag round
            wait_for(f"{g}'s lag history", lambda g=g: _history(mirror, g), 120)
        with browser() as b:
            yield {
                "mirror": mirror,
                "groups": groups,
                "topic": topic,
                "browser": b,
                "bootstrap": kafka.bootstrap,
            }
    finally:
        module_mirrors.close()


def test_the_groups_list_shows_the_live_groups(world: Any) -> None:
    mirror, groups = world["mirror"], world["groups"]
    with open_page(world["browser"]) as page:
        page.page.goto(f"{mirror.http.url}/ui/groups?q={urllib.parse.quote(groups['xss'])}")
        page.page.wait_for_selector("#groups tbody tr[data-group-id]")
        shown = page.page.eval_on_selector_all(
            "#groups tbody tr[data-group-id]",
            "rows => rows.map(r => [...r.cells].map(c => c.textContent.trim()))",
        )
        api = get(f"{mirror.http.url}/groups?q={urllib.parse.quote(groups['xss'])}")["groups"]
        assert [r[0] for r in shown] == [g["group_id"] for g in api] == [groups["xss"]]
        assert shown[0][1] == "ui" and shown[0][5] == f"{api[0]['lag']:,}" == f"{(100 - 10) + (100 - 20):,}"
        assert page.page.eval_on_selector_all("main img", "imgs => imgs.length") == 0
        page.screenshot("ui-live-groups")
        assert page.errors == [] and page.dialogs == []


def _committed(page: Any) -> list[Any]:
    """The group page's committed offsets, partition by partition (the cells' values as JSON)."""
    values: list[str] = page.page.eval_on_selector_all(
        "#partitions-table td[data-field=committed_offset]", "cells => cells.map(c => c.dataset.value)"
    )
    return [json.loads(v) for v in values]


def test_a_commit_shows_on_the_open_group_page(world: Any) -> None:
    mirror, group, topic = world["mirror"], world["groups"]["plain"], world["topic"]
    with open_page(world["browser"]) as page:
        page.page.goto(f"{mirror.http.url}/ui/group?id={urllib.parse.quote(group, safe='')}")
        page.page.wait_for_selector("#partitions-table td[data-field=committed_offset]")
        lag = get(group_url(mirror, group, "/lag"))
        assert sorted((p["partition"], p["committed_offset"]) for p in lag["partitions"]) == [
            (0, 10),
            (1, 20),
        ]
        assert group in (page.page.text_content("#title") or "")
        assert sorted(_committed(page)) == [10, 20]
        # a real consumer commits while the page is open: it shows without a reload
        _commit(world["bootstrap"], group, topic, {0: 77})
        wait_for("the new commit on the open page", lambda: sorted(_committed(page)) == [20, 77], 120)
        assert page.page.evaluate("performance.getEntriesByType('navigation').length") == 1
        page.screenshot("ui-live-group")
        assert page.errors == [] and page.dialogs == []
