"""When the packing producer hands a transaction's records to its loop: in chunks while partitions
carrying many records each hold at least half of them (a catch-up streams out as it is read), and
only at the flush while the records are spread a few per partition over many (each partition's in
one batch, as aiokafka's Python pays per batch). Built without a broker: only the hand-over is the
point."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from mirror.kafka.packing_producer import CHUNK_RECORDS, CHUNK_RECORDS_PER_PARTITION, PackingProducer


class _Loop:
    """Stands in for the event loop: keeps what was handed to it."""

    def __init__(self) -> None:
        self.chunks: list[int] = []

    def call_soon_threadsafe(self, _put: Any, item: tuple[str, list[object], None]) -> None:
        self.chunks.append(len(item[1]))


def _producer() -> tuple[PackingProducer, _Loop]:
    producer = PackingProducer.__new__(PackingProducer)  # no loop, no broker: only its bookkeeping
    loop = _Loop()
    producer._loop = loop  # type: ignore[assignment]
    producer._queue = SimpleNamespace(put_nowait=None)  # type: ignore[assignment]
    producer._pending = []
    producer._pending_counts = {}
    producer._pending_thick = 0
    producer._broken = None
    producer._outstanding = 0
    producer._settled = threading.Condition()
    producer._transactional = True
    return producer, loop


def test_records_of_few_partitions_go_to_the_loop_in_chunks_as_they_come() -> None:
    producer, loop = _producer()
    for index in range(3 * CHUNK_RECORDS):
        producer.produce("catch-up", b"v", partition=index % 8)
    assert loop.chunks == [CHUNK_RECORDS] * 3


def test_records_spread_thin_over_many_partitions_wait_for_the_flush() -> None:
    producer, loop = _producer()
    partitions = CHUNK_RECORDS  # one record each per chunk's worth: far below the per-partition bar
    records = 5 * CHUNK_RECORDS
    for index in range(records):
        producer.produce(f"thin-{index % partitions // 10}", b"v", partition=index % 10)
    assert loop.chunks == []
    producer._hand_over()  # what flush() and commit_transaction() do first
    assert loop.chunks == [records]


def test_a_thin_load_that_thickens_goes_out_once_its_partitions_reach_the_bar() -> None:
    producer, loop = _producer()
    partitions = 100
    below_the_bar = (CHUNK_RECORDS_PER_PARTITION - 1) * partitions
    for index in range(CHUNK_RECORDS_PER_PARTITION * partitions):
        producer.produce("t", b"v", partition=index % partitions)
        if index < below_the_bar:
            assert loop.chunks == []
    assert len(loop.chunks) == 1  # once half of the partitions reached the bar


def test_a_few_hot_partitions_among_many_thin_ones_still_stream() -> None:
    producer, loop = _producer()
    for thin in range(2 * CHUNK_RECORDS):  # one record each in 4,000 partitions: held
        producer.produce("thin", b"v", partition=thin)
    assert loop.chunks == []
    for index in range(3 * CHUNK_RECORDS):  # then a catch-up of 4 partitions
        producer.produce("hot", b"v", partition=index % 4)
    assert loop.chunks, "the hot partitions' records were held until the flush"
