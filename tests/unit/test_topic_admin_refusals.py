"""What topic administration does when a cluster refuses (MM2's MirrorUtilsTest and two cases of
MirrorSourceConnectorTest): which refusals are fatal, what the one-line error names, and what an
ACL sync does against a cluster without an authorizer. The admin client is a fake answering with
the futures librdkafka would hand back; the brokers' side of the same refusals is in
reliability/test_security.py."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror.config.flow_settings import FlowSettings
from mirror.errors import KafkaClientError, NotAuthorizedError
from mirror.topics import sync as topic_sync
from mirror.topics.sync import TopicSync


@dataclass
class Listed:
    partitions: dict[int, object]
    error: object | None = None


@dataclass
class Metadata:
    topics: dict[str, Listed]


def refused(code: int) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(KafkaException(KafkaError(code)))
    return future


def answered(value: object = None) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


@dataclass
class FakeAdmin:
    """A cluster holding `topics`; creating topics answers `create` (a KafkaError code, or None for
    success), describing configs refuses the topics in `no_describe`, and the cluster has an
    authorizer unless `authorizer` is False. Records every call."""

    topics: dict[str, int] = field(default_factory=dict)
    create: int | None = None
    no_describe: set[str] = field(default_factory=set)
    authorizer: bool = True
    calls: list[str] = field(default_factory=list)

    def list_topics(self, **_: object) -> Metadata:
        return Metadata({name: Listed(dict.fromkeys(range(n))) for name, n in self.topics.items()})

    def create_topics(self, new_topics: list[Any], **_: object) -> dict[str, Future[Any]]:
        self.calls += [f"create {topic.topic}" for topic in new_topics]
        return {
            topic.topic: answered() if self.create is None else refused(self.create) for topic in new_topics
        }

    def describe_configs(self, resources: list[Any], **_: object) -> dict[Any, Future[Any]]:
        return {
            r: refused(KafkaError.TOPIC_AUTHORIZATION_FAILED) if r.name in self.no_describe else answered({})
            for r in resources
        }

    def describe_acls(self, *_: object, **__: object) -> Future[Any]:
        self.calls.append("describe_acls")
        return answered([]) if self.authorizer else refused(KafkaError.SECURITY_DISABLED)

    def create_acls(self, *_: object, **__: object) -> dict[Any, Future[Any]]:
        self.calls.append("create_acls")
        return {}


def settings(**changes: object) -> FlowSettings:
    base = FlowSettings(
        source="A",
        target="B",
        source_consumer={},
        source_admin={"side": "source"},
        source_producer={},
        target_producer={},
        target_consumer={},
        target_admin={"side": "target"},
        topics=["orders", "payments"],
        topics_exclude=[],
        offsets_topic="mm2-offsets.A.internal",
    )
    return base.__class__(**{**base.__dict__, **changes})


def topic_sync_over(
    monkeypatch: pytest.MonkeyPatch, source: FakeAdmin, target: FakeAdmin, **changes: object
) -> TopicSync:
    admins = {"source": source, "target": target}
    monkeypatch.setattr(topic_sync, "admin_client", lambda conf: admins[conf["side"]])
    return TopicSync(settings(**changes))


@pytest.mark.parametrize(
    "code", [KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED]
)
def test_an_internal_topic_creation_refused_by_the_authorizer_names_both_remedies(
    monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # MM2 assumes such a topic exists; mirror has listed the cluster first, so the topic is missing
    # and using it would fail later, far from the cause.
    sync = topic_sync_over(monkeypatch, FakeAdmin(), FakeAdmin(create=code))

    with pytest.raises(NotAuthorizedError) as raised:
        sync.ensure_internal_topics()

    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("creating topic mm2-offsets.A.internal: ")
    assert "`mirror acls <mm2.yaml>`" in message
    assert "create mm2-offsets.A.internal on B beforehand (25 partitions, cleanup.policy=compact)" in message


def test_internal_topics_that_exist_are_never_created_again_so_no_create_permission_is_needed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flow = settings()
    on_target = [
        "mm2-offsets.A.internal",
        flow.offset_syncs_topic(),
        flow.checkpoints_topic(),
        flow.checkpoint_offsets_topic(),
        "heartbeats",
        flow.heartbeat_offsets_topic("A"),
    ]
    on_source = ["heartbeats", flow.heartbeat_offsets_topic("B")]
    source = FakeAdmin(dict.fromkeys(on_source, 1), create=KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    target = FakeAdmin(dict.fromkeys(on_target, 1), create=KafkaError.CLUSTER_AUTHORIZATION_FAILED)

    topic_sync_over(monkeypatch, source, target).ensure_internal_topics()

    assert source.calls == target.calls == []


def test_internal_topics_missing_on_a_cluster_are_created_compacted(monkeypatch: pytest.MonkeyPatch) -> None:
    target = FakeAdmin()
    topic_sync_over(monkeypatch, FakeAdmin(), target).ensure_internal_topics()
    assert "create mm2-offset-syncs.A.internal" in target.calls
    assert "create A.checkpoints.internal" in target.calls


def test_a_cluster_without_the_create_topics_api_is_asked_to_have_the_topic_created_beforehand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sync = topic_sync_over(monkeypatch, FakeAdmin(), FakeAdmin(create=KafkaError.UNSUPPORTED_VERSION))

    with pytest.raises(
        KafkaClientError,
        match=r"^creating topic mm2-offsets\.A\.internal: .*UNSUPPORTED_VERSION.*create the topic beforehand",
    ):
        sync.ensure_internal_topics()


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (KafkaError.INVALID_CONFIG, "creating topic mm2-offsets.A.internal: "),
        (KafkaError.INVALID_REPLICATION_FACTOR, "creating topic mm2-offsets.A.internal: "),
        (KafkaError.REQUEST_TIMED_OUT, "creating topic mm2-offsets.A.internal: "),
    ],
)
def test_an_invalid_configuration_or_a_timeout_while_creating_an_internal_topic_is_fatal(
    monkeypatch: pytest.MonkeyPatch, code: int, says: str
) -> None:
    sync = topic_sync_over(monkeypatch, FakeAdmin(), FakeAdmin(create=code))

    with pytest.raises(KafkaClientError) as raised:
        sync.ensure_internal_topics()

    assert not isinstance(raised.value, NotAuthorizedError)
    assert str(raised.value).startswith(says) and "\n" not in str(raised.value)


def test_a_create_answer_that_never_comes_is_fatal_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    class Silent(FakeAdmin):
        def create_topics(self, new_topics: list[Any], **_: object) -> dict[str, Future[Any]]:
            self.calls += [f"create {topic.topic}" for topic in new_topics]
            return {topic.topic: Future() for topic in new_topics}  # never completes

    monkeypatch.setattr("mirror.kafka.admin.CREATE_TRY_SECONDS", 0.01)
    silent = Silent()
    sync = topic_sync_over(monkeypatch, FakeAdmin(), silent)

    with pytest.raises(
        KafkaClientError,
        match=r"^creating topic mm2-offsets\.A\.internal: no answer in 6 tries of 0 s; check",
    ):
        sync.ensure_internal_topics()
    assert silent.calls.count("create mm2-offsets.A.internal") == 6


@pytest.mark.parametrize("no_answer", [KafkaError._TIMED_OUT, KafkaError._TRANSPORT])
def test_a_create_unanswered_once_asks_for_fresh_metadata_and_again(
    monkeypatch: pytest.MonkeyPatch, no_answer: int
) -> None:
    """A broker killed a moment ago can be the controller librdkafka's metadata names: the next try
    must not go to it blindly."""

    @dataclass
    class FirstUnanswered(FakeAdmin):
        def list_topics(self, **kwargs: object) -> Metadata:
            self.calls.append("list")
            return super().list_topics(**kwargs)

        def create_topics(self, new_topics: list[Any], **kwargs: object) -> dict[str, Future[Any]]:
            self.create = no_answer if not any(c.startswith("create") for c in self.calls) else None
            return super().create_topics(new_topics, **kwargs)

    target = FirstUnanswered()
    topic_sync_over(monkeypatch, FakeAdmin(), target).ensure_internal_topics()

    offsets_calls = [c for c in target.calls if c in ("list", "create mm2-offsets.A.internal")]
    assert offsets_calls == ["list", "create mm2-offsets.A.internal", "list", "create mm2-offsets.A.internal"]


def test_describing_source_configs_refused_names_the_topics_and_the_source_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = FakeAdmin({"orders": 2, "payments": 1}, no_describe={"orders"})
    sync = topic_sync_over(monkeypatch, source, FakeAdmin())

    with pytest.raises(NotAuthorizedError) as raised:
        sync.sync()

    assert str(raised.value).startswith("describing configs of topic orders on source cluster A: ")
    assert "payments" not in str(raised.value)


def test_acl_sync_against_a_cluster_without_an_authorizer_says_so_once_and_never_writes_to_the_target(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    source, target = FakeAdmin({"orders": 1}, authorizer=False), FakeAdmin({"A.orders": 1})
    sync = topic_sync_over(monkeypatch, source, target)

    with caplog.at_level(logging.INFO, logger="mirror.topics.sync"):
        synced = [sync.sync_acls() for _ in range(3)]

    assert synced == [0, 0, 0]
    skipped = [r.getMessage() for r in caplog.records if "ACL sync skipped" in r.getMessage()]
    assert len(skipped) == 1
    assert "A or B has no authorizer; set sync_topic_acls: false" in skipped[0]
    assert "create_acls" not in target.calls


@dataclass
class KraftController(FakeAdmin):
    """A target whose controller refuses, as KRaft's does, a CreateTopics request that would write
    more than 10,000 metadata records (a topic, each partition, each config entry), and creates
    what it accepts."""

    requests: list[int] = field(default_factory=list)

    def create_topics(self, new_topics: list[Any], **_: object) -> dict[str, Future[Any]]:
        records = sum(1 + t.num_partitions + len(t.config) for t in new_topics)
        self.requests.append(records)
        if records > 10_000:
            too_large = KafkaError(KafkaError.UNKNOWN, "Unable to perform excessively large batch operation.")
            return {t.topic: _refused_with(too_large) for t in new_topics}
        self.topics.update({t.topic: t.num_partitions for t in new_topics})
        return {t.topic: answered() for t in new_topics}


def _refused_with(error: KafkaError) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(KafkaException(error))
    return future


def test_ten_thousand_new_partitions_are_created_in_batches_the_controller_accepts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A flow of 1,000 topics x 10 partitions: one request would be 11,000 records, which the
    # controller refuses (MM2 then waits 10 minutes to ask again, and again).
    source = FakeAdmin(topics={f"scale-{n:03d}": 10 for n in range(1000)})
    target = KraftController()
    sync = topic_sync_over(monkeypatch, source, target, topics=["scale-.*"])

    result = sync.sync()

    assert result.created == 1000
    assert target.topics == {f"A.scale-{n:03d}": 10 for n in range(1000)}
    assert len(target.requests) > 1 and max(target.requests) <= 10_000, target.requests
