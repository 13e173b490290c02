"""What the insights live tests (`test_insights_live`, `test_share_live`) share: a mirror on the
session broker with a one-second trigger and its own checkpoint, and a JSON-or-bytes HTTP GET."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        body = resp.read()
        return (
            json.loads(body) if resp.headers.get("content-type", "").startswith("application/json") else body
        )


def group_url(mirror: Any, group: str, suffix: str = "") -> str:
    return f"{mirror.http.url}/groups/{urllib.parse.quote(group, safe='')}{suffix}"


def start_mirror(spark: Any, bootstrap: str, work: Path, **settings: Any) -> Any:
    """A started mirror, ready (its first batch folded); the caller stops it."""
    from streaming.app.mirror import Mirror
    from streaming.settings import load_settings

    mirror = Mirror(
        load_settings(
            bootstrap_servers=bootstrap,
            checkpoint_location=str(work / "checkpoint"),
            trigger_interval_s=1.0,
            shuffle_partitions=2,
            http_port=0,
            lag_interval_s=1.0,
            **settings,
        ),
        spark=spark,
    ).start()
    try:
        assert mirror.wait_ready(300), mirror.store.readiness.to_json()
    except BaseException:
        mirror.stop()
        raise
    return mirror
