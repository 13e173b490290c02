"""Startup failures become one-line messages with documented exit codes, for real: an unreachable
broker, another cluster's checkpoint, missing connector jars.  The table of causes itself:
tests/test_streaming/test_app/test_errors.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streaming.app.errors import EXIT_CONNECTOR, EXIT_UNREACHABLE


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
