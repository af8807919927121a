"""`mirror heartbeats --serve-metrics [HOST:]PORT`: what the address may be, and the error when not."""

from __future__ import annotations

import pytest

from mirror.errors import ConfigError
from mirror.runner.heartbeat_monitor import parse_address


@pytest.mark.parametrize(
    ("address", "expected"), [("9465", ("127.0.0.1", 9465)), ("10.1.2.3:9465", ("10.1.2.3", 9465))]
)
def test_serve_metrics_takes_a_port_or_a_host_and_port(address: str, expected: tuple[str, int]) -> None:
    assert parse_address(address) == expected


@pytest.mark.parametrize("address", ["", "host:", "host:http", "70000", "0"])
def test_a_bad_serve_metrics_address_is_a_one_line_error(address: str) -> None:
    with pytest.raises(ConfigError, match=r"expected \[HOST:\]PORT") as raised:
        parse_address(address)
    assert "\n" not in str(raised.value)
