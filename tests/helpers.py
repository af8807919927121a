"""Small helpers shared by the integration tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

T = TypeVar("T")


def run_seed() -> int:
    """A new seed every run (MIRROR_TEST_SEED repeats one), printed so a failure can be replayed."""
    seed = int(os.environ.get("MIRROR_TEST_SEED", time.time_ns() % 2**31))
    print(f"MIRROR_TEST_SEED={seed}")  # noqa: T201 - pytest shows it with the failure
    return seed


def unique_name(request: pytest.FixtureRequest, prefix: str = "") -> str:
    """A topic or group name of its own for each test, readable in broker logs."""
    test = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:60]
    return f"{prefix}{test}-{uuid.uuid4().hex[:6]}"


def assert_eventually(check: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.2) -> T:
    """Retry `check` until it stops raising AssertionError; after `timeout`, re-raise the last one."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(interval)


def retrying(ask: Callable[[], T], timeout: float = 60) -> T:
    """`ask` again while a partition's leader moves (new topics, a broker of a replicated cluster
    lost or back and leading again) or the error is retriable; raise anything else at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ask()
        except KafkaException as exc:
            error = exc.args[0]
            moving = error.code() in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
            if not (moving or error.retriable()) or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def create_topic(
    bootstrap_servers: str,
    name: str,
    partitions: int = 1,
    config: dict[str, str] | None = None,
    *,
    security: Mapping[str, str] | None = None,
) -> None:
    """`security`: the client properties a secured cluster needs (TLS, SASL)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **(security or {})})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=30)
    for future in futures.values():
        future.result(timeout=30)


def run_mirror(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The `mirror` command as a user runs it: a separate process, its exit code and output."""
    return subprocess.run(
        [sys.executable, "-m", "mirror", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
