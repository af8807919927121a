"""Several rounds of one bench run, the contenders' order alternating, and their medians.

Who runs first is not neutral: at 1,000 partitions under a steady load, one run of two rounds on
this 2-core machine measured mirror's p99 at 1.66x MM2's with mirror first and 0.54x with MM2
first (bench/results/20261128T220110Z-quick-2rounds.md). A comparison taken in both orders, and
reported as medians beside each round's own figures, says how much of a ratio is the order.
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


# Counts of what went wrong: the medians keep the worst round's, so a defect in one round shows.
_WORST_HIGH = frozenset({"missing", "duplicated", "out_of_order", "corrupted", "records_re_read"})
# Counts of what arrived: the worst round's too.
_WORST_LOW = frozenset({"received", "delivered", "delivered_fraction", "records_read"})
_STEADY = ("latency", "latency_many")


def medians(rounds: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per contender, in the first round's order. Each figure is the median of the rounds'
    (an even count's lower middle for whole numbers, so counts stay whole), except the counts of
    what went wrong or arrived, which are the worst round's; a yes/no is true only if true in
    every round; a result that failed in any round (a catch-up with an error, a steady load that
    could not be measured) is that failure, not the others' figures."""
    merged = []
    for row in rounds[0]:
        same = [found for rows in rounds for found in rows if found["name"] == row["name"]]
        combined = _merge(same)
        for key in _STEADY:
            error = next((found[f"{key}_error"] for found in same if f"{key}_error" in found), None)
            if error is not None:
                combined.pop(key, None)
                combined[f"{key}_error"] = error
        merged.append(combined)
    return merged


def _merge(values: list[Any], key: str = "") -> Any:
    present = [value for value in values if value is not None]
    if not present:
        return None
    if all(isinstance(value, dict) for value in present):
        failed = next((value for value in present if "error" in value), None)
        if failed is not None:
            return failed
        keys = list(dict.fromkeys(name for value in present for name in value))
        return {name: _merge([value.get(name) for value in present], name) for name in keys}
    if all(isinstance(value, bool) for value in present):
        return all(present)
    if all(isinstance(value, int | float) and not isinstance(value, bool) for value in present):
        return _middle(present, key)
    return present[0]


def _middle(numbers: list[float], key: str) -> float:
    if key in _WORST_HIGH:
        return max(numbers)
    if key in _WORST_LOW:
        return min(numbers)
    whole = all(isinstance(number, int) for number in numbers)
    return statistics.median_low(numbers) if whole else statistics.median(numbers)
