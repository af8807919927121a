"""The driver's two lines about a cluster that stops answering: one when its silence passes the
limit, one when it answers again, and nothing in between however long it lasts."""

from __future__ import annotations

from mirror.runner.cluster_answers import Silence


def test_a_silence_is_said_once_when_it_passes_the_limit_and_once_when_the_cluster_answers_again() -> None:
    said: list[str] = []
    silence = Silence("A->B", "source", "A", 30.0, said.append)
    silence.check(unanswered_since=100.0, problem=None, now=125.0)
    assert said == []
    for now in (131.0, 140.0, 170.0):  # the progress report asks every five seconds
        silence.check(unanswered_since=100.0, problem="Local: Timed out", now=now)
    assert said == [
        "flow A->B: warning: the source cluster A has not answered for 31s (Local: Timed out); the copy "
        "waits for it, and goes on by itself from the committed positions once it answers"
    ]
    silence.check(unanswered_since=None, problem=None, now=175.0)
    assert said[1:] == ["flow A->B: the source cluster A answers again, after 75s"]
    silence.check(unanswered_since=None, problem=None, now=180.0)
    assert len(said) == 2


def test_a_silence_measured_from_the_last_answer_ends_when_a_later_answer_comes() -> None:
    # The target's lease: its last renewal is where a silence starts; a later one ends it.
    said: list[str] = []
    silence = Silence("A->B", "target", "B", 8.0, said.append)
    silence.check(unanswered_since=0.0, problem="Local: Timed out", now=9.0)
    silence.check(unanswered_since=0.0, problem="Local: Timed out", now=14.0)
    silence.check(unanswered_since=20.0, problem=None, now=21.0)
    silence.check(unanswered_since=20.0, problem=None, now=29.0)
    assert [line.split(" has not", 1)[0] for line in said if "warning" in line] == [
        "flow A->B: warning: the target cluster B",
        "flow A->B: warning: the target cluster B",
    ]
    assert said[1] == "flow A->B: the target cluster B answers again, after 21s"


def test_a_cluster_that_answers_but_not_for_every_partition_is_not_called_silent() -> None:
    # One source broker of three down: metadata answers, its partitions' leaders do not yet.
    said: list[str] = []
    silence = Silence("A->B", "source", "A", 30.0, said.append)
    problem = "listing partition offsets: t-3's leader gave no offset"
    silence.check(unanswered_since=100.0, problem=problem, now=133.0, in_part=True)
    assert said == [
        "flow A->B: warning: the source cluster A answers, but not for every partition, for 33s "
        f"({problem}): a broker is away and its partitions' leaders have not moved; their copy waits for "
        "new leaders, and goes on by itself from the committed positions"
    ]
    silence.check(unanswered_since=None, problem=None, now=140.0)
    assert said[1:] == ["flow A->B: the source cluster A answers again, after 40s"]


def test_a_cluster_said_to_answer_in_part_that_then_stops_answering_at_all_is_said_silent_once() -> None:
    # One broker lost, then the others: the first line blames one broker, so the second must not wait.
    said: list[str] = []
    silence = Silence("A->B", "source", "A", 30.0, said.append)
    silence.check(unanswered_since=100.0, problem="t-3's leader gave no offset", now=131.0, in_part=True)
    for now in (136.0, 141.0):
        silence.check(unanswered_since=100.0, problem="Local: Timed out", now=now, in_part=False)
    silence.check(unanswered_since=100.0, problem="t-3's leader gave no offset", now=146.0, in_part=True)
    assert len(said) == 2, said
    assert said[0].startswith("flow A->B: warning: the source cluster A answers, but not for every partition")
    assert said[1].startswith(
        "flow A->B: warning: the source cluster A has not answered for 36s (Local: Timed out)"
    )
