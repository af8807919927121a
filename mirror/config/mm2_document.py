"""The placed draft as an mm2.yaml document: each cluster with the top-level security settings it
does not set itself, each flow with every flow's defaults beneath its own, and what MM2 ran
implicitly written down (offsets topic, offset syncs off, heartbeats), with a note for each
difference from MM2 the user should know of.
"""

from __future__ import annotations

from typing import Any

from mirror.config.flow_settings import heartbeat_pairs
from mirror.config.mm2_keys import DEFAULT_DIFFERENCES
from mirror.config.mm2_placement import Draft
from mirror.config.models import MirrorConfig


def _cluster_document(alias: str, cluster: dict[str, Any], draft: Draft) -> dict[str, Any]:
    bootstrap = cluster.pop("bootstrap_servers")
    # Top-level security settings apply where the cluster does not set the same Java property itself.
    properties = cluster.setdefault("properties", {})
    for java_name, entries in draft.shared_client.items():
        if java_name not in draft.cluster_client_keys.get(alias, set()):
            for name, value in entries.items():
                properties.setdefault(name, value)
    return {"bootstrap_servers": bootstrap, **{k: v for k, v in cluster.items() if v}}


def as_document(draft: Draft) -> dict[str, Any]:
    """The mm2.yaml document of `draft`; what it decides on the way goes to draft.notes and .dropped."""
    clusters = {alias: _cluster_document(alias, cluster, draft) for alias, cluster in draft.clusters.items()}
    flows: dict[str, Any] = {}
    for name, settings in draft.flows.items():
        # MM2 runs a flow only with <A>-><B>.enabled=true.
        flow = {"enabled": False, **draft.flow_defaults, **settings}
        target = name.split("->")[1]
        if target in draft.exactly_once_targets:
            flow.setdefault("exactly_once", True)
        if not flow["enabled"]:
            flows[name] = flow
            continue
        # Where MM2's workers kept the positions, so mirror resumes from them: the connector's own
        # offsets.storage.topic, else the workers' (the top level's wins over the target cluster's).
        _, cluster_topic = draft.cluster_offsets_topics.get(target, ("", None))
        worker_topic = draft.worker_offsets_topic or cluster_topic
        if worker_topic is not None:
            flow.setdefault("offsets_storage_topic", worker_topic)
        if "exactly_once" not in flow:
            draft.notes.append(
                f"{name}: MM2 ran this flow at-least-once; mirror runs it exactly-once by default "
                "(set exactly_once: false to keep at-least-once)"
            )
        if flow.get("emit_offset_syncs") is False:
            _without_offset_syncs(name, flow, draft)
        for yaml_key, note in DEFAULT_DIFFERENCES.items():
            if yaml_key not in flow:
                draft.notes.append(f"{name}: {note}")
        flows[name] = flow
    if not flows:
        draft.notes.append(
            "no <A>-><B>.* settings found, so no flow was written; MM2 would replicate nothing either"
        )
    _unused_offsets_topics(flows, draft)
    return {"clusters": clusters, "flows": flows}


def _unused_offsets_topics(flows: dict[str, Any], draft: Draft) -> None:
    targets = {name.split("->")[1] for name, flow in flows.items() if flow["enabled"]}
    for alias, (key, _) in draft.cluster_offsets_topics.items():
        if draft.worker_offsets_topic is not None:
            draft.dropped.append(f"{key}: MM2's workers take the top-level offset.storage.topic instead")
        elif alias not in targets:
            draft.dropped.append(
                f"{key}: the offsets topic of MM2's workers that write into {alias}; no enabled flow "
                f"replicates into {alias}, so no flow takes it"
            )


def _without_offset_syncs(name: str, flow: dict[str, Any], draft: Draft) -> None:
    """Write down what MM2 runs for a flow with offset syncs off, where the file leaves it implicit."""
    if "sync_group_offsets" not in flow:
        # MM2's default, made explicit: mirror's (on) needs offset syncs and would be refused.
        flow["sync_group_offsets"] = False
    if "emit_checkpoints" not in flow:
        # MM2's checkpoints default on, so its checkpoint connector fails validation and the flow runs
        # without it (Dedicated.testClusterWithEmitOffsetDisabled). Set explicitly, both stay and the
        # file is refused: the user asked for checkpoints that cannot be made.
        flow["emit_checkpoints"] = False
        draft.notes.append(
            f"{name}: emit.offset-syncs.enabled is false, so MM2 ran this flow without its checkpoint "
            "connector (it fails validation); written emit_checkpoints: false"
        )


def match_mm2_heartbeats(
    config: MirrorConfig, document: dict[str, Any], draft: Draft, aliases: list[str]
) -> bool:
    """Line mirror's heartbeats up with MM2's; True if a flow was added to `document`.

    MM2 emits heartbeats X->Y into Y for every pair whose emit.heartbeats.enabled is on (the pair's,
    else the top-level one, else true), with or without a flow X->Y. mirror emits them beside an
    enabled flow: X->Y's own, or flow Y->X's `reverse_heartbeats`.
    """
    default = draft.flow_defaults.get("emit_heartbeats", True)
    mm2_pairs = {
        (source, target)
        for source in aliases
        for target in aliases
        if source != target and draft.flows.get(f"{source}->{target}", {}).get("emit_heartbeats", default)
    }
    emitted = heartbeat_pairs(config)
    added = False
    for source, target in sorted(emitted - mm2_pairs):
        # Only a reverse emission can be extra, and only when flow source->target is not written:
        # written disabled with heartbeats off, it tells the flow target->source to emit none.
        name = f"{source}->{target}"
        if name not in document["flows"]:
            document["flows"][name] = {**draft.flow_defaults, "enabled": False, "emit_heartbeats": False}
            draft.notes.append(
                f"{name}: written disabled with emit_heartbeats: false, as MM2 emits no heartbeats "
                f"{name} here; without it the flow {target}->{source} would"
            )
            added = True
    missing = sorted(mm2_pairs - emitted)  # what was added above removed only pairs MM2 does not emit
    if missing:
        pairs = ", ".join(f"{source}->{target}" for source, target in missing)
        draft.notes.append(
            f"heartbeats {pairs}: MM2 emits them (its heartbeats-only herders, one per cluster pair with "
            "heartbeats on); mirror emits heartbeats only beside an enabled flow between the two clusters, "
            "so these are not emitted"
        )
    return added
