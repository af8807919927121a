"""Starting the Spark JVM with its standard error read by this process. Driver only.

The JVM's standard error is also that of every Python process Spark starts (workers, the
streaming data source's planner). Python ends such a process with a traceback on it, e.g. a
planner that could not connect back to a JVM which was paused meanwhile. `mirror run` shows users
one-line errors, never stack traces: each traceback becomes one warning naming its last line (the
whole of it at DEBUG); every other line passes through unchanged.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable
from subprocess import PIPE

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway

from mirror.spark.signals import threads_without_signals

log = logging.getLogger(__name__)

TRACEBACK = "Traceback (most recent call last):"


def start_gateway(conf: SparkConf) -> None:
    """Start the JVM for `conf` (as SparkSession.builder would) with its standard error filtered."""
    gateway = launch_gateway(  # type: ignore[no-untyped-call]
        conf, popen_kwargs={"stderr": PIPE, "text": True, "errors": "replace"}
    )
    stderr = gateway.proc.stderr  # the JVM's process, set by launch_gateway
    with threads_without_signals():
        threading.Thread(
            target=forward_lines, args=(stderr, _write_through), name="spark-stderr", daemon=True
        ).start()
    # The SparkContext the builder makes next takes this gateway instead of starting its own.
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def forward_lines(lines: Iterable[str], write: Callable[[str], None]) -> None:
    """Pass `lines` to `write`, except Python tracebacks, each logged as one warning."""
    traceback: list[str] = []
    for line in lines:
        if traceback:
            traceback.append(line)
            # A traceback's frames are indented; its first unindented line names the exception.
            if line[:1] not in (" ", "\t", "\n", ""):
                _log_traceback(traceback)
                traceback = []
        elif line.startswith(TRACEBACK):
            traceback = [line]
        else:
            write(line)
    if traceback:
        _log_traceback(traceback)


def _log_traceback(lines: list[str]) -> None:
    log.warning("a Spark Python process failed: %s", lines[-1].strip())
    log.debug("its traceback:\n%s", "".join(lines))


def _write_through(line: str) -> None:
    sys.stderr.write(line)
    sys.stderr.flush()
