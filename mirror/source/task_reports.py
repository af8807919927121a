"""What a copy task tells the driver, through its stats messages, and how it tells a condition once.

An outage repeats the same failure every try, up to every two seconds: each kind of message (its
numbers aside: offsets and seconds change per try) is told once per task.
"""

from __future__ import annotations

import re

from mirror.source.stats import StatsSender


class TaskReports:
    def __init__(self, stats: StatsSender) -> None:
        self._stats = stats
        self._told: set[str] = set()  # kinds seen: waits reported, aborts logged

    def report(self, kind: str, message: str) -> None:
        """An event for the driver's output, sent now."""
        self._stats.current.events.append((kind, message))
        self._stats.send()

    def say_once(self, message: str) -> None:
        """A condition the task waits out (a partition without a leader, a transaction not decided
        yet) reaches the driver's output once per task, not once per try."""
        if self.first_time(f"waiting: {message}"):
            self.report("waiting", message)

    def first_time(self, text: str) -> bool:
        """Whether `text` is new to this task, numbers aside."""
        kind = re.sub(r"\d+", "N", text)
        if kind in self._told:
            return False
        self._told.add(kind)
        return True
