"""The local launcher's pure parts: what it hands to Kafka's command-line tools."""

from __future__ import annotations

import uuid

import pytest

from mirror.local import broker


def test_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xF8 encodes to '-' as the first URL-safe base64 character; kafka-storage then reads
    # the id as an option ("argument --cluster-id/-t: expected one argument").
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(int=1)])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(draws))

    cluster_id = broker._new_cluster_id()

    assert cluster_id == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_cluster_id_is_22_characters_of_url_safe_base64() -> None:
    cluster_id = broker._new_cluster_id()

    assert len(cluster_id) == 22
    assert set(cluster_id) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
