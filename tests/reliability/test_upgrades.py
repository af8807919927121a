"""A rolling restart onto a newer build while records flow: nothing lost, nothing copied twice.

The older build is a commit of this repository's history (the build stop 20 landed: its flow mark
carries no times, its copy tasks write no `d=` with their positions), taken out with `git archive`
and run with PYTHONPATH pointing at it, its Spark workers included. It copies mid-stream and stops
on SIGTERM; the Spark state directory is deleted (docs/deploy.md says that is always safe); this
build starts on the same clusters with another `tasks_max`, commit interval and epoch length and
finishes the copy, which is then compared with the source record by record.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirror.config import load_config
from mirror.config.flow_settings import flow_settings
from mirror.source.offsets_admin import last_owner
from tests.helpers import create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, wait_until_copying, write_config
from tests.reliability.conftest import Record
from tests.reliability.traffic import Traffic, compare_topics
from tests.seeding import produce_mixed

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.reliability]

ROOT = Path(__file__).resolve().parents[2]
OLD_BUILD = "df6a276"  # main when stop 20 landed (#13, #14 resolved)
BACKLOG = 6000
PARTITIONS = 12


@pytest.fixture(scope="module")
def old_build(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", OLD_BUILD, "mirror"],
        capture_output=True,
        check=False,
    )
    assert archive.returncode == 0, (
        f"the older build {OLD_BUILD} is not in this clone's history (a full clone is needed): "
        f"{archive.stderr.decode(errors='replace')}"
    )
    where = tmp_path_factory.mktemp("old-build")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(where, filter="data")
    yield where
    shutil.rmtree(where, ignore_errors=True)


def test_a_rolling_restart_onto_this_build_with_other_settings_loses_and_duplicates_nothing(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
    old_build: Path,
) -> None:
    topic = unique_name(request, "upgrade-")
    create_topic(
        source_cluster.bootstrap_servers, topic, partitions=PARTITIONS, config={"retention.ms": "-1"}
    )
    produce_mixed(source_cluster, topic, BACKLOG, PARTITIONS, seed=7, aborted_every=5)
    traffic = Traffic(source_cluster, {topic: PARTITIONS}, per_second=1000).start()
    before = write_config(tmp_path, source_cluster, target_cluster, [topic], tasks_max=2, name="before.yaml")
    old = MirrorRun(before, tmp_path / "old.log", build=old_build)
    try:
        wait_until_copying(source_cluster, target_cluster, [topic], old, more=3000)
        assert old.stop() == 0, old.output()[-3000:]
        # It was the old build that ran: its flow mark carries no times.
        config = load_config(before)
        settings = flow_settings(config, source_cluster.alias, target_cluster.alias, config.flows["A->B"])
        mark = last_owner(settings)
        assert mark is not None and mark.stopping and mark.renewed_ms == 0, mark

        shutil.rmtree(tmp_path / "state")  # the Spark state directory
        after = write_config(
            tmp_path,
            source_cluster,
            target_cluster,
            [topic],
            tasks_max=3,
            commit_interval_ms=250,
            emit_heartbeats_interval_seconds=2,
            spark={"epoch_seconds": 30},
            name="after.yaml",
        )
        new = MirrorRun(after, tmp_path / "new.log")
        try:
            wait_until_copying(source_cluster, target_cluster, [topic], new, more=1000)
            produced = traffic.stop()
            wait_until_caught_up(source_cluster, target_cluster, [topic], new)
            assert new.stop() == 0, new.output()[-3000:]
            upgraded = last_owner(settings)
            assert upgraded is not None and upgraded.renewed_ms > 0 and upgraded.generation > mark.generation
        finally:
            new.cleanup()
    finally:
        traffic.stop()
        old.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, [topic])
    reliability(
        "fault",
        f"rolling restart from build {OLD_BUILD} (SIGTERM) onto this one, tasks_max 2 -> 3, "
        "Spark state deleted",
        does=(
            "the new build resumes from the positions the old one committed in Kafka (not from Spark's "
            "state), fencing the old build's producer ids"
        ),
        comparison=comparison,
        shown="both runs exit 0; the new one resumed from the positions in Kafka",
    )
    assert comparison.exact, comparison
    assert comparison.checked == BACKLOG + produced
