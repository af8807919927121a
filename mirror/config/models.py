"""The `mm2.yaml` schema: clusters, flows, Spark and metrics.

Names follow MM2's properties with dots turned into underscores (`offset.lag.max` ->
`offset_lag_max`, `emit.checkpoints.interval.seconds` -> `emit_checkpoints_interval_seconds`), so
an MM2 user recognises every key. Defaults are MM2's except where noted in `config/mm2.example.yaml`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from mirror.config.cluster import ClusterConfig, FrozenModel, PositiveSeconds
from mirror.policy.filters import (
    DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
    DEFAULT_GROUPS,
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS,
    DEFAULT_TOPICS_EXCLUDE,
)

ALIAS_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$"
Alias = Annotated[str, StringConstraints(pattern=ALIAS_PATTERN)]

# The levels `logging:` accepts, as Python's logging names them.
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


RegexList = list[str]


def _check_regexes(patterns: RegexList) -> RegexList:
    for index, pattern in enumerate(patterns):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(
                f"item {index} {pattern!r} is not a valid regular expression ({exc}); "
                "fix the pattern (full-match, e.g. 'orders\\..*')"
            ) from exc
    return patterns


class FlowConfig(FrozenModel):
    """One replication flow, `source->target`, with MM2's per-flow settings."""

    enabled: bool = True
    topics: RegexList = Field(default_factory=lambda: list(DEFAULT_TOPICS))
    topics_exclude: RegexList = Field(default_factory=lambda: list(DEFAULT_TOPICS_EXCLUDE))
    groups: RegexList = Field(default_factory=lambda: list(DEFAULT_GROUPS))
    groups_exclude: RegexList = Field(default_factory=lambda: list(DEFAULT_GROUPS_EXCLUDE))
    replication_policy: Literal["default", "identity"] = "default"
    replication_policy_separator: Annotated[str, StringConstraints(min_length=1)] = "."
    replication_policy_internal_topic_separator_enabled: bool = True
    exactly_once: bool = True
    # None: "target" with exactly-once (syncs commit in the data's transaction), else MM2's "source".
    offset_syncs_topic_location: Literal["source", "target"] | None = None
    emit_offset_syncs: bool = True
    offset_lag_max: Annotated[int, Field(ge=0)] = 100
    refresh_topics: bool = True
    refresh_topics_interval_seconds: PositiveSeconds = 10.0
    refresh_groups: bool = True
    refresh_groups_interval_seconds: PositiveSeconds = 10.0
    sync_topic_configs: bool = True
    sync_topic_configs_interval_seconds: PositiveSeconds = 600.0
    sync_topic_acls: bool = True
    sync_topic_acls_interval_seconds: PositiveSeconds = 600.0
    # `mirror verify` inside `mirror run`: the copy compared with its source this often. Off by default.
    verify_interval_seconds: PositiveSeconds | None = None
    emit_checkpoints: bool = True
    emit_checkpoints_interval_seconds: PositiveSeconds = 5.0
    sync_group_offsets: bool = True
    sync_group_offsets_interval_seconds: PositiveSeconds = 5.0
    emit_heartbeats: bool = True
    emit_heartbeats_interval_seconds: PositiveSeconds = 1.0
    heartbeats_replication: bool = True
    replication_factor: Annotated[int, Field(ge=1)] | None = None
    internal_topics_replication_factor: Annotated[int, Field(ge=1)] | None = None
    config_properties_exclude: RegexList = Field(
        default_factory=lambda: list(DEFAULT_CONFIG_PROPERTIES_EXCLUDE)
    )
    offsets_storage_topic: str | None = None
    # Where a topic config the source leaves at its default comes from: `target` (MM2's default:
    # the target's own default; an override on the remote topic is removed) or `source` (the
    # source's default value is set on the remote topic).
    use_defaults_from: Literal["target", "source"] = "target"
    # Copy tasks (MM2's tasks.max): None means one per core of the machine running `mirror run`.
    tasks_max: Annotated[int, Field(ge=1, le=1024)] | None = None
    # Transactional producers per copy task (exactly-once only; mirror.config.flow_settings.
    # task_producers says when more than one helps).
    producers_per_task: Annotated[int, Field(ge=1, le=16)] = 1
    # Whose producer copy tasks write through (mirror.kafka.packing_producer says when each wins);
    # None: chosen by `mirror run` (mirror.runner.copy_producer).
    copy_producer: Literal["librdkafka", "aiokafka"] | None = None
    # A copy task commits a transaction this often (and sooner when one grows large).
    commit_interval_ms: Annotated[int, Field(ge=1, le=60_000)] = 100
    # The most key and value bytes per second the flow copies, shared equally by its copy tasks.
    throttle_bytes_per_second: float | None = None
    # A copy task of over 1,000 partitions stops fetching one idle this long (mirror.source.
    # idle_pause); None: it fetches every partition all the time.
    pause_idle_partitions_after_seconds: PositiveSeconds | None = 30.0
    # Replaced by commit_interval_ms; still accepted so older configs load, with a warning.
    max_records_per_batch: Annotated[int, Field(ge=1)] | None = None
    on_source_truncation: Literal["continue", "fail"] = "continue"
    on_remote_topic_deleted: Literal["recopy", "fail"] = "recopy"

    @field_validator("topics", "topics_exclude", "groups", "groups_exclude", "config_properties_exclude")
    @classmethod
    def _regexes_compile(cls, patterns: RegexList) -> RegexList:
        return _check_regexes(patterns)

    @field_validator("throttle_bytes_per_second", mode="before")
    @classmethod
    def _positive_rate(cls, rate: object) -> float | None:
        if rate is None:
            return None
        try:
            value = 0.0 if isinstance(rate, bool) else float(rate)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            value = 0.0
        if not 0 < value < float("inf"):
            raise ValueError(
                f"must be a positive number of bytes per second, not {rate!r}; "
                "e.g. 10485760 for 10 MiB/s, or remove it for no throttle"
            )
        return value

    @model_validator(mode="after")
    def _producers_need_transactions(self) -> FlowConfig:
        if self.producers_per_task > 1 and not self.exactly_once:
            raise ValueError(
                f"producers_per_task is {self.producers_per_task}, but an at-least-once copy task "
                "writes through one idempotent producer; remove producers_per_task, or set "
                "exactly_once: true"
            )
        return self

    @model_validator(mode="after")
    def _checkpoints_have_offset_syncs(self) -> FlowConfig:
        # MM2 refuses this too (for an enabled flow): checkpoints and group sync translate through
        # offset syncs.
        if self.enabled and not self.emit_offset_syncs and (self.emit_checkpoints or self.sync_group_offsets):
            raise ValueError(
                "emit_offset_syncs is false, but checkpoints and group offset sync translate through "
                "offset syncs; set emit_checkpoints: false and sync_group_offsets: false, or "
                "emit_offset_syncs: true"
            )
        return self


class SparkConfig(FrozenModel):
    """Where the Spark application runs and where it keeps its streaming checkpoints."""

    master: str = "local[*]"
    app_name: str = "mirror"
    checkpoint_dir: str = "./.mirror-state"
    # How long each micro-batch of the copy tasks runs. Between two the copy pauses for ~0.5-2.5 s
    # (Spark ends one batch and plans the next; the tasks re-open), so epochs are long: at 600 s
    # under 0.5% of records wait for a gap.
    epoch_seconds: Annotated[float, Field(ge=1, le=3600)] = 600.0
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("master")
    @classmethod
    def _known_master(cls, master: str) -> str:
        if not re.match(r"^(local(\[(\*|\d+)(,\s*\d+)?\])?|spark://.+|yarn|k8s://.+)$", master):
            raise ValueError(
                f"{master!r} is not a Spark master URL; use local[*], local[N], local[N,F], "
                "spark://host:port, yarn or k8s://https://host:port"
            )
        return master


class MetricsConfig(FrozenModel):
    """The Prometheus endpoint the driver serves."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 9464
    # False: the per-partition source series (records, bytes, record age, lag, truncated records)
    # keep one series per topic, for flows of thousands of partitions.
    per_partition: bool = True


FLOW_KEY = re.compile(r"^\s*([^\s>]+?)\s*->\s*([^\s>]+)\s*$")


def parse_flow_key(key: str) -> tuple[str, str]:
    """`"A->B"` -> ("A", "B"); ValueError naming the expected shape otherwise."""
    match = FLOW_KEY.match(key)
    if match is None:
        raise ValueError(f"flow {key!r} is not of the form SOURCE->TARGET, e.g. 'A->B'")
    return match.group(1), match.group(2)


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _fold_case_duplicates(section: dict[str, Any]) -> dict[str, Any]:
    """Merge each lower-case key into the one key that differs only in case (env over file)."""
    folded = dict(section)
    for key in [k for k in section if k.islower()]:
        twins = [k for k in section if k != key and k.lower() == key]
        if len(twins) == 1 and isinstance(section[key], dict) and isinstance(section[twins[0]], dict):
            folded[twins[0]] = _deep_merge(section[twins[0]], folded.pop(key))
    return folded


def flow_problems(flow_keys: Iterable[str], cluster_aliases: Iterable[str]) -> list[tuple[str, str]]:
    """(flow key, problem) for flows that are malformed, loop on one cluster or name unknown clusters."""
    aliases = set(cluster_aliases)
    known = ", ".join(sorted(aliases)) or "none"
    problems: list[tuple[str, str]] = []
    for key in flow_keys:
        try:
            source, target = parse_flow_key(key)
        except ValueError as exc:
            problems.append((key, str(exc)))
            continue
        if source == target:
            problems.append(
                (key, f"flow {key!r} replicates cluster {source!r} into itself; name two clusters")
            )
        for alias in dict.fromkeys((source, target)):
            if alias not in aliases:
                problems.append(
                    (
                        key,
                        f"flow {key!r} names cluster {alias!r}, which is not defined under clusters "
                        f"(defined: {known}); add it or fix the flow name",
                    )
                )
    return problems


class MirrorConfig(BaseSettings):
    """The whole `mm2.yaml`. Environment variables MIRROR_<KEY>__<SUBKEY> override the file."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="forbid",
        env_prefix="MIRROR_",
        env_nested_delimiter="__",
        case_sensitive=False,
    )

    clusters: dict[Alias, ClusterConfig]
    flows: dict[str, FlowConfig] = Field(default_factory=dict)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    # Levels per logger, e.g. {mirror.source: DEBUG}: over mirror's INFO, on the driver and in
    # every Spark worker (mirror.logs).
    logging: dict[str, str] = Field(default_factory=dict)

    @field_validator("logging")
    @classmethod
    def _known_levels(cls, levels: dict[str, str]) -> dict[str, str]:
        for name, level in levels.items():
            if str(level).upper() not in LEVELS:
                raise ValueError(f"{name}: unknown level {level!r}; use one of {', '.join(LEVELS)}")
        return {name: str(level).upper() for name, level in levels.items()}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The YAML file arrives as init kwargs; the environment is listed first so it wins.
        return (env_settings, init_settings)

    @model_validator(mode="before")
    @classmethod
    def _fold_env_keys_onto_aliases(cls, data: Any) -> Any:
        # Environment variable names are case-insensitive, so MIRROR_CLUSTERS__B__... arrives as
        # cluster "b"; merge it into the alias the file spells "B" rather than invent a new cluster.
        if isinstance(data, dict):
            for section in ("clusters", "flows"):
                if isinstance(data.get(section), dict):
                    data = {**data, section: _fold_case_duplicates(data[section])}
        return data

    @model_validator(mode="after")
    def _flows_name_defined_clusters(self) -> MirrorConfig:
        problems = [problem for _, problem in flow_problems(self.flows, self.clusters)]
        if problems:
            # One line per problem; the loader prints each on its own line.
            raise ValueError("\n".join(problems))
        return self

    def flow_endpoints(self) -> list[tuple[str, str, FlowConfig]]:
        """(source alias, target alias, flow) for every flow, in file order."""
        return [(*parse_flow_key(key), flow) for key, flow in self.flows.items()]
