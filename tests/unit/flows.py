"""A flow A->B with no client properties unless given, for tests of decisions that take FlowSettings."""

from __future__ import annotations

from typing import Any

from mirror.config.flow_settings import FlowSettings


def flow_a_to_b(topics: list[str], **changes: Any) -> FlowSettings:
    """`changes` may set the clients' properties too (`target_producer=cluster.properties()`)."""
    clients: dict[str, Any] = {
        role: {}
        for role in (
            "source_consumer",
            "source_admin",
            "source_producer",
            "target_producer",
            "target_consumer",
            "target_admin",
        )
    }
    return FlowSettings(
        **{"source": "A", "target": "B", "topics": topics, "topics_exclude": [], **clients, **changes}
    )
