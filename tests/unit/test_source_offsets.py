"""Connect source-offset records in the exact JSON MM2's MirrorSourceConnector stores."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror.errors import WireFormatError
from mirror.flow.source_offsets import (
    SourcePartition,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)


def test_key_is_connects_compact_json_in_mm2_field_order() -> None:
    key = encode_key(SourcePartition(cluster="A", topic="orders", partition=3))
    assert key == b'["MirrorSourceConnector",{"cluster":"A","partition":3,"topic":"orders"}]'


def test_value_is_the_last_replicated_offset() -> None:
    assert encode_value(1234) == b'{"offset":1234}'


def test_key_written_by_mm2_decodes_whatever_its_whitespace() -> None:
    mm2_key = b'["MirrorSourceConnector", {"topic": "orders", "partition": 3, "cluster": "A"}]'
    assert decode_key(mm2_key) == ("MirrorSourceConnector", SourcePartition("A", "orders", 3))


@pytest.mark.parametrize(
    "foreign_key",
    [
        b'["my-jdbc-connector",{"table":"users"}]',
        b'{"not":"a list"}',
        b'["MirrorSourceConnector",{"cluster":"A","topic":"t","partition":"3"}]',
        b'["MirrorSourceConnector",{"cluster":"A","topic":"t","partition":true}]',
    ],
)
def test_keys_of_other_shapes_are_not_ours(foreign_key: bytes) -> None:
    assert decode_key(foreign_key) is None


def test_tombstone_value_means_no_position() -> None:
    assert decode_value(None) is None


def test_value_without_integer_offset_is_an_error() -> None:
    with pytest.raises(WireFormatError, match="offset"):
        decode_value(b'{"offset":"12"}')


def test_non_json_key_is_an_error() -> None:
    with pytest.raises(WireFormatError, match="not JSON"):
        decode_key(b"\x00\x01binary")


@given(st.text(min_size=1), st.text(min_size=1), st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1))
def test_key_and_value_round_trip(cluster: str, topic: str, partition: int, offset: int) -> None:
    source = SourcePartition(cluster, topic, partition)
    assert decode_key(encode_key(source)) == ("MirrorSourceConnector", source)
    assert decode_value(encode_value(offset)) == offset
