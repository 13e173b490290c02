"""Running mirrors for the tests: `RunningMirrors` behind the ``mirrors`` and ``module_mirrors``
fixtures (tests/conftest.py), the settings of a mirror on the session broker with a one-second
trigger and its own checkpoint (`live_settings`), a JSON-or-bytes HTTP GET, and a group's lag
(`lag_of`)."""

from __future__ import annotations

import json
import urllib.error
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


def lag_of(mirror: Any, group: str) -> dict[str, Any]:
    """``GET /groups/{id}/lag``, or {} while the group is not in the lag tracker yet (404
    "pending")."""
    try:
        body = get(group_url(mirror, group, "/lag"))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return {}
        raise
    assert isinstance(body, dict)
    return body


def live_settings(bootstrap: str, work: Path, **settings: Any) -> Any:
    """Settings of a mirror on ``bootstrap`` with a one-second trigger, its own checkpoint under
    ``work`` and an ephemeral HTTP port."""
    from streaming.settings import load_settings

    defaults = {
        "bootstrap_servers": bootstrap,
        "checkpoint_location": str(work / "checkpoint"),
        "trigger_interval_s": 1.0,
        "shuffle_partitions": 2,
        "http_port": 0,
        "lag_interval_s": 1.0,
    }
    return load_settings(**(defaults | settings))


class RunningMirrors:
    """In-process mirrors on the session's Spark, each stopped when the owner closes (the fixtures
    ``mirrors`` and ``module_mirrors`` of tests/conftest.py), in reverse start order -- whether the
    test passed, failed or a start-up wait timed out.  Stopping twice is harmless (`Mirror.stop`),
    so a test may stop one itself (a restart)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self._started: list[Any] = []

    def start(self, settings: Any, *, ready_s: float | None = None, spark: Any = None) -> Any:
        """A started mirror; with ``ready_s``, also ready (its catch-up folded) within that many
        seconds; on ``spark`` when given (another session of the same context), else the run's."""
        from streaming.app.mirror import Mirror

        mirror = Mirror(settings, spark=self.spark if spark is None else spark).start()
        self._started.append(mirror)
        if ready_s is not None:
            assert mirror.wait_ready(ready_s), mirror.status.readiness_json()
        return mirror

    def close(self) -> None:
        """Stop every mirror still running, newest first; one that fails to stop does not keep the
        others running (the first error is raised after all were tried)."""
        errors: list[BaseException] = []
        while self._started:
            try:
                self._started.pop().stop()
            except BaseException as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> RunningMirrors:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
