"""What two records must share to count as the same copy: key, value, headers and timestamp.

Each field is length-framed (-1 for null), so no two different records frame to the same bytes.
A partition's digest chains its records' frames in order: equal digests mean equal sequences.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

DIGEST_BYTES = 16
_HEAD = struct.Struct(">qiii")  # timestamp, key length, value length, header count
_LENGTH = struct.Struct(">i")

Headers = Sequence[tuple[str, bytes | None]] | None


def frame(key: bytes | None, value: bytes | None, headers: Headers, timestamp_ms: int) -> bytes:
    parts = [
        _HEAD.pack(
            timestamp_ms,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
            0 if not headers else len(headers),
        ),
        key or b"",
        value or b"",
    ]
    for name, content in headers or ():
        encoded = name.encode()
        parts += [_LENGTH.pack(len(encoded)), encoded]
        parts += [_LENGTH.pack(-1), b""] if content is None else [_LENGTH.pack(len(content)), content]
    return b"".join(parts)


def record_digest(key: bytes | None, value: bytes | None, headers: Headers, timestamp_ms: int) -> bytes:
    return hashlib.blake2b(frame(key, value, headers, timestamp_ms), digest_size=DIGEST_BYTES).digest()


class ChainDigest:
    """A partition's running digest and record count."""

    __slots__ = ("_hash", "count")

    def __init__(self) -> None:
        self._hash = hashlib.blake2b(digest_size=DIGEST_BYTES)
        self.count = 0

    def add(self, key: bytes | None, value: bytes | None, headers: Headers, timestamp_ms: int) -> None:
        self._hash.update(frame(key, value, headers, timestamp_ms))
        self.count += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()
