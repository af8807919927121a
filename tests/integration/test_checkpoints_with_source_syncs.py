"""Checkpoints and group sync with the offset syncs on the source cluster (MM2's default location).

At-least-once, `mirror` keeps them there as MM2 does: the source component writes them into A,
the checkpoint component reads them from A. A group moved to B must resume as it does with the
syncs on the target (tests/integration/test_checkpoints.py), and no sync of the flow may land on B.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.checkpoint_flow import Flow, offset_syncs_of
from tests.kafka_backends import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def flow(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Flow]:
    running = Flow(
        source_cluster, target_cluster, tmp_path_factory.mktemp("source-syncs"), exactly_once=False
    )
    try:
        yield running
        assert running.run.stop() == 0, running.run.output()[-3000:]
    finally:
        running.run.cleanup()


def test_a_caught_up_group_resumes_on_the_target_with_nothing_re_read(flow: Flow) -> None:
    topic = flow.assert_a_caught_up_group_re_reads_nothing("caught-up", old=2000, new=300)
    # MM2's naming: the topic on A is named after the other cluster, B; the location the target
    # would use (mm2-offset-syncs.A.internal on B) holds nothing of this flow's topic.
    assert offset_syncs_of(flow.source, "mm2-offset-syncs.B.internal", topic)
    assert offset_syncs_of(flow.target, "mm2-offset-syncs.A.internal", topic) == []


def test_a_mid_stream_group_skips_nothing_and_re_reads_less_than_one_sync_interval(flow: Flow) -> None:
    flow.assert_a_mid_stream_group_skips_nothing("mid-stream", total=2000, consumed=777)
