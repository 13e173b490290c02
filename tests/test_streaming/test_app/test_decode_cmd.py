"""The `coordinator-mirror decode` command, run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streaming.app import decode_cmd
from streaming.pipeline.capture_format import CapturedRecord, CaptureHeader, write_capture

EXE = Path(sys.executable).with_name("coordinator-mirror")
K1 = "0001" + "000167" + "000174" + "00000000"
V3 = "0003" + "0000000000000064" + "ffffffff" + "0000" + "0000018bcfe56800"


def run(*args: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [str(EXE), "decode", *args], check=False, capture_output=True, text=True, encoding="utf-8", timeout=60
    )
    return proc.returncode, proc.stdout, proc.stderr


def one_json(stdout: str) -> Any:
    lines = stdout.splitlines()
    assert len(lines) == 1, stdout
    return json.loads(lines[0])


def test_entry_point_exists() -> None:
    assert EXE.exists(), EXE


def test_valid_record() -> None:
    rc, out, err = run("--key", K1, "--value", V3)
    assert rc == 0, err
    assert one_json(out) == {
        "key": {"type": 1, "data": {"group": "g", "topic": "t", "partition": 0}},
        "value": {
            "version": 3,
            "data": {"offset": 100, "leaderEpoch": -1, "metadata": "", "commitTimestamp": 1700000000000},
        },
    }


def test_hex_may_contain_spaces_and_0x() -> None:
    rc, out, _ = run("--key", "0x0002 0001 67")
    assert rc == 0 and one_json(out) == {"key": {"type": 2, "data": {"group": "g"}}, "value": None}


def test_tombstone() -> None:
    rc, out, _ = run("--key", K1)
    assert rc == 0
    assert one_json(out) == {
        "key": {"type": 1, "data": {"group": "g", "topic": "t", "partition": 0}},
        "value": None,
    }


def test_unknown_type_exits_3() -> None:
    rc, out, err = run("--key", "002a000167", "--value", "0000")
    assert rc == 3
    assert one_json(out) == {"unknown": {"type": 42, "key": "002a000167", "value": "0000"}}
    assert "Traceback" not in err


def test_truncated_record_exits_4() -> None:
    rc, out, err = run("--key", K1, "--value", V3[:-4])
    assert rc == 4
    body = one_json(out)["error"]
    assert (body["type"], body["version"], body["part"], body["field"]) == (1, 3, "value", "commitTimestamp")
    assert body["position"] == 16 and body["reason"].startswith("truncated")
    assert "Traceback" not in err


def test_bad_hex_exits_2() -> None:
    rc, out, err = run("--key", "00zz")
    assert rc == 2 and out == ""
    assert "--key is not valid hex" in err and "Traceback" not in err
    rc, _, err = run("--key", K1, "--value", "123")
    assert rc == 2 and "--value is not valid hex" in err


def test_key_or_capture_is_required() -> None:
    rc, _, err = run()
    assert rc == 2 and "Traceback" not in err


def _capture(tmp_path: Path, name: str, records: list[CapturedRecord]) -> Path:
    path = tmp_path / name
    write_capture(path, CaptureHeader(source="test"), records)
    return path


CAPTURE = [
    CapturedRecord(0, 10, 1700000000001, bytes.fromhex(K1), bytes.fromhex(V3)),
    CapturedRecord(0, 11, 1700000000002, bytes.fromhex(K1), None),
    CapturedRecord(3, 7, 1700000000003, bytes.fromhex("0012000167"), b"\x00\x00"),  # K=18: unknown
    CapturedRecord(3, 8, 1700000000004, bytes.fromhex("0002" + "0007") + "grüppe".encode(), None),
]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_capture_all_good(tmp_path: Path, suffix: str) -> None:
    rc, out, err = run("--capture", str(_capture(tmp_path, "c" + suffix, CAPTURE)))
    assert rc == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(x["partition"], x["offset"], x["timestamp"]) for x in lines] == [
        (0, 10, 1700000000001),
        (0, 11, 1700000000002),
        (3, 7, 1700000000003),
        (3, 8, 1700000000004),
    ]
    assert lines[0]["value"]["data"]["offset"] == 100
    assert lines[1]["value"] is None
    assert lines[2]["unknown"]["type"] == 18
    assert lines[3]["key"]["data"]["group"] == "grüppe"
    assert "decoded 4 records: 3 ok, 1 unknown type, 0 undecodable" in err


def test_capture_with_a_bad_record_prints_everything_then_exits_4(tmp_path: Path) -> None:
    bad = CapturedRecord(1, 5, 1, bytes.fromhex(K1), bytes.fromhex(V3[:-2]))
    rc, out, err = run("--capture", str(_capture(tmp_path, "bad.jsonl", [bad, *CAPTURE])))
    assert rc == 4
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 5
    assert lines[0]["error"]["field"] == "commitTimestamp" and lines[0]["offset"] == 5
    assert "1 undecodable" in err and "Traceback" not in err


def test_unreadable_capture_exits_2(tmp_path: Path) -> None:
    rc, _, err = run("--capture", str(tmp_path / "missing.jsonl"))
    assert rc == 2 and "cannot read capture" in err and "Traceback" not in err
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"capture": {}}\nnot json\n')
    rc, _, err = run("--capture", str(broken))
    assert rc == 2 and "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "data"),
    [
        ("0001", b"\x00\x01"),
        ("0x0001", b"\x00\x01"),
        ("0X 00 01", b"\x00\x01"),
        (" 00\n01\t", b"\x00\x01"),
        ("", b""),
    ],
)
def test_hex_forms_a_user_pastes(text: str, data: bytes) -> None:
    assert decode_cmd._hex("--key", text) == data


@pytest.mark.parametrize("text", ["0g", "001", "0x0x00"])
def test_bad_hex_names_the_flag(text: str) -> None:
    with pytest.raises(decode_cmd._UsageError, match="--value is not valid hex"):
        decode_cmd._hex("--value", text)


@pytest.mark.parametrize(
    ("source", "topic"),
    [
        ("kafka://host:9092/__share_group_state", "__share_group_state"),
        ("kafka://host:9092/__consumer_offsets", "__consumer_offsets"),
        ("kafka://host:9092/some-other-topic", "__consumer_offsets"),
        ("file:///tmp/x", "__consumer_offsets"),
    ],
)
def test_a_captures_topic_is_read_from_its_header(tmp_path: Path, source: str, topic: str) -> None:
    path = tmp_path / "c.jsonl"
    write_capture(path, CaptureHeader(source=source), [])
    assert decode_cmd._capture_topic(str(path)) == topic
    assert decode_cmd._capture_topic(str(tmp_path / "missing.jsonl")) == "__consumer_offsets"
