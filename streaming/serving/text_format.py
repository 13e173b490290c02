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


def merge_expositions(texts: list[bytes]) -> bytes:
    """Several expositions (one per mirrored cluster, each written from the same catalogue) as one:
    each family's ``# HELP``/``# TYPE`` once, then every text's samples of it -- the format wants a
    family's samples together, under one header.  Families keep the order they first appear in."""
    if len(texts) == 1:
        return texts[0]
    order: list[bytes] = []
    heads: dict[bytes, bytes] = {}
    blocks: dict[bytes, list[bytes]] = {}
    for text in texts:
        for name, head, block in _families(text):
            if name not in heads:
                order.append(name)
                heads[name] = head
                blocks[name] = []
            if block:
                blocks[name].append(block)
    return b"".join(heads[n] + b"".join(blocks[n]) for n in order)


def _families(text: bytes) -> list[tuple[bytes, bytes, bytes]]:
    """(name, header lines, sample lines) of each family of an exposition, in order."""
    out: list[tuple[bytes, bytes, bytes]] = []
    if text.startswith(b"# HELP "):
        pos = 0
    else:
        found = text.find(b"\n# HELP ")
        pos = -1 if found < 0 else found + 1
    while pos >= 0:
        nxt = text.find(b"\n# HELP ", pos)
        end = len(text) if nxt < 0 else nxt + 1
        help_end = text.index(b"\n", pos) + 1  # the header: the HELP line and the TYPE line after it
        type_end = text.index(b"\n", help_end) + 1 if text.startswith(b"# TYPE ", help_end) else help_end
        name = text[pos + len(b"# HELP ") : text.index(b" ", pos + len(b"# HELP "))]
        out.append((name, text[pos:type_end], text[type_end:end]))
        pos = -1 if nxt < 0 else nxt + 1
    return out
