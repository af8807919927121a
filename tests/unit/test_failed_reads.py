"""Reads of a cluster that fail or come back partial (a broker down, a coordinator loading) raise,
after asking again; they never come back as "no groups", "no offset" or "no such topic"
(mirror.kafka). The copy task's own decisions: test_copy_start_decisions.py."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, cast

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from mirror.errors import MirrorError
from mirror.kafka.admin import list_topics, non_default_configs_of, topic_ids
from mirror.kafka.group_admin import list_group_ids
from mirror.kafka.transactions import committed_metadata


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """retrying() asks again for 30 s: here each try is 10 s apart and costs nothing."""
    monkeypatch.setattr("mirror.kafka.clients.time.sleep", lambda _: None)
    monkeypatch.setattr("mirror.kafka.clients.time.monotonic", iter(range(0, 10_000, 10)).__next__)


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


class GroupsAdmin:
    """ListGroups goes to every broker; one that cannot answer is an entry in `errors`."""

    def list_consumer_groups(self, **_: object) -> Future[Any]:
        listing = SimpleNamespace(
            valid=[SimpleNamespace(group_id="orders-app")],
            errors=[KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)],
        )
        return _done(listing)


def test_a_broker_that_cannot_list_its_groups_fails_the_listing_instead_of_hiding_them() -> None:
    with pytest.raises(MirrorError, match="listing consumer groups of cluster A"):
        list_group_ids(cast(AdminClient, GroupsAdmin()), what="cluster A")


class TopicsAdmin:
    def __init__(self, error: KafkaError | None) -> None:
        self.error = error

    def list_topics(self, **_: object) -> SimpleNamespace:
        topics = {
            "orders": SimpleNamespace(error=None, partitions={0: None, 1: None}),
            "payments": SimpleNamespace(error=self.error, partitions={}),
        }
        return SimpleNamespace(topics=topics)


def test_a_topic_listed_with_an_error_is_asked_again_never_left_out_as_deleted() -> None:
    with pytest.raises(MirrorError, match="listing topics of cluster A"):
        list_topics(
            cast(AdminClient, TopicsAdmin(KafkaError(KafkaError.LEADER_NOT_AVAILABLE))), what="cluster A"
        )
    # "No such topic" is an answer.
    listed = list_topics(
        cast(AdminClient, TopicsAdmin(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))), what="A"
    )
    assert sorted(listed) == ["orders"]


class MarkReader:
    def committed(self, *_: object, **__: object) -> list[SimpleNamespace]:
        return [SimpleNamespace(metadata=None, error=KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT))]


def test_a_flow_mark_that_could_not_be_read_is_no_flow_without_an_owner() -> None:
    with pytest.raises(MirrorError, match="reading the flow's owner"):
        committed_metadata(
            cast(Consumer, MarkReader()), "mm2-offsets.A.internal", 0, "reading the flow's owner"
        )


class NewTopicAdmin:
    """A topic just created: the first broker asked does not know it yet."""

    def __init__(self) -> None:
        self.asked = 0

    def describe_configs(self, resources: list[Any], **_: object) -> dict[Any, Future[Any]]:
        self.asked += 1
        answers: dict[Any, Future[Any]] = {}
        for resource in resources:
            future: Future[Any] = Future()
            if self.asked == 1:
                future.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            else:
                future.set_result({})
            answers[resource] = future
        return answers


def test_configs_of_a_topic_not_every_broker_knows_yet_are_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("mirror.kafka.admin.time.sleep", lambda _: None)
    admin = NewTopicAdmin()
    assert non_default_configs_of(cast(AdminClient, admin), ["A.orders"], what="target cluster B") == {
        "A.orders": {}
    }
    assert admin.asked == 2


class SlowBrokerAdmin:
    """DescribeTopics: the first request goes unanswered (a broker just restarted, or starved, or
    killed while the client's metadata still names it controller), the next one answers."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def list_topics(self, **_: object) -> SimpleNamespace:
        self.calls.append("metadata")
        return SimpleNamespace(topics={}, controller_id=2)

    def describe_topics(self, topics: Any, **_: object) -> dict[str, Future[Any]]:
        self.calls.append("describe")
        (name,) = topics.topic_names
        if self.calls.count("describe") == 1:
            unanswered: Future[Any] = Future()  # never completes: result(timeout=...) times out
            return {name: unanswered}
        return {name: _done(SimpleNamespace(topic_id="q3GRmxd3T4u4ZrsWp8bUwA"))}


def test_a_topic_id_left_unanswered_is_asked_again_after_fresh_metadata_names_a_live_controller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("mirror.kafka.admin.DESCRIBE_SECONDS", 0.01)
    admin = SlowBrokerAdmin()
    assert topic_ids(cast(AdminClient, admin), ["A.orders"], what="B") == {
        "A.orders": "q3GRmxd3T4u4ZrsWp8bUwA"
    }
    assert admin.calls == ["describe", "metadata", "describe"]
