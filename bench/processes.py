"""CPU seconds and peak RSS of a contender: its process and every descendant (JVMs, Python workers);
and what the brokers spent meanwhile."""

from __future__ import annotations

import bisect
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import psutil

SAMPLE_SECONDS = 0.2


@dataclass(frozen=True)
class BrokerJvm:
    """One broker of the bench's clusters: what a contender's load costs it is part of the contender's
    cost, and a broker whose heap ran out (a 1 GiB source broker under a consumer of 10,000
    partitions did, and stayed full for the contenders after it) skews every figure taken on it."""

    side: Literal["source", "target"]
    pid: int
    gc_log: Path

    def usage(self) -> tuple[float, int] | None:
        """(CPU seconds so far, full GCs so far), or None if the JVM is gone. The JVM keeps two GC
        log files of 5 MB: a count taken across a rotation may lose the oldest file's."""
        try:
            times = psutil.Process(self.pid).cpu_times()
        except psutil.Error:
            return None
        full = 0
        for log in self.gc_log.parent.glob(self.gc_log.name + "*"):
            with contextlib.suppress(OSError):
                full += log.read_text(encoding="utf-8", errors="replace").count("Pause Full")
        return times.user + times.system, full


def broker_usage(brokers: Sequence[BrokerJvm]) -> dict[str, tuple[float, int]]:
    """Per side ("source", "target"): CPU seconds and full GCs so far, summed over its brokers;
    a side one of whose brokers is gone is left out rather than counted short."""
    totals: dict[str, tuple[float, int]] = {}
    gone: set[str] = set()
    for broker in brokers:
        usage = broker.usage()
        if usage is None:
            gone.add(broker.side)
            continue
        before = totals.get(broker.side, (0.0, 0))
        totals[broker.side] = (before[0] + usage[0], before[1] + usage[1])
    return {side: total for side, total in totals.items() if side not in gone}


class ProcessTree:
    """Samples a process tree on a thread until stopped.

    CPU is the sum over every process seen of its last sampled user+system time, so a Spark
    Python worker that exits between samples loses at most one interval. Children's reaped times
    (`children_user`) are ignored: they would count those workers twice.
    """

    def __init__(self, root_pid: int) -> None:
        self._root = psutil.Process(root_pid)
        self._last_cpu: dict[int, float] = {}
        self.samples: list[tuple[float, float, int]] = []  # (monotonic time, cpu seconds, rss bytes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="process-tree", daemon=True)

    def start(self) -> ProcessTree:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(SAMPLE_SECONDS)

    def _sample(self) -> None:
        try:
            processes = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            return  # the root exited; the last sample stands
        rss = 0
        for process in processes:
            with contextlib.suppress(psutil.Error), process.oneshot():
                times = process.cpu_times()
                self._last_cpu[process.pid] = times.user + times.system
                rss += process.memory_info().rss
        self.samples.append((time.monotonic(), sum(self._last_cpu.values()), rss))

    def cpu_at(self, when: float) -> float:
        """CPU seconds used up to the first sample at or after `when` (the last one if none is)."""
        if not self.samples:
            return 0.0
        index = bisect.bisect_left([t for t, _, _ in self.samples], when)
        return self.samples[min(index, len(self.samples) - 1)][1]

    def peak_rss_bytes(self, since: float | None = None, until: float | None = None) -> int:
        return max(
            (
                rss
                for t, _, rss in self.samples
                if (until is None or t <= until) and (since is None or t >= since)
            ),
            default=0,
        )


def start(command: Sequence[str], log: Path, *, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """A contender process in its own session, so stopping it stops its whole tree."""
    with log.open("ab") as out:
        return subprocess.Popen(
            list(command), stdout=out, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes], *, grace_seconds: float = 30.0) -> None:
    """SIGTERM the contender's main process, as `kill` would; SIGKILL its whole group after the grace
    period. (Terminating the group at once would take Spark's JVM away from under `mirror run`.)"""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace_seconds)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)


def open_files(pid: int) -> int:
    """How many files (and sockets) process `pid` holds open now; 0 once it is gone."""
    try:
        return int(psutil.Process(pid).num_fds())
    except psutil.Error:
        return 0
