"""One logging set-up for the driver and for every Python worker Spark starts.

Logging configured in the driver does not exist in a worker process: Spark forks workers from its
Python daemon, which knows nothing of the CLI's flags or of mm2.yaml. So the format and the
per-logger levels travel in FlowSettings, and each executor entry point (a copy task, a
checkpoint or heartbeat round) calls `configure` with them before it logs; the driver calls it
from the CLI. Everything goes to standard error: a worker's reaches the console of `mirror run`
in local mode (through the JVM's, see mirror.spark.gateway) and the executor's log on a cluster.

Lines name what they are about: flow, component and task through `log_context`, a partition or
the task's partitions through a call's `extra=`, as JSON fields (`--log-format json`) or a
bracketed prefix in text. A task's partition list goes on the lines about all of them (taking,
giving up, aborting), not on every line: hundreds of names on each would bury the messages.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pythonjsonlogger.json import JsonFormatter

LOG_FORMATS = ("text", "json")
TEXT_PARTITIONS_SHOWN = 3  # a task may own hundreds; text names a few and the count

_context: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("mirror_log_context", default={})  # noqa: B039 - never mutated, only replaced
_configured: tuple[str, tuple[tuple[str, str], ...], bool] | None = None
_levels_set: list[str] = []  # loggers the last set-up gave a level, reset by the next one


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Every line logged inside carries `fields` (flow=, component=, task=)."""
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def partition_names(partitions: Iterable[tuple[str, int]]) -> list[str]:
    """`topic-partition` names, as Kafka's tools write them."""
    return [f"{topic}-{partition}" for topic, partition in partitions]


def configure(
    log_format: str = "text", levels: Mapping[str, str] | None = None, *, debug: bool = False
) -> None:
    """Send this process's logs to standard error in `log_format`, at INFO (DEBUG with `debug`)
    and `levels` ({logger name: level}) over that. Cheap to call again: a worker calls it
    for every task, and only a different set-up changes anything."""
    global _configured  # noqa: PLW0603 - one set-up per process, by design
    wanted = (log_format, tuple(sorted((levels or {}).items())), debug)
    if wanted == _configured:
        return
    handler = _Stderr()
    handler.setFormatter(_JsonLines() if log_format == "json" else _TextLines())
    handler.addFilter(_add_context)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "mirror", False)]:
        root.removeHandler(old)
    handler.mirror = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    if not debug:
        # Their INFO lines (every job run, every py4j call) drown mirror's own progress lines. And
        # py4j logs, with a traceback, every exception a foreachBatch callback passes back to Spark;
        # the query fails with it and the supervisor reports it in one line, so those stay quiet.
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        # A job still running at its next interval (a cluster not answering) is expected; the
        # progress line says so instead of a warning every interval.
        logging.getLogger("apscheduler").setLevel(logging.ERROR)
        # aiokafka's INFO lines (a coordinator found, per producer) are its librdkafka's debug
        # noise; its warnings and errors stay.
        logging.getLogger("aiokafka").setLevel(logging.WARNING)
    else:
        # aiokafka's DEBUG is a line per batch: 450,000 in 4 minutes of a 10,000-partition
        # profile, 11% of its samples. `logging.levels` can still ask for it.
        logging.getLogger("aiokafka").setLevel(logging.INFO)
    # librdkafka's own log (mirror.kafka.clients) is noise but with --debug.
    logging.getLogger("mirror.librdkafka").setLevel(logging.DEBUG if debug else logging.CRITICAL + 1)
    for name in _levels_set:
        logging.getLogger(name).setLevel(logging.NOTSET)
    for name, level in (levels or {}).items():
        logging.getLogger(name).setLevel(level)
    _levels_set[:] = list(levels or {})
    logging.captureWarnings(True)  # a library's warning is a log line too, in the same format
    _configured = wanted


def emits_json() -> bool:
    """Whether this process logs JSON lines (so that other text on its standard error is wrapped)."""
    return _configured is not None and _configured[0] == "json"


def _add_context(record: logging.LogRecord) -> bool:
    for name, value in _context.get().items():
        if not hasattr(record, name):  # a call's own extra= wins
            setattr(record, name, value)
    return True


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Standard error as it is when a line is written, not when logging was set up (a test's
    captured stream, a worker's redirected one)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


class _JsonLines(JsonFormatter):
    # ISO 8601 in UTC: log pipelines merge the lines of many hosts.
    converter = time.gmtime  # type: ignore[assignment]
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"

    def __init__(self) -> None:
        super().__init__(
            "{asctime}{levelname}{name}{message}",
            style="{",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            json_ensure_ascii=False,
        )


class _TextLines(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(where)s%(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.where = _where(record)
        return super().format(record)


def _where(record: logging.LogRecord) -> str:
    """`[A->B source task 1 orders-0,orders-1,orders-2 +5] ` from the context fields, or ''."""
    parts = [str(getattr(record, name)) for name in ("flow", "component") if hasattr(record, name)]
    if hasattr(record, "task"):
        parts.append(f"task {record.task}")
    if hasattr(record, "partition"):
        parts.append(str(record.partition))
    partitions = getattr(record, "partitions", None)
    if partitions:
        shown = ",".join(partitions[:TEXT_PARTITIONS_SHOWN])
        more = len(partitions) - TEXT_PARTITIONS_SHOWN
        parts.append(f"{shown} +{more}" if more > 0 else shown)
    return f"[{' '.join(parts)}] " if parts else ""
