"""One source partition inside a copy task: its position, the open transaction's records, and
which of them get an OffsetSync. No Kafka client here; the task feeds it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from mirror.source.offset_syncs import PartitionState, triggered_syncs


@dataclass(eq=False)
class PartitionCopy:
    """Implements mirror.source.record_copy.CopySink."""

    flow: str
    topic: str
    partition: int
    remote_topic: str
    offset_lag_max: int
    # Next source offset to copy; `committed` is the same as last committed on the target.
    position: int = 0
    committed: int | None = None
    # The source leader epoch of the record (or marker) before `position`, -1 if unknown: a consumer
    # that starts at the position with it finds out if the source log lost what was copied (KIP-320).
    epoch: int = -1
    # The ID of the source topic the task reads (KIP-516): an epoch is only of that topic's log.
    source_topic_id: str | None = None
    # The source topic ID the committed position is of, None if unknown (written before IDs were).
    position_topic_id: str | None = None
    # Moved by a seek (past lost records) and no record read since.
    sought: bool = False
    # The open transaction's records: source offsets in order and, as reports arrive, where
    # each landed on the target (-1 for a failed delivery).
    upstream: list[int] = field(default_factory=list)
    downstream: list[int] = field(default_factory=list)
    bytes: int = 0
    oldest_ms: int = 0
    # The open transaction's delivery errors: a broker refuses whole batches, so the largest failed
    # record is the one to name when records are too large, the first one otherwise.
    failure: Any = None
    failed_at: int = -1  # the largest failed record's index in `upstream`
    failed_size: int = -1
    first_failed_at: int = -1
    # MM2's sync triggers, kept across transactions, and the last copied pair no sync covers yet.
    syncs: PartitionState = field(init=False)
    unsynced: tuple[int, int] | None = None
    # The trailing pair the open transaction carries: it is of committed records, so it outlives
    # an abort of that transaction.
    trailing: tuple[int, int] | None = None
    # Where the previous transaction's last record landed: a re-created remote topic starts lower.
    last_downstream: int = -1
    # The source offset of the last record copied as far as the task knows, -1 if it does not.
    last_upstream: int = -1
    # Seen re-created while the task ran: its stored position describes the deleted topic.
    recreated: bool = False
    # The remote topic's ID (KIP-516) when the task last read its positions, committed with them.
    remote_topic_id: str | None = None
    truncated: int = 0
    # Which of the task's producers writes this partition's records, syncs and position.
    producer: int = 0

    def __post_init__(self) -> None:
        self.syncs = PartitionState(self.offset_lag_max)

    def where(self) -> str:
        return f"flow {self.flow}: {self.topic}-{self.partition}"

    def log_fields(self) -> dict[str, str]:
        """The `partition` field of a log line about this partition (mirror.logs)."""
        return {"partition": f"{self.topic}-{self.partition}"}

    def on_delivery(self, error: Any, message: Any) -> None:
        if error is not None:
            size = len(message.value() or b"") + len(message.key() or b"")
            if self.failure is None or size > self.failed_size:
                self.failure, self.failed_at, self.failed_size = error, len(self.downstream), size
            if self.first_failed_at < 0:
                self.first_failed_at = len(self.downstream)
            self.downstream.append(-1)
        else:
            # Per partition, librdkafka reports deliveries in produce order (idempotent producer).
            self.downstream.append(message.offset())

    @property
    def pending(self) -> int:
        return len(self.upstream)

    def read_position(self) -> int:
        """The next source offset to read: past the open transaction's records."""
        return max(self.position, self.upstream[-1] + 1) if self.upstream else self.position

    def moved_since_commit(self) -> bool:
        return self.committed is None or self.position != self.committed

    def recreated_remote(self) -> bool:
        """True if this transaction's records did not land in rising offsets after the previous one's:
        the remote partition was deleted and re-created while the task ran (or truncated by hand).
        A transaction in flight when the topic went straddles both: its first records landed high
        in the old topic, the rest from offset 0 in the new one."""
        landed = [offset for offset in self.downstream if offset >= 0]
        if not landed:
            return False
        if landed[0] <= self.last_downstream:
            return True
        if landed[-1] - landed[0] == len(landed) - 1:
            # Contiguous: the usual case, in O(1). A straddling transaction passes it only if it put
            # more records into the new topic than the old one ever held; that is caught at the next.
            return False
        return any(later <= earlier for earlier, later in itertools.pairwise(landed))

    def take_syncs(self) -> list[tuple[int, int]]:
        """(upstream, downstream) pairs to sync for the open transaction's records: MM2's triggers."""
        syncs, unsynced = triggered_syncs(self.syncs, zip(self.upstream, self.downstream, strict=True))
        if self.upstream:
            self.unsynced = unsynced
        return syncs

    def take_trailing_sync(self) -> tuple[int, int] | None:
        """The last copied record's pair, once the partition went quiet without a sync for it.

        With it, a group that consumed everything on the source translates to exactly the end of
        the remote partition; emitting it only when the partition is quiet keeps busy partitions
        at MM2's rate of syncs.
        """
        pair, self.unsynced = self.unsynced, None
        self.trailing = pair
        return pair

    def unsynced_upstream(self, *, syncs_after_commit: bool = False) -> int:
        """The source offset of the last copied record while no sync covers it, else -1: committed
        with the position, so the trailing sync outlives this task (mirror.source.positions).

        With `syncs_after_commit` (the syncs live on the source cluster, written after the commit
        that carries this position, and lost if the task dies before they go out), the last copied
        record's offset even when a sync covers it: the task that opens next sends its pair again.
        """
        if syncs_after_commit:
            last = self.upstream[-1] if self.upstream else self.last_upstream
            return last if last >= 0 and self.downstream_end() >= 0 else -1
        if self.unsynced is None or self.unsynced[1] != self.downstream_end():
            return -1
        return self.unsynced[0]

    def syncs_committed(self) -> None:
        """The open transaction, and the trailing pair it carried, committed."""
        self.trailing = None

    def downstream_end(self) -> int:
        """Where the last record of this partition landed on the target, as far as the task knows."""
        landed = self.downstream[-1] if self.downstream else -1
        return max(self.last_downstream, landed)

    def read_up_to(self, consumer_position: int, epoch: int) -> None:
        """Before committing records read: the position passes the last of them and whatever the
        consumer skipped after it (aborted records, markers). The epoch is the consumer's, so it is
        kept only with the consumer's own position, and not while the consumer may still tell a
        position from before a seek (`sought`): a position paired with another offset's epoch
        would make the next start's check (KIP-320) wrong."""
        self.position = max(self.position, self.upstream[-1] + 1, consumer_position)
        self.epoch = epoch if self.position == consumer_position and not self.sought else -1
        self.sought = False  # a record read since: the consumer's position is after it

    def swept_to(self, consumer_position: int, epoch: int) -> None:
        """With no record to copy, the consumer moved past aborted records and markers: the
        position follows, with the consumer's epoch. Not after a seek until a record is read: the
        consumer may still tell its position from before it."""
        if not self.upstream and not self.sought and consumer_position > self.position:
            self.position, self.epoch = consumer_position, epoch

    def committed_now(self) -> None:
        """The open transaction committed: its records are on the target for good."""
        if self.downstream:
            self.last_downstream = max(self.last_downstream, self.downstream[-1])
        if self.upstream:
            self.last_upstream = self.upstream[-1]
        self.committed = self.position
        self.position_topic_id = self.source_topic_id
        self.clear()

    def discard(self) -> None:
        """The open transaction was aborted: its records, and any pair from them, never happened.
        A trailing pair it carried is of records committed before, so it is due again. Discarding
        again with nothing open (an abort, then the rewind) keeps that pair: it was lost before."""
        held = bool(self.upstream) or self.trailing is not None
        self.clear()
        if held:
            self.unsynced, self.trailing = self.trailing, None

    def forget_syncs(self) -> None:
        """The remote partition is copied again from scratch (re-created, or its copy gone): no pair
        of the old copy may be synced, and MM2's triggers start over, so its first record syncs."""
        self.unsynced = self.trailing = None
        self.last_upstream = -1
        self.syncs = PartitionState(self.offset_lag_max)

    def clear(self) -> None:
        self.upstream = []
        self.downstream = []
        self.bytes = 0
        self.oldest_ms = 0
        self.failure, self.failed_at, self.failed_size, self.first_failed_at = None, -1, -1, -1
