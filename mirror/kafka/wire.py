"""Byte-exact MM2 record formats: OffsetSync, Checkpoint and Heartbeat.

They are Kafka protocol `Schema` structs: fields in declaration order, big-endian integers,
STRING = INT16 length + UTF-8 bytes, no framing and no record headers. Checkpoint and Heartbeat
values start with an INT16 version, which must be 0. Kafka's own readers ignore trailing bytes,
so decoders here do too.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mirror.errors import WireFormatError

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_MAX_STRING_BYTES = 32767
VERSION = 0


class _Reader:
    """Sequential reader over one record's bytes; every short read is a WireFormatError."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._pos = 0
        self._what = what

    def _take(self, n: int) -> bytes:
        end = self._pos + n
        if n < 0 or end > len(self._data):
            raise WireFormatError(
                f"{self._what}: record is truncated ({len(self._data)} bytes, needed {end}); "
                "it was not written by MM2 or mirror"
            )
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def int16(self) -> int:
        return int(_INT16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_INT64.unpack(self._take(8))[0])

    def string(self) -> str:
        length = self.int16()
        if length < 0:
            raise WireFormatError(f"{self._what}: string length {length} is negative; STRING is not nullable")
        raw = self._take(length)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireFormatError(f"{self._what}: string is not valid UTF-8") from exc

    def version(self) -> int:
        version = self.int16()
        if version != VERSION:
            raise WireFormatError(
                f"{self._what}: unsupported version {version}; only version {VERSION} exists in MM2"
            )
        return version


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > _MAX_STRING_BYTES:
        raise WireFormatError(
            f"string of {len(raw)} bytes exceeds the {_MAX_STRING_BYTES}-byte limit of Kafka's STRING type"
        )
    return _INT16.pack(len(raw)) + raw


def _reader(data: bytes | None, what: str) -> _Reader:
    if data is None:
        raise WireFormatError(f"{what}: record has no bytes (null); MM2 never writes null here")
    return _Reader(data, what)


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """`downstream_offset` on the target holds the record at `upstream_offset` on the source."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return _string(self.topic) + _INT32.pack(self.partition)

    def value(self) -> bytes:
        return _INT64.pack(self.upstream_offset) + _INT64.pack(self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        k = _reader(key, "OffsetSync key")
        v = _reader(value, "OffsetSync value")
        return cls(k.string(), k.int32(), v.int64(), v.int64())


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A group's committed offset on the source, translated to the remote topic on the target.

    `topic` is the downstream (remote) topic name, e.g. `A.orders`, as MM2 writes it.
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + _INT32.pack(self.partition)

    def value(self) -> bytes:
        return (
            _INT16.pack(VERSION)
            + _INT64.pack(self.upstream_offset)
            + _INT64.pack(self.downstream_offset)
            + _string(self.metadata)
        )

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        k = _reader(key, "Checkpoint key")
        v = _reader(value, "Checkpoint value")
        group, topic, partition = k.string(), k.string(), k.int32()
        v.version()
        return cls(group, topic, partition, v.int64(), v.int64(), v.string())


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Emitted by flow source->target into the target's heartbeats topic; timestamp in epoch ms."""

    source_alias: str
    target_alias: str
    timestamp_ms: int

    def key(self) -> bytes:
        return _string(self.source_alias) + _string(self.target_alias)

    def value(self) -> bytes:
        return _INT16.pack(VERSION) + _INT64.pack(self.timestamp_ms)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        k = _reader(key, "Heartbeat key")
        v = _reader(value, "Heartbeat value")
        source, target = k.string(), k.string()
        v.version()
        return cls(source, target, v.int64())
