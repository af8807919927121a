"""A copy task's clients for one flow: mirror.source.copy_clients, given the flow's properties and names."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import cached_property
from typing import Any

from confluent_kafka import Consumer, Producer

from mirror.config.flow_settings import FlowSettings
from mirror.kafka.clients import admin_client
from mirror.kafka.packing_producer import CopyProducer
from mirror.source import copy_clients
from mirror.source.split_reader import SplitReader


def _copier_group(settings: FlowSettings) -> str:
    return f"mirror-{settings.source}-{settings.target}-copier"


def source_reader(settings: FlowSettings, partitions: Sequence[tuple[str, int]]) -> SplitReader:
    """The consumers of every partition the task owns (one per thousand); assign()ed, never subscribed.
    Their prefetch is sized for the task's whole share, so it stays bounded however it is split."""
    return SplitReader(
        partitions,
        lambda: copy_clients.source_reader(
            settings.source_consumer, _copier_group(settings), len(partitions)
        ),
    )


def end_asker(settings: FlowSettings) -> Consumer:
    """Asks the source for paused partitions' read_committed ends (mirror.source.idle_pause)."""
    return copy_clients.end_asker(settings.source_consumer, _copier_group(settings))


def source_admin(settings: FlowSettings) -> Any:
    return admin_client(settings.source_admin)


def positions_reader(settings: FlowSettings) -> Consumer:
    """Reads (read_committed) and, at-least-once, commits the flow's positions group."""
    return copy_clients.positions_reader(settings.target_consumer, settings.positions_group())


def remote_reader(settings: FlowSettings) -> Consumer:
    """Reads remote partitions read_committed, to tell an empty one from one holding records."""
    return copy_clients.remote_reader(settings.target_consumer, _copier_group(settings))


def task_writer(
    settings: FlowSettings, transactional_id: str | None, topics: Collection[str]
) -> CopyProducer:
    """The task's producer, on the target: transactional (fencing every older holder of the id)
    or, at-least-once, idempotent; librdkafka's or aiokafka's, as the flow's copy_producer says.
    `topics` are the ones it will write."""
    return copy_clients.task_writer(
        settings.target_producer,
        transactional_id,
        commit_interval_ms=settings.commit_interval_ms,
        doing=f"flow {settings.name}: initialising {transactional_id}",
        packing_group=settings.positions_group() if settings.copy_producer == "aiokafka" else None,
        topics=topics,
    )


def sync_writer(settings: FlowSettings) -> Producer:
    """Writes OffsetSyncs into the source cluster (offset_syncs_topic_location: source)."""
    return copy_clients.sync_writer(settings.source_producer)


class RareClients:
    """The clients a copy task needs only to start a partition or to recover one (reading
    positions, skipping lost records), made the first time they are asked for."""

    def __init__(self, settings: FlowSettings) -> None:
        self._settings = settings

    @cached_property
    def source_admin(self) -> Any:
        return source_admin(self._settings)

    @cached_property
    def target_admin(self) -> Any:
        return admin_client(self._settings.target_admin)

    @cached_property
    def remote_reader(self) -> Consumer:
        return remote_reader(self._settings)

    def close(self) -> None:
        if "remote_reader" in self.__dict__:  # made: cached_property keeps it in the instance
            self.remote_reader.close()
