"""`mirror migrate cutover`: runbook 1's steps, each checked, resumable from a state file.

lag gate -> fence the source's producers -> verify the fence (the source's ends stop moving) ->
drain (the flow copied everything) -> verify (the copy equals the source) -> groups (every stopped
group's offsets translated exactly and written on the target) -> report. A running `mirror run` of
the flow does the copying throughout; the cutover only watches, fences and moves groups.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mirror.config.flow_settings import FlowSettings
from mirror.errors import ConfigError, MigrationStepError, MirrorError
from mirror.kafka.acl import TopicAcl
from mirror.kafka.admin import create_topic_acls, describe_topic_acls
from mirror.kafka.clients import admin_client
from mirror.kafka.group_admin import group_offsets, list_group_ids
from mirror.kafka.offsets import high_watermarks, last_stable_offsets
from mirror.migrate.groups import SETTLE_TRIES, move_groups, settle_moved
from mirror.migrate.state import (
    STEPS,
    CutoverState,
    config_digest,
    load_state,
    locked,
    save_state,
    state_path,
)
from mirror.source.offsets_admin import PositionRow, list_positions
from mirror.topics.sync import TopicSync
from mirror.verify.job import FlowReport, verify_flow

Partition = tuple[str, int]
T = TypeVar("T")
Say = Callable[[str], None]
POLL_SECONDS = 2.0


@dataclass(frozen=True)
class CutoverOptions:
    lag_threshold: int = 1000
    lag_timeout: float = 600.0
    producer_principals: tuple[str, ...] = ()
    producers_stopped: bool = False
    fence_seconds: float = 10.0
    fence_timeout: float = 300.0
    drain_timeout: float = 600.0
    dry_run: bool = False


def run_cutover(
    settings: FlowSettings, config: Path, state_dir: Path, options: CutoverOptions, say: Say
) -> CutoverState:
    path = state_path(state_dir, settings.name)
    digest = config_digest(config)
    if options.dry_run:  # reads only: no lock, no state file
        state = load_state(path) or CutoverState(flow=settings.name, config_sha256=digest)
        cutover = _Cutover(settings, options, state, say)
        for step in STEPS:
            done = state.steps[step].status == "done"
            say(
                f"{step}: done before ({state.steps[step].detail})"
                if done
                else f"{step}: would {cutover.describe(step)}"
            )
        return state
    with locked(path):
        state = load_state(path) or CutoverState(flow=settings.name, config_sha256=digest)
        if state.config_sha256 != digest:
            raise ConfigError(
                [
                    f"{config} changed since this cutover started ({path}); restore it, or move the state "
                    "file away to start over"
                ]
            )
        cutover = _Cutover(settings, options, state, say)
        if not set(options.producer_principals) <= set(state.fenced_principals):
            # More producers named since the fence went up (the fence check caught one): fence them
            # too, and check the fence again.
            for step in STEPS[STEPS.index("fence") :]:
                state.steps[step].status = "pending"
        for step in STEPS:
            if state.steps[step].status == "done":
                say(f"{step}: done before ({state.steps[step].detail})")
                continue
            state.start(step)
            save_state(path, state)
            try:
                detail = cutover.run(step)
            except MirrorError as exc:
                state.finish(step, str(exc).splitlines()[0], status="failed")
                save_state(path, state)
                raise
            state.finish(step, detail)
            save_state(path, state)
            say(f"{step}: {detail}")
        return state


class _Cutover:
    def __init__(
        self, settings: FlowSettings, options: CutoverOptions, state: CutoverState, say: Say
    ) -> None:
        self.settings, self.options, self.state, self.say = settings, options, state, say
        self.source_admin = admin_client(settings.source_admin)
        self.target_admin = admin_client(settings.target_admin)
        policy = settings.policy()
        # Heartbeats are mirror's own records, written on; they are neither fenced nor drained.
        self.topics = [t for t in TopicSync(settings).selected_topics() if not policy.is_heartbeats_topic(t)]

    def describe(self, step: str) -> str:
        o = self.options
        return {
            "lag_gate": f"wait until at most {o.lag_threshold} records are left to copy (now "
            f"{self._lag(self._rows())}), for up to {o.lag_timeout:g}s",
            "fence": self._fence_plan(),
            "verify_fence": f"check that {len(self.topics)} topics' ends stay put for {o.fence_seconds:g}s",
            "drain": "wait until the flow has copied every record of the fenced topics",
            "verify": "compare every copied record with its source (`mirror verify --complete`)",
            "groups": f"translate and write the offsets of {len(self._source_groups())} groups on "
            f"{self.settings.target} (inactive groups only, never backwards)",
            "report": "print what moved",
        }[step]

    def run(self, step: str) -> str:
        steps: dict[str, Callable[[], str]] = {
            "lag_gate": self._lag_gate,
            "fence": self._fence,
            "verify_fence": self._verify_fence,
            "drain": self._drain,
            "verify": self._verify,
            "groups": self._groups,
            "report": self._report,
        }
        return steps[step]()

    def _rows(self) -> list[PositionRow]:
        return list_positions(self.settings, self.topics, not_yet_on_target=True)

    @staticmethod
    def _lag(rows: list[PositionRow]) -> int:
        return sum(row.to_copy for row in rows)

    def _lag_gate(self) -> str:
        limit = self.options.lag_threshold
        lag = self._wait(
            lambda: self._lag(self._rows()),
            lambda lag: lag <= limit,
            self.options.lag_timeout,
            lambda lag: (
                f"{lag} records still to copy (threshold {limit}); is `mirror run` running "
                f"flow {self.settings.name}? `mirror status` shows"
            ),
            "lag",
        )
        return f"{lag} records left to copy (threshold {limit})"

    def _fence_plan(self) -> str:
        if self.options.producer_principals:
            return (
                f"deny WRITE on {len(self.topics)} topics of {self.settings.source} to "
                f"{', '.join(self.options.producer_principals)}"
            )
        if self.options.producers_stopped:
            return f"take the operator's word that nothing writes to {self.settings.source}'s topics"
        return "refuse: name the producers with --producer-principal, or pass --producers-stopped"

    def _fence(self) -> str:
        principals = self.options.producer_principals
        if principals:
            if describe_topic_acls(self.source_admin) is None:
                raise ConfigError(
                    [
                        f"{self.settings.source} has no authorizer, so producers cannot be fenced with ACLs; "
                        "stop them yourself and pass --producers-stopped instead of --producer-principal"
                    ]
                )
            create_topic_acls(
                self.source_admin,
                [TopicAcl(t, p, "*", "WRITE", "DENY") for t in self.topics for p in principals],
            )
            self.state.fence = "acl"
            self.state.fenced_principals = sorted({*self.state.fenced_principals, *principals})
            who = ", ".join(principals)
            return f"WRITE denied to {who} on {len(self.topics)} topics of {self.settings.source}"
        if self.options.producers_stopped:
            self.state.fence = "operator"
            return (
                f"the operator stopped the producers of {self.settings.source}'s topics (--producers-stopped)"
            )
        raise ConfigError(
            [
                f"the cutover must stop writes to {self.settings.source}'s topics: name the producers' "
                "principals with --producer-principal (a deny-write ACL), or stop the producers yourself "
                "and pass --producers-stopped"
            ]
        )

    def _verify_fence(self) -> str:
        partitions = [(row.topic, row.partition) for row in self._rows()]
        window = self.options.fence_seconds
        deadline = time.monotonic() + self.options.fence_timeout
        while True:
            before = high_watermarks(self.source_admin, partitions)
            time.sleep(window)
            after = high_watermarks(self.source_admin, partitions)
            stable = last_stable_offsets(self.source_admin, partitions)
            moved = sorted(tp for tp in partitions if after[tp] != before[tp])
            open_transactions = sorted(tp for tp in partitions if stable[tp] != after[tp])
            if not moved and not open_transactions:
                self.state.ends_at_fence = {f"{t}:{p}": end for (t, p), end in after.items()}
                return f"{len(partitions)} partitions kept their ends for {window:g}s"
            if time.monotonic() > deadline:
                if moved:
                    t, p = moved[0]
                    raise MigrationStepError(
                        f"verify_fence: {t}-{p} grew from {before[(t, p)]} to {after[(t, p)]} within "
                        f"{window:g}s ({len(moved)} partitions moved): something still writes (a super user, "
                        "or a principal not fenced); stop it or name it with --producer-principal, then run "
                        "the cutover again"
                    )
                t, p = open_transactions[0]
                raise MigrationStepError(
                    f"verify_fence: {t}-{p} has a transaction open for over {self.options.fence_timeout:g}s; "
                    "end its "
                    "producer (kafka-transactions.sh abort), then run the cutover again to resume here"
                )
            what = (
                f"{len(moved)} partitions still growing"
                if moved
                else f"{len(open_transactions)} open transactions"
            )
            self.say(f"verify_fence: {what}; watching again")

    def _drain(self) -> str:
        def behind(rows: list[PositionRow]) -> int:
            return sum(1 for row in rows if row.position is None or row.position < row.end)

        rows = self._wait(
            self._rows,
            lambda rows: behind(rows) == 0,
            self.options.drain_timeout,
            lambda rows: (
                f"{behind(rows)} partitions not fully copied ({self._lag(rows)} records); is `mirror "
                f"run` running flow {self.settings.name}?"
            ),
            "drain",
        )
        return f"the flow has copied every record of {len(rows)} partitions"

    def _verify(self) -> str:
        return verify_outcome(verify_flow(self.settings, self.topics))

    def _source_groups(self) -> list[str]:
        """The source's groups the flow's group filter selects that committed offsets on its topics."""
        where = f"source cluster {self.settings.source}"
        group_filter = self.settings.group_filter()
        names = [g for g in list_group_ids(self.source_admin, what=where) if group_filter.matches(g)]
        chosen = set(self.topics)
        found = group_offsets(self.source_admin, names, what=where) if names else {}
        return sorted(g for g, offsets in found.items() if any(t in chosen for t, _ in offsets))

    def _groups(self) -> str:
        move = move_groups(self.settings, self._source_groups(), self.topics, timeout=POLL_SECONDS)
        for group in move.still_consuming:
            self.say(f"groups: {group} still has members on {self.settings.source}; moved as committed now")
        self.state.groups_moved = {
            group: {f"{t}:{p}": o for (t, p), o in sorted(offsets.items())}
            for group, offsets in move.moved.items()
        }
        settled = settle_moved(self.settings, move.moved, lambda line: self.say(f"groups: {line}"))
        if settled.unsettled:
            raise MigrationStepError(
                f"groups: the running flow's group sync still moves {', '.join(settled.unsettled)} back "
                f"after {SETTLE_TRIES} checks; stop `mirror run`, then run the cutover again"
            )
        for group, why in settled.joined.items():
            self.state.groups_moved.pop(group, None)
            move.not_moved[group] = why
        self.state.groups_not_moved = move.not_moved
        moved = len(self.state.groups_moved)
        return f"{moved} groups written on {self.settings.target}; {len(move.not_moved)} not"

    def _report(self) -> str:
        s = self.state
        lines = [f"flow {self.settings.name} cut over"]
        if s.fence == "acl":
            lines.append(
                f"  {self.settings.source} stays fenced (deny WRITE to {', '.join(s.fenced_principals)}); "
                "to lift "
                "it: kafka-acls.sh --remove --deny-principal <principal> --operation Write --topic <topic>"
            )
        lines.append(f"  groups moved: {', '.join(sorted(s.groups_moved)) or '-'}")
        lines += [f"  NOT MOVED {group}: {why}" for group, why in sorted(s.groups_not_moved.items())]
        lines.append(
            f"  next: point consumers and producers at {self.settings.target}, then stop `mirror run`"
        )
        for line in lines:
            self.say(line)
        return f"{len(s.groups_moved)} groups moved, {len(s.groups_not_moved)} not"

    def _wait(
        self,
        read: Callable[[], T],
        done: Callable[[T], bool],
        timeout: float,
        failure: Callable[[T], str],
        step: str,
    ) -> T:
        deadline = time.monotonic() + timeout
        shown = 0.0
        while True:
            value = read()
            if done(value):
                return value
            if time.monotonic() > deadline:
                raise MigrationStepError(
                    f"{step}: after {timeout:g}s, {failure(value)}; run the cutover again to resume here"
                )
            if time.monotonic() - shown > 10:
                self.say(f"{step}: {failure(value).split(';')[0]}")
                shown = time.monotonic()
            time.sleep(POLL_SECONDS)


def verify_outcome(report: FlowReport) -> str:
    """The verify step's line for a flow's report; MigrationStepError unless the copy equals its source."""
    waiting = report.waiting()
    if report.differs or report.uncompared or waiting:
        raise MigrationStepError(
            f"verify: the copy differs from the source ({report.diff_total('missing')} missing, "
            f"{report.diff_total('extra') + report.total('extra_after')} extra, "
            f"{report.diff_total('changed')} "
            f"changed, {report.uncompared} partitions not compared, {waiting} not copied yet); "
            f"`mirror verify --flow '{report.flow}'` names each partition"
        )
    compared = f"{report.total('records')} records in {len(report.partitions)} partitions equal their source"
    unverified = report.total("unverified")
    # Said, not failed: the offset syncs that anchor a comparison are compacted over time, so a
    # long-running flow's oldest records have none; the line must not claim they were compared.
    if not unverified:
        return compared
    return f"{compared}; {unverified} source offsets before the oldest offset sync, not compared"
