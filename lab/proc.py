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


def _stat(pid: int) -> tuple[int, float, float, int] | None:
    """(parent pid, own CPU seconds -- user + system --, its reaped children's, resident bytes), or
    None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/statm") as fh:
            pages = int(fh.read().split()[1])
        # fields[0] is field 3 (state): ppid 4, utime 14, stime 15, cutime 16, cstime 17
        own = (int(fields[11]) + int(fields[12])) / _CLK_TCK
        reaped = (int(fields[13]) + int(fields[14])) / _CLK_TCK
        return int(fields[1]), own, reaped, pages * _PAGE
    except (OSError, IndexError, ValueError):
        return None


def _cpu_and_rss(pid: int) -> tuple[float, int]:
    """CPU seconds (user + system, its own and its reaped children's) and resident bytes."""
    st = _stat(pid)
    return (0.0, 0) if st is None else (st[1] + st[2], st[3])


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
    reaped (cutime/cstime), so a Python worker that came and went is still counted -- and, where
    the parent ignores SIGCHLD (PySpark's daemon does: the kernel reaps its workers, and their time
    reaches no cutime), the time a process had when it was last seen (`departed`): without it a
    worker exiting inside a window took its whole lifetime's CPU out of the window's total."""

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
        #: CPU seconds by `kind` at the last sample (`sample`), `departed` included
        self.cpu_parts: dict[str, float] = {}
        #: CPU seconds, by `kind`, of processes gone from the tree whose time no parent's cutime
        #: took (their parent ignored SIGCHLD, or left too): as last sampled
        self.departed: dict[str, float] = {}
        #: the last sample's processes: pid -> (parent pid, kind, own CPU s, reaped children's CPU s)
        self._seen: dict[int, tuple[int, str, float, float]] = {}
        self.samples: list[tuple[float, float, int]] = []  # (monotonic, cpu s, rss bytes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)

    def sample(self) -> tuple[float, int]:
        cpu, rss, pss = 0.0, 0, 0
        parts: dict[str, int] = {}
        pss_parts: dict[str, int] = {}
        cpu_parts: dict[str, float] = {}
        seen: dict[int, tuple[int, str, float, float]] = {}
        for pid in tree_pids(self.root):
            st = _stat(pid)
            if st is None:
                continue
            ppid, own, reaped, r = st
            kind = "root" if pid == self.root else kind_of(pid)
            seen[pid] = (ppid, kind, own, reaped)
            rss += r
            parts[kind] = parts.get(kind, 0) + r
            cpu_parts[kind] = cpu_parts.get(kind, 0.0) + own + reaped
            if self.pss:
                p = _pss(pid)
                pss += p
                pss_parts[kind] = pss_parts.get(kind, 0) + p
        self._count_departed(seen)
        for kind, c in self.departed.items():
            cpu_parts[kind] = cpu_parts.get(kind, 0.0) + c
        cpu = sum(cpu_parts.values())
        self.cpu_parts = cpu_parts
        if rss > self.peak_rss:
            self.peak_rss, self.peak_parts = rss, parts
        if pss > self.peak_pss:
            self.peak_pss, self.peak_pss_parts = pss, pss_parts
        self.samples.append((time.monotonic(), cpu, rss))
        return cpu, rss

    def _count_departed(self, seen: dict[int, tuple[int, str, float, float]]) -> None:
        """The processes of the last sample gone from this one: their time goes to `departed`
        unless their parent's reaped-children time grew by it (a parent that waited for them)."""
        for pid, (ppid, kind, own, reaped) in self._seen.items():
            if pid in seen:
                continue
            before, after = self._seen.get(ppid), seen.get(ppid)
            grew = after[3] - before[3] if before is not None and after is not None else 0.0
            if grew + 2 / _CLK_TCK < own + reaped:
                self.departed[kind] = self.departed.get(kind, 0.0) + own + reaped
        self._seen = seen

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
