"""Failures a user can cause, as one-line messages with an exit code: the one place that classifies them.

`classify` maps an exception raised while the mirror starts (or a failed query's error text) to a
`StartupError`: what went wrong, what to do, and the documented exit code (README, "Exit codes").
The table `CAUSES` is read top to bottom; the first row whose pattern matches the exception's class
name or text wins.  Adding a cause (TLS, SASL, ...) is adding a row.

Exit codes:

==  ======================================================================================
0   stopped cleanly (SIGTERM / Ctrl-C)
1   an unexpected error (the message names it; ``--log-level DEBUG`` shows the traceback)
2   bad settings, or a checkpoint that is not this mirror's (another cluster, a newer format)
3   the Kafka cluster cannot be reached
4   Spark's Kafka connector jars are missing or do not match pyspark
==  ======================================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

EXIT_OK: Final = 0
EXIT_UNEXPECTED: Final = 1
EXIT_CONFIG: Final = 2
EXIT_UNREACHABLE: Final = 3
EXIT_CONNECTOR: Final = 4


class StartupError(Exception):
    """A failure the user can fix: ``message`` says what and what to do; ``exit_code`` is documented."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Cause:
    """One row of the table: a regex over ``ClassName: text`` of the exception (and its causes),
    the exit code, and the message (``{detail}`` = the matched exception's first line)."""

    name: str
    pattern: str
    exit_code: int
    message: str


CAUSES: Final[tuple[Cause, ...]] = (
    Cause(
        "connector",
        r"MissingArtifactsError|ConnectorVersionError|ClassNotFoundException: .*kafka"
        r"|Failed to find data source: kafka",
        EXIT_CONNECTOR,
        "Spark's Kafka connector is missing or does not match pyspark: {detail}. Run `make jars` "
        "(or set spark_jars / spark_packages to spark-sql-kafka-0-10 of the installed pyspark version).",
    ),
    Cause(
        "unreachable",
        r"kafka\.common\.errors\.TimeoutException|Timed out waiting for a node assignment"
        r"|Timed out waiting to send the call|UnknownHostException|No resolvable bootstrap urls"
        r"|ConnectException: Connection refused|_TRANSPORT|_ALL_BROKERS_DOWN|_TIMED_OUT|BrokerUnreachable",
        EXIT_UNREACHABLE,
        "cannot reach the Kafka cluster at {bootstrap}: {detail}. Check bootstrap_servers, the network "
        "path and the listener the brokers advertise; the mirror retries nothing at start "
        "(a supervisor -- Kubernetes, systemd -- restarts it).",
    ),
)


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def first_line(text: str, limit: int = 300) -> str:
    """The informative first line of a (possibly Java) error text, without the stack trace."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # py4j: "An error occurred while calling o123.get.\n: java.util.concurrent.ExecutionException: ..."
    lines = [ln.lstrip(": ") for ln in lines if not ln.startswith("at ") and "error occurred while" not in ln]
    line = lines[0] if lines else text.strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


def classify(exc: BaseException, *, bootstrap: str | None = None) -> StartupError:
    """The `StartupError` for ``exc`` (itself if it is one; exit 1 with its first line if no row matches)."""
    for e in _chain(exc):
        if isinstance(e, StartupError):
            return e
    texts = [f"{type(e).__name__}: {e}" for e in _chain(exc)]
    for cause in CAUSES:
        rx = re.compile(cause.pattern)
        for text in texts:
            m = rx.search(text)
            if m:
                detail = first_line(text[m.start() :] if "Exception" in m.group(0) else text)
                return StartupError(
                    cause.message.format(detail=detail, bootstrap=bootstrap or "?"), cause.exit_code
                )
    return StartupError(f"unexpected error: {first_line(texts[0])}", EXIT_UNEXPECTED)
