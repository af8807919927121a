"""What the packing producer holds of each record it was given (mirror.kafka.packing_producer),
and what its delivery callback is handed: the parts of librdkafka's Message the copy path reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError


@dataclass(slots=True)
class Produced:
    """A record produced and not yet reported, with its callback."""

    topic: str
    partition: int  # -1: by the key's murmur2 hash, as Java's producer and Connect place it
    key: bytes | None
    value: bytes | None
    timestamp: int  # ms; 0: the time it is appended
    headers: list[tuple[str, bytes | None]] | None
    on_delivery: Callable[[KafkaError | None, Any], None] | None


class Delivered:
    """What an `on_delivery` callback is handed: the parts of librdkafka's Message it reads."""

    __slots__ = ("_offset", "_record")

    def __init__(self, record: Produced, offset: int) -> None:
        self._record, self._offset = record, offset

    def topic(self) -> str:
        return self._record.topic

    def key(self) -> bytes | None:
        return self._record.key

    def value(self) -> bytes | None:
        return self._record.value

    def offset(self) -> int:
        return self._offset


def fill_batch(batch: Any, records: list[Produced], start: int) -> tuple[Any, int]:
    """aiokafka's BatchBuilder `batch` with `records` from `start` on, as many as fit; and where
    the next batch starts."""
    end = start
    for record in records[start:]:
        appended = batch.append(
            timestamp=record.timestamp or None, key=record.key, value=record.value,
            headers=record.headers or [],
        )  # fmt: skip
        if appended is None:
            break
        end += 1
    return batch, end
