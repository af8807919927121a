"""Which `mirror run` instance owns a flow: the holder of the flow's lease transactional id.

Starting an instance initialises the lease id, which fences the previous holder (KIP-98 epoch
bump). Each holder proves it still owns the flow by committing a tiny transaction; once fenced,
it must stop. The data path fences zombies on its own; the lease turns that into a clear exit.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror.errors import FlowTakenOverError
from mirror.kafka.clients import consumer, producer, translate
from mirror.replication.settings import FlowSettings


class FlowLease:
    def __init__(self, settings: FlowSettings) -> None:
        self._settings = settings
        self._producer = producer(
            {**settings.target_producer, "transactional.id": settings.lease_transactional_id()}
        )
        self._group = consumer(
            {**settings.target_consumer, "group.id": f"__mirror-instance.{settings.source}-{settings.target}"}
        )
        # When the target last answered; renewals are the flow's heartbeat with its target.
        self.last_renewed = time.monotonic()
        self._unfinished = False

    def acquire(self) -> None:
        try:
            self._producer.init_transactions(60)
        except KafkaException as exc:
            raise translate(exc, f"flow {self._settings.name}: taking the flow's lease") from exc

    def renew(self) -> None:
        """Raise FlowTakenOverError if another instance acquired the lease since."""
        # An empty transaction never reaches the coordinator; committing a group offset does.
        mark = [TopicPartition(self._settings.offsets_topic, 0, 0)]
        try:
            if self._unfinished:
                # A renewal that timed out (the target not answering) left its transaction open.
                self._abort_unfinished()
            self._producer.begin_transaction()
            self._unfinished = True
            self._producer.send_offsets_to_transaction(mark, self._group.consumer_group_metadata(), 30)
            self._producer.commit_transaction(30)
            self._unfinished = False
            self.last_renewed = time.monotonic()
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise FlowTakenOverError(
                    f"flow {self._settings.name}: another mirror instance took over this flow; "
                    "this one stops (run one instance per flow)"
                ) from exc
            # Anything else (the target away for a while) is retried at the next renewal.

    def _abort_unfinished(self) -> None:
        try:
            self._producer.abort_transaction(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._STATE:  # _STATE: nothing was open after all
                raise
        self._unfinished = False

    def close(self) -> None:
        self._group.close()
