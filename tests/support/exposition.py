"""Parsing the exporter's text exposition into samples (prometheus_client's parser) and picking series
by name and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

SampleKey = tuple[str, tuple[tuple[str, str], ...]]


def parse(text: bytes) -> dict[SampleKey, float]:
    out: dict[SampleKey, float] = {}
    for fam in text_string_to_metric_families(text.decode("utf-8")):
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, f"duplicate series {key}"
            out[key] = s.value
    return out


def series(samples: dict[SampleKey, float], name: str, **labels: str) -> dict[SampleKey, float]:
    return {
        k: v
        for k, v in samples.items()
        if k[0] == name and all(dict(k[1]).get(a) == b for a, b in labels.items())
    }


def value(samples: dict[SampleKey, float], name: str, **labels: str) -> float:
    found = series(samples, name, **labels)
    assert len(found) == 1, (name, labels, found)
    return next(iter(found.values()))
