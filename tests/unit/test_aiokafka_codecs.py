"""The one-pass codecs write the same bytes and read the same tuples as aiokafka's own.

The batch CRC does not cover a Produce request's partition field: a codec that paired a record
batch with the wrong partition would write it there, and the broker would take it. So every
codec is held to aiokafka's generic Array of the same layout, on random contents and the edges
(empty, null, negative counts, non-ASCII metadata, extreme offsets), and whole messages are
compared once installed.
"""

from __future__ import annotations

import random
from io import BytesIO
from typing import Any

import aiokafka
import pytest
from aiokafka.protocol.produce import ProduceRequest_v7, ProduceResponse_v7
from aiokafka.protocol.transaction import (
    AddPartitionsToTxnRequest_v0,
    AddPartitionsToTxnResponse_v0,
    TxnOffsetCommitRequest_v0,
    TxnOffsetCommitResponse_v0,
)
from aiokafka.protocol.types import Array, Bytes, Int16, Int32, Int64, Schema, String

from mirror.kafka import aiokafka_codecs
from mirror.kafka.aiokafka_codecs import _Integers, _PartitionBatches, _PartitionIds, _PartitionOffsets

BATCHES = Array(("partition", Int32), ("messages", Bytes))
OFFSETS = Array(("partition", Int32), ("offset", Int64), ("metadata", String("utf-8")))
IDS = Array(Int32)
PRODUCED = Array(
    ("partition", Int32), ("error_code", Int16), ("offset", Int64), ("timestamp", Int64),
    ("log_start_offset", Int64),
)  # fmt: skip
ERRORS = Array(("partition", Int32), ("error_code", Int16))
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def _int16(rng: random.Random) -> int:
    return rng.randint(-(2**15), 2**15 - 1)


def _int32(rng: random.Random) -> int:
    return rng.choice([0, 1, -1, *INT32, rng.randint(*INT32)])


def _int64(rng: random.Random) -> int:
    return rng.choice([0, -1, *INT64, rng.randint(*INT64)])


def _metadata(rng: random.Random) -> str | None:
    return rng.choice([None, "", "x", "é€\x00", "meta" * rng.randint(1, 40)])


@pytest.mark.parametrize("seed", range(20))
def test_each_request_codec_writes_the_bytes_aiokafka_would(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([0, 1, 2, rng.randint(3, 600)])
    batches = [
        (_int32(rng), rng.choice([None, b"", bytes(rng.randbytes(rng.randint(1, 300))), bytearray(b"ba")]))
        for _ in range(n)
    ]
    offsets = [(_int32(rng), _int64(rng), _metadata(rng)) for _ in range(n)]
    ids = [_int32(rng) for _ in range(n)]
    assert _PartitionBatches(BATCHES).encode(batches) == BATCHES.encode(batches)
    assert _PartitionOffsets(OFFSETS).encode(offsets) == OFFSETS.encode(offsets)
    assert _PartitionIds(IDS).encode(ids) == IDS.encode(ids)


def test_a_null_array_is_written_as_aiokafka_writes_it() -> None:
    codecs = [
        (_PartitionBatches(BATCHES), BATCHES),
        (_PartitionOffsets(OFFSETS), OFFSETS),
        (_PartitionIds(IDS), IDS),
    ]
    for fast, generic in codecs:
        assert fast.encode(None) == generic.encode(None)


@pytest.mark.parametrize("seed", range(20))
def test_each_answer_codec_reads_the_tuples_aiokafka_would(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([0, 1, rng.randint(2, 600)])
    produced = [(_int32(rng), _int16(rng), _int64(rng), _int64(rng), _int64(rng)) for _ in range(n)]
    errors = [(_int32(rng), _int16(rng)) for _ in range(n)]
    for generic, layout, items in [(PRODUCED, ">ihqqq", produced), (ERRORS, ">ih", errors)]:
        trailer = b"\x00\x00\x00\x07"  # what follows the array must be left unread
        data = generic.encode(items) + trailer
        fast_read, generic_read = BytesIO(data), BytesIO(data)
        assert _Integers(generic, layout).decode(fast_read) == generic.decode(generic_read) == items
        assert fast_read.read() == generic_read.read() == trailer


@pytest.mark.parametrize("count", [-1, -2, 0])
def test_a_null_negative_or_empty_count_reads_as_aiokafka_reads_it(count: int) -> None:
    data = Int32.encode(count) + b"rest"
    fast_read, generic_read = BytesIO(data), BytesIO(data)
    assert _Integers(ERRORS, ">ih").decode(fast_read) == ERRORS.decode(generic_read)
    assert fast_read.read() == generic_read.read() == b"rest"


def test_an_answer_cut_short_fails_to_read_rather_than_reading_less() -> None:
    data = ERRORS.encode([(1, 0), (2, 0), (3, 0)])[:-1]
    with pytest.raises(ValueError, match="underrun"):
        _Integers(ERRORS, ">ih").decode(BytesIO(data))


def _plain(field: Any) -> Any:
    """`field` with aiokafka's generic Array wherever a codec of ours stands, at any depth."""
    if not isinstance(field, Array):
        return field
    inner = field.array_of
    if not isinstance(inner, Schema):
        return Array(inner)
    return Array(*zip(inner.names, [_plain(f) for f in inner.fields], strict=True))


def _generic(schema: Schema) -> Schema:
    return Schema(*zip(schema.names, [_plain(f) for f in schema.fields], strict=True))


def _swapped(message: Any, topics: str) -> Any:
    return aiokafka_codecs._topic_schema(message, topics).fields[-1]


@pytest.fixture
def pristine(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiokafka's schemas as shipped for the test, whatever was installed before it (and after)."""
    for message, topics, _, _ in aiokafka_codecs._EXPECTED:
        topic_schema = aiokafka_codecs._topic_schema(message, topics)
        monkeypatch.setattr(topic_schema, "fields", tuple(_plain(f) for f in topic_schema.fields))


@pytest.mark.usefixtures("pristine")
def test_installed_they_stand_in_every_message_a_transaction_repeats_per_partition() -> None:
    assert all(type(_swapped(m, t)) is Array for m, t, _, _ in aiokafka_codecs._EXPECTED)
    assert aiokafka_codecs.install()
    assert aiokafka_codecs.install()  # again: nothing more to swap
    rng = random.Random(7)
    topics = [f"topic-{t}-é" for t in range(30)]
    batches = [(t, [(p, rng.randbytes(40)) for p in range(9)]) for t in topics]
    offsets = [(t, [(p, 10 * p, _metadata(rng)) for p in range(9)]) for t in topics]
    requests: list[Any] = [
        ProduceRequest_v7("txn", -1, 30_000, batches),
        AddPartitionsToTxnRequest_v0("txn", 12, 3, [(t, list(range(9))) for t in topics]),
        TxnOffsetCommitRequest_v0("txn", "group", 12, 3, offsets),
    ]
    assert all(type(_swapped(m, t)) is not Array for m, t, _, _ in aiokafka_codecs._EXPECTED)
    for request in requests:
        installed = request.SCHEMA
        values = [request.__dict__[name] for name in installed.names]
        assert installed.encode(values) == _generic(installed).encode(values)
    answers: list[tuple[Any, list[Any]]] = [
        (ProduceResponse_v7, [[(t, [(p, 0, 100 + p, -1, 0) for p in range(9)]) for t in topics], 0]),
        (AddPartitionsToTxnResponse_v0, [0, [(t, [(p, 0) for p in range(9)]) for t in topics]]),
        (TxnOffsetCommitResponse_v0, [0, [(t, [(p, 0) for p in range(9)]) for t in topics]]),
    ]
    for message, values in answers:
        data = _generic(message.SCHEMA).encode(values)
        read = message.decode(data)
        assert [read.__dict__[name] for name in message.SCHEMA.names] == values


@pytest.mark.usefixtures("pristine")
def test_another_aiokafka_keeps_its_own_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aiokafka, "__version__", "0.15.0")
    assert not aiokafka_codecs.install()
    assert all(type(_swapped(m, t)) is Array for m, t, _, _ in aiokafka_codecs._EXPECTED)


@pytest.mark.usefixtures("pristine")
def test_a_schema_laid_out_otherwise_keeps_every_codec_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = list(aiokafka_codecs._EXPECTED)
    message, topics, partitions, layout = expected[-1]  # the last: a check that came late swaps none
    expected[-1] = (message, topics, partitions, [*layout, ("extra", Int32)])
    monkeypatch.setattr(aiokafka_codecs, "_EXPECTED", expected)
    assert not aiokafka_codecs.install()
    assert all(type(_swapped(m, t)) is Array for m, t, _, _ in expected)
