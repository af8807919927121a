"""A flow's source positions, listed and moved: MM2's offsets API (KIP-875) for `mirror offsets`.

A flow's position per source partition lives in two places on the target, written together in
every copy transaction (mirror.source.transaction): the positions group (what copy tasks read)
and the offsets topic in Connect's format (what MM2 reads). Moving positions writes both in one
transaction, after the flow has been taken over as a new `mirror run` takes it: the lease first
(a running instance exits at its next renewal), then a mark naming a newer copy generation, then
every copy-task transactional id fenced. No task of an earlier run can commit after that, and the
next `mirror run` copies from the new positions: back for a re-copy, forward to skip.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition

from mirror.config.flow_settings import FlowSettings
from mirror.errors import (
    ClusterAuthenticationError,
    ClusterTlsError,
    ConfigError,
    FlowInUseError,
    KafkaClientError,
    NotAuthorizedError,
)
from mirror.flow.mark import FlowMark
from mirror.flow.ownership import flow_mark_reader, read_flow_mark
from mirror.flow.source_offsets import SourcePartition, encode_key, encode_value
from mirror.kafka.clients import admin_client, consumer, producer, translate
from mirror.kafka.fencing import fence_transactional_ids
from mirror.kafka.offsets import committed_with_metadata, earliest_offsets, last_stable_offsets
from mirror.kafka.transactions import AbortableError, RetriableError
from mirror.source.lease import FlowLease
from mirror.source.positions import landed_offset
from mirror.topics.sync import TopicSync

log = logging.getLogger(__name__)

Partition = tuple[str, int]
MARK_READ_SECONDS = 15.0


@dataclass(frozen=True)
class PositionRow:
    """One source partition of a flow: where the flow goes on, and what the source holds."""

    topic: str
    partition: int
    position: int | None  # the next source offset the flow copies; None: it never copied this one
    earliest: int
    end: int  # the source's last stable offset

    @property
    def lag(self) -> int | None:
        return None if self.position is None else max(0, self.end - self.position)

    @property
    def to_copy(self) -> int:
        """Source offsets the flow has still to copy; all of them if it never copied the partition."""
        return max(
            0, self.end - (self.earliest if self.position is None else max(self.position, self.earliest))
        )


def list_positions(
    settings: FlowSettings, topics: Collection[str] = (), *, not_yet_on_target: bool = False
) -> list[PositionRow]:
    """Every partition the flow copies (of `topics`, if given), with its position and the source's
    range; with `not_yet_on_target`, also those whose remote topic does not exist yet."""
    sync = TopicSync(settings)
    listed = sync.selected_partitions() if not_yet_on_target else sync.replicated_partitions()
    partitions = [(t, p) for t, p in listed if not topics or t in topics]
    source = admin_client(settings.source_admin)
    earliest = earliest_offsets(source, partitions)
    ends = last_stable_offsets(source, partitions)
    committed = _committed(settings, partitions)
    return [
        PositionRow(t, p, committed.get((t, p)), earliest[(t, p)], ends[(t, p)])
        for t, p in sorted(partitions)
    ]


def move_positions(settings: FlowSettings, wanted: Mapping[Partition, int], *, force: bool) -> None:
    """Set the flow's position of each partition in `wanted`, for the next `mirror run` to copy from.

    Refuses (FlowInUseError) while the flow's last mark does not say its owner stopped, unless
    `force`: then the owner is fenced, and a running instance exits at its next lease renewal.
    """
    if not wanted:
        return
    owner = last_owner(settings)
    if owner is None or not owner.stopping:
        who = "an unknown instance" if owner is None else f"instance {owner.instance}"
        if not force:
            raise FlowInUseError(
                f"flow {settings.name}: {who} may still be running it (the flow's mark does not say it "
                "stopped); stop that `mirror run` first, or pass --force to fence it (it then exits)"
            )
        log.warning("flow %s: fencing %s (--force)", settings.name, who)
    mine = dataclasses.replace(settings, instance_id=f"mirror-offsets-{uuid.uuid4().hex[:8]}")
    lease = FlowLease(mine)
    try:
        previous = lease.take()
        task_ids = max(previous.task_ids if previous else 0, settings.copy_task_ids())
        generation = (previous.generation if previous else 0) + 1
        # Stopping, and a newer generation: a task of the previous run that re-opens ends.
        lease.acquire(FlowMark(mine.instance_id, generation, task_ids, stopping=True))
        ids = [settings.copy_task_transactional_id(i) for i in range(task_ids)]
        fence_transactional_ids(settings.target_producer, ids, doing=f"flow {settings.name}: fencing")
        _write(settings, wanted)
    finally:
        lease.close()
    # A `mirror run` starting meanwhile may have taken the flow back before its tasks opened.
    now = last_owner(settings)
    if now is None or now.instance != mine.instance_id:
        raise FlowInUseError(
            f"flow {settings.name}: a `mirror run` took the flow while the positions were written, and "
            "may have copied past them; stop it and run this command again"
        )


def last_owner(settings: FlowSettings, *, wait_seconds: float = MARK_READ_SECONDS) -> FlowMark | None:
    """The flow's mark; an open lease transaction (a killed owner) reads as no mark at all once
    `wait_seconds` have passed without it ending."""
    reader = flow_mark_reader(settings)
    deadline = time.monotonic() + wait_seconds
    try:
        while True:
            try:
                return read_flow_mark(settings, reader)
            except (NotAuthorizedError, ClusterAuthenticationError, ClusterTlsError):
                raise  # not "no owner": the caller would say an unknown instance may be running it
            except (RetriableError, AbortableError, KafkaClientError):
                if time.monotonic() >= deadline:
                    return None
            time.sleep(0.5)
    finally:
        reader.close()


def _committed(settings: FlowSettings, partitions: Collection[Partition]) -> dict[Partition, int]:
    return {tp: position for tp, (position, _) in positions_and_landings(settings, partitions).items()}


def positions_and_landings(
    settings: FlowSettings, partitions: Collection[Partition]
) -> dict[Partition, tuple[int, int]]:
    """Per source partition, the flow's committed position and where the partition's last copied
    record landed on the target (-1 if its position does not say: written by MM2)."""
    reader = consumer(
        {
            **settings.target_consumer,
            "group.id": settings.positions_group(),
            "isolation.level": "read_committed",
        }
    )
    try:
        remote = {(settings.remote_topic(t), p): (t, p) for t, p in partitions}
        return {
            remote[tp]: (position, landed_offset(metadata))
            for tp, (position, metadata) in committed_with_metadata(reader, remote).items()
        }
    finally:
        reader.close()


def _write(settings: FlowSettings, wanted: Mapping[Partition, int]) -> None:
    """The new positions, in the offsets topic and the positions group, in one transaction."""
    remote = {(t, p): (settings.remote_topic(t), p) for t, p in wanted}
    remote_ends = last_stable_offsets(admin_client(settings.target_admin), remote.values())
    writer = producer(
        {
            **settings.target_producer,
            "transactional.id": settings.offsets_tool_transactional_id(),
            # Java-compatible key hashing: the record lands in the partition Connect would use.
            "partitioner": "murmur2_random",
        }
    )
    group = consumer({**settings.target_consumer, "group.id": settings.positions_group()})
    doing = f"flow {settings.name}: writing the new positions"
    try:
        writer.init_transactions(60)
        writer.begin_transaction()
        positions = []
        for (topic, partition), position in sorted(wanted.items()):
            key = encode_key(SourcePartition(settings.source, topic, partition))
            # Connect stores the last copied offset; none before the first, so a tombstone (else
            # the next run would move the group up to the old, higher record: positions.py).
            value = encode_value(position - 1) if position > 0 else None
            writer.produce(settings.offsets_topic, key=key, value=value)
            remote_topic, remote_partition = remote[(topic, partition)]
            # "d=": where the remote partition ends now, so the next run does not take it for re-created.
            landed = remote_ends[(remote_topic, remote_partition)] - 1
            positions.append(
                TopicPartition(
                    remote_topic, remote_partition, position, metadata=f"d={landed}" if landed >= 0 else ""
                )
            )
        writer.send_offsets_to_transaction(positions, group.consumer_group_metadata(), 60)
        writer.commit_transaction(60)
    except KafkaException as exc:
        raise translate(exc, doing) from exc
    finally:
        group.close()


def check_in_range(rows: Mapping[Partition, PositionRow], wanted: Mapping[Partition, int]) -> None:
    """ConfigError, one line per partition, for positions outside what the source holds."""
    problems = []
    for (topic, partition), offset in sorted(wanted.items()):
        row = rows[(topic, partition)]
        if not row.earliest <= offset <= row.end:
            problems.append(
                f"{topic}-{partition}: offset {offset} is outside the source's range "
                f"{row.earliest}..{row.end}; choose an offset in it (or --to-earliest, --to-latest)"
            )
    if problems:
        raise ConfigError(problems)
