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


def test_expositions_of_several_clusters_merge_family_by_family() -> None:
    """Each family's header once, every cluster's samples under it, in first-seen order -- what
    Prometheus's parser reads back as one family per name (it refuses a family written twice)."""
    from streaming.serving.text_format import merge_expositions

    a_counter = MetricDef("a_total", "counter", "A.", ("cluster_name",), "", "mirror", "")
    b_gauge = MetricDef("b", "gauge", "B.", ("cluster_name", "group"), "", "mirror", "")
    only = MetricDef("c", "gauge", "C, one cluster only.", ("cluster_name",), "", "mirror", "")

    def text(cluster: str, *, with_c: bool) -> bytes:
        out = header(a_counter) + f'a_total{{cluster_name="{cluster}"}} 1\n'
        out += header(b_gauge) + "".join(
            f'b{{cluster_name="{cluster}",group="g{i}"}} {i}\n' for i in range(3)
        )
        if with_c:
            out += header(only) + f'c{{cluster_name="{cluster}"}} 7\n'
        return out.encode()

    merged = merge_expositions([text("eu", with_c=False), text("us", with_c=True), text("ap", with_c=False)])
    families = {f.name: f for f in text_string_to_metric_families(merged.decode())}
    assert list(families) == ["a", "b", "c"]
    assert merged.count(b"# HELP b ") == 1 and merged.count(b"# TYPE a_total ") == 1
    assert [s.labels["cluster_name"] for s in families["a"].samples] == ["eu", "us", "ap"]
    assert len(families["b"].samples) == 9 and [s.value for s in families["c"].samples] == [7]
    assert merge_expositions([text("eu", with_c=True)]) == text("eu", with_c=True)
