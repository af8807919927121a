"""The copy task producer's settings: what the copy path relies on, and what a user may change."""

from __future__ import annotations

from mirror.source.copy_clients import source_reader_config, task_writer_config


def test_a_transactional_writer_lingers_for_the_commit_interval() -> None:
    config = task_writer_config({}, "mirror-A-B-0", commit_interval_ms=250)
    assert config["linger.ms"] == "250"
    assert config["transactional.id"] == "mirror-A-B-0"
    assert "enable.idempotence" not in config  # implied by the transactional id


def test_an_at_least_once_writer_sends_within_milliseconds_and_is_idempotent() -> None:
    config = task_writer_config({}, None, commit_interval_ms=250)
    assert config["linger.ms"] == "5"
    assert config["enable.idempotence"] == "true"
    assert "transactional.id" not in config


def test_the_users_producer_properties_win_but_never_over_the_partitioner() -> None:
    user = {"linger.ms": "20", "transaction.timeout.ms": "30000", "partitioner": "consistent"}
    config = task_writer_config(user, "mirror-A-B-0", commit_interval_ms=100)
    assert config["linger.ms"] == "20"
    assert config["transaction.timeout.ms"] == "30000"
    # Offsets records must land in the partition Connect's Java client would pick.
    assert config["partitioner"] == "murmur2_random"


def test_a_source_consumer_of_more_partitions_than_one_consumer_reads_waits_as_java_consumers_do() -> None:
    assert source_reader_config({}, "copier", partitions=1000)["fetch.wait.max.ms"] == "100"
    assert source_reader_config({}, "copier", partitions=5000)["fetch.wait.max.ms"] == "500"


def test_a_source_consumer_of_more_partitions_than_one_consumer_reads_paces_its_fetches() -> None:
    many = source_reader_config({}, "copier", partitions=5000)
    assert many["queued.min.messages"] == "1"
    assert many["fetch.queue.backoff.ms"] == "100"
    few = source_reader_config({}, "copier", partitions=1000)
    assert "queued.min.messages" not in few
    assert "fetch.queue.backoff.ms" not in few


def test_the_users_consumer_properties_win_but_never_over_read_committed() -> None:
    user = {"fetch.wait.max.ms": "20", "isolation.level": "read_uncommitted"}
    config = source_reader_config(user, "copier", partitions=500)
    assert config["fetch.wait.max.ms"] == "20"
    assert config["isolation.level"] == "read_committed"
    assert config["auto.offset.reset"] == "error"
