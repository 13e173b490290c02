"""Kafka's one text form of a UUID (topic ids), and the one conversion into it.

Kafka writes a ``Uuid`` as ``Uuid.toString()`` does: its 16 bytes in URL-safe base64 without
padding -- 22 characters of ``A-Z a-z 0-9 - _``, the last one of ``A Q g w`` (it carries the final
2 bits; the 4 bits after them are zero).  The decoders produce exactly that, and every table the
project keys by topic id (the cluster's id -> name map, the groups' ids) uses it.

Client libraries hand ids over in other forms: confluent-kafka's ``str(Uuid)`` is *standard*
base64 (``+`` and ``/`` where Kafka has ``-`` and ``_``), which differs from Kafka's text for
about half of all ids (those with one of the two characters: ``1 - (62/64)**22``); others give the
36-character hex form or the two signed 64-bit halves.  `canonical_uuid` turns any of them into
Kafka's text, at the one place a client hands an id over (`streaming.cluster.offsets`).
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
import uuid
from typing import Final

#: Kafka's text of a UUID: 21 characters of the URL-safe alphabet, then one holding the last 2 bits
_KAFKA_UUID: Final = re.compile(r"[A-Za-z0-9_-]{21}[AQgw]")
#: 22 characters of either base64 alphabet (not both), optionally padded to 24
_BASE64_22: Final = re.compile(r"([A-Za-z0-9_-]{22}|[A-Za-z0-9+/]{22})(==)?")
_TO_URLSAFE: Final = str.maketrans("+/", "-_")


def kafka_uuid(raw: bytes) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def is_kafka_uuid(text: str) -> bool:
    """Is ``text`` a UUID in Kafka's text form (the form every table of ours is keyed by)?"""
    return _KAFKA_UUID.fullmatch(text) is not None


def canonical_uuid(value: object) -> str:
    """A UUID as a client library hands it over -> Kafka's text form.

    Accepted: Kafka's own text (returned as it is); standard base64 (confluent-kafka's
    ``str(Uuid)``), padded or not; the 36-character hex form; 16 raw bytes; an object with the two
    signed 64-bit halves (confluent-kafka's ``get_most_significant_bits()`` /
    ``get_least_significant_bits()``, Java's ``getMostSignificantBits()`` /
    ``getLeastSignificantBits()`` through py4j).  Anything else is malformed: returned as
    ``str(value)`` unchanged, so it is shown as given and never matches an id (the lag tracker
    counts it, ``coordinator_mirror_topic_ids_unresolved{reason="malformed"}``).  Never raises."""
    raw = _raw_bytes(value)
    if raw is not None:
        return kafka_uuid(raw)
    try:
        return str(value)
    except Exception:  # a str() that raises: still an id we show, never an exception here
        return repr(value)


def _raw_bytes(value: object) -> bytes | None:
    """The 16 bytes of ``value`` in any accepted form, or None."""
    if isinstance(value, bytes | bytearray):
        return bytes(value) if len(value) == 16 else None
    if isinstance(value, str):
        return _text_bytes(value.strip())
    halves = _halves(value)
    if halves is None:
        return None
    msb, lsb = halves
    try:
        return struct.pack(">qq", msb, lsb)
    except struct.error:  # out of the signed 64-bit range
        try:
            return struct.pack(">QQ", msb, lsb)
        except struct.error:
            return None


def _text_bytes(text: str) -> bytes | None:
    if _BASE64_22.fullmatch(text):
        body = text[:22].translate(_TO_URLSAFE)
        try:
            return base64.urlsafe_b64decode(body + "==")
        except (binascii.Error, ValueError):  # pragma: no cover - the pattern admits only valid text
            return None
    if len(text) == 36 and text.count("-") == 4:
        try:
            return uuid.UUID(text).bytes
        except ValueError:
            return None
    return None


def _halves(value: object) -> tuple[int, int] | None:
    for msb_name, lsb_name in (
        ("get_most_significant_bits", "get_least_significant_bits"),  # confluent-kafka
        ("getMostSignificantBits", "getLeastSignificantBits"),  # Java's Uuid through py4j
    ):
        msb, lsb = getattr(value, msb_name, None), getattr(value, lsb_name, None)
        if callable(msb) and callable(lsb):
            try:
                hi, lo = msb(), lsb()
            except Exception:  # a proxy whose JVM went away: malformed, not a crash
                return None
            if isinstance(hi, int) and isinstance(lo, int):
                return hi, lo
            return None
    return None
