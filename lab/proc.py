"""What the lab's background processes share: a free loopback port, a child that dies with us, and
the CPU and memory of a process tree."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import threading
import time

#: the ports `free_port` handed out lately in this process: never handed out twice while their
#: owner may not have bound them yet (the kernel can give a just-closed port to the next bind(0) --
#: a secured broker's six listeners and its KDC are chosen one after another, bound seconds later)
_HANDED: collections.deque[int] = collections.deque(maxlen=256)
_HANDED_LOCK = threading.Lock()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now and not handed out lately by this process (it may
    still be taken by another process before it is bound: retry on that)."""
    with _HANDED_LOCK:
        held: list[socket.socket] = []
        try:
            while True:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(s)  # held until one is chosen: the kernel offers each port once
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
                if port not in _HANDED:
                    _HANDED.append(port)
                    return port
        finally:
            for s in held:
                s.close()


def set_pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    """``preexec_fn`` of a child process: SIGKILL it when the Python process that started it dies
    (PR_SET_PDEATHSIG, Linux), so that a killed test run leaves no orphan."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def stop_group(proc: subprocess.Popen[bytes] | subprocess.Popen[str], timeout_s: float = 10.0) -> None:
    """SIGTERM to ``proc``'s process group (it was started with ``start_new_session``), then
    SIGKILL if it has not ended after ``timeout_s``."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)


def kill_group(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """SIGKILL to ``proc``'s process group, and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


def tree_pids(root: int) -> list[int]:
    """``root`` and every descendant alive now (Linux /proc)."""
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack += _children(pid)
    return out


def _cpu_and_rss(pid: int) -> tuple[float, int]:
    """CPU seconds (user + system, its own and its reaped children's) and resident bytes."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/statm") as fh:
            pages = int(fh.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0, 0
    # fields[0] is field 3 (state): utime 14, stime 15, cutime 16, cstime 17
    ticks = sum(int(f) for f in fields[11:15])
    return ticks / _CLK_TCK, pages * _PAGE


def _pss(pid: int) -> int:
    """Proportional set size, bytes: resident memory with each page shared by N processes counted
    1/N -- summed over a tree, every page once (a forked Python worker shares its parent's pages;
    a sum of RSS counts them in each)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def kind_of(pid: int) -> str:
    """What a process of a mirror's tree is: the Spark driver JVM, the Kafka client JVM (py4j's
    gateway), a Python worker, or its command's first word."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().split(b"\0")
    except OSError:
        return "gone"
    text = b" ".join(cmd)
    if b"org.apache.spark.deploy.SparkSubmit" in text:
        return "spark_jvm"
    if b"py4j.GatewayServer" in text or (b"py4j" in text and b"java" in cmd[0]):
        return "client_jvm"
    if b"pyspark.daemon" in text or b"pyspark.worker" in text:
        return "python_workers"
    return os.path.basename(cmd[0].decode(errors="replace")) or "?"


_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


class TreeSampler:
    """CPU seconds and resident memory of a process and all its descendants (the driver, its JVMs,
    Spark's Python workers), sampled every ``interval_s`` in a thread.

    CPU counts every live process's own time plus the time of its children that exited and were
    reaped (cutime/cstime), so a Python worker that came and went is still counted."""

    def __init__(self, root: int, interval_s: float = 0.1, *, pss: bool = False) -> None:
        self.root = root
        self.interval_s = interval_s
        self.peak_rss = 0
        #: resident bytes of each process at the peak, by `kind`
        self.peak_parts: dict[str, int] = {}
        #: with ``pss``: the largest sum of proportional set sizes (`_pss`), and its parts by kind
        self.pss = pss
        self.peak_pss = 0
        self.peak_pss_parts: dict[str, int] = {}
        #: CPU seconds by `kind` at the last sample (`sample`)
        self.cpu_parts: dict[str, float] = {}
        self.samples: list[tuple[float, float, int]] = []  # (monotonic, cpu s, rss bytes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)

    def sample(self) -> tuple[float, int]:
        cpu, rss, pss = 0.0, 0, 0
        parts: dict[str, int] = {}
        pss_parts: dict[str, int] = {}
        cpu_parts: dict[str, float] = {}
        for pid in tree_pids(self.root):
            c, r = _cpu_and_rss(pid)
            cpu += c
            rss += r
            kind = "root" if pid == self.root else kind_of(pid)
            parts[kind] = parts.get(kind, 0) + r
            cpu_parts[kind] = cpu_parts.get(kind, 0.0) + c
            if self.pss:
                p = _pss(pid)
                pss += p
                pss_parts[kind] = pss_parts.get(kind, 0) + p
        self.cpu_parts = cpu_parts
        if rss > self.peak_rss:
            self.peak_rss, self.peak_parts = rss, parts
        if pss > self.peak_pss:
            self.peak_pss, self.peak_pss_parts = pss, pss_parts
        self.samples.append((time.monotonic(), cpu, rss))
        return cpu, rss

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
