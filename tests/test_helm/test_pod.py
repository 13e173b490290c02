"""The chart's pods, run on this machine against the real broker: what the kubelet would do.

* Deployment mode: the rendered container's arguments and environment (the settings ConfigMap as a
  file, Secret references resolved the way the kubelet would), probed by the rendered probes --
  startup and liveness on /healthz, readiness on /ready -- then stopped with SIGTERM, which must
  end the process cleanly within the rendered terminationGracePeriodSeconds.
* SparkApplication mode's driver process tree: spark-submit (a JVM) running docker/spark_main.py
  as its Python child with the chart's driver class path, stopped by the chart's preStop hook
  (docker/stop-driver) -- the path the container's SIGTERM cannot take.

Only Kubernetes itself is missing: no image, no kubelet, no operator.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.helm import REPO, Helm

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()


def _probe(container: dict[str, Any], name: str) -> tuple[str, float, float]:
    """(url path, period, budget) of a rendered httpGet probe on the named container port."""
    probe = container[name]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    port = probe["httpGet"]["port"]
    port = ports[port] if isinstance(port, str) else port
    budget = probe.get("initialDelaySeconds", 0) + probe["periodSeconds"] * probe["failureThreshold"]
    return f"http://127.0.0.1:{port}{probe['httpGet']['path']}", probe["periodSeconds"], budget


def _wait_probe(
    url: str, budget_s: float, proc: subprocess.Popen[bytes], log: Path, cap_s: float = 300
) -> float:
    """Poll like the kubelet (faster); return seconds until the probe passed."""
    started = time.monotonic()
    deadline = started + min(budget_s, cap_s)
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
        try:
            if _get(url, 5)[0] == 200:
                return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} did not pass within {min(budget_s, cap_s)} s:\n{log.read_text()[-3000:]}")


def _kubelet_env(container: dict[str, Any], secrets: dict[tuple[str, str], str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CM_")}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = str(var["value"])
        else:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = secrets[(ref["name"], ref["key"])]
    return env


def test_deployment_pod_probes_and_graceful_stop(kafka: Any, helm: Helm, tmp_path: Path) -> None:
    port = _free_port()
    volume = tmp_path / "pvc"
    values = {
        "settings": {
            "bootstrap_servers": kafka.bootstrap,
            "checkpoint_location": f"{volume}/checkpoint",
            "events_path": f"{volume}/events",
            "http_port": port,
            "cluster_name": "pod-sim",
            "shuffle_partitions": 2,
        },
        # a Kafka client option whose value only a Secret carries
        "kafkaSecretOptions": [{"option": "client.dns.lookup", "secretName": "kafka-client", "key": "dns"}],
        "persistence": {"mountPath": str(volume)},
        "deployment": {"driverMemory": "1g"},
    }
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    rendered = helm.render(tmp_path / "values.yaml")
    pod = rendered.get("Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]

    # the kubelet's side: the ConfigMap as a file, emptyDirs, Secret values, the container's args
    settings = tmp_path / "settings.yaml"
    settings.write_text(rendered.settings_yaml())
    env = _kubelet_env(container, {("kafka-client", "dns"): "use_all_dns_ips"})
    env["SPARK_LOCAL_DIRS"] = str(tmp_path / "spark-local")
    args = [
        a if a != "/etc/coordinator-mirror/config/settings.yaml" else str(settings) for a in container["args"]
    ]
    log = tmp_path / "pod.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streaming.app.cli", *args],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp_path,
        )  # fmt: skip
    try:
        startup_url, _, startup_budget = _probe(container, "startupProbe")
        _wait_probe(startup_url, startup_budget, proc, log)
        liveness_url, _, _ = _probe(container, "livenessProbe")
        assert _get(liveness_url, 5)[0] == 200
        readiness_url, _, _ = _probe(container, "readinessProbe")
        _wait_probe(readiness_url, 300, proc, log)
        status, body = _get(f"http://127.0.0.1:{port}/metrics", 10)
        assert status == 200 and b'cluster_name="pod-sim"' in body
        status, body = _get(f"http://127.0.0.1:{port}/groups", 10)
        assert status == 200 and json.loads(body)["count"] >= 0
        # the checkpoint is on the volume (its first batch's offsets are written once the query,
        # started as /ready turned 200, has planned that batch)
        deadline = time.monotonic() + 60
        while not (volume / "checkpoint" / "offsets").is_dir() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (volume / "checkpoint" / "offsets").is_dir()

        # Kubernetes stops the pod: SIGTERM to PID 1, SIGKILL after the grace period. (The mirror
        # waits up to 60 s for a gap between micro-batches; when batches run back to back it then
        # interrupts one, which the checkpoint re-runs: the grace period covers both.)
        grace = pod["terminationGracePeriodSeconds"]
        stopping = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(grace) == 0
        assert time.monotonic() - stopping < grace
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text()
    after = text.split("received SIGTERM")[-1]
    assert after.strip() == ": stopping between two micro-batches", text[-3000:]  # one line, nothing after
    # the Secret's option reached the Kafka client options (the start-up log shows them redacted)
    assert "'client.dns.lookup': 'use_all_dns_ips'" in text, text[:3000]


def test_sparkapplication_driver_stops_through_the_prestop_hook(
    kafka: Any, helm: Helm, tmp_path: Path
) -> None:
    """spark-submit -> python docker/spark_main.py, as in the driver pod (deploy mode client inside
    it), with the chart's spark.driver.extraClassPath for the connector; the preStop hook stops it."""
    import pyspark

    from streaming.jars import spark_kafka_jars

    rendered = helm.render("spark-s3a.yaml")
    app = rendered.get("SparkApplication")["spec"]
    chart_classpath = app["sparkConf"]["spark.driver.extraClassPath"]
    connector_dir = Path(spark_kafka_jars()[0]).parent
    assert chart_classpath.endswith(f"/spark-kafka-{pyspark.__version__}/*")
    classpath = f"{connector_dir}/*"  # the same layout, on this machine

    port = _free_port()
    settings = tmp_path / "settings.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "bootstrap_servers": kafka.bootstrap,
                "checkpoint_location": str(tmp_path / "checkpoint"),
                "http_host": "0.0.0.0",
                "http_port": port,
                "shuffle_partitions": 2,
                "spark_conf": {"spark.driver.memory": "1g"},
            }
        )
    )
    pidfile = tmp_path / "driver.pid"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CM_")}
    env.update(
        SPARK_HOME=str(Path(pyspark.__file__).parent),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        COORDINATOR_MIRROR_PIDFILE=str(pidfile),
    )
    config = "/etc/coordinator-mirror/config/settings.yaml"
    arguments = [a if a != config else str(settings) for a in app["arguments"]]
    log = tmp_path / "driver.log"
    with open(log, "wb") as out:
        submit = subprocess.Popen(
            [
                str(Path(pyspark.__file__).parent / "bin" / "spark-submit"),
                "--master", "local[2]", "--deploy-mode", "client",
                "--conf", f"spark.driver.extraClassPath={classpath}",
                str(REPO / "docker" / "spark_main.py"), *arguments,
            ],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp_path,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while True:
            assert submit.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                if _get(f"http://127.0.0.1:{port}/ready", 5)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        python_pid = int(pidfile.read_text())
        assert python_pid != submit.pid  # the Python driver is spark-submit's child

        hook = subprocess.run(
            [str(REPO / "docker" / "stop-driver")],
            env={**env, "COORDINATOR_MIRROR_PIDFILE": str(pidfile)},
            check=False, timeout=app["driver"]["template"]["spec"]["terminationGracePeriodSeconds"],
        )  # fmt: skip
        assert hook.returncode == 0
        assert submit.wait(60) == 0  # spark-submit ends with its Python driver: the pod completes
    finally:
        if submit.poll() is None:
            os.killpg(submit.pid, signal.SIGKILL)
            submit.wait()
    text = log.read_text()
    assert "received SIGTERM: stopping" in text and "Traceback" not in text, text[-3000:]
    assert not pidfile.exists()
