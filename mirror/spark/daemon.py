"""Spark's Python daemon for mirror (`spark.python.daemon.module`): pyspark's own, warmed up.

Every Python worker Spark starts on an executor is forked from this daemon, and imports what it
needs after the fork: pyspark from `pyspark.zip`, which holds no bytecode and is compiled anew in
every worker, then mirror's copy path. Importing them here once, pyspark from the installed
package when there is one, lets every worker start with them loaded. Nothing here starts a
thread (no Kafka client, no pyarrow), so forking stays safe.
"""

from __future__ import annotations

import gc
import sys

# Spark puts pyspark.zip first on PYTHONPATH; the installed package, with cached bytecode, wins
# when it is there, and the zip still serves a Spark distribution without one.
sys.path.sort(key=lambda entry: entry.endswith(".zip"))

import pyspark.worker  # noqa: F401
from pyspark import daemon

import mirror.source.task  # noqa: F401

if __name__ == "__main__":
    # A reused worker ends every Spark task with gc.collect() (pyspark/daemon.py), and every
    # checkpoint and heartbeat round is a task: each collection walked all that was imported above,
    # 16% of the workers' Python time in a profile of 1,000 partitions. Frozen before the fork, it
    # is left out of their collections (and its pages stay shared: a collection writes to them).
    gc.freeze()
    daemon.manager()
