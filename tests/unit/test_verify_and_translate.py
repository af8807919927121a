"""`mirror verify`'s pure parts: record digests, the side-by-side walk, and the anchors it walks between."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mirror.kafka.wire import OffsetSync
from mirror.migrate.translate import NewestSyncs
from mirror.verify.compare import compare_streams
from mirror.verify.digest import ChainDigest, record_digest
from mirror.verify.ranges import Extent, StartAnchors, copy_range


def _entries(values: list[int], first_offset: int = 0) -> list[tuple[int, bytes]]:
    return [(first_offset + i, record_digest(None, b"%d" % v, None, 0)) for i, v in enumerate(values)]


def test_every_field_of_a_record_changes_its_digest() -> None:
    base = record_digest(b"k", b"v", [("h", b"1")], 1000)
    assert base != record_digest(b"k2", b"v", [("h", b"1")], 1000)
    assert base != record_digest(b"k", b"v2", [("h", b"1")], 1000)
    assert base != record_digest(b"k", b"v", [("h", b"2")], 1000)
    assert base != record_digest(b"k", b"v", [("h2", b"1")], 1000)
    assert base != record_digest(b"k", b"v", [("h", b"1")], 1001)
    assert base != record_digest(b"k", b"v", [("h", b"1"), ("h", b"1")], 1000)


def test_null_and_empty_key_value_and_header_differ() -> None:
    assert record_digest(None, b"v", None, 0) != record_digest(b"", b"v", None, 0)
    assert record_digest(b"k", None, None, 0) != record_digest(b"k", b"", None, 0)
    assert record_digest(None, None, [("h", None)], 0) != record_digest(None, None, [("h", b"")], 0)


def test_field_boundaries_cannot_shift_between_records() -> None:
    one, other = ChainDigest(), ChainDigest()
    one.add(b"ab", b"c", None, 0)
    other.add(b"a", b"bc", None, 0)
    assert one.hexdigest() != other.hexdigest()


def test_equal_streams_compare_equal_whatever_their_offsets() -> None:
    diff = compare_streams(_entries(list(range(50))), _entries(list(range(50)), first_offset=7))
    assert not diff.differs and diff.compared == 50 and diff.first_source_offset is None


def test_a_record_missing_from_the_copy_is_named_at_its_source_offset() -> None:
    diff = compare_streams(
        _entries(list(range(20))), _entries([*range(10), *range(11, 20)], first_offset=100)
    )
    assert (diff.missing, diff.extra, diff.changed) == (1, 0, 0)
    assert (diff.first_source_offset, diff.first_target_offset) == (10, 110)


def test_an_extra_record_in_the_copy_is_named_at_its_target_offset() -> None:
    diff = compare_streams(_entries(list(range(20))), _entries([*range(5), 999, *range(5, 20)]))
    assert (diff.missing, diff.extra, diff.changed) == (0, 1, 0)
    assert (diff.first_source_offset, diff.first_target_offset) == (5, 5)


def test_a_changed_record_is_one_changed_not_a_missing_and_an_extra() -> None:
    diff = compare_streams(_entries(list(range(20))), _entries([*range(8), 999, *range(9, 20)]))
    assert (diff.missing, diff.extra, diff.changed) == (0, 0, 1)
    assert diff.first_source_offset == 8


def test_a_copy_that_stops_short_or_runs_on_counts_the_rest() -> None:
    short = compare_streams(_entries(list(range(10))), _entries(list(range(7))))
    assert (short.missing, short.first_source_offset, short.first_target_offset) == (3, 7, None)
    long = compare_streams(_entries(list(range(7))), _entries(list(range(10))))
    assert (long.extra, long.first_source_offset, long.first_target_offset) == (3, None, 7)


def test_a_gap_wider_than_the_window_still_adds_up() -> None:
    # 30 records missing, look-ahead of 8: no realignment, but every source record is accounted for.
    diff = compare_streams(_entries(list(range(100))), _entries([*range(10), *range(40, 100)]), window=8)
    assert diff.differs and diff.compared == 100 and diff.first_source_offset == 10
    matched = diff.compared - diff.missing - diff.changed
    assert matched + diff.extra + diff.changed == 70


@given(
    st.lists(st.integers(0, 40), max_size=60),
    st.lists(st.tuples(st.integers(0, 59), st.sampled_from(["drop", "add", "change"])), max_size=5),
)
def test_every_edit_is_found_and_an_unedited_copy_is_equal(
    values: list[int], edits: list[tuple[int, str]]
) -> None:
    copy = list(values)
    for position, kind in edits:
        if kind == "drop" and position < len(copy):
            del copy[position]
        elif kind == "add":
            copy.insert(min(position, len(copy)), 1000 + position)
        elif kind == "change" and position < len(copy):
            copy[position] = 2000 + position
    diff = compare_streams(_entries(values), _entries(copy))
    assert diff.differs == (copy != values)
    assert diff.compared == len(values)
    # Each source record is matched, missing or changed; each copy record matched, extra or changed.
    matched = diff.compared - diff.missing - diff.changed
    assert matched + diff.extra + diff.changed == len(copy)


def _sync(up: int, down: int) -> OffsetSync:
    return OffsetSync("t", 0, up, down)


def test_the_oldest_sync_both_logs_still_hold_anchors_the_start() -> None:
    anchors = StartAnchors({("t", 0): Extent(100, 500)}, {("t", 0): Extent(0, 600)})
    for sync in (_sync(0, 0), _sync(120, 130), _sync(220, 240)):
        anchors.add(sync)
    start = anchors.get(("t", 0))
    planned = copy_range(
        ("t", 0), remote_topic="A.t", source=Extent(100, 500), target=Extent(0, 600),
        position=(450, 470), start=start,
    )  # fmt: skip
    assert not isinstance(planned, str)
    assert (planned.source_start, planned.source_end, planned.target_start, planned.target_end) == (
        120,
        450,
        130,
        471,
    )
    assert (planned.unverified, planned.not_yet_copied, planned.anchor) == (20, 50, "offset sync")


def test_syncs_of_a_remote_partition_since_recreated_are_dropped() -> None:
    anchors = StartAnchors({("t", 0): Extent(0, 500)}, {("t", 0): Extent(0, 200)})
    for sync in (_sync(0, 0), _sync(100, 100), _sync(300, 0), _sync(400, 100)):
        anchors.add(sync)
    assert anchors.get(("t", 0)) == _sync(300, 0)


def test_partitions_with_nothing_to_compare_say_why() -> None:
    kwargs = {"remote_topic": "A.t", "source": Extent(0, 10), "target": Extent(0, 10), "start": None}
    assert copy_range(("t", 0), position=None, **kwargs) == "never copied"  # type: ignore[arg-type]
    assert "no target offset" in str(copy_range(("t", 0), position=(10, -1), **kwargs))  # type: ignore[arg-type]
    # A position committed before anything was copied (the partition was empty) compares empty, and
    # whatever its copy holds is extra.
    empty = copy_range(("t", 0), position=(0, -1), **kwargs)  # type: ignore[arg-type]
    assert not isinstance(empty, str)
    assert (empty.source_start, empty.source_end, empty.target_start, empty.target_end) == (0, 0, 0, 0)
    assert (empty.target_lso, empty.not_yet_copied) == (10, 10)
    gone = copy_range(("t", 0), remote_topic="A.t", source=Extent(50, 60), target=Extent(0, 41),
                      position=(40, 39), start=None)  # fmt: skip
    # Retention removed all that was copied: empty ranges compare equal, the target's tail still counts.
    assert not isinstance(gone, str)
    assert (gone.source_start, gone.source_end, gone.target_start, gone.target_end) == (50, 50, 40, 40)
    assert (gone.not_yet_copied, gone.target_lso) == (10, 41)


def test_a_group_translates_from_the_newest_sync_below_it_that_both_logs_still_hold() -> None:
    syncs = NewestSyncs({("t", 0): [150, 250]}, {("t", 0): (120, 0)})
    for sync in (_sync(100, 100), _sync(140, 150), _sync(200, 210), _sync(300, 320)):
        syncs.add(sync)
    assert syncs.get(("t", 0), 150) == _sync(140, 150)  # (100, 100) is gone from the source
    assert syncs.get(("t", 0), 250) == _sync(200, 210)
    gone = NewestSyncs({("t", 0): [150]}, {("t", 0): (150, 0)})
    gone.add(_sync(100, 100))
    assert gone.get(("t", 0), 150) is None  # behind every usable sync: not translated
