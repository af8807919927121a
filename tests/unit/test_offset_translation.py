"""Offset translation rules: the sync store, checkpoint monotonicity and target group sync."""

from __future__ import annotations

from bisect import bisect_left

from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.checkpoint.checkpoints import CheckpointStore, plan_group_sync
from mirror.checkpoint.sync_store import SLOTS, TOO_OLD, OffsetSyncStore
from mirror.kafka.wire import Checkpoint, OffsetSync
from mirror.source.offset_syncs import syncs_for_range


def loaded_store(*pairs: tuple[int, int], topic: str = "t") -> OffsetSyncStore:
    store = OffsetSyncStore()
    for up, down in pairs:
        store.add(OffsetSync(topic, 0, up, down))
    store.mark_loaded()
    return store


def test_a_group_at_a_sync_translates_exactly() -> None:
    store = loaded_store((100, 40))
    assert store.translate("t", 0, 100) == 40


def test_a_group_past_a_sync_moves_only_one_record_past_it() -> None:
    # Upstream 101..499 may hold markers or aborted records; only 41 is certain not to skip data.
    store = loaded_store((100, 40))
    assert store.translate("t", 0, 101) == 41
    assert store.translate("t", 0, 500) == 41


def test_a_group_older_than_every_sync_cannot_be_translated() -> None:
    store = loaded_store((100, 40))
    assert store.translate("t", 0, 99) == TOO_OLD


def test_nothing_translates_before_the_initial_read_or_for_an_unknown_partition() -> None:
    store = OffsetSyncStore()
    store.add(OffsetSync("t", 0, 100, 40))
    assert store.translate("t", 0, 100) is None
    store.mark_loaded()
    assert store.translate("t", 1, 100) is None
    assert store.translate("other", 0, 100) is None


def test_an_upstream_rewind_discards_the_earlier_history() -> None:
    # The source topic was re-created: offset 50 now names a different record than before.
    store = loaded_store((0, 0), (1000, 1000), (50, 2000))
    assert store.translate("t", 0, 50) == 2000
    assert store.translate("t", 0, 999) == 2001
    assert store.translate("t", 0, 10) == TOO_OLD


def test_without_restored_checkpoints_only_the_last_sync_of_the_initial_load_is_kept() -> None:
    # KAFKA-15905: history read before the checkpoints are known must not be trusted.
    store = OffsetSyncStore(keep_history_while_loading=False)
    for up in (0, 100, 200):
        store.add(OffsetSync("t", 0, up, up))
    store.mark_loaded()
    assert store.translate("t", 0, 150) == TOO_OLD
    assert store.translate("t", 0, 200) == 200


def test_a_group_at_a_transaction_boundary_behind_the_live_end_translates_exactly() -> None:
    # One sync per 100 records and one per transaction end: MM2's 64 sparse slots alone would
    # send a group far behind the end back to an old slot; the recent window keeps it exact.
    # 3,600 syncs: the recent window has been trimmed on the way.
    pairs = [(up, up + up // 500) for up in range(0, 300_000, 100)]
    pairs += [(up + 99, up + 99 + up // 500) for up in range(0, 300_000, 500)]
    store = loaded_store(*sorted(pairs))
    assert store.translate("t", 0, 290_599) == 290_599 + 290_500 // 500


def test_the_sparse_slots_keep_mm2s_spacing_invariants() -> None:
    store = loaded_store(*[(up, up) for up in range(0, 100_000, 7)])
    slots = store._syncs[("t", 0)]
    assert len(slots) == SLOTS
    for i in range(1, SLOTS):
        newer, older = slots[i - 1], slots[i]
        if newer is older:
            continue
        assert newer.upstream_offset <= older.upstream_offset + 2**i - 2 ** (i - 1)
        assert newer.upstream_offset >= older.upstream_offset + 2 ** max(i - 3, 0)


@st.composite
def replicated_partitions(draw: st.DrawFn) -> tuple[list[int], list[int], int]:
    """Upstream offsets of copied records (gaps: markers, aborted) and where each landed downstream."""
    count = draw(st.integers(1, 400))
    gaps = draw(st.lists(st.integers(0, 3), min_size=count, max_size=count))
    down_gaps = draw(st.lists(st.integers(0, 1), min_size=count, max_size=count))
    ups, downs, up, down = [], [], 0, 0
    for gap, down_gap in zip(gaps, down_gaps, strict=True):
        up += gap
        down += down_gap
        ups.append(up)
        downs.append(down)
        up += 1
        down += 1
    return ups, downs, draw(st.integers(1, 50))


@settings(max_examples=200, deadline=None)
@given(replicated_partitions(), st.data())
def test_translation_never_skips_a_record_the_group_has_not_consumed(
    partition: tuple[list[int], list[int], int], data: st.DataObject
) -> None:
    ups, downs, offset_lag_max = partition
    # Cut into transactions as the source component does; each ends with a sync.
    cuts = sorted(data.draw(st.sets(st.integers(1, len(ups)), max_size=8)) | {len(ups)})
    store, start = OffsetSyncStore(), 0
    for end in cuts:
        for up, down in syncs_for_range(zip(ups[start:end], downs[start:end], strict=True), offset_lag_max):
            store.add(OffsetSync("t", 0, up, down))
        start = end
    store.mark_loaded()
    group = data.draw(st.integers(0, ups[-1] + 5))
    translated = store.translate("t", 0, group)
    # The next record the group would read upstream, and where its copy sits downstream.
    index = bisect_left(ups, group)
    exact = downs[index] if index < len(ups) else downs[-1] + 1
    assert translated is not None
    assert translated <= exact
    if translated == TOO_OLD:
        assert group < ups[0]
    if index == len(ups):
        # A group that consumed everything translates to exactly the end: nothing re-read.
        assert translated == downs[-1] + 1


def checkpoint(down: int, up: int, group: str = "g") -> Checkpoint:
    return Checkpoint(group, "A.t", 0, up, down)


def test_checkpoints_move_forward_only_unless_the_group_was_reset_upstream() -> None:
    store = CheckpointStore()
    store.restore(checkpoint(down=50, up=100))
    assert store.is_news(checkpoint(down=51, up=101))
    assert not store.is_news(checkpoint(down=50, up=120))  # same downstream: nothing new
    assert not store.is_news(checkpoint(down=40, up=120))  # would move backwards
    assert store.is_news(checkpoint(down=10, up=20))  # the group was reset on the source
    assert store.is_news(checkpoint(down=10, up=20, group="other"))


def test_a_target_group_is_moved_forward_never_back_and_never_past_the_end() -> None:
    checkpoints = {
        ("A.t", 0): Checkpoint("g", "A.t", 0, 100, 90),
        ("A.t", 1): Checkpoint("g", "A.t", 1, 100, 90),
        ("A.t", 2): Checkpoint("g", "A.t", 2, 100, 90),
        ("A.t", 3): Checkpoint("g", "A.t", 3, 100, 90),
    }
    plan = plan_group_sync(
        "g",
        checkpoints,
        active=False,
        target_offsets={("A.t", 1): 95, ("A.t", 2): 10},
        remote_ends={("A.t", 0): 91, ("A.t", 1): 91, ("A.t", 2): 91, ("A.t", 3): 50},
    )
    assert plan.write == {("A.t", 0): 90, ("A.t", 2): 90}
    assert plan.ahead == [("A.t", 1)]
    assert plan.beyond_end == [("A.t", 3)]


def test_a_group_with_members_on_the_target_is_left_alone() -> None:
    plan = plan_group_sync(
        "g",
        {("A.t", 0): Checkpoint("g", "A.t", 0, 100, 90)},
        active=True,
        target_offsets={},
        remote_ends={("A.t", 0): 91},
    )
    assert plan.active
    assert plan.write == {}
