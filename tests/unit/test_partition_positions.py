"""Where a partition's position (and the source leader epoch committed with it) goes before a
commit and while nothing is read: the epoch must always be of the offset it is committed with, or
the next start's check against the source log (KIP-320) would take an intact log for a truncated
one, or miss a truncation."""

from __future__ import annotations

from mirror.source.partition_copy import PartitionCopy


def part(position: int = 100, epoch: int = 3) -> PartitionCopy:
    return PartitionCopy("A->B", "orders", 0, "A.orders", 100, position=position, epoch=epoch)


def test_a_commit_takes_the_consumers_position_and_epoch_past_skipped_markers() -> None:
    copy = part()
    copy.upstream = [100, 101, 102]
    copy.read_up_to(104, 5)  # a commit marker at 103 skipped
    assert (copy.position, copy.epoch) == (104, 5)


def test_a_consumer_position_behind_the_last_record_read_gives_no_epoch() -> None:
    # A stale position must not lend its epoch to another offset.
    copy = part()
    copy.upstream = [100, 101, 102]
    copy.read_up_to(101, 5)
    assert (copy.position, copy.epoch) == (103, -1)


def test_an_unknown_consumer_position_gives_no_epoch() -> None:
    copy = part()
    copy.upstream = [100]
    copy.read_up_to(-1, -1)
    assert (copy.position, copy.epoch) == (101, -1)


def test_after_a_seek_the_first_commit_keeps_no_epoch_and_ends_the_seek() -> None:
    copy = part()
    copy.sought = True
    copy.upstream = [150]
    copy.read_up_to(151, 5)  # the consumer may still tell the epoch of its position before the seek
    assert (copy.position, copy.epoch, copy.sought) == (151, -1, False)
    copy.clear()
    copy.upstream = [151]
    copy.read_up_to(152, 6)
    assert (copy.position, copy.epoch) == (152, 6)


def test_a_sweep_follows_the_consumer_past_aborted_records_with_its_epoch() -> None:
    copy = part()
    copy.swept_to(120, 4)
    assert (copy.position, copy.epoch) == (120, 4)
    copy.swept_to(110, 9)  # never backwards
    assert (copy.position, copy.epoch) == (120, 4)


def test_a_sweep_leaves_a_partition_with_records_in_the_open_transaction_or_just_sought() -> None:
    with_records = part()
    with_records.upstream = [100]
    with_records.swept_to(120, 4)
    sought = part()
    sought.sought = True
    sought.swept_to(120, 4)
    assert [(c.position, c.epoch) for c in (with_records, sought)] == [(100, 3), (100, 3)]
