"""A quiet partition's trailing offset sync is due again after its transaction aborts, however
many times the task discards what it read (an abort, then the rewind to the committed positions)."""

from __future__ import annotations

from mirror.source.partition_copy import PartitionCopy


def _committed_quiet_partition() -> PartitionCopy:
    part = PartitionCopy("A->B", "orders", 0, "A.orders", offset_lag_max=100)
    part.upstream, part.downstream = list(range(5)), list(range(5))
    part.take_syncs()
    part.read_up_to(5, epoch=0)
    part.committed_now()
    return part


def test_a_trailing_sync_aborted_once_is_due_again() -> None:
    part = _committed_quiet_partition()
    pair = part.take_trailing_sync()
    assert pair is not None
    part.discard()
    assert part.take_trailing_sync() == pair


def test_an_abort_then_a_rewind_keep_the_trailing_sync_due() -> None:
    part = _committed_quiet_partition()
    pair = part.take_trailing_sync()
    part.discard()  # the abort
    part.discard()  # the rewind, with nothing open
    assert part.take_trailing_sync() == pair


def test_a_pair_of_aborted_records_is_never_synced() -> None:
    part = _committed_quiet_partition()
    assert part.take_trailing_sync() is not None
    part.syncs_committed()
    part.upstream, part.downstream = [5, 6, 7], [5, 6, 7]
    part.take_syncs()
    part.discard()
    part.discard()
    assert part.take_trailing_sync() is None


def test_a_partition_copied_again_from_scratch_syncs_nothing_of_its_old_copy() -> None:
    part = _committed_quiet_partition()
    pair = part.take_trailing_sync()
    assert pair is not None
    part.discard()  # the transaction that found the remote topic deleted
    part.forget_syncs()  # read_positions: re-created, copied again from the source's start
    assert part.take_trailing_sync() is None
    part.upstream, part.downstream = [0], [0]
    assert part.take_syncs() == [(0, 0)]  # the new copy's first record anchors translation again
