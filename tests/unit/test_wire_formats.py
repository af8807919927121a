"""MM2 record formats: golden bytes from MM2.md section 1, and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror.errors import WireFormatError
from mirror.kafka.wire import Checkpoint, Heartbeat, OffsetSync

names = st.text(min_size=0, max_size=200)
offsets = st.integers(min_value=-(2**63), max_value=2**63 - 1)
partitions = st.integers(min_value=-(2**31), max_value=2**31 - 1)


def test_offset_sync_matches_mm2_golden_bytes() -> None:
    sync = OffsetSync("orders", 3, upstream_offset=1000, downstream_offset=990)
    assert sync.key() == bytes.fromhex("0006 6f7264657273 00000003")
    assert sync.value() == bytes.fromhex("00000000000003e8 00000000000003de")


def test_checkpoint_matches_mm2_golden_bytes() -> None:
    checkpoint = Checkpoint("g1", "A.orders", 3, upstream_offset=1000, downstream_offset=991, metadata="")
    assert checkpoint.key() == bytes.fromhex("0002 6731 0008 412e6f7264657273 00000003")
    assert checkpoint.value() == bytes.fromhex("0000 00000000000003e8 00000000000003df 0000")


def test_heartbeat_matches_mm2_golden_bytes() -> None:
    heartbeat = Heartbeat("A", "B", 1_700_000_000_000)
    assert heartbeat.key() == bytes.fromhex("0001 41 0001 42")
    assert heartbeat.value() == bytes.fromhex("0000 0000018bcfe56800")


def test_golden_bytes_decode_to_the_documented_values() -> None:
    assert OffsetSync.decode(
        bytes.fromhex("00066f726465727300000003"), bytes.fromhex("00000000000003e800000000000003de")
    ) == OffsetSync("orders", 3, 1000, 990)
    assert Checkpoint.decode(
        bytes.fromhex("0002 6731 0008 412e6f7264657273 00000003"),
        bytes.fromhex("0000 00000000000003e8 00000000000003df 0000"),
    ) == Checkpoint("g1", "A.orders", 3, 1000, 991, "")
    assert Heartbeat.decode(
        bytes.fromhex("000141000142"), bytes.fromhex("00000000018bcfe56800")
    ) == Heartbeat("A", "B", 1_700_000_000_000)


@given(names, partitions, offsets, offsets)
def test_offset_sync_round_trips(topic: str, partition: int, upstream: int, downstream: int) -> None:
    sync = OffsetSync(topic, partition, upstream, downstream)
    assert OffsetSync.decode(sync.key(), sync.value()) == sync


@given(names, names, partitions, offsets, offsets, names)
def test_checkpoint_round_trips(
    group: str, topic: str, partition: int, upstream: int, downstream: int, metadata: str
) -> None:
    checkpoint = Checkpoint(group, topic, partition, upstream, downstream, metadata)
    assert Checkpoint.decode(checkpoint.key(), checkpoint.value()) == checkpoint


@given(names, names, offsets)
def test_heartbeat_round_trips(source: str, target: str, timestamp: int) -> None:
    heartbeat = Heartbeat(source, target, timestamp)
    assert Heartbeat.decode(heartbeat.key(), heartbeat.value()) == heartbeat


def test_strings_are_length_prefixed_utf8_bytes_not_characters() -> None:
    assert OffsetSync("é", 0, 0, 0).key()[:4] == bytes.fromhex("0002c3a9")


def test_decoders_ignore_trailing_bytes_like_kafkas_schema_read() -> None:
    sync = OffsetSync("t", 1, 2, 3)
    assert OffsetSync.decode(sync.key() + b"\x00", sync.value() + b"\xff\xff") == sync


def test_checkpoint_with_unknown_version_is_rejected() -> None:
    checkpoint = Checkpoint("g", "t", 0, 1, 1)
    with pytest.raises(WireFormatError, match="unsupported version 1"):
        Checkpoint.decode(checkpoint.key(), b"\x00\x01" + checkpoint.value()[2:])


def test_heartbeat_with_unknown_version_is_rejected() -> None:
    with pytest.raises(WireFormatError, match="unsupported version 7"):
        Heartbeat.decode(Heartbeat("A", "B", 0).key(), b"\x00\x07" + bytes(8))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"\x00\x05ab", bytes(16)),  # string shorter than its length
        (b"\x00\x01a\x00\x00", bytes(16)),  # partition cut short
        (OffsetSync("t", 0, 0, 0).key(), bytes(15)),  # value cut short
        (None, bytes(16)),  # MM2 never writes a null key
        (b"\xff\xff", bytes(16)),  # negative length: STRING is not nullable
    ],
)
def test_truncated_or_null_offset_sync_is_a_wire_format_error(key: bytes | None, value: bytes) -> None:
    with pytest.raises(WireFormatError):
        OffsetSync.decode(key, value)


def test_string_longer_than_kafkas_limit_cannot_be_encoded() -> None:
    with pytest.raises(WireFormatError, match="32767"):
        OffsetSync("x" * 32768, 0, 0, 0).key()
