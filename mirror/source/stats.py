"""What copy tasks tell the driver while they run: counts, transaction latencies, events.

A Spark task's result reaches the driver only when the task ends, and copy tasks run for whole
epochs (minutes). So each task sends a JSON line about once a second over TCP to a small server
on the driver (`spark.driver.host`), which feeds the metrics and the progress line. Losing the
connection loses only metrics: the copy never waits for it.
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

SEND_SECONDS = 1.0


@dataclass
class TaskStats:
    """One reporting interval of one copy task; executor side."""

    flow: str
    task: int
    records: dict[str, list[int]] = field(default_factory=dict)  # "topic:partition" -> [records, bytes]
    truncated: dict[str, int] = field(default_factory=dict)
    # Offsets copied that the source log then lost (an unclean leader election), per partition.
    copied_then_lost: dict[str, int] = field(default_factory=dict)
    ages: dict[str, float] = field(default_factory=dict)  # per partition: oldest record's age at commit
    latencies: list[float] = field(default_factory=list)  # per transaction: oldest record to commit
    transactions: int = 0
    aborted: int = 0
    fenced: int = 0
    throttled: float = 0.0  # seconds spent waiting on the flow's throttle
    # How many of the task's partitions it does not fetch while idle (mirror.source.idle_pause),
    # when that changed; None: as the last message said.
    paused: int | None = None
    events: list[tuple[str, str]] = field(default_factory=list)
    # When the task started copying and when it ended (time.time()), for the epoch gap.
    epoch: float = 0.0
    opened: float = 0.0
    closed: float = 0.0

    def copied(self, topic: str, partition: int, records: int, size: int) -> None:
        entry = self.records.setdefault(f"{topic}:{partition}", [0, 0])
        entry[0] += records
        entry[1] += size

    def message(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "task": self.task,
            "records": self.records,
            "truncated": self.truncated,
            "copied_then_lost": self.copied_then_lost,
            "ages": self.ages,
            "latencies": self.latencies,
            "transactions": self.transactions,
            "aborted": self.aborted,
            "fenced": self.fenced,
            "throttled": self.throttled,
            "paused": self.paused,
            "events": self.events,
            "epoch": self.epoch,
            "opened": self.opened,
            "closed": self.closed,
        }

    def empty(self) -> bool:
        return not (
            self.records
            or self.truncated
            or self.copied_then_lost
            or self.events
            or self.aborted
            or self.fenced
            or self.throttled
            or self.paused is not None
            or self.opened
            or self.closed
        )


class StatsSender:
    """Sends a task's stats to the driver; never raises, never blocks the copy for long."""

    def __init__(self, address: tuple[str, int] | None, flow: str, task: int, epoch: float) -> None:
        self._address = address
        self._socket: socket.socket | None = None
        self._flow, self._task, self._epoch = flow, task, epoch
        self.current = TaskStats(flow, task, epoch=epoch)
        self._next = time.monotonic() + SEND_SECONDS
        self._warned = False

    def maybe_send(self) -> None:
        if time.monotonic() >= self._next:
            self.send()

    def send(self) -> None:
        self._next = time.monotonic() + SEND_SECONDS
        stats, self.current = self.current, TaskStats(self._flow, self._task, epoch=self._epoch)
        if self._address is None or stats.empty():
            return
        line = (json.dumps(stats.message(), separators=(",", ":")) + "\n").encode()
        try:
            if self._socket is None:
                self._socket = socket.create_connection(self._address, timeout=2)
            self._socket.sendall(line)
        except OSError as exc:
            self.close()
            if not self._warned:
                self._warned = True
                log.warning(
                    "flow %s: task %d cannot report stats to the driver: %s", self._flow, self._task, exc
                )

    def close(self) -> None:
        if self._socket is not None:
            try:
                self._socket.close()
            finally:
                self._socket = None


class StatsServer:
    """Driver side: accepts the tasks' connections and hands every message to `on_message`."""

    def __init__(self, host: str, on_message: Callable[[dict[str, Any]], None]) -> None:
        handler_callback = on_message

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for line in self.rfile:
                    try:
                        handler_callback(json.loads(line))
                    except Exception:  # one bad message must not end the stream
                        log.warning("copy task stats: could not apply a message", exc_info=True)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((host, 0), Handler)
        self.address: tuple[str, int] = (host, self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="copy-stats", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
