"""One-pass codecs for the per-partition arrays of the requests a transaction repeats for every
partition it touches: Produce, AddPartitionsToTxn and TxnOffsetCommit, and their answers.

aiokafka encodes and decodes every field of every partition in Python, four calls a field: for
a copy task's transaction of 2,500 partitions in 250 topics (a Produce request and answer, an
AddPartitionsToTxn and a TxnOffsetCommit each way) that took 32 ms of the loop that also fills
the batches, and 4 ms with these (timeit, 50 rounds). These arrays have a fixed layout
(integers, and one length-prefixed field), so one `struct` call reads or writes a partition, or
a whole array of integers, producing the same bytes and the same tuples.

`install()` swaps them into aiokafka's schemas in place, for the version they were written
against only: if any schema is not exactly the one expected, none is swapped (and that is
logged).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from io import BytesIO
from typing import Any

import aiokafka
from aiokafka.protocol.produce import ProduceRequest_v3, ProduceResponse_v5
from aiokafka.protocol.transaction import (
    AddPartitionsToTxnRequest_v0,
    AddPartitionsToTxnResponse_v0,
    TxnOffsetCommitRequest_v0,
    TxnOffsetCommitResponse_v0,
)
from aiokafka.protocol.types import Array, Bytes, Int16, Int32, Int64, Schema, String

log = logging.getLogger(__name__)

VERSION = "0.14.0"  # the aiokafka whose schemas these were checked against
_COUNT = struct.Struct(">i")
_PARTITION_LENGTH = struct.Struct(">ii")  # partition, then its record batch's length
_PARTITION_OFFSET_LENGTH = struct.Struct(">iqh")  # partition, offset, then its metadata's length


class _Integers(Array):  # type: ignore[misc]  # aiokafka is Any to mypy (pyproject)
    """An array of records of fixed-width integers: one read and one unpack for all of them."""

    def __init__(self, original: Array, layout: str) -> None:
        self.array_of = original.array_of
        self._layout = struct.Struct(layout)

    def decode(self, data: BytesIO) -> list[Any] | None:
        count = Int32.decode(data)
        if count == -1:
            return None
        if count <= 0:
            return []  # aiokafka's range(count) makes a negative count empty too
        size = count * self._layout.size
        raw = data.read(size)
        if len(raw) != size:
            raise ValueError("Buffer underrun decoding an array")
        return list(self._layout.iter_unpack(raw))


class _PartitionIds(Array):  # type: ignore[misc]  # aiokafka is Any to mypy (pyproject)
    """Array(Int32): AddPartitionsToTxn's partitions of a topic, in one pack."""

    def __init__(self, original: Array) -> None:
        self.array_of = original.array_of

    def encode(self, items: Sequence[int] | None) -> bytes:
        if items is None:
            return _COUNT.pack(-1)
        return struct.pack(f">i{len(items)}i", len(items), *items)


class _PartitionBatches(Array):  # type: ignore[misc]  # aiokafka is Any to mypy (pyproject)
    """Produce's (partition, record batch) of a topic."""

    def __init__(self, original: Array) -> None:
        self.array_of = original.array_of

    def encode(self, items: Sequence[tuple[int, bytes | None]] | None) -> bytes:
        if items is None:
            return _COUNT.pack(-1)
        parts: list[Any] = [_COUNT.pack(len(items))]
        for partition, records in items:
            if records is None:
                parts.append(_PARTITION_LENGTH.pack(partition, -1))
            else:
                parts += (_PARTITION_LENGTH.pack(partition, len(records)), records)
        return b"".join(parts)


class _PartitionOffsets(Array):  # type: ignore[misc]  # aiokafka is Any to mypy (pyproject)
    """TxnOffsetCommit's (partition, offset, metadata) of a topic."""

    def __init__(self, original: Array) -> None:
        self.array_of = original.array_of

    def encode(self, items: Sequence[tuple[int, int, str | None]] | None) -> bytes:
        if items is None:
            return _COUNT.pack(-1)
        parts: list[bytes] = [_COUNT.pack(len(items))]
        for partition, offset, metadata in items:
            if metadata is None:
                parts.append(_PARTITION_OFFSET_LENGTH.pack(partition, offset, -1))
            else:
                text = str(metadata).encode("utf-8")
                parts += (_PARTITION_OFFSET_LENGTH.pack(partition, offset, len(text)), text)
        return b"".join(parts)


def _layout(schema: Schema) -> list[tuple[str, object]]:
    """A schema's fields as comparable (name, type) pairs: a String by its encoding, an Array
    or a nested Schema by its own layout."""
    described: list[tuple[str, object]] = []
    for name, field in zip(schema.names, schema.fields, strict=True):
        if isinstance(field, Array):
            inner = field.array_of
            kind: object = ("array", tuple(_layout(inner)) if isinstance(inner, Schema) else inner)
        elif isinstance(field, String):
            kind = ("string", field.encoding)
        else:
            kind = field
        described.append((name, kind))
    return described


def _topic_schema(message: Any, topics_field: str) -> Schema:
    """The per-topic schema inside `message`'s array `topics_field`."""
    index = message.SCHEMA.names.index(topics_field)
    topics = message.SCHEMA.fields[index].array_of
    assert isinstance(topics, Schema)  # noqa: S101 - install() takes this for a layout it does not know
    return topics


def _swap(topic_schema: Schema, partitions_field: str, codec: Array) -> None:
    index = topic_schema.names.index(partitions_field)
    fields = list(topic_schema.fields)
    fields[index] = codec
    topic_schema.fields = tuple(fields)


_UTF8 = ("string", "utf-8")
_PARTITION_ERRORS = ("array", (("partition", Int32), ("error_code", Int16)))
# Each message, the array of topics in it, and the exact layout of one topic expected there.
_EXPECTED: list[tuple[Any, str, str, list[tuple[str, object]]]] = [
    (ProduceRequest_v3, "topics", "partitions",
     [("topic", _UTF8), ("partitions", ("array", (("partition", Int32), ("messages", Bytes))))]),
    (ProduceResponse_v5, "topics", "partitions",
     [("topic", _UTF8), ("partitions", ("array", (
         ("partition", Int32), ("error_code", Int16), ("offset", Int64), ("timestamp", Int64),
         ("log_start_offset", Int64))))]),
    (AddPartitionsToTxnRequest_v0, "topics", "partitions",
     [("topic", _UTF8), ("partitions", ("array", Int32))]),
    (AddPartitionsToTxnResponse_v0, "errors", "partition_errors",
     [("topic", _UTF8), ("partition_errors", _PARTITION_ERRORS)]),
    (TxnOffsetCommitRequest_v0, "topics", "partitions",
     [("topic", _UTF8), ("partitions", ("array", (
         ("partition", Int32), ("offset", Int64), ("metadata", _UTF8))))]),
    (TxnOffsetCommitResponse_v0, "errors", "partition_errors",
     [("topic", _UTF8), ("partition_errors", _PARTITION_ERRORS)]),
]  # fmt: skip


def _codec(message: Any, original: Array) -> Array:
    if message is ProduceRequest_v3:
        return _PartitionBatches(original)
    if message is ProduceResponse_v5:
        return _Integers(original, ">ihqqq")
    if message is AddPartitionsToTxnRequest_v0:
        return _PartitionIds(original)
    if message is TxnOffsetCommitRequest_v0:
        return _PartitionOffsets(original)
    return _Integers(original, ">ih")  # the two answers of (partition, error_code)


def install() -> bool:
    """Swap the codecs in (once; again is a no-op); False if this aiokafka is not the one they
    fit, and then nothing is swapped."""
    if aiokafka.__version__ != VERSION:
        log.info("aiokafka %s, not %s: its own per-partition codecs are kept", aiokafka.__version__, VERSION)
        return False
    swaps: list[tuple[Schema, str, Array]] = []
    for message, topics_field, partitions_field, expected in _EXPECTED:
        try:
            topic_schema = _topic_schema(message, topics_field)
            index = topic_schema.names.index(partitions_field)
        except (ValueError, AttributeError, AssertionError):
            topic_schema = None
        if topic_schema is None or not isinstance(topic_schema.fields[index], Array):
            log.info("aiokafka's %s is not laid out as expected: its own codecs are kept", message.__name__)
            return False
        if _layout(topic_schema) != expected:  # a swapped codec keeps the layout it replaced
            log.info("aiokafka's %s is not laid out as expected: its own codecs are kept", message.__name__)
            return False
        current = topic_schema.fields[index]
        if type(current) is Array:  # else swapped already
            swaps.append((topic_schema, partitions_field, _codec(message, current)))
    for topic_schema, partitions_field, codec in swaps:
        _swap(topic_schema, partitions_field, codec)
    return True
