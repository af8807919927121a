"""What Spark's planner processes import: every `mirror run` start-up pays for it several times
(the data source unpickled to give its schema, in the streaming source runner, to plan reads)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("confluent_kafka", "aiokafka", "cryptography", "mirror.source.task")


def test_the_copy_sources_module_leaves_the_copy_paths_kafka_libraries_to_the_executors() -> None:
    # A fresh interpreter, as a planner is: this test's own process has them all loaded already.
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys, mirror.source.job; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    assert loaded == []
