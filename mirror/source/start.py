"""Where a copy task starts each partition (what it does when the source lost records: mirror.source.losses).

The positions group on the target is the truth: after the task's producer is initialised (every
older holder of its transactional id fenced), what it says was committed was copied. A partition
without a position is either new to the assignment (it starts where the source consumer's
auto.offset.reset says: its earliest offset, or with `latest` its end) or its remote topic was
deleted on the target, which made Kafka drop the group's offsets for it.

A remote topic counts as deleted and re-created only on positive proof (README, "Failures"):
its topic ID differs from the one committed with the position, or Kafka removed the position and
the remote partition holds nothing at all. A read that fails, times out or cannot be decided yet
(a partition without a leader, a transaction whose markers are pending) is asked again, never
taken for an empty partition or a lost position.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror.config.flow_settings import FlowSettings
from mirror.errors import KafkaClientError, RemoteTopicDeletedError
from mirror.flow.offsets_store import read_to_end
from mirror.flow.source_offsets import CONNECTOR_NAME, decode_key, decode_value
from mirror.kafka.admin import topic_ids
from mirror.kafka.offsets import (
    committed_with_metadata,
    earliest_offsets,
    high_watermarks,
    last_stable_offsets,
)
from mirror.kafka.transactions import RetriableError
from mirror.source.partition_copy import PartitionCopy
from mirror.source.partition_reads import holds_no_committed_record, seek
from mirror.source.positions import (
    landed_offset,
    recorded_epoch,
    recorded_source_topic_id,
    recorded_topic_id,
    unsynced_pair,
)

log = logging.getLogger(__name__)
Report = Callable[[str, str], None]  # (event kind, one-line message) for the driver's output


def read_positions(
    settings: FlowSettings,
    parts: Collection[PartitionCopy],
    *,
    positions: Consumer,
    source_admin: AdminClient,
    remote: Consumer,
    target_admin: AdminClient,
    report: Report,
) -> None:
    """Set every partition's position from the target; what had none starts per auto.offset.reset.

    Every read here either answers for every partition or raises (RetriableError, KafkaClientError:
    the task waits and reads again): a partition whose leader, coordinator or log cannot be read
    now is never taken for one without a position, an empty one or a re-created one.
    """
    ids = topic_ids(target_admin, {part.remote_topic for part in parts}, what=settings.target)
    for part in parts:
        if part.remote_topic not in ids:
            raise RetriableError(
                f"{part.where()}: {part.remote_topic} does not exist on {settings.target} (yet); "
                "waiting for topic sync to create it"
            )
        part.remote_topic_id = ids[part.remote_topic]
    sources = _source_topic_ids(settings, parts, source_admin)
    committed = committed_with_metadata(positions, [(p.remote_topic, p.partition) for p in parts])
    recreated = _recreated(parts, committed, target_admin)
    missing = [p for p in parts if (p.remote_topic, p.partition) not in committed or p in recreated]
    for part in parts:
        found = committed.get((part.remote_topic, part.partition))
        part.source_topic_id, part.epoch, part.position_topic_id = sources.get(part.topic), -1, None
        if found is not None and part not in recreated:
            part.position = part.committed = found[0]
            part.position_topic_id = recorded_source_topic_id(found[1])
            part.epoch = recorded_epoch(found[1], part.source_topic_id)
            # Carried forward, so a commit that moves the position without copying (past records the
            # source lost) still says where the partition's last record landed (`mirror verify`).
            part.last_downstream = max(part.last_downstream, landed_offset(found[1]))
            # The target's word on the trailing sync, not this task's memory: a commit that failed
            # here may have landed (its records' last pair is then due, and the copy will not send
            # it again), and a task that opens knows nothing of the last one's.
            # Not across a source topic deleted and made again (its ID, when recorded, says): the
            # pair is of the old topic's records.
            known = part.position_topic_id is not None and part.source_topic_id is not None
            same_source = not known or part.position_topic_id == part.source_topic_id
            part.unsynced = unsynced_pair(found[1]) if same_source else None
            part.last_upstream = part.unsynced[0] if part.unsynced is not None else -1
    if not missing:
        return
    earliest = earliest_offsets(source_admin, [(p.topic, p.partition) for p in missing])
    for part, proof in recreated.items():
        # Kafka may keep a deleted topic's group offsets for a while; the topic's ID says.
        part.recreated, part.last_downstream, part.committed = False, -1, None
        part.forget_syncs()
        part.position = _recopy(settings, part, earliest[(part.topic, part.partition)], proof, report)
    missing = [part for part in missing if part not in recreated]
    start = _new_partition_starts(settings, source_admin, missing, earliest)
    stored: dict[tuple[str, int], int] | None = None
    for part in missing:
        part.forget_syncs()  # copied from a start of its own: nothing of a copy before it is synced
        low = earliest[(part.topic, part.partition)]
        had_position = part.committed is not None
        part.committed = None  # so the task's first commit records where it starts
        if stored is None:
            # Only when positions are missing (a flow's first start, partitions added, a remote
            # topic deleted, a task killed before its first commit), so reading it is affordable.
            # It tells a partition never copied from one whose remote copy is gone.
            stored = _stored_positions(settings)
        if not had_position and (part.topic, part.partition) not in stored:
            # Never copied: a new partition, or a flow's first start. The task's first commit
            # stores this position, so a restart goes on from it rather than from a later end.
            part.position = start[(part.topic, part.partition)]
        elif holds_no_committed_record(
            remote, target_admin, part.remote_topic, part.partition, where=part.where()
        ):
            # Kafka removes a group's offsets for a topic when the topic is deleted; with the remote
            # partition holding nothing at all, the copy was deleted and the topic made again.
            proof = (
                "holds no record and Kafka removed the flow's position for it "
                f"(topic ID {part.remote_topic_id})"
            )
            part.position = _recopy(settings, part, low, proof, report)
        elif (part.topic, part.partition) in stored:
            part.position = stored[(part.topic, part.partition)]
            log.warning(
                "%s: position taken from %s: %d",
                part.where(),
                settings.offsets_topic,
                part.position,
                extra=part.log_fields(),
            )
        else:
            raise KafkaClientError(
                f"{part.where()}: the flow's position for {part.remote_topic}-{part.partition} is gone from "
                f"group {settings.positions_group()} and from {settings.offsets_topic}, but the remote "
                "partition holds records; restore the group's offsets, or delete the remote topic to copy "
                "the partition again"
            )


def _source_topic_ids(
    settings: FlowSettings, parts: Collection[PartitionCopy], source_admin: AdminClient
) -> dict[str, str | None]:
    """The source topics' IDs, which say whose log a committed epoch is of; with the source away,
    the IDs the task knew (the copy cannot read the source either until it answers)."""
    try:
        return topic_ids(source_admin, {part.topic for part in parts}, what=settings.source)
    except KafkaClientError:
        return {part.topic: part.source_topic_id for part in parts if part.source_topic_id}


def _new_partition_starts(
    settings: FlowSettings,
    source_admin: AdminClient,
    parts: Collection[PartitionCopy],
    earliest: dict[tuple[str, int], int],
) -> dict[tuple[str, int], int]:
    """Where each partition starts if the flow never copied it: MM2's source consumer setting."""
    if settings.auto_offset_reset != "latest" or not parts:
        return earliest
    # The read_committed end, where a read_committed consumer reset to latest would begin.
    return last_stable_offsets(source_admin, [(p.topic, p.partition) for p in parts])


def _stored_positions(settings: FlowSettings) -> dict[tuple[str, int], int]:
    """Where Connect's offsets topic says the flow got, per source partition (MM2's or ours)."""
    positions = {}
    for raw_key, raw_value in read_to_end(settings.target_consumer, settings.offsets_topic).items():
        decoded = decode_key(raw_key)
        offset = decode_value(raw_value)
        if decoded is None or offset is None or decoded[0] != CONNECTOR_NAME:
            continue
        source = decoded[1]
        if source.cluster == settings.source:
            # Connect stores the last replicated offset; replication resumes after it.
            positions[(source.topic, source.partition)] = offset + 1
    return positions


def _recreated(
    parts: Collection[PartitionCopy],
    committed: dict[tuple[str, int], tuple[int, str]],
    target_admin: AdminClient,
) -> dict[PartitionCopy, str]:
    """Partitions whose remote topic was deleted and re-created since their position was committed,
    each with its proof; only positive proof counts:
    - the topic ID the position was committed for is not the remote topic's ID now (KIP-516);
    - without a recorded ID (a position written by an older build, MM2 or `mirror offsets`): the
      remote partition's log, undecided records included, ends at or below where the flow's last
      record landed. Its read_committed end is no proof: a transaction whose markers wait for a
      new leader holds it back at its first record, which can be the landed record itself;
    - records of this task landed below earlier ones while it ran (part.recreated).
    """
    proofs: dict[PartitionCopy, str] = {}
    unrecorded: dict[PartitionCopy, int] = {}
    for part in parts:
        found = committed.get((part.remote_topic, part.partition))
        if part.recreated:
            proofs[part] = "took records at offsets below ones this task had copied into it"
        if found is None:
            continue
        recorded = recorded_topic_id(found[1])
        if recorded is not None and part.remote_topic_id is not None:
            if recorded != part.remote_topic_id:
                proofs[part] = (
                    f"is a new topic (topic ID {part.remote_topic_id}; the flow copied into {recorded})"
                )
        elif landed_offset(found[1]) >= 0:
            unrecorded[part] = landed_offset(found[1])
    if unrecorded:
        ends = high_watermarks(target_admin, [(p.remote_topic, p.partition) for p in unrecorded])
        for part, landed in unrecorded.items():
            end = ends[(part.remote_topic, part.partition)]
            if end <= landed:
                proofs[part] = f"ends at offset {end}, below where the flow's last record landed ({landed})"
    return proofs


def _recopy(settings: FlowSettings, part: PartitionCopy, low: int, proof: str, report: Report) -> int:
    message = (
        f"{part.where()}: {part.remote_topic}-{part.partition} on {settings.target} {proof}: "
        "the remote topic was deleted and re-created"
    )
    if settings.on_remote_topic_deleted == "fail":
        raise RemoteTopicDeletedError(
            f"{message}; restore it, or set on_remote_topic_deleted: recopy to copy the partition "
            f"again from offset {low}"
        )
    log.error("%s; copying the partition again from offset %d", message, low, extra=part.log_fields())
    report(
        "recopied",
        f"flow {settings.name}: {part.remote_topic}-{part.partition} on {settings.target} had been deleted "
        f"and re-created; copying {part.topic}-{part.partition} into it again from offset {low}",
    )
    return low


def seek_to_position(source: Consumer, part: PartitionCopy) -> None:
    seek(source, part.topic, part.partition, part.position)


def start_of(part: PartitionCopy) -> TopicPartition:
    """Where the consumer starts `part`. With the epoch committed, librdkafka checks that the source
    log still holds what was copied before it reads on (KIP-320): a log that an unclean leader
    election truncated fails the check, rather than being read from the same offsets as if new."""
    if part.epoch < 0:
        return TopicPartition(part.topic, part.partition, part.position)
    return TopicPartition(part.topic, part.partition, part.position, leader_epoch=part.epoch)
