"""The floor: the least a Python replicator can do with confluent-kafka, exactly once.

`python -m bench.floor SOURCE TARGET ALIAS REGEX...` copies every source topic that full-matches
one of the regexes to `ALIAS.<topic>` on the target, same partition, key, value, headers and
timestamp, in one process: one read_committed consumer (a consumer group, as MM2's tasks and most
applications use), one transactional producer, a transaction committed every 100 ms with the
consumer's positions in it (send_offsets_to_transaction, as offsets of a group on the target under
the remote topics' names: the target has no partition of the source's names). No Spark, no offset syncs, no
checkpoints, no metrics: whatever `mirror` costs beyond this on the same partitions is ours, and
what this costs is librdkafka's and the brokers'. Library defaults everywhere else.
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.workloads import matching_topics
from mirror.kafka.admin import create_topics

COMMIT_SECONDS = 0.1  # mirror's default commit_interval_ms
BATCH = 10_000


def _create_remote(target: str, alias: str, topics: dict[str, int]) -> None:
    remote: list[tuple[str, int, dict[str, str]]] = [(f"{alias}.{n}", p, {}) for n, p in topics.items()]
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


def _commit(producer: Producer, consumer: Consumer, positions_group: Consumer, alias: str) -> None:
    positions = [
        TopicPartition(f"{alias}.{tp.topic}", tp.partition, tp.offset)
        for tp in consumer.position(consumer.assignment())
        if tp.offset >= 0
    ]
    producer.send_offsets_to_transaction(positions, positions_group.consumer_group_metadata())
    producer.commit_transaction()
    producer.begin_transaction()


def main(argv: list[str]) -> int:
    source, target, alias, *patterns = argv
    topics = matching_topics(source, patterns)
    _create_remote(target, alias, topics)
    stop = False

    def _stop(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            "group.id": f"bench-floor-{alias}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer({"bootstrap.servers": target, "transactional.id": f"bench-floor-{alias}"})
    positions_group = Consumer({"bootstrap.servers": target, "group.id": f"bench-floor-{alias}"})
    producer.init_transactions()
    producer.begin_transaction()
    consumer.subscribe(sorted(topics))
    copied, committed_at = False, time.monotonic()
    while not stop:
        for message in consumer.consume(BATCH, COMMIT_SECONDS):
            if message.error() is not None:
                if message.error().fatal():
                    raise KafkaException(message.error())
                continue
            _produce(producer, alias, message)
            copied = True
        if copied and time.monotonic() - committed_at >= COMMIT_SECONDS:
            _commit(producer, consumer, positions_group, alias)
            copied, committed_at = False, time.monotonic()
    if copied:
        _commit(producer, consumer, positions_group, alias)
    producer.abort_transaction()  # the empty one begun after the last commit
    consumer.close()
    positions_group.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
