"""Prometheus's text exposition format (0.0.4), its three primitives -- a label value escaped, a
number written, a family's HELP/TYPE header -- used by every writer of ``GET /metrics`` (the groups'
series, the mirror's, the lag families), so that they escape and format exactly alike."""

from __future__ import annotations

import math

from streaming.serving.catalogue import MetricDef


def escape(value: str) -> str:
    """A label value: backslash, double quote and newline escaped."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def fmt(value: float) -> str:
    """Integers exactly (offsets), other values as Python's shortest round-trip repr; NaN and the
    infinities as the format spells them."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def header(m: MetricDef) -> str:
    """A family's ``# HELP`` (backslash and newline escaped) and ``# TYPE`` lines."""
    text = m.help.replace("\\", "\\\\").replace("\n", "\\n")
    return f"# HELP {m.name} {text}\n# TYPE {m.name} {m.type}\n"
