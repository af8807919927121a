"""A copy task's source reads, split over one consumer per PARTITIONS_PER_CONSUMER partitions.

librdkafka has no incremental fetch sessions (KIP-227): every fetch request names every partition
the consumer reads from that broker. The broker parks each request in its fetch purgatory, on a
watch list per partition, and drops the completed ones from idle partitions' lists only at its
periodic purge (about every 1,000 requests). With 5,000 partitions per consumer (10,000 in two
tasks) those lists held ~2 million entries, ~600 MB of a 1 GiB source broker's heap, until it ran
out of memory. Requests of at most 1,000 partitions keep that a fifth as large, whatever the
task's share; up to that many partitions a task keeps a single consumer, and nothing changes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

PARTITIONS_PER_CONSUMER = 1000
# While every consumer is idle, how long one of them is waited on before the next is looked at:
# the most a record arriving at another one waits.
_WAIT_SLICE_SECONDS = 0.01


class SplitReader:
    """The task's partitions in sorted runs of at most PARTITIONS_PER_CONSUMER, one consumer each;
    reads as one consumer does (assign, consume, poll, position), fairly across them."""

    def __init__(
        self,
        partitions: Sequence[tuple[str, int]],
        new_consumer: Callable[[], Consumer],
        *,
        per_consumer: int = PARTITIONS_PER_CONSUMER,
    ) -> None:
        ordered = sorted(partitions)
        runs = [ordered[i : i + per_consumer] for i in range(0, len(ordered), per_consumer)] or [[]]
        self._new_consumer = new_consumer
        self.consumers: list[Consumer] = [new_consumer() for _ in runs]
        self._assigned = False
        self._owner = {partition: index for index, run in enumerate(runs) for partition in run}
        self._next = 0  # the consumer read first next time, so none is starved

    def reader_of(self, topic: str, partition: int) -> Consumer:
        """The consumer reading `topic`-`partition` (single-partition reads: seek, watermarks)."""
        return self.consumers[self._owner.get((topic, partition), 0)]

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Read `partitions` from their offsets. Every assign after the first reads through new
        consumers: until a re-assigned partition's first fetch, librdkafka answers position() from
        the last record the application consumed before it (after consuming to 500 and
        re-assigning 100, it said 500 in 4 trials of 20). A copy task that rewound after an abort
        would then take that position as swept, past the aborted records, and commit it: they
        were lost (75 records, in a CI takeover run). A new consumer has consumed nothing."""
        if self._assigned:
            old, self.consumers = self.consumers, []
            for consumer in old:
                with contextlib.suppress(KafkaException):
                    consumer.close()
            self.consumers = [self._new_consumer() for _ in old]
        self._assigned = True
        for consumer, own in zip(self.consumers, self._split(partitions), strict=True):
            consumer.assign(own)

    def position(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        """Positions in the order asked."""
        if len(self.consumers) == 1:
            positions: list[TopicPartition] = self.consumers[0].position(list(partitions))
            return positions
        # Each answer goes back to the index it was asked at: no map keyed by (topic, partition)
        # over thousands of partitions at every commit.
        owner = self._owner
        split: list[list[int]] = [[] for _ in self.consumers]
        for index, tp in enumerate(partitions):
            split[owner.get((tp.topic, tp.partition), 0)].append(index)
        answered = list(partitions)  # every index is asked of exactly one consumer, and replaced
        for consumer, indexes in zip(self.consumers, split, strict=True):
            if indexes:
                own = consumer.position([partitions[i] for i in indexes])
                for index, tp in zip(indexes, own, strict=True):
                    answered[index] = tp
        return answered

    def pause(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Fetch none of `partitions` until resumed (librdkafka then fetches each from the position
        the task consumed up to); new consumers (assign) fetch them all again."""
        for consumer, own in zip(self.consumers, self._split(_as_tps(partitions)), strict=True):
            if own:
                consumer.pause(own)

    def resume(self, partitions: Sequence[tuple[str, int]]) -> None:
        for consumer, own in zip(self.consumers, self._split(_as_tps(partitions)), strict=True):
            if own:
                consumer.resume(own)

    def fetched_end(self, topic: str, partition: int) -> int:
        """The partition's end as its last fetch answer told it (librdkafka's cache, no request;
        for a read_committed consumer its last stable offset), -1 if none came since it was
        assigned. Every fetch answer tells the end of every partition in the request, records or
        not, so it stays current while the partition is fetched at all."""
        try:
            ends = self.reader_of(topic, partition).get_watermark_offsets(
                TopicPartition(topic, partition), cached=True
            )
        except KafkaException:
            return -1
        return int(ends[1]) if ends is not None and ends[1] >= 0 else -1

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        """Up to `num_messages` of what the consumers hold now, each asked in turn; only a single
        consumer is waited on (`timeout`), as poll() waits on several."""
        messages: list[Message]
        if len(self.consumers) == 1:
            messages = self.consumers[0].consume(num_messages, timeout)
            return messages
        messages = []
        for consumer in self._in_turn():
            if len(messages) >= num_messages:
                break
            messages.extend(consumer.consume(num_messages - len(messages), 0))
        return messages

    def poll(self, timeout: float) -> Message | None:
        """The first message any consumer has within `timeout`."""
        if len(self.consumers) == 1:
            return self.consumers[0].poll(timeout)
        deadline = time.monotonic() + timeout
        while True:
            for consumer in self._in_turn():
                message = consumer.poll(0)
                if message is not None:
                    return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            message = self.consumers[self._next].poll(min(remaining, _WAIT_SLICE_SECONDS))
            if message is not None:
                return message

    def close(self) -> None:
        for consumer in self.consumers:
            consumer.close()

    def _in_turn(self) -> list[Consumer]:
        start = self._next
        self._next = (start + 1) % len(self.consumers)
        return self.consumers[start:] + self.consumers[:start]

    def _split(self, partitions: Sequence[TopicPartition]) -> list[list[TopicPartition]]:
        split: list[list[TopicPartition]] = [[] for _ in self.consumers]
        for tp in partitions:
            split[self._owner.get((tp.topic, tp.partition), 0)].append(tp)
        return split


def _as_tps(partitions: Sequence[tuple[str, int]]) -> list[TopicPartition]:
    return [TopicPartition(topic, partition) for topic, partition in partitions]
