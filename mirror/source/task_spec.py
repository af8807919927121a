"""What the planner hands a copy task for one epoch, and the one row the task returns."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CopyTaskSpec:
    """What the planner hands one task for one epoch; picklable."""

    index: int
    generation: int
    partitions: tuple[tuple[str, int], ...]
    deadline: float  # time.time() at which the epoch's window ends
    stats_address: tuple[str, int] | None
    # The driver's stop file: a second stop signal where the executor shares the driver's disk
    # (local mode), for when the flow mark cannot be written.
    stop_file: str | None = None
    # This task's share of the flow's throttle_bytes_per_second; None: not throttled.
    throttle_bytes_per_second: float | None = None


@dataclass
class TaskSummary:
    """The task's one output row, when its epoch ends."""

    task: int
    generation: int
    partitions: int
    records: int = 0
    transactions: int = 0
    ended: str = "window"
