"""Reconcile a flow's positions group with its offsets topic before replication starts.

The offsets topic (Connect's format) is what MM2 and KIP-618 tooling read and write; the
positions group is the O(1) guard the copy tasks read. If MM2, or an older mirror, advanced the
offsets topic past the group, the group is moved forward so nothing is copied twice.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from mirror.config.flow_settings import FlowSettings
from mirror.flow.offsets_store import read_to_end
from mirror.flow.source_offsets import CONNECTOR_NAME, decode_key, decode_value
from mirror.kafka.clients import consumer
from mirror.kafka.offsets import commit_positions, committed_positions

log = logging.getLogger(__name__)


def position_metadata(
    landed: int,
    topic_id: str | None,
    epoch: int = -1,
    source_topic_id: str | None = None,
    unsynced: int = -1,
) -> str:
    """A position's metadata, written with it in each copy transaction: where the partition's last
    copied record landed on the target (`d=`), the ID of the remote topic it landed in (`t=`),
    which tells a remote topic deleted and re-created since from the same topic (KIP-516), and the
    source leader epoch of the last record before the position (`e=`) with the ID of the source
    topic it is of (`s=`): with them the consumer checks that the source log still holds what was
    copied (KIP-320), which says nothing once the source topic is a new one. `u=` is the source
    offset of that last record when no offset sync covers it yet: its trailing sync is still due,
    and a task that opens after this one (killed, fenced, or unsure its commit landed) sends it."""
    fields = [f"d={landed}"]
    if topic_id:
        fields.append(f"t={topic_id}")
    if epoch >= 0 and source_topic_id:
        fields += [f"e={epoch}", f"s={source_topic_id}"]
    if unsynced >= 0 and landed >= 0:
        fields.append(f"u={unsynced}")
    return ";".join(fields)


def _fields(metadata: str) -> dict[str, str]:
    return dict(field.split("=", 1) for field in metadata.split(";") if "=" in field)


def landed_offset(metadata: str) -> int:
    """Where a partition's last copied record landed on the target, from its position's metadata;
    -1 if it does not say (written by MM2, `mirror offsets`, or a build before `d=`)."""
    landed = _fields(metadata).get("d", "")
    return int(landed) if landed.isdigit() else -1


def unsynced_pair(metadata: str) -> tuple[int, int] | None:
    """The (upstream, downstream) pair of the partition's last copied record if no offset sync
    covered it when its position was committed; None if one did, or the metadata does not say."""
    fields = _fields(metadata)
    upstream, landed = fields.get("u", ""), fields.get("d", "")
    return (int(upstream), int(landed)) if upstream.isdigit() and landed.isdigit() else None


def recorded_epoch(metadata: str, source_topic_id: str | None) -> int:
    """The source leader epoch committed with the position, if it is of `source_topic_id` (the
    source topic now); -1 if not recorded, or recorded for a topic since deleted and made again,
    whose epochs started over."""
    fields = _fields(metadata)
    epoch = fields.get("e", "")
    if not epoch.isdigit() or source_topic_id is None or fields.get("s") != source_topic_id:
        return -1
    return int(epoch)


def recorded_source_topic_id(metadata: str) -> str | None:
    """The ID of the source topic the position is of (committed with an epoch); None if unknown."""
    return _fields(metadata).get("s") or None


def recorded_topic_id(metadata: str) -> str | None:
    """The remote topic's ID the flow last committed this position for; None if not recorded."""
    return _fields(metadata).get("t") or None


def reconcile_positions(settings: FlowSettings, replicated: Collection[tuple[str, int]]) -> int:
    """Move the positions group up to the offsets topic where that is ahead; returns how many moved.

    Only `replicated` source partitions (copied by this flow now, remote partition present) count:
    the offsets topic also remembers topics the flow no longer copies, and a position cannot be
    committed for a remote topic that was deleted.
    """
    stored = read_to_end(settings.target_consumer, settings.offsets_topic)
    from_topic: dict[tuple[str, int], int] = {}
    for raw_key, raw_value in stored.items():
        decoded = decode_key(raw_key)
        if decoded is None:
            continue
        connector, source = decoded
        offset = decode_value(raw_value)
        if connector != CONNECTOR_NAME or source.cluster != settings.source or offset is None:
            continue
        if (source.topic, source.partition) not in replicated:
            continue
        # Connect stores the last replicated offset; replication resumes after it.
        from_topic[(settings.remote_topic(source.topic), source.partition)] = offset + 1
    group = consumer(
        {
            **settings.target_consumer,
            "group.id": settings.positions_group(),
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
        }
    )
    try:
        committed = committed_positions(group, list(from_topic))
        ahead = {tp: pos for tp, pos in from_topic.items() if pos > committed.get(tp, -1)}
        commit_positions(group, ahead)
    finally:
        group.close()
    if ahead:
        log.info(
            "flow %s: took %d partition positions from %s", settings.name, len(ahead), settings.offsets_topic
        )
    return len(ahead)
