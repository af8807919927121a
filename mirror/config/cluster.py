"""A cluster in `mm2.yaml`: where it is, and the librdkafka properties its clients get.

Credentials among those properties are kept as `SecretStr` from the moment they are read, so no
print, log line or error message shows them; `reveal` unwraps them only for librdkafka.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, StringConstraints, field_validator

PositiveSeconds = Annotated[float, Field(gt=0)]

# librdkafka properties whose values are credentials: kept as SecretStr, masked when printed.
_SECRET_PROPERTY = re.compile(r"(password|secret|\.key\.pem|sasl\.oauthbearer\.config|jaas)", re.IGNORECASE)


class FrozenModel(BaseModel):
    """Every `mm2.yaml` section: read once, never changed, an unknown key refused (a typo is an
    error, not a silently ignored setting)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


ClientProperties = dict[str, str | SecretStr]
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _protect_secrets(properties: dict[str, Any]) -> ClientProperties:
    protected: ClientProperties = {}
    for key, value in properties.items():
        if isinstance(value, bool):
            text: str | SecretStr = "true" if value else "false"
        elif isinstance(value, str | SecretStr):
            text = value
        elif isinstance(value, int | float):
            text = str(value)
        else:
            raise ValueError(
                f"property {key!r} has a {type(value).__name__} value; librdkafka properties are "
                "strings, numbers or booleans"
            )
        if isinstance(text, str) and _SECRET_PROPERTY.search(key):
            text = SecretStr(text)
        protected[key] = text
    return protected


def reveal(properties: ClientProperties) -> dict[str, str]:
    """Plain strings for handing to librdkafka; the only place secrets are unwrapped."""
    return {k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in properties.items()}


class ClusterConfig(FrozenModel):
    """One Kafka cluster, known by its alias."""

    bootstrap_servers: Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]
    properties: ClientProperties = Field(default_factory=dict)
    consumer: ClientProperties = Field(default_factory=dict)
    producer: ClientProperties = Field(default_factory=dict)
    admin: ClientProperties = Field(default_factory=dict)
    connect_timeout_seconds: PositiveSeconds = 30.0

    @field_validator("properties", "consumer", "producer", "admin", mode="before")
    @classmethod
    def _secrets(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return _protect_secrets(value)
        return value

    @field_validator("properties", "consumer", "producer", "admin")
    @classmethod
    def _no_bootstrap_in_properties(cls, value: ClientProperties) -> ClientProperties:
        if "bootstrap.servers" in value:
            raise ValueError(
                "set the cluster's bootstrap_servers key instead of a bootstrap.servers property"
            )
        return value

    @field_validator("properties", "consumer")
    @classmethod
    def _known_offset_reset(cls, value: ClientProperties) -> ClientProperties:
        # It decides where a flow starts a partition it never copied (MM2's consumer setting);
        # librdkafka's synonyms and "none" are refused rather than guessed at.
        reset = value.get("auto.offset.reset")
        if reset is not None and reset not in ("earliest", "latest"):
            raise ValueError(
                f"auto.offset.reset {reset!r} is not earliest or latest; use earliest (copy a new "
                "partition from its first record) or latest (copy only records written after it is found)"
            )
        return value

    @field_validator("properties", "consumer", "producer", "admin")
    @classmethod
    def _known_security_protocol(cls, value: ClientProperties) -> ClientProperties:
        # Kafka (and librdkafka) take the protocol in any case; anything else is refused here, so
        # `mirror validate` and every command that loads the file say so in one line.
        protocol = value.get("security.protocol")
        if isinstance(protocol, str) and protocol.upper() not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"security.protocol {protocol!r} is not a Kafka security protocol; use one of "
                f"{', '.join(SECURITY_PROTOCOLS)} (any case)"
            )
        return value

    def client_properties(self, role: Literal["consumer", "producer", "admin"]) -> dict[str, str]:
        """librdkafka config for one client role: cluster-wide properties, then the role's overrides."""
        merged: ClientProperties = {"bootstrap.servers": self.bootstrap_servers}
        merged.update(self.properties)
        merged.update(getattr(self, role))
        return reveal(merged)
