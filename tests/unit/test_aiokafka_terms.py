"""The aiokafka copy producer's translations: librdkafka's properties in, librdkafka's errors out,
so the copy path configures it and sorts its failures as it does librdkafka's."""

from __future__ import annotations

import ssl

import pytest
from aiokafka import errors as aiokafka_errors
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NotEnoughReplicasError,
    ProducerFenced,
    TopicAuthorizationFailedError,
)
from confluent_kafka import KafkaError, KafkaException

from mirror.errors import ConfigError, NotAuthorizedError, ProducerFencedError
from mirror.kafka.aiokafka_terms import kafka_error, producer_options
from mirror.kafka.transactions import RetriableError, classify
from mirror.source.copy_clients import task_writer_config


def test_the_copy_producers_own_configuration_translates_whole() -> None:
    config = task_writer_config(
        {"bootstrap.servers": "b:9092", "compression.type": "zstd", "message.max.bytes": "2000000"},
        "mirror-A-B-task:0",
        commit_interval_ms=100,
    )
    options = producer_options(config, what="flow A->B")
    assert options == {
        "bootstrap_servers": "b:9092",
        "compression_type": "zstd",
        "max_request_size": 2_000_000,
        "transaction_timeout_ms": 60_000,
    }


def test_tls_and_sasl_properties_become_a_context_and_credentials() -> None:
    options = producer_options(
        {
            "bootstrap.servers": "b:9093",
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "scram-sha-512",
            "sasl.username": "mirror",
            "sasl.password": "secret",
            "ssl.endpoint.identification.algorithm": "none",
        },
        what="flow A->B",
    )
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("mirror", "secret")
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    assert options["ssl_context"].check_hostname is False


def test_a_property_aiokafka_cannot_honour_is_one_line_naming_it_and_the_way_out() -> None:
    with pytest.raises(ConfigError) as refused:
        producer_options(
            {"bootstrap.servers": "b:9092", "sticky.partitioning.linger.ms": "5"}, what="flow A->B"
        )
    assert refused.value.problems == [
        "flow A->B: the aiokafka copy producer has no counterpart for producer property "
        "sticky.partitioning.linger.ms; remove it or set copy_producer: librdkafka"
    ]


@pytest.mark.parametrize(
    ("raised", "sorted_as"),
    [
        (ProducerFenced(), ProducerFencedError),
        (TopicAuthorizationFailedError(), NotAuthorizedError),
        (NotEnoughReplicasError(), RetriableError),
        (KafkaTimeoutError(), RetriableError),
        (KafkaConnectionError(), RetriableError),
    ],
)
def test_aiokafka_errors_sort_as_librdkafkas_of_the_same_meaning(raised: Exception, sorted_as: type) -> None:
    assert isinstance(classify(KafkaException(kafka_error(raised)), "copying"), sorted_as)


def test_a_failed_transactional_call_replaces_the_producer_unless_an_acl_is_missing() -> None:
    # aiokafka's transaction state after a failed EndTxn or TxnOffsetCommit is not one to build
    # on: a new producer settles it, and the task re-reads what the target committed.
    assert isinstance(
        classify(KafkaException(kafka_error(KafkaTimeoutError(), fatal=True)), "x"), ProducerFencedError
    )
    assert isinstance(
        classify(KafkaException(kafka_error(TopicAuthorizationFailedError(), fatal=True)), "x"),
        NotAuthorizedError,
    )


def test_a_record_too_large_keeps_the_code_the_copy_path_names_it_by() -> None:
    # mirror.source.transaction turns this code into RecordTooLargeError, naming the settings.
    assert kafka_error(MessageSizeTooLargeError()).code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_a_record_a_compacted_topic_refuses_keeps_its_code_through_aiokafka() -> None:
    # aiokafka 0.14 does not know INVALID_RECORD and would report it as UnknownError, code lost:
    # the copy path names the fix (a key, or the topic's cleanup.policy) by this code.
    refused = aiokafka_errors.for_code(KafkaError.INVALID_RECORD)()
    assert kafka_error(refused).code() == KafkaError.INVALID_RECORD
