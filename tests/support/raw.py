"""Minimal, decoder-independent reading of `__consumer_offsets` keys for harness tests.

Every key is ``int16 record type`` followed by the group id as a classic string (int16 length +
UTF-8) -- true for all record types 0..23 -- which is all these tests need to attribute a record
to a group without depending on the decoders under test.
"""

from __future__ import annotations

import struct


def record_type(key: bytes) -> int:
    return int(struct.unpack_from(">h", key, 0)[0])


def group_of(key: bytes) -> str:
    (n,) = struct.unpack_from(">h", key, 2)
    return key[4 : 4 + n].decode("utf-8")
