"""The service log (`streaming.app.logs`): JSON lines with Spark's field names (ts in UTC with
milliseconds, log4j's level names, the exception's class, message and stack) or text; the chosen
format for every logger, Python warnings included, and the noisy libraries held at WARN; `report`
as a plain ``coordinator-mirror: ...`` line or an ERROR object.  The format is process-wide, so the
configured process is a child of its own here."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from streaming.app.logs import LEVELS, JsonFormatter


def _record(level: int, msg: str, *args: Any, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    record = logging.LogRecord("coordinator_mirror", level, __file__, 1, msg, args, exc_info)
    record.created, record.msecs = 1_764_147_575.123, 123.0
    return record


@pytest.mark.parametrize(
    ("level", "name"),
    [
        (logging.DEBUG, "DEBUG"),
        (logging.INFO, "INFO"),
        (logging.WARNING, "WARN"),
        (logging.ERROR, "ERROR"),
        (logging.CRITICAL, "FATAL"),
    ],
)
def test_a_json_line_has_sparks_field_names_and_log4js_levels(level: int, name: str) -> None:
    line = JsonFormatter().format(_record(level, "group %s: %d members", 'g/ü "x"', 3))
    assert json.loads(line) == {
        "ts": "2025-11-26T08:59:35.123Z",
        "level": name,
        "logger": "coordinator_mirror",
        "msg": 'group g/ü "x": 3 members',
    }
    assert "\n" not in line and "ü" in line  # one line, UTF-8 as is
    assert set(LEVELS.values()) == {"WARN", "FATAL"}


def test_an_exception_is_carried_whole_in_its_own_field() -> None:
    try:
        raise ValueError("bad offset\nsecond line")
    except ValueError as exc:
        caught = exc
    obj = json.loads(JsonFormatter().format(_record(logging.ERROR, "failed", exc=caught)))
    assert obj["exception"]["class"] == "ValueError"
    assert obj["exception"]["msg"] == "bad offset\nsecond line"
    assert obj["exception"]["stacktrace"].startswith("Traceback (most recent call last)")
    assert obj["msg"] == "failed"


def _child(fmt: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(
        f"""
        import logging, warnings
        from streaming.app.logs import configure_logging, log_format, report
        configure_logging("INFO", "{fmt}")
        logging.getLogger("coordinator_mirror").info("started")
        logging.getLogger("coordinator_mirror").debug("not shown")
        logging.getLogger("py4j").info("internal chatter")
        logging.getLogger("uvicorn.access").warning("slow client")
        warnings.warn("deprecated thing")
        print(log_format(), flush=True)
        report("cannot reach the Kafka cluster")
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )


def test_json_for_every_logger_and_warnings_with_noisy_ones_at_warn() -> None:
    done = _child("json")
    assert done.stdout.strip() == "json"
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(o["logger"], o["level"]) for o in lines] == [
        ("coordinator_mirror", "INFO"),
        ("uvicorn.access", "WARN"),
        ("py.warnings", "WARN"),
        ("coordinator_mirror", "ERROR"),
    ]
    assert "deprecated thing" in lines[2]["msg"]
    assert lines[3]["msg"] == "cannot reach the Kafka cluster"  # report: an ERROR object
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", o["ts"]) for o in lines)


def test_text_for_people_and_report_as_one_plain_line() -> None:
    done = _child("text")
    lines = done.stderr.splitlines()
    assert re.fullmatch(r"\S+ \S+ INFO coordinator_mirror: started", lines[0]), lines[0]
    assert not any("internal chatter" in line or "not shown" in line for line in lines)
    assert lines[-1] == "coordinator-mirror: cannot reach the Kafka cluster"
