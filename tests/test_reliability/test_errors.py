"""Startup failures become one-line messages with documented exit codes (streaming/app/errors.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streaming.app.errors import EXIT_CONNECTOR, EXIT_UNEXPECTED, EXIT_UNREACHABLE, StartupError, classify
from streaming.jars import MissingArtifactsError
from streaming.pipeline.session import ConnectorVersionError


def test_java_timeouts_mean_the_cluster_is_unreachable() -> None:
    text = (
        "An error occurred while calling o77.get.\n: java.util.concurrent.ExecutionException: "
        "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. "
        "Call: describeCluster\n\tat org.apache.kafka.common.internals.KafkaFutureImpl.wrapAndThrow"
    )
    err = classify(RuntimeError(text), bootstrap="b:9092")
    assert err.exit_code == EXIT_UNREACHABLE
    assert "b:9092" in err.message and "\tat " not in err.message and "\n" not in err.message


def test_connector_problems_name_the_fix() -> None:
    for exc in (MissingArtifactsError("JVM artifacts not found in /x"), ConnectorVersionError("3.5 vs 4.0")):
        err = classify(exc)
        assert err.exit_code == EXIT_CONNECTOR and "make jars" in err.message


def test_a_startup_error_passes_through_and_anything_else_is_exit_1() -> None:
    mine = StartupError("checkpoint of another cluster", 2)
    try:
        raise RuntimeError("wrapped") from mine
    except RuntimeError as exc:
        assert classify(exc) is mine
    assert classify(ValueError("boom")).exit_code == EXIT_UNEXPECTED


@pytest.mark.broker
def test_unreachable_broker_at_start_is_a_message_and_exit_3(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "streaming.app.cli",
            "run",
            "--bootstrap-servers",
            f"127.0.0.1:{port}",
            "--checkpoint-location",
            str(tmp_path / "ckpt"),
            "--http-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == EXIT_UNREACHABLE, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert "cannot reach the Kafka cluster" in out.stderr


def _run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", "run", "--http-port", "0", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.broker
def test_another_clusters_checkpoint_is_refused_with_exit_2(kafka, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from streaming.app.errors import EXIT_CONFIG

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    # what a mirror of another cluster leaves in its checkpoint (`streaming.pipeline.recovery`)
    (ckpt / "mirror.json").write_text(
        json.dumps({"format": 1, "cluster_id": "aNotherCluster0000000w", "last_batch_ms": None})
    )
    out = _run_cli("--bootstrap-servers", kafka.bootstrap, "--checkpoint-location", str(ckpt))
    assert out.returncode == EXIT_CONFIG, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    line = next(ln for ln in out.stderr.splitlines() if ln.startswith("coordinator-mirror: "))
    assert "belongs to Kafka cluster aNotherCluster0000000w" in line and kafka.bootstrap in line
    # nothing was written over the other cluster's file
    assert json.loads((ckpt / "mirror.json").read_text())["cluster_id"] == "aNotherCluster0000000w"

    (ckpt / "mirror.json").write_text(json.dumps({"format": 99, "cluster_id": None}))
    out = _run_cli("--bootstrap-servers", kafka.bootstrap, "--checkpoint-location", str(ckpt))
    assert out.returncode == EXIT_CONFIG and "written by a newer mirror" in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr


def test_missing_connector_jars_are_exit_4(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = _run_cli(
        "--bootstrap-servers",
        "127.0.0.1:9",
        "--checkpoint-location",
        str(tmp_path / "ckpt"),
        env={"COORDINATOR_MIRROR_JARS": str(tmp_path / "no-jars")},
    )
    assert out.returncode == EXIT_CONNECTOR, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("coordinator-mirror: ")]
    assert len(lines) == 1 and "make jars" in lines[0], out.stderr[-2000:]
