"""What the flow's lag says (the progress line and `mirror_source_lag_records`): every selected
partition counts, and a lag that cannot be read is unknown, never a stale number. The clusters'
answers are stubbed at the `mirror.kafka.offsets` boundary; the lag against real brokers is read
in integration/test_source_replication.py and integration/test_status.py."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from confluent_kafka import KafkaError, KafkaException
from prometheus_client import CollectorRegistry

from mirror.errors import KafkaClientError
from mirror.metrics import SourceMetrics
from mirror.runner import progress
from mirror.runner.cluster_answers import SOURCE_LATE_SECONDS, Silence
from mirror.runner.progress import LagReader
from tests.unit.flows import flow_a_to_b

Partition = tuple[str, int]


class _Reader:
    """The reader's consumers, never asked: the reads are stubbed at mirror.kafka.offsets."""

    def list_topics(self, **_: object) -> None:
        return None

    def close(self) -> None:
        return None


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> LagReader:
    monkeypatch.setattr(progress, "committed_reader", lambda _conf, _group: _Reader())
    return LagReader(flow_a_to_b(["orders"]))


def answering(
    monkeypatch: pytest.MonkeyPatch, ends: dict[Partition, int], positions: dict[Partition, int]
) -> None:
    monkeypatch.setattr(progress, "stable_ends", lambda _consumer, parts: {p: ends[p] for p in parts})

    def committed(_consumer: object, parts: Iterable[Partition]) -> dict[Partition, int]:
        return {p: positions[p] for p in parts if p in positions}

    monkeypatch.setattr(progress, "committed_positions", committed)


def test_a_selected_partition_not_copied_yet_lags_by_all_its_records(
    reader: LagReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    # orders-1's remote partition could not be created: it is in no copy task, and its ten
    # records are ten records of lag, not none.
    answering(monkeypatch, {("orders", 0): 10, ("orders", 1): 10}, {("A.orders", 0): 7})
    reader.refresh(lambda: [("orders", 0), ("orders", 1)], copied={("orders", 0)})
    assert reader.latest == {("orders", 0): 3, ("orders", 1): 10}


def test_a_lag_not_read_for_thirty_seconds_is_unknown_and_its_series_are_dropped(
    reader: LagReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    answering(monkeypatch, {("orders", 0): 10}, {("A.orders", 0): 10})
    reader.refresh(lambda: [("orders", 0)], copied={("orders", 0)})
    assert reader.latest == {("orders", 0): 0}
    metrics = SourceMetrics(CollectorRegistry())
    metrics.record_lag("A->B", reader.latest)

    def unanswered() -> list[Partition]:
        raise KafkaClientError("listing topics of source cluster A: Failed to get metadata: Local: Timed out")

    reader.refresh(unanswered, copied={("orders", 0)})
    assert reader.latest == {("orders", 0): 0}, "one failed read keeps the last one for a while"
    clock = progress.time.monotonic() + progress.LAG_STALE_SECONDS + 1
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock)
    assert reader.latest is None
    assert reader.age_seconds is not None and reader.age_seconds > progress.LAG_STALE_SECONDS

    metrics.record_lag("A->B", reader.latest)
    assert not [s for m in metrics.lag.collect() for s in m.samples], "a stale 0 would read as caught up"


def test_a_read_still_waiting_on_a_dead_leader_tells_a_cluster_that_answers_in_part(
    reader: LagReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One broker of three killed: the metadata answers at once, the ends of the partitions it led
    # wait for librdkafka's timeout, longer than the silence the console reports.
    answering(monkeypatch, {}, {})
    lines: list[str] = []
    silence = Silence("A->B", "source", "A", SOURCE_LATE_SECONDS, lines.append)

    def waiting(_consumer: object, _parts: Iterable[Partition]) -> dict[Partition, int]:
        assert reader.source_unanswered_since is not None
        later = reader.source_unanswered_since + SOURCE_LATE_SECONDS + 1
        silence.check(
            reader.source_unanswered_since,
            reader.source_problem,
            later,
            in_part=reader.source_answers_in_part,
        )
        raise KafkaClientError("listing partition offsets: orders-0's leader gave no offset")

    monkeypatch.setattr(progress, "stable_ends", waiting)
    reader.refresh(lambda: [("orders", 0)], copied={("orders", 0)})
    assert len(lines) == 1, lines
    assert "answers, but not for every partition" in lines[0], lines[0]


def test_a_read_whose_topic_listing_answered_tells_a_cluster_that_answers_in_part_whatever_comes_next(
    reader: LagReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A local drill: a read waiting on a lost broker's partitions was said to be a silent cluster,
    # its own metadata request after the listing failing, likely in the 10 s the machine stalled as
    # the broker was killed. The listing is the cluster's answer; nothing after it is asked.
    class _Stalled:
        def list_topics(self, **_: object) -> None:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    reader._source_ends = _Stalled()  # type: ignore[assignment]
    answering(monkeypatch, {}, {})
    said: list[bool] = []

    def waiting(_consumer: object, _parts: Iterable[Partition]) -> dict[Partition, int]:
        said.append(reader.source_answers_in_part)
        raise KafkaClientError("listing partition offsets: no answer in time")

    monkeypatch.setattr(progress, "stable_ends", waiting)
    reader.refresh(lambda: [("orders", 0)], copied={("orders", 0)})
    assert said == [True] and reader.source_answers_in_part

    def unlisted() -> list[Partition]:
        raise KafkaClientError("listing topics of source cluster A: Failed to get metadata: Local: Timed out")

    reader.refresh(unlisted, copied={("orders", 0)})
    assert not reader.source_answers_in_part, "no listing answered: the cluster is silent"


def test_a_silence_of_some_partitions_lasts_across_reads_whose_topic_listing_answers(
    reader: LagReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A broker lost for minutes: every read lists the topics, then waits on its partitions' ends.
    def failing(_consumer: object, _parts: Iterable[Partition]) -> dict[Partition, int]:
        raise KafkaClientError("listing partition offsets: orders-0's leader gave no offset")

    answering(monkeypatch, {}, {})
    monkeypatch.setattr(progress, "stable_ends", failing)
    reader.refresh(lambda: [("orders", 0)], copied={("orders", 0)})
    since = reader.source_unanswered_since
    assert since is not None and reader.source_answers_in_part
    reader.refresh(lambda: [("orders", 0)], copied={("orders", 0)})
    assert reader.source_unanswered_since == since, "the listing ended the silence, to be said again"
    answering(monkeypatch, {("orders", 0): 10}, {("A.orders", 0): 10})
    reader.refresh(lambda: [("orders", 0)], copied={("orders", 0)})
    assert reader.source_unanswered_since is None and not reader.source_answers_in_part
