"""Several rounds of one bench run, the contenders' order alternating, and their medians.

Who runs first is not neutral: at 1,000 partitions under a steady load, single runs of nearby
commits on this 2-core machine measured mirror's p99 at 2.1x MM2's with mirror first and 0.6x
with MM2 first. A comparison taken in both orders, and reported as medians beside each round's
own figures, says how much of a ratio is the order.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def order(names: Sequence[str], index: int) -> list[str]:
    """The contenders of round `index` (0-based), in the order they run: as given, then reversed,
    and so on. The ceiling (the brokers' own tools) runs in the first round only."""
    contenders = list(names) if index % 2 == 0 else list(reversed(names))
    return contenders if index == 0 else [name for name in contenders if name != "ceiling"]


def run_name(name: str, index: int) -> str:
    """The name a contender runs under in round `index`: its topics, groups and flow are the round's
    own, so no round starts from what an earlier one left (positions, a translated group)."""
    return name if index == 0 else f"{name}-r{index + 1}"


def medians(rounds: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per contender, in the first round's order: each number the median of the rounds'
    (a figure a failed round lacks is the median of the others), a yes/no true only if true in
    every round, anything else (labels, errors) as the first round that has it says."""
    first = rounds[0]
    merged = []
    for row in first:
        same = [found for rows in rounds for found in rows if found["name"] == row["name"]]
        merged.append(_merge(same))
    return merged


def _merge(values: list[Any]) -> Any:
    present = [value for value in values if value is not None]
    if not present:
        return None
    if all(isinstance(value, dict) for value in present):
        keys = list(dict.fromkeys(key for value in present for key in value))
        return {key: _merge([value.get(key) for value in present]) for key in keys}
    if all(isinstance(value, bool) for value in present):
        return all(present)
    if all(isinstance(value, int | float) and not isinstance(value, bool) for value in present):
        middle = statistics.median(present)
        return (
            int(middle)
            if all(isinstance(value, int) for value in present) and middle == int(middle)
            else middle
        )
    return present[0]
