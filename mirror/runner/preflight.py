"""What `mirror run` checks before it prepares a flow: its state directory is writable, and every
cluster's client properties are known and the cluster answers. Each failure is one line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mirror.config.flow_settings import FlowSettings
from mirror.config.models import MirrorConfig
from mirror.errors import ConfigError
from mirror.kafka.clients import check_properties, wait_until_reachable


def check_state_dir(config: MirrorConfig, state_dir: Path, instance_id: str) -> None:
    """Spark writes its checkpoints here; fail now, in one line, rather than inside Spark."""
    directory = config.spark.checkpoint_dir
    if "://" in directory:
        return  # hdfs://, s3a://...: only Spark can reach it
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        probe = state_dir / f".write-check-{instance_id}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        problem = (
            f"spark.checkpoint_dir {directory}: cannot write there ({exc.strerror}); choose a "
            "directory mirror may create and write, or fix its permissions"
        )
        raise ConfigError([problem]) from exc


def reach_clusters(config: MirrorConfig, settings: Sequence[FlowSettings]) -> None:
    """Every cluster the flows name: its client properties checked, then reached once."""
    for alias in dict.fromkeys(alias for s in settings for alias in (s.source, s.target)):
        reach_cluster(config, alias)


def reach_cluster(config: MirrorConfig, alias: str) -> None:
    """One cluster's client properties checked, then the cluster reached once (one line if not)."""
    cluster = config.clusters[alias]
    check_properties(
        {
            "admin": cluster.client_properties("admin"),
            "producer": cluster.client_properties("producer"),
            "consumer": cluster.client_properties("consumer"),
        },
        what=f"cluster {alias}",
    )
    wait_until_reachable(
        cluster.client_properties("admin"),
        timeout_seconds=cluster.connect_timeout_seconds,
        what=f"cluster {alias}",
    )
