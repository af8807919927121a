"""Which producer a flow's copy tasks write through, when its configuration leaves it open.

aiokafka's (mirror.kafka.packing_producer), exactly-once and at-least-once alike: in the bench it
matched or beat librdkafka's on every load in both modes, and at hundreds of partitions or more
under a steady load it was the only one to beat MM2 (README, Sizing). It takes fewer client
properties than librdkafka: a target whose producer properties it cannot honour (a PKCS#12
keystore, say) keeps librdkafka's, and the run says why. A flow that names its producer gets it,
and a property aiokafka cannot honour is then a configuration error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from mirror.config.flow_settings import FlowSettings
from mirror.config.models import FlowConfig
from mirror.kafka.aiokafka_terms import producer_options, unsupported


def choose_copy_producer(
    settings: FlowSettings, flow: FlowConfig, say: Callable[[str], None]
) -> FlowSettings:
    """`settings` with the copy producer the flow's tasks use; ConfigError if the flow asked for
    aiokafka's and the target's producer properties name one it has no counterpart for."""
    if flow.copy_producer == "aiokafka":
        producer_options(settings.target_producer, what=f"flow {settings.name}")
        return replace(settings, copy_producer="aiokafka")
    if flow.copy_producer is not None:
        return replace(settings, copy_producer=flow.copy_producer)
    missing = unsupported(settings.target_producer)
    if missing:
        say(
            f"flow {settings.name}: copying through librdkafka's producer: aiokafka's has no counterpart "
            f"for {', '.join(missing)}"
        )
        return replace(settings, copy_producer="librdkafka")
    return replace(settings, copy_producer="aiokafka")
