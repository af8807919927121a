"""Whether a flow's two clusters answer `mirror run`: one line when one stops answering, one when it
answers again.

A network partition, or a cluster down, shows in the progress line as a lag that is unknown or a
target "not answering"; an operator reading the log also wants the moment it began and ended, said
once each. The target's sign of life is the flow's lease, renewed every two seconds; the source's
is the lag read, which lists its topics and asks for its partitions' ends every five seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from mirror.config.flow_settings import FlowSettings
from mirror.runner.progress import LAG_STALE_SECONDS
from mirror.source.lease import RENEW_SECONDS

# The target: four lease renewals missed; the progress line says "not answering" from then on too.
TARGET_LATE_SECONDS = 4 * RENEW_SECONDS
# The source: when its lag stops being shown (a lag read of 10,000 partitions from a busy source
# may take seconds, so a shorter silence would warn of a cluster that is only slow).
SOURCE_LATE_SECONDS = LAG_STALE_SECONDS


class Silence:
    """One cluster of one flow, as seen from the driver."""

    def __init__(
        self,
        flow: str,
        role: Literal["source", "target"],
        alias: str,
        late_seconds: float,
        out: Callable[[str], None],
    ) -> None:
        self._flow = flow
        self._cluster = f"the {role} cluster {alias}"
        self._late = late_seconds
        self._out = out
        self._since: float | None = None  # the start of the silence reported, until it ends
        self._in_part = False  # whether the line said the cluster answers in part

    def check(
        self, unanswered_since: float | None, problem: str | None, now: float, *, in_part: bool = False
    ) -> None:
        """`unanswered_since`: since when (time.monotonic()) a request to the cluster waits or has
        failed with no answer since; None if it answers. A later time than the silence reported
        means it answered in between. `problem`: what the last request that failed ran into.
        `in_part`: the cluster itself answers, but not every partition's leader does."""
        if self._since is None:
            if unanswered_since is not None and now - unanswered_since > self._late:
                self._since, self._in_part = unanswered_since, in_part
                self._warn(now - unanswered_since, problem, in_part=in_part)
        elif unanswered_since is None or unanswered_since > self._since:
            self._out(f"flow {self._flow}: {self._cluster} answers again, after {now - self._since:.0f}s")
            self._since = None
        elif self._in_part and not in_part:
            # Said to answer in part, and now not at all (the rest of the cluster went too): said
            # once more, or the line in the log would still blame one broker.
            self._in_part = False
            self._warn(now - self._since, problem, in_part=False)

    def _warn(self, seconds: float, problem: str | None, *, in_part: bool) -> None:
        because = f" ({problem})" if problem else ""
        lasted = f"{seconds:.0f}s{because}"
        self._out(
            f"flow {self._flow}: warning: {self._cluster} answers, but not for every partition, "
            f"for {lasted}: a broker is away and its partitions' leaders have not moved; their "
            "copy waits for new leaders, and goes on by itself from the committed positions"
            if in_part
            else f"flow {self._flow}: warning: {self._cluster} has not answered for {lasted}; the "
            "copy waits for it, and goes on by itself from the committed positions once it answers"
        )


def flow_silences(settings: FlowSettings, out: Callable[[str], None]) -> tuple[Silence, Silence]:
    """The flow's source and target, each with its own limit."""
    return (
        Silence(settings.name, "source", settings.source, SOURCE_LATE_SECONDS, out),
        Silence(settings.name, "target", settings.target, TARGET_LATE_SECONDS, out),
    )
