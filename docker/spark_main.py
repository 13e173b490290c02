"""spark-submit's main file in SparkApplication mode: the same CLI the image's entrypoint runs.

The Spark Operator submits ``local:///opt/coordinator-mirror/main.py`` with the arguments
``run --config /etc/coordinator-mirror/config/settings.yaml``; spark-submit starts this script as a child
of its JVM, so the container's SIGTERM never reaches it.  It records its pid for the driver's
preStop hook (docker/stop-driver), which sends SIGTERM here so that the mirror stops its query
between micro-batches before the pod goes away.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PIDFILE = Path(os.environ.get("COORDINATOR_MIRROR_PIDFILE", "/tmp/coordinator-mirror.pid"))


def main() -> int:
    from streaming.app.cli import main as cli

    try:
        PIDFILE.write_text(f"{os.getpid()}\n")
    except OSError as exc:  # no preStop stop then, but the mirror still runs
        print(f"coordinator-mirror: cannot write {PIDFILE}: {exc}", file=sys.stderr)
    try:
        return cli(sys.argv[1:])
    finally:
        PIDFILE.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
