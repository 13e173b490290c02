"""A real Spark standalone cluster on loopback -- one master, N workers -- from the installed pyspark.

pyspark's wheel carries Spark's jars (``pyspark/jars``) but not the ``sbin/start-master.sh`` family,
so the daemons are started the way those scripts end up starting them: ``java -cp 'jars/*'
org.apache.spark.deploy.master.Master`` / ``...deploy.worker.Worker spark://HOST:PORT``.  A worker
launches its executors (``CoarseGrainedExecutorBackend`` JVMs) from ``SPARK_HOME``, which is the
pyspark package directory here.  The machine is small: each worker offers ``cores_per_worker``
cores (default 1) and ``worker_memory``; an application that asks for more waits forever, so the
defaults of an application (``spark.executor.memory`` 1g, one executor per worker) fit exactly.

Like `lab.broker.LocalKafka`, every daemon gets PR_SET_PDEATHSIG (a killed test run leaves no
orphan JVM) and its own session; `StandaloneCluster.stop` also kills any executor JVM its workers
left behind.  `executor_pids` finds an application's executor JVMs in ``/proc`` so that a test can
``kill -9`` one in the middle of a micro-batch.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.proc import free_port as _free_port
from lab.proc import set_pdeathsig as _set_pdeathsig

EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


class ClusterStartError(RuntimeError):
    """The master or a worker did not come up; the message carries the tail of its log."""


def spark_home() -> Path:
    """The installed pyspark: ``jars/`` holds Spark's runtime, ``bin/`` its launch scripts."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "jars").is_dir():
        raise ClusterStartError(f"{home} has no jars/: not a pyspark distribution with Spark's jars")
    return home


def scala_version(home: Path) -> str:
    """``2.13`` from ``jars/spark-core_2.13-<version>.jar``."""
    for jar in (home / "jars").glob("spark-core_*.jar"):
        return jar.name.split("_", 1)[1].split("-", 1)[0]
    raise ClusterStartError(f"no spark-core jar in {home / 'jars'}")


@dataclass(frozen=True)
class ClusterSettings:
    workers: int = 2
    cores_per_worker: int = 1
    worker_memory: str = "1g"
    daemon_heap: str = "256m"  # master and worker JVMs: they only schedule


@dataclass
class _Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    webui_port: int


def _pid_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _arg(cmd: list[str], flag: str) -> str | None:
    with contextlib.suppress(ValueError, IndexError):
        return cmd[cmd.index(flag) + 1]
    return None


def executor_processes() -> list[dict[str, Any]]:
    """Every executor JVM on this machine: ``{"pid", "app_id", "executor_id", "worker_url"}``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        cmd = _pid_cmdline(int(entry))
        if EXECUTOR_CLASS not in cmd:
            continue
        found.append(
            {
                "pid": int(entry),
                "app_id": _arg(cmd, "--app-id"),
                "executor_id": _arg(cmd, "--executor-id"),
                "worker_url": _arg(cmd, "--worker-url"),
            }
        )
    return found


def rss_bytes(pid: int) -> int:
    """Resident memory of one process (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class StandaloneCluster:
    """``with StandaloneCluster() as c: ... --spark-master c.master_url ...``"""

    def __init__(self, settings: ClusterSettings | None = None, workdir: str | Path | None = None) -> None:
        self.settings = settings or ClusterSettings()
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="cm-spark-"))
        self.home = spark_home()
        self.port = 0
        self.master: _Daemon | None = None
        self.workers: list[_Daemon] = []
        self.worker_ports: list[int] = []

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def master_url(self) -> str:
        if not self.port:
            raise RuntimeError("cluster not started")
        return f"spark://127.0.0.1:{self.port}"

    @property
    def master_ui(self) -> str:
        assert self.master is not None, "cluster not started"
        return f"http://127.0.0.1:{self.master.webui_port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "SPARK_HOME": str(self.home),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
                # the launcher that builds an executor's command asks for it (bin/load-spark-env.sh
                # would export it; without it: "Cannot find any build directories")
                "SPARK_SCALA_VERSION": scala_version(self.home),
                # executors find the JVM through JAVA_HOME (the launcher's buildJavaCommand)
                "JAVA_HOME": env.get("JAVA_HOME")
                or str(Path(shutil.which("java") or "java").resolve().parents[1]),
            }
        )
        return env

    def _spawn(self, name: str, main_class: str, *args: str, webui_port: int) -> _Daemon:
        java = shutil.which("java")
        if java is None:
            raise ClusterStartError("`java` (17+) is not on PATH")
        log = self.workdir / f"{name}.log"
        cmd = [
            java,
            f"-Xmx{self.settings.daemon_heap}",
            "-Djava.awt.headless=true",
            "-cp",
            f"{self.home / 'jars'}/*",
            main_class,
            *args,
        ]
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                env=self._env(),
                start_new_session=True,
                preexec_fn=_set_pdeathsig,  # noqa: PLW1509 - only async-signal-safe prctl
            )
        return _Daemon(name, proc, log, webui_port)

    def start(self, timeout_s: float = 120.0) -> StandaloneCluster:
        if self.master is not None:
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        ui = _free_port()
        self.master = self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(ui),
            webui_port=ui,
        )
        s = self.settings
        for i in range(s.workers):
            work = self.workdir / f"worker-{i}"
            work.mkdir(exist_ok=True)
            ui, port = _free_port(), _free_port()
            self.worker_ports.append(port)
            self.workers.append(
                self._spawn(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui),
                    "--cores",
                    str(s.cores_per_worker),
                    "--memory",
                    s.worker_memory,
                    "--work-dir",
                    str(work),
                    self.master_url,
                    webui_port=ui,
                )
            )
        try:
            self._wait_workers(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications, cores)."""
        with urllib.request.urlopen(f"{self.master_ui}/json/", timeout=5) as resp:
            data: dict[str, Any] = json.loads(resp.read())
        return data

    def _wait_workers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            for d in [self.master, *self.workers]:
                assert d is not None
                if d.process.poll() is not None:
                    raise ClusterStartError(f"{d.name} exited with {d.process.returncode}:\n{self._tail(d)}")
            with contextlib.suppress(OSError, ValueError):
                alive = [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= len(self.workers):
                    return
            if time.monotonic() > deadline:
                assert self.master is not None
                raise ClusterStartError(
                    f"{len(self.workers)} workers not registered after {timeout_s}s:\n"
                    + self._tail(self.master)
                )
            time.sleep(0.3)

    @staticmethod
    def _tail(d: _Daemon, lines: int = 30) -> str:
        if not d.log.exists():
            return ""
        return "".join(d.log.read_text(errors="replace").splitlines(keepends=True)[-lines:])

    # -- executors -------------------------------------------------------------------------------
    def executor_pids(self, app_id: str | None = None) -> dict[str, int]:
        """{executor id: pid} of this cluster's executor JVMs (of one application, if given).  An
        executor names its worker (``--worker-url spark://Worker@127.0.0.1:PORT``)."""
        ours = {f"127.0.0.1:{port}" for port in self.worker_ports}
        out = {}
        for e in executor_processes():
            url = str(e["worker_url"] or "")
            if url.rsplit("@", 1)[-1] not in ours or e["executor_id"] is None:
                continue
            if app_id is None or e["app_id"] == app_id:
                out[str(e["executor_id"])] = int(e["pid"])
        return out

    def kill_executor(self, executor_id: str, app_id: str | None = None) -> int:
        """``kill -9`` one executor JVM; returns its pid."""
        pid = self.executor_pids(app_id)[executor_id]
        os.kill(pid, signal.SIGKILL)
        return pid

    def daemon_pids(self) -> dict[str, int]:
        return {d.name: d.process.pid for d in [self.master, *self.workers] if d is not None}

    # -- stop ------------------------------------------------------------------------------------
    def stop(self, timeout_s: float = 20.0) -> None:
        """Workers, then the master: SIGTERM, SIGKILL after ``timeout_s``; then any executor JVM a
        worker of this cluster left behind."""
        leftovers = []
        with contextlib.suppress(Exception):
            leftovers = list(self.executor_pids().values())
        for d in [*self.workers, self.master]:
            if d is None or d.process.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(d.process.pid, signal.SIGTERM)
        for d in [*self.workers, self.master]:
            if d is None:
                continue
            try:
                d.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(d.process.pid, signal.SIGKILL)
                d.process.wait(10)
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.workers = []
        self.worker_ports = []
        self.master = None

    def cleanup(self) -> None:
        self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
