"""Starting the Spark JVM with its standard error read by this process. Driver only.

The JVM's standard error is also that of every Python process Spark starts (workers, the
streaming data source's planner). Python ends such a process with a traceback on it, e.g. a
planner that could not connect back to a JVM which was paused meanwhile. `mirror run` shows users
one-line errors, never stack traces: each traceback becomes one warning naming its exception line
(the whole of it at DEBUG); every other line passes through unchanged.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway

from mirror.logs import emits_json
from mirror.spark.signals import threads_without_signals

log = logging.getLogger(__name__)
_jvm_log = logging.getLogger("mirror.spark.jvm")
_LOG4J_LEVEL = re.compile(r"^\d\d:\d\d:\d\d spark ([A-Z]+) ")
_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}

TRACEBACK = "Traceback (most recent call last):"
# Python's lines between the tracebacks of a chained exception.
_CHAINING = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)


def start_gateway(conf: SparkConf) -> None:
    """Start the JVM for `conf` (as SparkSession.builder would) with its standard error filtered.

    The pipe is read from before the JVM starts: a JVM that fails to start says why on it, and
    one that wrote more than a pipe holds before it is up would otherwise block for good.
    """
    read_end, write_end = os.pipe()
    reader = os.fdopen(read_end, encoding="utf-8", errors="replace")  # the thread's, for good
    with threads_without_signals():
        threading.Thread(
            target=forward_lines, args=(reader, _write_through), name="spark-stderr", daemon=True
        ).start()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write_end})  # type: ignore[no-untyped-call]
    finally:
        os.close(write_end)  # the JVM holds its own copy; the reader ends when the JVM's closes
    # The SparkContext the builder makes next takes this gateway instead of starting its own.
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def forward_lines(lines: Iterable[str], write: Callable[[str], None]) -> None:
    """Pass `lines` to `write`, except Python tracebacks, each logged as one warning."""
    traceback: list[str] = []
    chained = False  # just after a traceback: Python's chaining lines belong to it
    for line in lines:
        if traceback:
            traceback.append(line)
            # A traceback's frames are indented; its first unindented line names the exception.
            if line[:1] not in (" ", "\t", "\n", ""):
                _log_traceback(traceback)
                traceback, chained = [], True
        elif line.startswith(TRACEBACK):
            traceback = [line]
        elif chained and (not line.strip() or line.strip() in _CHAINING):
            continue
        else:
            chained = False
            write(line)
    if traceback:
        _log_traceback(traceback)


def _log_traceback(lines: list[str]) -> None:
    log.warning("a Spark Python process failed: %s", lines[-1].strip())
    log.debug("its traceback:\n%s", "".join(lines))


_unwritable = threading.Event()


def _write_through(line: str) -> None:
    # Never raise: this thread must keep draining the pipe, or the JVM and every Python worker
    # block on their next write to it.
    if _unwritable.is_set() or sys.stderr is None:
        return
    if emits_json() and not line.startswith("{"):
        # The JVM's own lines (log4j, mirror/spark/log4j2.properties: "HH:mm:ss spark LEVEL ..."),
        # among the workers' JSON ones: one JSON line each as well, at the JVM's level (anything
        # else on the JVM's stderr, such as a stack trace's lines, as a warning).
        level = _LOG4J_LEVEL.match(line)
        _jvm_log.log(
            _LEVELS.get(level.group(1), logging.WARNING) if level else logging.WARNING, line.rstrip("\n")
        )
        return
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except (OSError, ValueError):
        _unwritable.set()
