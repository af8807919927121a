"""A flow's offset syncs, read in order from wherever the flow keeps them."""

from __future__ import annotations

from collections.abc import Iterator

from mirror.config.flow_settings import FlowSettings
from mirror.kafka.admin import list_topics
from mirror.kafka.clients import admin_client
from mirror.kafka.offsets import earliest_offsets, last_stable_offsets
from mirror.kafka.wire import OffsetSync
from mirror.verify.range_reads import read_ranges


def read_offset_syncs(settings: FlowSettings) -> Iterator[OffsetSync]:
    """Every committed OffsetSync of the flow's syncs topic, oldest first; none if it has no topic."""
    if not settings.emit_offset_syncs:
        return
    on_target = settings.offset_syncs_location == "target"
    admin = admin_client(settings.target_admin if on_target else settings.source_admin)
    properties = settings.target_consumer if on_target else settings.source_consumer
    topic = (settings.offset_syncs_topic(), 0)
    where = f"cluster {settings.target if on_target else settings.source}"
    if topic[0] not in list_topics(admin, what=where):
        return
    low, end = earliest_offsets(admin, [topic])[topic], last_stable_offsets(admin, [topic])[topic]
    for batch in read_ranges(properties, {topic: (low, end)}, what=f"reading {topic[0]}"):
        for message in batch:
            yield OffsetSync.decode(message.key(), message.value())
