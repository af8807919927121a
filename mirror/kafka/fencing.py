"""Fence transactional ids: initialise each once, which ends its open transaction and makes any
producer still holding it a zombie whose next transactional call fails (KIP-98 epoch bump).

This is how a new copy generation (or a new `mirror run`) makes sure no task of the previous one
can commit a partition another task now owns, as KIP-618's fencing round does for Connect. It also
unblocks reads: until a killed writer's transaction is aborted, the broker will not answer a
read_committed fetch of the group offsets it touched (KIP-447).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaException

from mirror.kafka.clients import producer, translate

PARALLEL_FENCES = 8


def fence_transactional_ids(properties: Mapping[str, str], ids: Iterable[str], *, doing: str) -> int:
    """Initialise every id of `ids` with producers built from `properties`; returns how many."""

    def fence(transactional_id: str) -> None:
        writer = producer({**properties, "transactional.id": transactional_id})
        try:
            writer.list_topics(timeout=30)  # see transactions.init_transactions: skips a 500 ms retry
            writer.init_transactions(60)
        except KafkaException as exc:
            raise translate(exc, f"{doing}: {transactional_id}") from exc

    ids = list(ids)
    with ThreadPoolExecutor(max_workers=PARALLEL_FENCES) as pool:
        list(pool.map(fence, ids))
    return len(ids)
