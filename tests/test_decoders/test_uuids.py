"""Kafka's text form of a UUID and the one conversion into it (`decoders.uuids`): every form a
client hands an id over in -- both base64 alphabets, padded or not, hex, raw bytes, the two 64-bit
halves -- gives Kafka's text, for random ids across the whole range; anything else comes back
unchanged and never raises."""

from __future__ import annotations

import base64
import random
import struct
import uuid

import pytest
from confluent_kafka import Uuid
from hypothesis import example, given, settings
from hypothesis import strategies as st

from decoders.interpreter import uuid_or_none
from decoders.uuids import canonical_uuid, is_kafka_uuid, kafka_uuid

#: ids whose Kafka text holds each character the two alphabets differ in
EDGE_IDS = [
    b"\xff" * 16,  # "_____________________w": every "_" (standard: "/")
    b"\xfb\xef\xbe" * 5 + b"\xfb",  # "-" (standard: "+")
    b"\x00" * 15 + b"\x01",
    bytes(range(16)),
]


class _JavaUuid:
    """The two halves as Java's ``org.apache.kafka.common.Uuid`` offers them through py4j."""

    def __init__(self, raw: bytes) -> None:
        self._msb, self._lsb = struct.unpack(">qq", raw)

    def getMostSignificantBits(self) -> int:  # noqa: N802 - Java's name
        return int(self._msb)

    def getLeastSignificantBits(self) -> int:  # noqa: N802 - Java's name
        return int(self._lsb)


def client_forms(raw: bytes) -> dict[str, object]:
    """The forms a Kafka client may hand the id ``raw`` over in."""
    msb, lsb = struct.unpack(">qq", raw)
    standard = base64.b64encode(raw).decode()
    return {
        "kafka text": kafka_uuid(raw),
        "confluent-kafka Uuid": Uuid(msb, lsb),
        "confluent-kafka str(Uuid)": str(Uuid(msb, lsb)),
        "standard base64 padded": standard,
        "standard base64": standard.rstrip("="),
        "url-safe base64 padded": base64.urlsafe_b64encode(raw).decode(),
        "hex": str(uuid.UUID(bytes=raw)),
        "bytes": raw,
        "java Uuid halves": _JavaUuid(raw),
    }


@settings(max_examples=500, deadline=None)
@given(st.binary(min_size=16, max_size=16))
@example(EDGE_IDS[0])
@example(EDGE_IDS[1])
def test_every_client_form_converts_to_kafkas_text(raw: bytes) -> None:
    want = kafka_uuid(raw)
    assert is_kafka_uuid(want) and len(want) == 22
    assert uuid_or_none(raw) in (want, None)  # the decoders write the same text (zero id: None)
    for form, value in client_forms(raw).items():
        assert canonical_uuid(value) == want, form
    assert canonical_uuid(want) == want  # idempotent


def test_random_ids_cover_both_alphabets_and_half_differ_between_them() -> None:
    """The property above over 20,000 seeded random UUIDs, and what the ids look like: about half
    hold "-" or "_" (so a table keyed by the standard alphabet misses them), and each of the four
    characters the alphabets differ in occurs."""
    rnd = random.Random(22)
    differ = 0
    seen: set[str] = set()
    n = 20_000
    for _ in range(n):
        raw = uuid.UUID(int=rnd.getrandbits(128), version=4).bytes  # what Kafka's Uuid.randomUuid() draws
        text = kafka_uuid(raw)
        standard = str(Uuid(*struct.unpack(">qq", raw)))
        seen.update(set(text + standard) & set("-_+/"))
        assert canonical_uuid(standard) == text
        differ += text != standard
    assert seen == set("-_+/")
    # P(one of 2 of 64 characters among 21 free ones + the last) = 1 - (62/64)**21 ~ 0.49
    assert 0.46 < differ / n < 0.52, differ / n


@pytest.mark.parametrize("raw", EDGE_IDS)
def test_edge_ids(raw: bytes) -> None:
    forms = client_forms(raw)
    assert {canonical_uuid(v) for v in forms.values()} == {kafka_uuid(raw)}


@pytest.mark.parametrize(
    "value",
    [
        "",
        "orders",
        "not an id at all!",
        "AAAAAAAAAAAAAAAAAAAA",  # 20 characters
        "AAAAAAAAAAAAAAAAAAAAAAA",  # 23
        "+AAAAAAAAAAAAAAAAAAA-A",  # both alphabets at once
        "AAAAAAAAAAAAAAAAAAAA=A",
        "00000000-0000-0000-0000-00000000000g",  # hex with a non-hex digit
        b"\x00" * 15,
        12345,
        None,
        object(),
    ],
)
def test_malformed_ids_come_back_unchanged(value: object) -> None:
    out = canonical_uuid(value)
    assert out == str(value) and not (isinstance(value, str) and is_kafka_uuid(out) and out != value)


def test_a_client_object_that_fails_is_malformed_not_an_exception() -> None:
    class Broken:
        def get_most_significant_bits(self) -> int:
            raise RuntimeError("the JVM went away")

        def get_least_significant_bits(self) -> int:
            return 0

        def __str__(self) -> str:
            return "broken-uuid"

    assert canonical_uuid(Broken()) == "broken-uuid"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_arbitrary_text_never_raises(text: str) -> None:
    out = canonical_uuid(text)
    assert out == text or is_kafka_uuid(out)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("AAAAAAAAAAAAAAAAAAAAAA", True),
        ("_____________________w", True),
        ("_____________________x", False),  # the last character carries 2 bits: A, Q, g or w
        ("/////////////////////w", False),  # the standard alphabet is not Kafka's text
        ("orders-events-v2-prod", False),
    ],
)
def test_is_kafka_uuid(text: str, ok: bool) -> None:
    assert is_kafka_uuid(text) is ok
