"""What a copy task does when the source lost records: deleted before they were copied (retention,
a topic deleted and made again), or lost after they were copied (an unclean leader election
truncated the log). Either is counted and reported, never passed over in silence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient

from mirror.config.flow_settings import FlowSettings
from mirror.errors import SourceTruncatedError
from mirror.kafka.admin import topic_ids
from mirror.kafka.offsets import high_watermarks, truncation_point
from mirror.kafka.transactions import RetriableError
from mirror.source.partition_copy import PartitionCopy
from mirror.source.partition_reads import watermarks
from mirror.source.record_copy import ConsumeError
from mirror.source.start import Report, seek_to_position
from mirror.source.stats import TaskStats

log = logging.getLogger(__name__)


def handle_consume_errors(
    settings: FlowSettings,
    errors: Sequence[ConsumeError],
    sinks: Mapping[tuple[str, int], PartitionCopy],
    reader_of: Callable[[str, int], Consumer],
    admin: AdminClient,
    *,
    stats: Callable[[], TaskStats],
    report: Report,
) -> None:
    """A copy task's consume errors: records gone from the source are reported and skipped per
    `on_source_truncation`; retriable ones are librdkafka's to retry; any other stops the task.

    `stats` gives the task's stats being gathered now, asked anew per error: each report sends
    them and starts new ones, so a second partition's loss counted into the first one's would
    never reach the driver (an unclean election on two partitions counted one)."""
    for error in errors:
        part = sinks[(error.topic, error.partition)]
        if error.out_of_range:
            resume_after_lost_records(
                settings,
                part,
                error.error,
                reader_of(part.topic, part.partition),
                admin,
                stats=stats(),
                report=report,
            )
        elif error.retriable:
            # librdkafka keeps fetching the partition (a leader moving, a topic being deleted
            # that the next topic refresh drops from the assignment); the others copy on.
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s: %s", part.where(), error, extra=part.log_fields())
        else:
            raise error.classified()


def resume_after_lost_records(
    settings: FlowSettings,
    part: PartitionCopy,
    error: KafkaError,
    reader: Consumer,
    source_admin: AdminClient,
    *,
    stats: TaskStats,
    report: Report,
) -> None:
    """The consumer of `part` (`reader`) found its position gone from the source (`error`): moves
    and seeks it to where copying goes on. A log the consumer found truncated under what was copied
    goes on after it (raising RetriableError if the open transaction holds lost records); records
    deleted before they were copied, or a topic made again, go per on_source_truncation."""
    diverged = truncation_point(error)
    if diverged is not None and same_source_topic(settings, part, source_admin, part.source_topic_id):
        part.position = go_on_after_truncation(settings, part, diverged, stats, report)
    else:
        if part.upstream:
            part.position = part.upstream[-1] + 1
        part.position = skip_lost_records(settings, part, reader, source_admin, stats=stats, report=report)
    # A seek may re-assign the partition, and until a record is read the consumer may still tell
    # the position from before it: the copy task's sweep leaves the partition alone.
    part.epoch, part.sought = -1, True
    seek_to_position(reader, part)


def skip_lost_records(
    settings: FlowSettings,
    part: PartitionCopy,
    source: Consumer,
    source_admin: AdminClient,
    *,
    stats: TaskStats,
    report: Report,
) -> int:
    """The source no longer has the partition's position: retention deleted records before they were
    copied, or the topic was deleted and re-created. Returns where copying goes on, per
    `on_source_truncation`; the records skipped are counted and reported, never skipped silently.
    A log that ends below the position while its topic ID is the same was truncated instead (an
    unclean leader election, met without an epoch to check): go_on_after_truncation."""
    low, stable = watermarks(
        source, part.topic, part.partition, doing=f"{part.where()}: reading the source watermarks"
    )
    # The log's end, undecided transactions included: the read_committed end lags behind it while
    # a transaction's markers wait (a leader moving), which is no proof of a shorter log.
    high = max(
        stable, high_watermarks(source_admin, [(part.topic, part.partition)])[(part.topic, part.partition)]
    )
    position = part.position
    if low <= position <= high:
        return position  # back in range (a leader change); nothing was lost
    if position > high and same_source_topic(settings, part, source_admin, part.position_topic_id):
        # Without the epoch the cut is unknown: the end now is the nearest offset the source still
        # has, and records it took after the cut and below that end are not read.
        return go_on_after_truncation(settings, part, high, stats, report)
    if position > high:
        message = (
            f"{part.where()}: the source partition now ends at offset {high}, below the {position} records "
            "already copied: the topic was deleted and re-created"
        )
        remedy = "set on_source_truncation: continue to copy the new topic from its start"
        lost = 0
    else:
        lost = low - position
        message = (
            f"{part.where()}: {lost} records (offsets {position}..{low - 1}) were deleted on the source "
            "before they were copied (retention or topic re-created)"
        )
        remedy = f"set on_source_truncation: continue to go on from offset {low}"
    if settings.on_source_truncation == "fail":
        raise SourceTruncatedError(f"{message}; {remedy}")
    log.error("%s; continuing from offset %d", message, low, extra=part.log_fields())
    report("truncated", f"{message}; continuing from offset {low}")
    part.truncated += lost
    return int(low)


def same_source_topic(
    settings: FlowSettings, part: PartitionCopy, source_admin: AdminClient, topic_id: str | None
) -> bool:
    """True if the source topic of `part` is still `topic_id` (the one the task took it from, or the
    one its committed position is of); a topic deleted and made again starts its offsets and epochs
    over, so its shorter log is no truncation of what was copied. False if `topic_id` is unknown."""
    now = topic_ids(source_admin, [part.topic], what=settings.source).get(part.topic)
    return topic_id is not None and now == topic_id


def go_on_after_truncation(
    settings: FlowSettings, part: PartitionCopy, diverged: int, stats: TaskStats, report: Report
) -> int:
    """The source log of `part` now ends at `diverged`, below records the flow had copied: an
    unclean leader election made a replica that lacked them the leader. Those records stay on the
    target (they were written and copied); records the source takes from now on land at offsets
    from `diverged` again, so copying goes on from there, reported as a line and in
    mirror_source_copied_then_lost_records_total. Raises RetriableError if the open transaction
    holds records of the lost tail: it is aborted, and the committed position checked again."""
    copied_to = part.upstream[-1] + 1 if part.upstream else part.position
    if diverged >= copied_to:
        return copied_to  # only records not read yet were lost
    if part.upstream and part.upstream[-1] >= diverged:
        raise RetriableError(
            f"{part.where()}: the source log was truncated at offset {diverged}, under records of the "
            "open transaction; aborting it and checking the committed position"
        )
    lost = copied_to - diverged
    message = (
        f"{part.where()}: the source log now ends at offset {diverged}, below {lost} offsets already "
        f"copied ({diverged}..{copied_to - 1}): a leader that lacked them was elected (unclean leader "
        f"election); {settings.target} keeps them, and the source's new records from offset {diverged} "
        "are copied after them"
    )
    key = f"{part.topic}:{part.partition}"
    # Counted before the report, which sends the stats at once (and starts new ones).
    stats.copied_then_lost[key] = stats.copied_then_lost.get(key, 0) + lost
    log.error("%s", message, extra=part.log_fields())
    report("truncated", message)
    return diverged
