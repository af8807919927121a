"""SASL users of a secured local broker: its JAAS settings, its clients' properties and the
SCRAM credentials written when its storage is formatted (mirror.local.broker)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ADMIN_USER = "admin"


@dataclass(frozen=True)
class SaslUsers:
    """A secured broker: clients authenticate with SASL (PLAIN or SCRAM) and an authorizer checks ACLs.

    Every user can log in with PLAIN and with both SCRAM mechanisms. `admin` is the super user the
    broker itself and the launcher use; nobody else may do anything an ACL does not allow.
    """

    admin_password: str
    users: Mapping[str, str] = field(default_factory=dict)  # name -> password

    def all_users(self) -> dict[str, str]:
        return {ADMIN_USER: self.admin_password, **self.users}

    def client_properties(self, user: str = ADMIN_USER, mechanism: str = "PLAIN") -> dict[str, str]:
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": self.all_users()[user],
        }

    def broker_settings(self, listener: str = "SASL_PLAINTEXT") -> dict[str, str]:
        plain_users = " ".join(f'user_{name}="{password}"' for name, password in self.all_users().items())
        plain = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{ADMIN_USER}" password="{self.admin_password}" {plain_users};'
        )
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return {
            "sasl.enabled.mechanisms": ",".join(("PLAIN", *SCRAM_MECHANISMS)),
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            f"listener.name.{listener.lower()}.plain.sasl.jaas.config": plain,
            **{
                f"listener.name.{listener.lower()}.{m.lower()}.sasl.jaas.config": scram
                for m in SCRAM_MECHANISMS
            },
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            # The controller listener stays PLAINTEXT on loopback; its principal is ANONYMOUS.
            "super.users": f"User:{ADMIN_USER};User:ANONYMOUS",
        }

    def scram_arguments(self) -> list[str]:
        """`kafka-storage format` arguments that create every user's SCRAM credentials."""
        return [
            argument
            for name, password in self.all_users().items()
            for mechanism in SCRAM_MECHANISMS
            for argument in ("--add-scram", f"{mechanism}=[name={name},password={password}]")
        ]
