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
        self._group = consumer({**settings.target_consumer, "group.id": settings.lease_group()})
        # When the target last answered; renewals are the flow's heartbeat with its target.
        self.last_renewed = time.monotonic()
        self._unfinished = False

    def acquire(self) -> None:
        try:
            self._producer.init_transactions(60)
        except KafkaException as exc:
            raise translate(exc, f"flow {self._settings.name}: taking the flow's lease") from exc
        # Record the new owner before any task runs, so fenced tasks of the old one stop.
        try:
            self._commit_mark()
        except KafkaException as exc:
            raise translate(
                exc, f"flow {self._settings.name}: recording this instance as the flow's owner"
            ) from exc
        self.last_renewed = time.monotonic()

    def renew(self) -> None:
        """Raise FlowTakenOverError if another instance acquired the lease since."""
        try:
            if self._unfinished:
                # A renewal that timed out (the target not answering) left its transaction open.
                self._abort_unfinished()
            self._commit_mark()
            self.last_renewed = time.monotonic()
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise FlowTakenOverError(
                    f"flow {self._settings.name}: another mirror instance took over this flow; "
                    "this one stops (run one instance per flow)"
                ) from exc
            # Anything else (the target away for a while) is retried at the next renewal.

    def _commit_mark(self) -> None:
        # An empty transaction never reaches the coordinator; committing a group offset does.
        # Its metadata names this instance: the flow's owner, as fenced tasks check (range_copier).
        mark = [TopicPartition(self._settings.offsets_topic, 0, 0, metadata=self._settings.instance_id)]
        self._producer.begin_transaction()
        self._unfinished = True
        self._producer.send_offsets_to_transaction(mark, self._group.consumer_group_metadata(), 30)
        self._producer.commit_transaction(30)
        self._unfinished = False

    def _abort_unfinished(self) -> None:
        try:
            self._producer.abort_transaction(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._STATE:  # _STATE: nothing was open after all
                raise
        self._unfinished = False

    def close(self) -> None:
        self._group.close()
