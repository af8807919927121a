"""Signals on the driver: only `mirror run` decides when Spark stops.

systemd's default stop, and Ctrl-C in a terminal, signal the whole process group. The Spark JVM
shares it, and by default SIGTERM runs its shutdown hooks, which stop the SparkContext under
running copy tasks (py4j tracebacks, exit 1). A JVM that starts with SIGTERM ignored leaves it
ignored (HotSpot registers no handler for an ignored shutdown signal); pyspark already starts it
with SIGINT ignored. The driver then ends the copy tasks' transactions and stops Spark itself.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


@contextmanager
def threads_without_signals() -> Iterator[None]:
    """Threads started inside block SIGTERM and SIGINT for good, so these are always delivered to
    the main thread, where Python runs the handlers; never lost to another thread while the main
    one blocks them."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def start_ignoring_sigterm(launch: Callable[[], T]) -> T:
    """Run `launch` (which starts the JVM) so the processes it starts ignore SIGTERM.

    SIGTERM is blocked meanwhile: one arriving now stays pending (Linux never discards a blocked
    signal) and reaches this process's handler once it is restored.
    """
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    handler = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        return launch()
    finally:
        signal.signal(signal.SIGTERM, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
