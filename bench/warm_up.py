"""Before the first contender: the brokers serve the many-partitions steady load once, unmeasured.

A run's first contender met brokers that had only been seeded, and paid for it: at 1,000
partitions MM2's steady p50 was 1,528 ms in that slot against 805-960 ms in five later rounds, and
mirror's 869-1,254 ms against 367-537 ms (bench/results/20261129T06*-quick-2rounds.*). So the
floor (bare consume -> transactional produce, bench/floor_aiokafka.py), which is neither
contender, copies that load first, through the same paths a contender's figures are taken on:
topics made on both sides, a paced producer into the source, transactions over as many target
partitions, a read_committed reader of all of them. Its latency is kept in the results, so a run
shows whether the brokers were still settling when it ended. It did not make the order neutral:
in two runs with it, mirror's figure still depended on its slot (README, Benchmarks).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import steady
from bench.contenders import CONTENDERS, Clusters
from bench.floor_aiokafka import offsets_topic
from bench.workloads import Mode, TopicSet

WARM_UP_SECONDS = 60
_WARMER = replace(next(c for c in CONTENDERS if c.name == "floor-eos-aiokafka"), name="warm-up")


def warm_up(
    clusters: Clusters, mode: Mode, work: Path, seconds: int
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The floor under the mode's many-partitions steady rate for `seconds`: (its latency, the
    source topics and the target topics it leaves, for the caller to delete)."""
    layout = mode.many.catch_up.topic_set
    topics = TopicSet("warm-up", layout.topics, layout.partitions)
    load = replace(mode.many.steady, seconds=seconds)
    setup = steady.prepare(clusters, topics, load)
    target = [*(_WARMER.remote_topic(name) for name in topics.names), offsets_topic(_WARMER.alias)]
    running = steady.launch_beside(
        setup,
        _WARMER,
        clusters,
        [topics.pattern],
        work / "warm-up",
        checkpoint_seconds=mode.checkpoint_seconds,
    )
    try:
        result = steady.latency(running, _WARMER, clusters, load, setup)
    finally:
        running.stop()
    return result, list(topics.names), target
