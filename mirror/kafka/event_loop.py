"""The asyncio event loop aiokafka's clients run on in a synchronous process: one per process,
in a daemon thread of its own, made on first use (mirror.kafka.packing_producer)."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from aiokafka.errors import KafkaError as AioKafkaError

_loop_lock = threading.Lock()
_loop: tuple[int, asyncio.AbstractEventLoop] | None = None  # the process it runs in, and the loop


def process_loop() -> asyncio.AbstractEventLoop:
    """The process's loop for aiokafka, running in a daemon thread from its first use. A process
    forked after that (PySpark's daemon forks its workers) has the variable but not the thread,
    so it makes its own."""
    global _loop  # noqa: PLW0603 - one loop per process, made on first use
    with _loop_lock:
        if _loop is None or _loop[0] != os.getpid():
            loop = asyncio.new_event_loop()
            loop.set_exception_handler(_unretrieved)
            threading.Thread(target=loop.run_forever, name="aiokafka-loop", daemon=True).start()
            _loop = (os.getpid(), loop)
        return _loop[1]


def _unretrieved(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """What asyncio would report of this loop's leftovers, which are aiokafka's and expected: each
    batch's inner future fails too and only the shield around it is read ("exception was never
    retrieved", with a traceback, after every failed batch); a producer given up while its broker
    was away is never stopped ("Unclosed AIOKafkaProducer"); and a worker process exits with its
    producers' tasks pending. Anything else goes to asyncio's own handler."""
    message = str(context.get("message", ""))
    if message == "Future exception was never retrieved" and isinstance(
        context.get("exception"), AioKafkaError
    ):
        return
    if message.startswith(("Unclosed AIOKafkaProducer", "Task was destroyed but it is pending")):
        return
    loop.default_exception_handler(context)
