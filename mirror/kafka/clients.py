"""Kafka client factories and the translation of librdkafka errors into MirrorErrors."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from mirror.errors import (
    ClusterAuthenticationError,
    ClusterTlsError,
    ClusterUnreachableError,
    ConfigError,
    KafkaClientError,
    NotAuthorizedError,
)
from mirror.kafka.certificates import (
    client_certificate_problem,
    explain_certificate_failure,
    explain_key_failure,
    is_certificate_failure,
)

# A group coordinator that moved or is still loading its log (a broker just started) answers these,
# without having done anything; librdkafka retries them inside its own group calls but not for
# committed() or the admin API.
COORDINATOR_CODES = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)

# Right after a topic is created its leader may not be known everywhere yet.
_TRANSIENT_CODES = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    *COORDINATOR_CODES,
    # A leader epoch the client cached before a broker restarted (admin._list_offsets refreshes it).
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    # A transactional offset commit not decided yet (its coordinator or a broker just restarted),
    # and a new leader whose high watermark is still behind: answers later, never "none".
    KafkaError.UNSTABLE_OFFSET_COMMIT,
    KafkaError.OFFSET_NOT_AVAILABLE,
}
# How long one admin request (or a committed-offsets fetch) may take before it counts as unanswered.
TIMEOUT_SECONDS = 30.0

STALE_LEADER_CODES = {KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH}

# librdkafka logs to stderr on its own (connection refusals, "fenced" when a partition's producer
# moves between workers). mirror reports what matters itself, so its log goes to a Python logger
# that only --debug shows (mirror.logs sets its level); silent where logging was not set up.
LIBRDKAFKA_LOG = logging.getLogger("mirror.librdkafka")
if LIBRDKAFKA_LOG.level == logging.NOTSET:
    LIBRDKAFKA_LOG.setLevel(logging.CRITICAL + 1)
_QUIET = {"logger": LIBRDKAFKA_LOG}
# An admin request waiting for a broker that is down (a partition's leader, a coordinator, every
# broker for ListGroups) spins librdkafka (2.16) with sparse connections, its default: each broker
# state change wakes the request, whose broker lookup asks for a connection, which skips the
# reconnect backoff, and a refused connect is the next state change. One such request kept a core
# busy (thousands of connects a second) until its timeout; a killed source broker made every
# process of a run spin so, and the two-core CI machine starved both clusters' brokers for a minute.
# Connections kept to every broker back off as they should (by hand: 0.0 CPU s in a 5 s wait, not 4.7).
ADMIN_CONNECTIONS = {"enable.sparse.connections": "false"}


def admin_client(properties: Mapping[str, str]) -> AdminClient:
    return AdminClient({**_QUIET, **ADMIN_CONNECTIONS, **properties})


def consumer(properties: Mapping[str, str]) -> Consumer:
    return Consumer({**_QUIET, **properties})


def producer(properties: Mapping[str, str]) -> Producer:
    return Producer({**_QUIET, **properties})


def committed_reader(properties: Mapping[str, str], group_id: str) -> Consumer:
    """Reads what `group_id` committed, read_committed: offsets committed in a transaction (and
    their metadata, such as the flow mark) only once the transaction commits."""
    return consumer({**properties, "group.id": group_id, "isolation.level": "read_committed"})


def check_properties(roles: Mapping[str, Mapping[str, str]], *, what: str) -> None:
    """Build each role's client once, without using it: librdkafka rejects unknown or invalid
    properties here, and the user learns which one at start-up rather than from a failed task."""
    factories: dict[str, Callable[[Mapping[str, str]], object]] = {
        "consumer": lambda p: consumer({"group.id": "mirror-property-check", **p}),
        "producer": producer,
        "admin": admin_client,
    }
    for role, properties in roles.items():
        try:
            factories[role](properties)
        except KafkaException as exc:
            key_problem = explain_key_failure(properties) if "ssl.key" in _reason(exc) else None
            problem = f"{what}: {role} client properties: " + (
                key_problem
                or f"{_reason(exc)}; fix or remove it (librdkafka's CONFIGURATION.md lists every property)"
            )
            raise ConfigError([problem]) from exc


def wait_until_reachable(properties: Mapping[str, str], *, timeout_seconds: float, what: str) -> None:
    """Return once a broker answers a metadata request; ClusterUnreachableError after the timeout.

    Failed authentication is not worth waiting out: it raises ClusterAuthenticationError at once, and
    a certificate either side refused ClusterTlsError, naming the cause.
    """
    bootstrap = properties.get("bootstrap.servers", "?")
    expired = client_certificate_problem(properties)
    if expired is not None:
        raise ClusterTlsError(f"{what}: {expired}")
    seen: list[KafkaError] = []
    logged = _LoggedLines()
    admin = AdminClient({**properties, "error_cb": seen.append, "logger": logged.logger})
    deadline = time.monotonic() + timeout_seconds
    last: Exception | None = None
    while True:
        remaining = deadline - time.monotonic()
        try:
            admin.list_topics(timeout=max(0.5, min(remaining, 2.0)))
            return
        except KafkaException as exc:
            last = exc
        admin.poll(0)  # serves error_cb: what the connection attempts ran into
        failed_auth = next((e for e in seen if e.code() == KafkaError._AUTHENTICATION), None)
        if failed_auth is not None:
            raise ClusterAuthenticationError(
                f"{what}: {bootstrap} refused the credentials ({_first_sentence(failed_auth.str())}); "
                "check sasl.mechanism, sasl.username and sasl.password in the cluster's properties"
            )
        refused = next((e for e in seen if is_certificate_failure(e.str())), None)
        if refused is not None:
            raise ClusterTlsError(f"{what}: {explain_certificate_failure(properties, refused.str())}")
        if time.monotonic() >= deadline:
            connection = next((e for e in reversed(seen) if e.code() != KafkaError._ALL_BROKERS_DOWN), None)
            raise _unreachable(
                f"{what}: no Kafka broker answered at {bootstrap} within {timeout_seconds:g}s",
                properties,
                connection,
                last,
                logged.lines,
            )


def _unreachable(
    said: str,
    properties: Mapping[str, str],
    connection: KafkaError | None,
    last: Exception | None,
    logged: list[str],
) -> ClusterUnreachableError:
    """`said` with what the attempts ran into and what to check."""
    hung_up = _hung_up_on_first_request(logged)
    protocol = properties.get("security.protocol", "plaintext").lower()
    if hung_up is not None and connection is None and protocol in ("plaintext", "sasl_plaintext"):
        return ClusterUnreachableError(
            f"{said} ({hung_up}); the listener there seems to speak TLS: set security.protocol to SSL (or "
            "SASL_SSL) with the ssl.* properties, or use the cluster's plaintext port (or, behind a proxy, "
            "check the broker it forwards to)"
        )
    return ClusterUnreachableError(f"{said} ({_reason(connection or last)}); {_hint(connection)}")


class _LoggedLines(logging.Handler):
    """What librdkafka logs while a client tries to reach a cluster. A connection the broker closes
    at the first request (a TLS listener meeting a plaintext client) reaches no error callback,
    only its log; the lines also go on to mirror.librdkafka, as every client's do."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        # Not registered with logging: its records reach this handler alone, at every level.
        self.logger = logging.Logger(LIBRDKAFKA_LOG.name, logging.DEBUG)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        if LIBRDKAFKA_LOG.isEnabledFor(record.levelno):
            LIBRDKAFKA_LOG.handle(record)


def _hung_up_on_first_request(lines: list[str]) -> str | None:
    """librdkafka's words for a broker that closed the connection at the client's first request
    (ApiVersion), without the log line's prefix; None if no broker did."""
    for line in reversed(lines):
        if "closed by peer" in line and "APIVERSION_QUERY" in line:
            return line.split("]: ", 1)[-1]
    return None


def _hint(error: KafkaError | None) -> str:
    text = error.str() if error is not None else ""
    if "Invalid response size" in text or "ApiVersion" in text or "Protocol parse failure" in text:
        return "something answers there, but not the Kafka protocol: check the port in bootstrap_servers"
    if "SSL" in text or "TLS" in text:
        return "check security.protocol and the ssl.* properties"
    return "check bootstrap_servers, security.protocol and that the cluster is up"


def _first_sentence(text: str) -> str:
    return text.split(" (after ", maxsplit=1)[0]


def _reason(exc: Exception | KafkaError | None) -> str:
    if isinstance(exc, KafkaError):
        return _first_sentence(str(exc.str()))
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return _first_sentence(str(exc.args[0].str()))
    return str(exc) if exc else "no answer"


T = TypeVar("T")


def retrying(
    action: Callable[[], T],
    *,
    doing: str,
    timeout_seconds: float = 30.0,
    only: frozenset[int] | None = None,
) -> T:
    """Run `action`, retrying librdkafka's retriable errors (leader moves, a topic just created).

    `only`: retry just these codes. A write decided on what the cluster said a moment ago (a group
    was empty) must not be retried on a refusal that reflects a new state (a member joined): it
    passes COORDINATOR_CODES, which the broker answers without having looked at the request.
    """
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            return action()
        except KafkaException as exc:
            retriable = error_code(exc) in only if only is not None else is_transient(exc)
            if not retriable or time.monotonic() >= deadline:
                raise translate(exc, doing) from exc
        except TimeoutError as exc:  # a future's result(timeout=...): the cluster did not answer
            raise KafkaClientError(f"{doing}: no answer in time; {_hint(None)}") from exc
        time.sleep(0.2)


def is_transient(exc: KafkaException) -> bool:
    """A refusal that answers differently a moment later: a leader or coordinator moving, a topic
    just created that not every broker knows yet."""
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    return error is not None and (error.retriable() or error.code() in _TRANSIENT_CODES)


def partition_error(error: KafkaError, topic: str, partition: int) -> KafkaException:
    """A per-partition error of an answer as an exception naming the partition (retrying() asks
    again where the code is transient)."""
    return KafkaException(
        KafkaError(error.code(), f"{topic}-{partition}: {error.str()}", retriable=error.retriable())
    )


def error_code(exc: KafkaException) -> int | None:
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    return error.code() if error is not None else None


AUTHORIZATION_CODES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}


def translate(exc: KafkaException, doing: str) -> KafkaClientError:
    """A KafkaClientError that says what we were doing and what the broker said."""
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    detail = error.str() if error is not None else str(exc)
    if error is not None and error.code() in AUTHORIZATION_CODES:
        return not_authorized(doing, detail)
    return KafkaClientError(f"{doing}: {detail}")


def not_authorized(doing: str, detail: str) -> NotAuthorizedError:
    return NotAuthorizedError(
        f"{doing}: {detail.rstrip('.')}; an ACL is missing for mirror's principal: "
        "`mirror acls <mm2.yaml>` lists the ACLs each cluster needs"
    )
