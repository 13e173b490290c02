"""`streaming.serving.text_format`: what every writer of ``GET /metrics`` escapes and formats with,
read back by prometheus_client's own parser."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streaming.serving.catalogue import MetricDef
from streaming.serving.text_format import escape, fmt, header


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (2**63 - 1, "9223372036854775807"),  # an offset, exactly
        (-1, "-1"),
        (42.0, "42"),
        (0.25, "0.25"),
        (1e-7, "1e-07"),
        (2.0**60, repr(2.0**60)),  # a float too large to be written as an exact int
        (math.nan, "NaN"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
    ],
)
def test_numbers(value: float, text: str) -> None:
    assert fmt(value) == text


@pytest.mark.parametrize(
    "label",
    ["plain", 'quo"te', "back\\slash", "new\nline", "<img src=x onerror=alert(1)>", "ünïcödé-🚀", '\\"\n'],
)
def test_label_values_and_numbers_read_back_exactly(label: str) -> None:
    m = MetricDef("x_total", "counter", "help with \\ and\nnewline", ("group",), "", "mirror", "")
    text = header(m) + f'x_total{{group="{escape(label)}"}} {fmt(2**53 + 1)}\n'
    (family,) = text_string_to_metric_families(text)
    (sample,) = family.samples
    assert family.documentation == m.help
    assert sample.labels == {"group": label} and sample.value == 2**53 + 1
