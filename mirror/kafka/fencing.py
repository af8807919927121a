"""Fence the writers a previous run left behind, before this run reads any position (KIP-618's fencing round).

A `mirror run` killed mid-transaction leaves that transaction open on the target, positions group
offset included. Until it is aborted, the broker will not answer a read_committed fetch of those
offsets (KIP-447), so start-up would wait for transaction.timeout.ms. Initialising each partition's
transactional id aborts it at once, and fences any writer of the old run that is still alive.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaException

from mirror.kafka.clients import producer, translate
from mirror.replication.settings import FlowSettings

PARALLEL_FENCES = 8


def fence_previous_writers(settings: FlowSettings, partitions: Iterable[tuple[str, int]]) -> int:
    """Initialise the transactional id of every source partition; returns how many were fenced."""

    def fence(partition: tuple[str, int]) -> None:
        transactional_id = settings.transactional_id(*partition)
        writer = producer({**settings.target_producer, "transactional.id": transactional_id})
        try:
            writer.init_transactions(60)
        except KafkaException as exc:
            raise translate(
                exc, f"flow {settings.name}: fencing earlier writers of {transactional_id}"
            ) from exc

    partitions = list(partitions)
    if not settings.exactly_once or not partitions:
        return 0
    with ThreadPoolExecutor(max_workers=PARALLEL_FENCES) as pool:
        list(pool.map(fence, partitions))
    return len(partitions)
