"""A Python worker that dies of a fatal signal fails its task with its Python stack in the error
(``spark.python.worker.faulthandler.enabled``, set for every mirror session)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = [pytest.mark.spark]


def _crash_in_native_code(batches: Iterator[Any]) -> Iterator[Any]:
    import ctypes

    for batch in batches:
        ctypes.string_at(0)  # a read of address 0: SIGSEGV in the worker
        yield batch


def test_a_worker_segfault_reports_the_workers_python_stack(spark: Any) -> None:
    assert spark.conf.get("spark.python.worker.faulthandler.enabled") == "true"
    with pytest.raises(Exception) as caught:
        spark.range(1).mapInArrow(_crash_in_native_code, "id long").collect()
    message = str(caught.value)
    assert "Segmentation fault" in message, message[-2000:]
    assert "_crash_in_native_code" in message, message[-2000:]  # the crashing frame, by name
