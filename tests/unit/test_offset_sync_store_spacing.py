"""How the sparse sync history ages: bounded eviction per update, and translation across resets.

Each update of a partition's 64 slots may drop older syncs to keep the exponential spacing. If one
update dropped many, a group that stopped in that stretch would translate to a much older sync and
re-read far more than needed. These tests bound the drops for the spacings MM2 meets in practice.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Iterable

import pytest

from mirror.checkpoint.sync_store import RECENT_SYNCS, SLOTS, TOO_OLD, OffsetSyncStore
from mirror.kafka.wire import OffsetSync

PARTITION = ("t", 0)


def loaded_store(*pairs: tuple[int, int]) -> OffsetSyncStore:
    store = OffsetSyncStore()
    store.mark_loaded()
    for up, down in pairs:
        store.add(OffsetSync(*PARTITION, up, down))
    return store


def add_counting_evictions(store: OffsetSyncStore, sync: OffsetSync) -> int:
    """Add `sync` and return how many distinct syncs left the sparse slots because of it."""
    # Counted by identity: syncs with equal offsets are still different records in the history.
    before = {id(s) for s in store._syncs[PARTITION]}
    store.add(sync)
    after = {id(s) for s in store._syncs[PARTITION]}
    assert after <= before | {id(sync)}, "an update may only keep old syncs or add the new one"
    return len(before - after)


def assert_spaced(slots: list[OffsetSync]) -> None:
    """Neighbouring slots are neither too close (C) nor too far apart (B)."""
    for i in range(1, SLOTS):
        newer, older = slots[i - 1].upstream_offset, slots[i].upstream_offset
        # A sync repeating its predecessor's upstream offset may briefly sit next to it (as in MM2).
        if newer != older:
            assert older + (1 << max(i - 3, 0)) <= newer <= older + (1 << i) - (1 << (i - 1)), f"slot {i}"


def worst_eviction(first_offset: int, steps: Iterable[int], bound: int) -> int:
    """Feed syncs at `first_offset` then after each step; check every update; return the worst."""
    store = loaded_store((first_offset, first_offset))
    offset, worst = first_offset, 0
    for step in steps:
        offset += step
        evicted = add_counting_evictions(store, OffsetSync(*PARTITION, offset, offset))
        slots = store._syncs[PARTITION]
        assert len(slots) == SLOTS
        assert slots[0].upstream_offset == offset, "the newest sync must be stored"
        # The oldest sync bounds how far back a group can still be translated at all.
        assert slots[-1].upstream_offset == first_offset, "the oldest sync must stay stored"
        assert evicted <= bound, f"the sync at {offset} evicted {evicted} syncs (bound {bound})"
        # Few evictions alone could also mean "keeps almost nothing": the spacing must hold too.
        assert_spaced(slots)
        worst = max(worst, evicted)
    return worst


# Steps 1, 3, 7, ... up to about 2**56: offset.lag.max values from "every record" to absurdly sparse.
EVEN_STEPS = [(1 << bits) - 1 for bits in range(1, 57)]


@pytest.mark.parametrize("first_offset", [0, 1, 7, 29])
def test_evenly_spaced_syncs_evict_at_most_one_stored_sync_each(first_offset: int) -> None:
    for step in EVEN_STEPS:
        worst = worst_eviction(first_offset, [step] * 100, bound=1)
        # 100 syncs cannot all fit the spacing, so the bound was exercised, not vacuously met.
        assert worst == 1, f"step {step}: no sync was ever evicted"


# (n, seed): steps vary by less than 2**n; the seed is in the test id so a failure reproduces.
RANDOM_CASES = [(n, 1000 + n) for n in (1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 42, 53)]


@pytest.mark.parametrize(
    ("bits", "seed"), RANDOM_CASES, ids=[f"n={n}-seed={seed}" for n, seed in RANDOM_CASES]
)
def test_randomly_spaced_syncs_evict_at_most_n_plus_two_syncs_per_update(bits: int, seed: int) -> None:
    rng = random.Random(seed)
    # Steps of 0 included: a sync repeating the previous upstream offset is legal and must not
    # break the bound.
    worst_eviction(0, [rng.randrange(0, 1 << bits) for _ in range(1024)], bound=bits + 2)
    # A large minimum step (offset.lag.max) on top of the same spread keeps the same bound.
    lag_max = 1 << 16
    steps = [rng.randrange(lag_max, lag_max + (1 << bits)) for _ in range(1024)]
    assert worst_eviction(0, steps, bound=bits + 2) >= 1


def test_dropped_syncs_evict_at_most_two_stored_syncs_per_update() -> None:
    # Half the gaps are one lag interval, half two, as if the sync in between was lost. Two adjacent
    # syncs followed by a gap can force both out at once to make room for the demoted older one.
    rng = random.Random(2024)
    lag_max = 100
    steps = [lag_max * rng.choice((1, 2)) for _ in range(10_000)]
    assert worst_eviction(0, steps, bound=2) >= 1


def test_a_downstream_reset_governs_translation_from_its_upstream_offset_on() -> None:
    # The target topic was re-created: upstream 200 now lands at 10, below the older syncs' 251.
    store = loaded_store((100, 200), (150, 251), (200, 10))
    assert store.translate(*PARTITION, 200) == 10
    assert store.translate(*PARTITION, 201) == 11
    assert store.translate(*PARTITION, 10_000) == 11
    # Unlike MM2, a downstream reset clears the history as an upstream rewind does: the older
    # syncs describe a remote topic that is gone, so groups behind the reset get no checkpoint.
    assert store.translate(*PARTITION, 150) == TOO_OLD
    assert store.translate(*PARTITION, 199) == TOO_OLD
    assert store.translate(*PARTITION, 99) == TOO_OLD


def test_a_downstream_reset_at_the_same_upstream_offset_replaces_the_older_sync() -> None:
    # The same upstream record synced twice: the second copy, after the reset, is the one to trust.
    store = loaded_store((100, 200), (200, 300), (200, 10))
    assert store.translate(*PARTITION, 200) == 10
    assert store.translate(*PARTITION, 250) == 11


def test_after_a_downstream_reset_no_later_group_translates_through_older_syncs() -> None:
    # One sync before the reset, the reset at upstream 10, then just enough syncs (2,047) that the
    # recent window is trimmed past the reset and the sparse slots no longer hold it either.
    later = [(10 + i, i) for i in range(1, 2 * RECENT_SYNCS)]
    store = loaded_store((0, 100_000), (10, 0), *later)
    for group in range(10, 10 + 2 * RECENT_SYNCS):
        translated = store.translate(*PARTITION, group)
        assert translated is not None
        # Upstream `group` sits at downstream `group - 10`. An answer from the pre-reset sync
        # (100,001) points past the whole new log: once the target grows that far, group sync
        # would move an idle group there and skip everything in between.
        assert 0 <= translated <= group - 10 + 1, f"group at {group} translated to {translated}"


def sparse_only(slots: list[OffsetSync], upstream_offset: int) -> int:
    """The answer MM2's 64 slots alone would give: the newest slot at or below, plus the +1 rule."""
    sync = next((s for s in slots if s.upstream_offset <= upstream_offset), None)
    if sync is None:
        return TOO_OLD
    return sync.downstream_offset + (0 if sync.upstream_offset == upstream_offset else 1)


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_the_recent_window_is_never_less_precise_than_the_sparse_slots_and_never_skips(seed: int) -> None:
    rng = random.Random(seed)
    pairs, up, down = [], 0, 0
    for _ in range(3_000):
        pairs.append((up, down))
        gap = rng.randrange(1, 200)
        # Downstream grows by at most the upstream gap: skipped upstream offsets were never copied.
        up, down = up + gap, down + rng.randrange(1, gap + 1)
    store = loaded_store(*pairs)
    slots = store._syncs[PARTITION]
    ups = [u for u, _ in pairs]
    for group in rng.sample(range(up), 2_000):
        translated = store.translate(*PARTITION, group)
        assert translated is not None
        # The best any real sync proves: the newest one at or below the group, plus the +1 rule.
        newest_up, newest_down = pairs[bisect_right(ups, group) - 1]
        proven = newest_down + (0 if newest_up == group else 1)
        assert sparse_only(slots, group) <= translated <= proven, f"group at {group}"
