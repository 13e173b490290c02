"""`python -m streaming.app.class_archive_cmd`: what the archive's training mirror reads.  The
archive itself (stamps, the JVM's use of it, make and the image): test_pipeline/test_class_archive.py."""

from __future__ import annotations

from pathlib import Path

from decoders import decode_record
from decoders.records import DecodeError, OffsetCommitKey, OffsetCommitValue
from streaming.app.class_archive_cmd import _training_capture
from streaming.pipeline.capture_format import read_capture


def test_the_training_replays_real_offset_commits(tmp_path: Path) -> None:
    """What the archive's training mirror reads is what the coordinator writes: every record
    decodes to an offset commit (key version 1, value version 3), none is an error."""
    path = tmp_path / "t.jsonl"
    _training_capture(path)
    records = list(read_capture(path))
    assert len(records) == 200
    for rec in records:
        decoded = decode_record(rec.key, rec.value)
        assert not isinstance(decoded, DecodeError), decoded
        assert isinstance(decoded.key, OffsetCommitKey) and isinstance(decoded.value, OffsetCommitValue)
        assert decoded.key.group_id.startswith("cds-group-") and decoded.value.offset >= 1
