"""The floor with another producer: `bench/floor.py`'s loop, but records go out through aiokafka's
transactional producer instead of librdkafka's.

`python -m bench.floor_aiokafka SOURCE TARGET ALIAS REGEX...` reads as the floor does (one
read_committed confluent-kafka consumer) and commits a transaction every 100 ms with the
positions it moved in it. The positions go in as records of an offsets topic on the target, as
MM2's and mirror's do (KIP-618), not by TxnOffsetCommit: the Kafka 4.3 brokers here answer
aiokafka 0.14's TxnOffsetCommit with UNKNOWN_SERVER_ERROR. What differs from the floor is the
produce request: librdkafka puts one partition in
each (confluentinc/librdkafka#1700), as many requests as partitions with records, at most five in
flight per connection; aiokafka, like Kafka's Java producer that MM2 uses, puts every ready
partition led by a broker into one request to it. Under a thin load over thousands of partitions
that is the difference between thousands of requests per commit and a handful: this contender
measures what that is worth, in Python, before the copy path is asked to pay for it.
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
from confluent_kafka.admin import AdminClient

from bench.floor import BATCH, COMMIT_SECONDS, create_remote
from bench.workloads import matching_topics
from mirror.kafka.admin import create_topics


async def _send(producer: AIOKafkaProducer, alias: str, message: Message) -> None:
    kind, timestamp = message.timestamp()
    await producer.send(
        f"{alias}.{message.topic()}",
        value=message.value(),
        key=message.key(),
        partition=message.partition(),
        timestamp_ms=timestamp if kind else None,
        headers=message.headers(),
    )


async def _commit(producer: AIOKafkaProducer, moved: dict[tuple[str, int], int], alias: str) -> None:
    for (topic, partition), offset in moved.items():
        await producer.send(_offsets_topic(alias), value=b"%d" % offset, key=f"{topic}:{partition}".encode())
    moved.clear()
    await producer.commit_transaction()
    await producer.begin_transaction()


def _offsets_topic(alias: str) -> str:
    return f"bench-floor-{alias}-offsets"


async def _copy(source: str, target: str, alias: str, topics: list[str]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            "group.id": f"bench-floor-{alias}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=target, transactional_id=f"bench-floor-{alias}", enable_idempotence=True
    )
    await producer.start()
    await producer.begin_transaction()
    consumer.subscribe(topics)
    # The consumer blocks in librdkafka: it waits in a thread while the loop serves the producer.
    reader = ThreadPoolExecutor(1)
    moved: dict[tuple[str, int], int] = {}  # the next offset of each partition copied since the last commit
    copied, committed_at = False, time.monotonic()
    try:
        while not stop.is_set():
            for message in await loop.run_in_executor(reader, consumer.consume, BATCH, COMMIT_SECONDS):
                if message.error() is not None:
                    if message.error().fatal():
                        raise KafkaException(message.error())
                    continue
                await _send(producer, alias, message)
                moved[(message.topic(), message.partition())] = message.offset() + 1
                copied = True
            if copied and time.monotonic() - committed_at >= COMMIT_SECONDS:
                await _commit(producer, moved, alias)
                copied, committed_at = False, time.monotonic()
        if copied:
            await _commit(producer, moved, alias)
        await producer.abort_transaction()  # the empty one begun after the last commit
    finally:
        await producer.stop()
        reader.shutdown()
        consumer.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor_aiokafka")
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("alias")
    parser.add_argument("patterns", nargs="+")
    args = parser.parse_args(argv)
    topics = matching_topics(args.source, args.patterns)
    create_remote(args.target, args.alias, topics)
    create_topics(
        AdminClient({"bootstrap.servers": args.target}),
        [(_offsets_topic(args.alias), 1, {"cleanup.policy": "compact"})],
        replication_factor=None,
    )
    asyncio.run(_copy(args.source, args.target, args.alias, sorted(topics)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
