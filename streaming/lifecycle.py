"""The one lifecycle of the mirror's parts: a `Part` starts promptly and stops idempotently, a
`PartGroup` starts its parts in order and stops them in reverse (itself a part: a cluster's parts
are one group inside the mirror's), and `Worker` is the one thread shell every looping part runs on.

Burrow's coordinators (``core/burrow.go``) set the pattern: configure validates and opens nothing,
start returns promptly, stop is idempotent and runs in the reverse order of start.  Here the
constructor is the configure step; `PartGroup.start` stops what it already started when a later part
fails, so a failed start leaves nothing running.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar, runtime_checkable

log = logging.getLogger("coordinator_mirror")


@runtime_checkable
class Part(Protocol):
    """Something the mirror starts and stops.  ``start`` returns promptly (a part with long work
    runs it on its own thread); ``stop`` may be called more than once, and before ``start``."""

    name: str

    def start(self) -> None: ...
    def stop(self) -> None: ...


P = TypeVar("P", bound=Part)


class Step:
    """A part whose start is one call and whose stop is another (or nothing): a start-up check, a
    resource opened at start and closed at stop."""

    def __init__(
        self, name: str, start: Callable[[], object], stop: Callable[[], object] | None = None
    ) -> None:
        self.name = name
        self._start = start
        self._stop = stop
        self._started = False

    def start(self) -> None:
        self._start()
        self._started = True

    def stop(self) -> None:
        if self._started and self._stop is not None:
            self._started = False
            self._stop()


class PartGroup:
    """Parts started in order and stopped in reverse; itself a `Part`."""

    def __init__(self, name: str, parts: Iterable[Part] = ()) -> None:
        self.name = name
        self.parts: list[Part] = list(parts)
        self._started: list[Part] = []
        self._lock = threading.Lock()
        #: stopped: a start still running (on another thread) starts nothing more
        self._closed = False

    def add(self, part: P) -> P:
        """Append ``part`` (before `start`); returns it."""
        self.parts.append(part)
        return part

    def __iter__(self) -> Iterator[Part]:
        return iter(self.parts)

    def start(self) -> None:
        """Each part in order; when one fails, those already started are stopped (in reverse) and
        the failure raised."""
        for part in self.parts:
            with self._lock:
                if self._is_closed():
                    return
                if part in self._started:
                    continue
            try:
                part.start()
            except BaseException:
                self.stop()
                raise
            with self._lock:
                closed = self._is_closed()  # (another thread may have stopped the group meanwhile)
                if not closed:
                    self._started.append(part)
            if closed:  # stopped while this part started: it stops too
                part.stop()
                return

    def _is_closed(self) -> bool:
        return self._closed

    def stop(self) -> None:
        """The started parts in reverse; a part whose stop fails is logged and the rest still stop.
        A group stopped is not started again (a start running meanwhile starts nothing more)."""
        with self._lock:
            self._closed = True
        while True:
            with self._lock:
                if not self._started:
                    return
                part = self._started.pop()
            try:
                part.stop()
            except Exception:  # stopping is best effort: the others must stop too
                log.exception("stopping %s failed", part.name)

    @property
    def running(self) -> list[str]:
        """The names of the parts started and not stopped, in start order."""
        with self._lock:
            return [p.name for p in self._started]


class Worker:
    """A part that runs `work` on a thread of its own (named ``thread_name``) until stopped.

    ``interval_s`` is the pause between steps; ``paced``: measured from the start of the previous
    step (a round every interval, whatever a round takes) rather than from its end; ``first_wait``:
    whether the first step waits an interval.  `work` returns False to end the thread.  An exception
    from `work` is logged -- the first, then every 100th -- and the thread goes on (`on_error`)."""

    #: how long `stop` waits for the thread
    join_timeout_s: float = 15.0

    def __init__(
        self, thread_name: str, interval_s: float, *, paced: bool = False, first_wait: bool = True
    ) -> None:
        self.name = thread_name.removeprefix("mirror-")
        self.thread_name = thread_name
        self.interval_s = interval_s
        self.paced = paced
        self.first_wait = first_wait
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0

    # -- what a worker is made of ------------------------------------------------------------
    def work(self) -> bool | None:
        """One step of the thread; False ends it."""
        raise NotImplementedError

    def on_error(self, exc: Exception) -> None:
        """A step raised: logged (the first, then every 100th) and the thread goes on."""
        self.errors += 1
        if self.errors % 100 == 1:
            log.warning("%s: a step failed (%d time(s))", self.thread_name, self.errors, exc_info=exc)

    def wake(self) -> None:
        """Called by `stop` after the stop is signalled: end a wait inside `work` (a blocking call)."""

    def on_stop(self) -> None:
        """Called by `stop` once the thread ended (or was never started)."""

    # -- the lifecycle -------------------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        return self._stopped.is_set()

    @property
    def stop_event(self) -> threading.Event:
        return self._stopped

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def started(self) -> bool:
        return self._thread is not None

    def join(self, timeout_s: float | None = None) -> None:
        """Wait for the thread to end (without stopping it)."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def start(self) -> None:
        """The thread, once (a worker stopped is not started again)."""
        if self._thread is not None or self._stopped.is_set():
            return
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self.wake()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.join_timeout_s)
            if thread.is_alive():
                log.warning("%s did not stop within %.0fs", self.thread_name, self.join_timeout_s)
        self.on_stop()

    def sleep(self, seconds: float) -> bool:
        """Wait up to ``seconds`` unless stopped; True when stopped."""
        return self._stopped.wait(max(0.0, seconds))

    def _run(self) -> None:
        if self.first_wait and self.sleep(self.interval_s):
            return
        while True:
            began = time.monotonic()
            try:
                if self.work() is False:
                    return
            except Exception as exc:
                if self._stopped.is_set():
                    return
                self.on_error(exc)
            spent = time.monotonic() - began if self.paced else 0.0
            if self.sleep(self.interval_s - spent):
                return
