"""The floor: the least a Python replicator can do with confluent-kafka, exactly once.

`python -m bench.floor [--producers K] SOURCE TARGET ALIAS REGEX...` copies every source topic
that full-matches one of the regexes to `ALIAS.<topic>` on the target, same partition, key, value,
headers and timestamp, in one process: one read_committed consumer (a consumer group, as MM2's
tasks and most applications use), one transactional producer, a transaction committed every
100 ms with the positions of the partitions it copied since the last one in it
(send_offsets_to_transaction, as offsets of a group on the target under the remote topics' names:
the target has no partition of the source's names). No Spark, no offset syncs, no checkpoints, no
metrics: whatever `mirror` costs beyond this on the same partitions is ours, and what this costs is
librdkafka's and the brokers'. Library defaults everywhere else.

With `--producers K` the partitions are dealt over K transactional producers, each committing its
own partitions' positions: librdkafka sends one partition per produce request, at most five in
flight per connection, so K producers (K connections) are the lever for many thin partitions.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.workloads import matching_topics
from mirror.kafka.admin import create_topics

COMMIT_SECONDS = 0.1  # mirror's default commit_interval_ms
BATCH = 10_000


def create_remote(
    target: str, alias: str, topics: dict[str, int], *, also: tuple[tuple[str, int, dict[str, str]], ...] = ()
) -> None:
    """The remote topics of `topics` on the target, and the topics `also` (name, partitions, config)."""
    remote: list[tuple[str, int, dict[str, str]]] = [(f"{alias}.{n}", p, {}) for n, p in topics.items()]
    remote += also
    create_topics(AdminClient({"bootstrap.servers": target}), remote, replication_factor=None)


def _produce(producer: Producer, alias: str, message: Message) -> None:
    kind, timestamp = message.timestamp()
    while True:
        try:
            producer.produce(
                f"{alias}.{message.topic()}",
                message.value(),
                message.key(),
                message.partition(),
                timestamp=timestamp if kind else 0,
                headers=message.headers(),
            )
            return
        except BufferError:
            producer.poll(0.05)  # the local queue is full: serve delivery reports, then again


def _commit(
    producers: list[Producer],
    moved: dict[tuple[str, int], int],
    positions_group: Consumer,
    alias: str,
    pool: ThreadPoolExecutor,
) -> None:
    # Every producer sends at once; then each commits its own partitions' positions, in parallel.
    # Only the partitions copied since the last commit: a position that did not move is committed
    # already, and 10,000 of them in every transaction would cost what neither replicator pays.
    for producer in producers:
        producer.flush()
    metadata = positions_group.consumer_group_metadata()
    owned: list[list[TopicPartition]] = [[] for _ in producers]
    for (topic, partition), offset in moved.items():
        owned[_route(topic, partition, len(producers))].append(
            TopicPartition(f"{alias}.{topic}", partition, offset)
        )
    moved.clear()

    def commit(index: int) -> None:
        producer = producers[index]
        if owned[index]:
            producer.send_offsets_to_transaction(owned[index], metadata)
        producer.commit_transaction()
        producer.begin_transaction()

    list(pool.map(commit, range(len(producers))))


def source_consumer(source: str, alias: str) -> Consumer:
    """The floor's reader: read_committed, in a group (as MM2's tasks and most applications read),
    from the start. Its positions are committed on the target, not here, and never read back: a
    floor measures one run from an empty target and is not restarted."""
    return Consumer(
        {
            "bootstrap.servers": source,
            "group.id": f"bench-floor-{alias}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )


def _route(topic: str, partition: int, count: int) -> int:
    return (zlib.crc32(topic.encode()) + partition) % count


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor")
    parser.add_argument("--producers", type=int, default=1)
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("alias")
    parser.add_argument("patterns", nargs="+")
    args = parser.parse_args(argv)
    source, target, alias, patterns = args.source, args.target, args.alias, args.patterns
    topics = matching_topics(source, patterns)
    create_remote(target, alias, topics)
    stop = False

    def _stop(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    consumer = source_consumer(source, alias)
    producers = [
        Producer({"bootstrap.servers": target, "transactional.id": f"bench-floor-{alias}-{index}"})
        for index in range(args.producers)
    ]
    positions_group = Consumer({"bootstrap.servers": target, "group.id": f"bench-floor-{alias}"})
    for producer in producers:
        producer.init_transactions()
        producer.begin_transaction()
    pool = ThreadPoolExecutor(len(producers))
    consumer.subscribe(sorted(topics))
    moved: dict[tuple[str, int], int] = {}  # the next offset of each partition copied since the last commit
    copied, committed_at = False, time.monotonic()
    while not stop:
        for message in consumer.consume(BATCH, COMMIT_SECONDS):
            if message.error() is not None:
                if message.error().fatal():
                    raise KafkaException(message.error())
                continue
            _produce(producers[_route(message.topic(), message.partition(), len(producers))], alias, message)
            moved[(message.topic(), message.partition())] = message.offset() + 1
            copied = True
        if copied and time.monotonic() - committed_at >= COMMIT_SECONDS:
            _commit(producers, moved, positions_group, alias, pool)
            copied, committed_at = False, time.monotonic()
    if copied:
        _commit(producers, moved, positions_group, alias, pool)
    for producer in producers:
        producer.abort_transaction()  # the empty one begun after the last commit
    pool.shutdown()
    consumer.close()
    positions_group.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
