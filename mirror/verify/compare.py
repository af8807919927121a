"""Walk a source partition and its copy side by side and say how they differ.

Both sides are streams of (offset, record digest) between a pair of anchors at which they are known
to line up. Where digests differ, a bounded look-ahead on each side tells a record missing from the
copy (the copy's record turns up later in the source), an extra record in the copy (the source's
record turns up later in the copy) and a changed one (neither). Memory stays within the window.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

Entry = tuple[int, bytes]  # (offset, digest)
WINDOW = 1_000


@dataclass
class PartitionDiff:
    compared: int = 0  # source records looked at
    missing: int = 0  # source records the copy lacks
    extra: int = 0  # copy records with no source record
    changed: int = 0  # copy records whose key, value, headers or timestamp differ
    first_source_offset: int | None = None  # the first source offset where the two part
    first_target_offset: int | None = None

    @property
    def differs(self) -> bool:
        return bool(self.missing or self.extra or self.changed)


def _index(window: deque[Entry], digest: bytes) -> int | None:
    for i, (_, seen) in enumerate(window):
        if i and seen == digest:
            return i
    return None


def compare_streams(
    source: Iterable[Entry], target: Iterable[Entry], *, window: int = WINDOW
) -> PartitionDiff:
    diff = PartitionDiff()
    src: Iterator[Entry] = iter(source)
    dst: Iterator[Entry] = iter(target)
    left: deque[Entry] = deque()
    right: deque[Entry] = deque()
    while True:
        left.extend(islice(src, window - len(left)))
        right.extend(islice(dst, window - len(right)))
        if not left and not right:
            return diff
        if left and right and left[0][1] == right[0][1]:
            left.popleft()
            right.popleft()
            diff.compared += 1
            continue
        if not diff.differs:  # the first difference: where the two part
            diff.first_source_offset = left[0][0] if left else None
            diff.first_target_offset = right[0][0] if right else None
        if not right:
            diff.missing += 1
            diff.compared += 1
            left.popleft()
            continue
        if not left:
            diff.extra += 1
            right.popleft()
            continue
        later_in_source = _index(left, right[0][1])
        later_in_target = _index(right, left[0][1])
        if later_in_source is not None and (later_in_target is None or later_in_source <= later_in_target):
            for _ in range(later_in_source):  # the copy skipped these
                left.popleft()
                diff.missing += 1
                diff.compared += 1
        elif later_in_target is not None:
            for _ in range(later_in_target):  # the copy holds these on top
                right.popleft()
                diff.extra += 1
        else:
            left.popleft()
            right.popleft()
            diff.changed += 1
            diff.compared += 1
