"""A real Prometheus server for the live suites and promtool for the rule tests (Debian's packages)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from lab.proc import free_port
from tests.support.require import require


class Prometheus:
    """A Prometheus server of our own (Debian's package), on loopback, storage in tmp."""

    def __init__(self, workdir: Path, targets: list[str], rules: Path) -> None:
        require(shutil.which("prometheus") is not None, "prometheus (Debian package prometheus)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "prometheus.yml"
        config.write_text(
            json.dumps(
                {
                    "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(rules)],
                    "scrape_configs": [
                        {"job_name": "coordinator-mirror", "static_configs": [{"targets": targets}]}
                    ],
                }
            )
        )
        self.log = (workdir / "prometheus.log").open("w")
        self.proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert self.proc.poll() is None, f"prometheus exited: {(workdir / 'prometheus.log').read_text()}"
            assert time.monotonic() < deadline, "prometheus not ready within 60s"
            time.sleep(0.3)

    def api(self, path: str, **params: Any) -> Any:
        body = _get(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}")
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    require(shutil.which("promtool") is not None, "promtool (Debian package prometheus)")
    return subprocess.run(
        ["promtool", *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())
