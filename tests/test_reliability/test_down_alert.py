"""The mirror's own "down" alert on a real Prometheus: kill -9 the mirror process, see
``CoordinatorMirrorDown`` go pending (and then fire), with the generated rules (``down_for`` in
seconds instead of minutes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dashboards.build import main as build_main
from tests.support.processes import free_port, wait_process_ready
from tests.support.prometheus import Prometheus

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.prometheus]

DOWN_FOR_S = 15


def _state(prometheus: Prometheus, name: str) -> str | None:
    states = [a["state"] for a in prometheus.alerts() if a["labels"].get("alertname") == name]
    return states[0] if states else None


def test_killing_the_mirror_makes_the_down_alert_pending_then_firing(kafka: Any, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "mirror.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streaming.app.cli",
                "run",
                "--bootstrap-servers",
                kafka.bootstrap,
                "--checkpoint-location",
                str(tmp_path / "ckpt"),
                "--http-port",
                str(port),
                "--shuffle-partitions",
                "2",
                "--spark-conf",
                "spark.driver.memory=1g",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    prometheus = None
    try:
        wait_process_ready(port, proc, 300)
        rules = tmp_path / "alerts.yaml"
        assert build_main(["--rules-out", str(rules), "--set", f"down_for={DOWN_FOR_S}s"]) == 0
        prometheus = Prometheus(tmp_path, [f"127.0.0.1:{port}"], rules)
        deadline = time.monotonic() + 60
        while not prometheus.api("query", query='up{job="coordinator-mirror"} == 1')["result"]:
            assert time.monotonic() < deadline, "Prometheus never scraped the mirror"
            time.sleep(1)
        assert _state(prometheus, "CoordinatorMirrorDown") is None

        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, no shutdown hooks
        proc.wait(30)
        killed_at = time.monotonic()
        seen: list[tuple[float, str | None]] = []
        while time.monotonic() - killed_at < DOWN_FOR_S + 30:
            state = _state(prometheus, "CoordinatorMirrorDown")
            if not seen or seen[-1][1] != state:
                seen.append((round(time.monotonic() - killed_at, 1), state))
            if state == "firing":
                break
            time.sleep(0.5)
        print(f"CoordinatorMirrorDown after the kill: {seen}")
        states = [s for _, s in seen]
        assert "pending" in states and states[-1] == "firing", seen
        pending_at = next(t for t, s in seen if s == "pending")
        firing_at = next(t for t, s in seen if s == "firing")
        assert firing_at - pending_at >= DOWN_FOR_S - 2  # it waited for `for:` before firing
    finally:
        if prometheus is not None:
            prometheus.stop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
