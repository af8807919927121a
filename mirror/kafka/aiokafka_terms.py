"""librdkafka's terms for aiokafka's: client properties in, and errors out.

The copy path speaks librdkafka (property names, KafkaError codes and flags); a producer built on
aiokafka (mirror.kafka.packing_producer) is handed the same properties and must fail the same
ways, so mirror.kafka.transactions.classify sorts its errors as it sorts librdkafka's. Kafka's
protocol error codes are the same numbers in both libraries; only the client-side errors need a
mapping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from aiokafka import errors as aiokafka_errors
from aiokafka.errors import (
    BrokerResponseError,
    IllegalOperation,
    InvalidProducerEpoch,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProducerFenced,
)
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.helpers import create_ssl_context
from confluent_kafka import KafkaError

from mirror.errors import ConfigError
from mirror.kafka.clients import AUTHORIZATION_CODES

# Properties the packing producer takes, by what it does with them.
_RENAMED = {
    "bootstrap.servers": ("bootstrap_servers", str),
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout_ms", int),
    "transaction.timeout.ms": ("transaction_timeout_ms", int),
    "message.max.bytes": ("max_request_size", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    "sasl.username": ("sasl_plain_username", str),
    "sasl.password": ("sasl_plain_password", str),
}
_SSL = {"ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password"}
# Settings whose job is done another way: idempotence and acks=all come with the producer
# (transactional or idempotent, always); the partition is always given (Java's murmur2 hashing
# for keyed internal records); records reach aiokafka in chunks, which are the linger;
# librdkafka's queue, logging and socket (socket.*) knobs have no counterpart: aiokafka's own apply.
_IMPLIED = {
    "linger.ms",
    "enable.idempotence",
    "acks",
    "partitioner",
    "transactional.id",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "batch.num.messages",
    "log_level",
    "log.connection.close",
    "statistics.interval.ms",
    "socket.keepalive.enable",
    "ssl.endpoint.identification.algorithm",
}
_COMPRESSION = {"none": None, "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}


class InvalidRecordError(BrokerResponseError):  # type: ignore[misc]
    """Kafka's INVALID_RECORD, which aiokafka 0.14 does not know: a compacted topic answers it to a
    record without a key. aiokafka reports a code it does not know as UnknownError, the code lost,
    and the copy path could then not name the problem (mirror.source.transaction), so the task
    would abort and retry for good instead of stopping with the fix."""

    errno = KafkaError.INVALID_RECORD
    message = "INVALID_RECORD"
    description = "The record was refused by the broker (on a compacted topic: it has no key)."


aiokafka_errors.kafka_errors.setdefault(InvalidRecordError.errno, InvalidRecordError)


def unsupported(properties: Mapping[str, str]) -> list[str]:
    """The producer properties among `properties` aiokafka's producer has no counterpart for."""
    known = {*_RENAMED, *_SSL, *_IMPLIED, "compression.type", "compression.codec", "security.protocol"}
    known |= {"sasl.mechanism", "sasl.mechanisms"}
    missing = [name for name in properties if name not in known and not name.startswith("socket.")]
    mechanism = properties.get("sasl.mechanism", properties.get("sasl.mechanisms", "PLAIN")).upper()
    if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):  # Kerberos and OAuth need more
        missing.append(f"sasl.mechanism {mechanism}")
    return sorted(missing)


def producer_options(properties: Mapping[str, str], *, what: str) -> dict[str, Any]:
    """aiokafka's AIOKafkaProducer arguments for librdkafka producer `properties`; ConfigError
    naming a property it has no counterpart for, rather than a setting dropped silently."""
    missing = unsupported(properties)
    if missing:
        raise ConfigError(
            [
                f"{what}: the aiokafka copy producer has no counterpart for producer "
                f"propert{'ies' if len(missing) > 1 else 'y'} {', '.join(missing)}; remove "
                f"{'them' if len(missing) > 1 else 'it'} or set copy_producer: librdkafka"
            ]
        )
    options: dict[str, Any] = {}
    for name, value in properties.items():
        if name in _RENAMED:
            option, kind = _RENAMED[name]
            options[option] = kind(value)
        elif name in ("compression.type", "compression.codec"):
            options["compression_type"] = _COMPRESSION.get(value, value)
        elif name == "security.protocol":
            options["security_protocol"] = value.upper()
        elif name in ("sasl.mechanism", "sasl.mechanisms"):
            options["sasl_mechanism"] = value.upper()
    if options.get("security_protocol", "PLAINTEXT") in ("SSL", "SASL_SSL"):
        context = create_ssl_context(
            cafile=properties.get("ssl.ca.location"),
            certfile=properties.get("ssl.certificate.location"),
            keyfile=properties.get("ssl.key.location"),
            password=properties.get("ssl.key.password"),
        )
        if properties.get("ssl.endpoint.identification.algorithm", "https") == "none":
            context.check_hostname = False
        options["ssl_context"] = context
    return options


def kafka_error(exc: BaseException, *, fatal: bool = False) -> KafkaError:  # noqa: PLR0911 - one per kind
    """The librdkafka KafkaError an aiokafka exception stands for. `fatal`: the producer is
    unusable after it (a transactional call that failed), unless a missing ACL is the cause."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, (ProducerFenced, InvalidProducerEpoch)):
        return KafkaError(KafkaError.PRODUCER_FENCED, text, fatal=True)
    if isinstance(exc, BrokerResponseError):
        if exc.errno in AUTHORIZATION_CODES:
            return KafkaError(exc.errno, text)
        return KafkaError(exc.errno, text, fatal=fatal, retriable=exc.retriable and not fatal)
    if isinstance(exc, (KafkaTimeoutError, asyncio.TimeoutError, TimeoutError)):
        return KafkaError(KafkaError._TIMED_OUT, text, fatal=fatal, retriable=not fatal)
    if isinstance(exc, KafkaConnectionError):
        return KafkaError(KafkaError._TRANSPORT, text, fatal=fatal, retriable=not fatal)
    if isinstance(exc, (IllegalOperation, AssertionError)):
        # aiokafka asserts a partition its metadata does not know (a remote topic shrunk or
        # re-created): a state the next transaction may not share.
        return KafkaError(KafkaError._STATE, text, fatal=fatal)
    if isinstance(exc, AioKafkaError):
        return KafkaError(KafkaError._FAIL, text, fatal=fatal, retriable=exc.retriable and not fatal)
    return KafkaError(KafkaError._FAIL, text, fatal=True)
