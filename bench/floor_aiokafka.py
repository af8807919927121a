"""The floor with another producer: `bench/floor.py`'s loop, but records go out through aiokafka's
transactional producer instead of librdkafka's.

`python -m bench.floor_aiokafka SOURCE TARGET ALIAS REGEX...` reads as the floor does (the same
read_committed confluent-kafka consumer) and commits a transaction every 100 ms with the positions
of the partitions it copied since the last one. Those positions go in as records of a compacted
offsets topic on the target, as MM2's and mirror's source offsets do (KIP-618), not by
TxnOffsetCommit as the floor's do (its first version did so, for the source's topic names, and
the broker answered UNKNOWN_SERVER_ERROR; for topics the target has, as mirror's copy tasks commit
them, aiokafka's TxnOffsetCommit works). As in the floor, they are written for
what they cost and never read back: a floor measures one run and is not restarted.

What differs is the produce request. librdkafka puts one partition in each
(confluentinc/librdkafka#1700), at most five requests in flight per connection, so a commit over
thousands of partitions with a record or two each waits for thousands of requests. aiokafka, like
Kafka's Java producer that MM2 uses, puts every ready partition a broker leads into one request to
it (one in flight per broker). Its batches are built in Python, so where partitions carry
thousands of records each librdkafka is the faster one: the two floors side by side show which
load each wins before the copy path is asked to pay for either.

aiokafka refuses a record with neither key nor value; the bench's records all have values.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, KafkaException, Message

from bench.floor import BATCH, COMMIT_SECONDS, create_remote, source_consumer
from bench.workloads import matching_topics


async def _send(producer: AIOKafkaProducer, alias: str, message: Message) -> asyncio.Future[object]:
    kind, timestamp = message.timestamp()
    delivered: asyncio.Future[object] = await producer.send(
        f"{alias}.{message.topic()}",
        value=message.value(),
        key=message.key(),
        partition=message.partition(),
        timestamp_ms=timestamp if kind else None,
        headers=message.headers(),
    )
    return delivered


async def _commit(
    producer: AIOKafkaProducer,
    sent: list[asyncio.Future[object]],
    moved: dict[tuple[str, int], int],
    alias: str,
) -> None:
    for (topic, partition), offset in moved.items():
        sent.append(
            await producer.send(
                offsets_topic(alias), value=b"%d" % offset, key=f"{topic}:{partition}".encode()
            )
        )
    # aiokafka commits a transaction whose batch failed for good (it only flushes): the records'
    # deliveries are awaited first, so a lost one raises instead of being committed past.
    await asyncio.gather(*sent)
    sent.clear()
    moved.clear()
    await producer.commit_transaction()
    await producer.begin_transaction()


def offsets_topic(alias: str) -> str:
    return f"bench-floor-{alias}-offsets"


async def _copy(consumer: Consumer, target: str, alias: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    producer = AIOKafkaProducer(
        bootstrap_servers=target, transactional_id=f"bench-floor-{alias}", enable_idempotence=True
    )
    await producer.start()
    # The consumer blocks in librdkafka: it waits in a thread while the loop serves the producer.
    reader = ThreadPoolExecutor(1)
    sent: list[asyncio.Future[object]] = []  # the deliveries of the open transaction
    moved: dict[tuple[str, int], int] = {}  # the next offset of each partition copied since the last commit
    try:
        await producer.begin_transaction()
        committed_at = time.monotonic()
        while not stop.is_set():
            for message in await loop.run_in_executor(reader, consumer.consume, BATCH, COMMIT_SECONDS):
                if message.error() is not None:
                    if message.error().fatal():
                        raise KafkaException(message.error())
                    continue
                sent.append(await _send(producer, alias, message))
                moved[(message.topic(), message.partition())] = message.offset() + 1
            if moved and time.monotonic() - committed_at >= COMMIT_SECONDS:
                await _commit(producer, sent, moved, alias)
                committed_at = time.monotonic()
        if moved:
            await _commit(producer, sent, moved, alias)
        await producer.abort_transaction()  # the empty one begun after the last commit
    finally:
        try:
            await producer.stop()
        finally:
            reader.shutdown()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor_aiokafka")
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("alias")
    parser.add_argument("patterns", nargs="+")
    args = parser.parse_args(argv)
    topics = matching_topics(args.source, args.patterns)
    create_remote(
        args.target,
        args.alias,
        topics,
        also=((offsets_topic(args.alias), 1, {"cleanup.policy": "compact"}),),
    )
    consumer = source_consumer(args.source, args.alias)
    try:
        consumer.subscribe(sorted(topics))
        asyncio.run(_copy(consumer, args.target, args.alias))
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
