"""Which `mirror run` owns a flow, as every writer of the flow checks it after being fenced.

The owner records itself in the flow mark (mirror.flow.mark), the metadata its lease
commits in the flow's lease group (mirror.source.lease). A fenced copy task, checkpoint or
heartbeat writer reads the mark: if another instance owns the flow now, the writer is a zombie
and stops; otherwise its own instance fenced it, and it may open again.
"""

from __future__ import annotations

from confluent_kafka import Consumer

from mirror.config.flow_settings import FlowSettings
from mirror.errors import FlowTakenOverError
from mirror.flow.mark import FlowMark
from mirror.kafka.clients import committed_reader
from mirror.kafka.transactions import committed_metadata


def flow_mark_reader(settings: FlowSettings) -> Consumer:
    """A read_committed consumer in the flow's lease group: it reads the flow mark."""
    return committed_reader(settings.target_consumer, settings.lease_group())


def read_flow_mark(
    settings: FlowSettings, owner_reader: Consumer, *, timeout_seconds: float = 30.0
) -> FlowMark | None:
    """The flow mark the lease's owner committed last (mirror.flow.mark); None if none yet.

    `owner_reader` is a consumer in the flow's lease group: read_committed (flow_mark_reader) waits
    for a renewal still open; read_uncommitted ignores open transactions (mirror.source.lease).
    """
    return FlowMark.decode(
        committed_metadata(
            owner_reader,
            settings.offsets_topic,
            0,
            f"flow {settings.name}: reading the flow's owner",
            timeout_seconds=timeout_seconds,
        )
    )


def stop_if_flow_taken_over(settings: FlowSettings, owner_reader: Consumer) -> FlowMark | None:
    """After a fence: raise FlowTakenOverError if another `mirror run` now owns the flow.

    Returns the mark read, so a caller can also check the copy generation it names.
    """
    mark = read_flow_mark(settings, owner_reader)
    if settings.instance_id and mark is not None and mark.instance != settings.instance_id:
        raise FlowTakenOverError(
            f"flow {settings.name}: another mirror instance took over this flow; this writer stops"
        )
    return mark
