"""Connect source-offset records as MM2's connectors store them (MM2.md 1.3, 1.4, 1.5).

key   = ["MirrorSourceConnector",{"cluster":"A","partition":3,"topic":"orders"}]
value = {"offset":1234}      (the last upstream offset replicated; resume at offset + 1)

Connect writes them with JsonConverter (schemas off) through Jackson: compact separators and the
field order above. Writing the same bytes matters: compaction only collapses identical keys, and
MM2 must find our positions (and we theirs) under the key it expects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mirror.errors import WireFormatError

CONNECTOR_NAME = "MirrorSourceConnector"
CHECKPOINT_CONNECTOR_NAME = "MirrorCheckpointConnector"
HEARTBEAT_CONNECTOR_NAME = "MirrorHeartbeatConnector"
# The checkpoint and heartbeat connectors always store this offset (KIP-875 accepts only 0).
FIXED_OFFSET = 0
_COMPACT = (",", ":")


@dataclass(frozen=True, slots=True)
class SourcePartition:
    """One upstream topic-partition of one source cluster, as Connect keys its offsets."""

    cluster: str
    topic: str
    partition: int


# A copy task writes every moved partition's key at each commit: thousands a second at 10,000
# partitions, each the same bytes as the last.
@lru_cache(maxsize=1 << 16)
def encode_key(source: SourcePartition, connector: str = CONNECTOR_NAME) -> bytes:
    partition_map = {"cluster": source.cluster, "partition": source.partition, "topic": source.topic}
    return json.dumps([connector, partition_map], separators=_COMPACT, ensure_ascii=False).encode("utf-8")


def encode_checkpoint_key(group: str, topic: str, partition: int) -> bytes:
    """MirrorCheckpointConnector's source partition; the field order is Java HashMap's for these keys."""
    partition_map = {"partition": partition, "topic": topic, "group": group}
    return json.dumps(
        [CHECKPOINT_CONNECTOR_NAME, partition_map], separators=_COMPACT, ensure_ascii=False
    ).encode("utf-8")


def encode_heartbeat_key(source_alias: str, target_alias: str) -> bytes:
    partition_map = {"sourceClusterAlias": source_alias, "targetClusterAlias": target_alias}
    return json.dumps(
        [HEARTBEAT_CONNECTOR_NAME, partition_map], separators=_COMPACT, ensure_ascii=False
    ).encode("utf-8")


def encode_value(last_replicated_offset: int) -> bytes:
    # Formatted, not json.dumps'd: a copy task writes one per moved partition at each commit, and
    # at 10,000 partitions json.dumps was most of the JSON time in the task (py-spy). Same bytes.
    return b'{"offset":%d}' % int(last_replicated_offset)


def _load(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireFormatError(f"Connect offset {what} is not JSON: {data[:80]!r}") from exc


def decode_key(data: bytes) -> tuple[str, SourcePartition] | None:
    """(connector name, partition) for a MirrorSourceConnector-shaped key, else None.

    Offsets topics are shared with other connectors, so keys of another shape are not errors.
    """
    parsed = _load(data, "key")
    if not (isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[1], dict)):
        return None
    connector, partition_map = parsed
    cluster, topic, partition = (partition_map.get(k) for k in ("cluster", "topic", "partition"))
    if not (isinstance(connector, str) and isinstance(cluster, str) and isinstance(topic, str)):
        return None
    # bool is an int in Python; a Connect partition number never is one.
    if not isinstance(partition, int) or isinstance(partition, bool):
        return None
    return connector, SourcePartition(cluster, topic, partition)


def decode_value(data: bytes | None) -> int | None:
    """The stored last-replicated offset, or None for a tombstone (offset reset)."""
    if data is None:
        return None
    parsed = _load(data, "value")
    offset = parsed.get("offset") if isinstance(parsed, dict) else None
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise WireFormatError(f'Connect offset value has no integer "offset": {data[:80]!r}')
    return offset
