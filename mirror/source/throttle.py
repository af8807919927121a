"""A copy task's share of its flow's `throttle_bytes_per_second`: a token bucket of key and value
bytes.

The task charges the bytes of each batch it copied, then reads nothing more until the bucket is
back to zero. The bucket holds at most one second of the rate, so after an idle spell the task
copies at most one second's bytes ahead of the rate. Batches are kept to about a tenth of a
second's bytes (from the record size seen so far): one batch of everything the consumer had
prefetched, megabytes, would copy in a burst and then hold the task for many seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

BURST_SECONDS = 1.0
BATCH_SECONDS = 0.1
FIRST_BATCH = 100  # records, before any size is known


class Throttle:
    def __init__(self, bytes_per_second: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not bytes_per_second > 0:
            raise ValueError(f"a throttle needs a positive rate, not {bytes_per_second!r}")
        self.rate = bytes_per_second
        self._clock = clock
        self._capacity = bytes_per_second * BURST_SECONDS
        self._tokens = self._capacity
        self._at = clock()
        self._record_bytes = 0.0  # average size of a copied record; 0 until one was

    def batch(self, most: int) -> int:
        """How many records to read next: about BATCH_SECONDS of the rate, at most `most`."""
        if not self._record_bytes:
            return min(most, FIRST_BATCH)
        return max(1, min(most, int(self.rate * BATCH_SECONDS / self._record_bytes)))

    def charge(self, size: int, records: int) -> float:
        """Spend `size` bytes of `records` records; returns the clock time until which the task
        must not read more (now, if the bucket still holds bytes)."""
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + (now - self._at) * self.rate) - size
        self._at = now
        if records:
            # A moving average: record sizes drift, and a single odd batch should not set the next.
            latest = size / records
            self._record_bytes = 0.8 * self._record_bytes + 0.2 * latest if self._record_bytes else latest
        if self._tokens >= 0:
            return now
        return now - self._tokens / self.rate
