"""A flow A->B with no client properties, for unit tests of decisions that take FlowSettings."""

from __future__ import annotations

from typing import Any

from mirror.config.flow_settings import FlowSettings


def flow_a_to_b(topics: list[str], **changes: Any) -> FlowSettings:
    return FlowSettings(
        source="A",
        target="B",
        source_consumer={},
        source_admin={},
        source_producer={},
        target_producer={},
        target_consumer={},
        target_admin={},
        topics=topics,
        topics_exclude=[],
        **changes,
    )
