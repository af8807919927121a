"""Which producer a flow's copy tasks write through: aiokafka's, exactly-once or not, unless the
flow says otherwise or the target's producer properties need librdkafka."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mirror.config.models import FlowConfig
from mirror.errors import ConfigError
from mirror.runner.copy_producer import choose_copy_producer
from tests.unit.flows import flow_a_to_b

PLAIN = {"bootstrap.servers": "b:9092"}
KEYSTORE = {**PLAIN, "security.protocol": "ssl", "ssl.keystore.location": "/etc/mirror/client.p12"}


def _choose(
    flow: dict[str, object], *, exactly_once: bool = True, producer: dict[str, str] = PLAIN
) -> tuple[str, list[str]]:
    said: list[str] = []
    settings = replace(flow_a_to_b(["t"], exactly_once=exactly_once), target_producer=producer)
    chosen = choose_copy_producer(settings, FlowConfig.model_validate(flow), said.append)
    return chosen.copy_producer, said


def test_exactly_once_copies_through_aiokafka_unless_told_otherwise() -> None:
    assert _choose({}) == ("aiokafka", [])
    assert _choose({"copy_producer": "librdkafka"}) == ("librdkafka", [])


def test_at_least_once_copies_through_aiokafka_too_unless_told_otherwise() -> None:
    flow = {"exactly_once": False}
    assert _choose(flow, exactly_once=False) == ("aiokafka", [])
    assert _choose({**flow, "copy_producer": "librdkafka"}, exactly_once=False) == ("librdkafka", [])
    assert _choose(flow, exactly_once=False, producer=KEYSTORE)[0] == "librdkafka"


def test_a_target_only_librdkafka_can_reach_keeps_it_and_the_run_says_why() -> None:
    said = "flow A->B: copying through librdkafka's producer: aiokafka's has no counterpart for "
    assert _choose({}, producer=KEYSTORE) == ("librdkafka", [f"{said}ssl.keystore.location"])
    assert _choose({}, producer={**PLAIN, "sasl.mechanism": "OAUTHBEARER"})[0] == "librdkafka"


def test_asking_for_aiokafka_where_it_cannot_reach_the_target_is_a_configuration_error() -> None:
    with pytest.raises(
        ConfigError, match=r"no counterpart for producer property ssl\.keystore\.location; remove it"
    ):
        _choose({"copy_producer": "aiokafka"}, producer=KEYSTORE)
