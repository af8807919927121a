"""Results as JSON, a Markdown table with ratios, and a PNG chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Which MirrorMaker 2 row a contender is compared with.
_PEER = {
    "mirror-eos": "mm2-eos",
    "mirror-alo": "mm2-alo",
    "mirror-eos-librdkafka": "mm2-eos",
    "mirror-alo-librdkafka": "mm2-alo",
    # Results from before aiokafka's producer became the default.
    "mirror-eos-aiokafka": "mm2-eos",
    "mirror-alo-aiokafka": "mm2-alo",
    "mm2-eos": "mm2-eos",
    "mm2-alo": "mm2-alo",
}


def _peer(name: str) -> str:
    """The MM2 row a row's ratios are taken against: every floor copies exactly once."""
    return "mm2-eos" if name.startswith("floor-") else _PEER.get(name, "")


def _translates(name: str) -> bool:
    """Whether a row has group translation to measure: the perf tools and the floors copy records only."""
    return name != "ceiling" and not name.startswith("floor-")


# The steady loads: where a contender's result is, and where the load is described.
_STEADY_LOADS = (("latency", "steady"), ("latency_many", "steady_many"))
SIDES = ("source", "target")


def _ratio(value: float | None, reference: float | None) -> str:
    if value is None or not reference:
        return "-"
    return f"{value / reference:.2f}x"


def _number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _warm_up_line(warmed: dict[str, Any], load: dict[str, Any]) -> str:
    """What the brokers served before the first contender (bench.warm_up)."""
    what = (
        f"Warm-up, unmeasured: the floor copied {load['rate']:,} records/s over {load['partitions']:,} "
        f"partitions for {warmed['seconds']} s before the first contender"
    )
    if "error" in warmed:
        return f"{what}, and failed: {warmed['error']}"
    latency = warmed["latency"]
    return f"{what} (its p50/p99 {_number(latency.get('p50_ms'))}/{_number(latency.get('p99_ms'))} ms)."


def markdown(results: dict[str, Any]) -> str:
    rows = {row["name"]: row for row in results["contenders"]}
    lines = [
        f"Mode **{results['mode']}**, {results.get('brokers', 1)} broker(s) per cluster, "
        + (
            f"source {results['wan_rtt_ms']} ms round trip away (Toxiproxy), "
            if results.get("wan_rtt_ms")
            else ""
        )
        + f"{results['machine']['cpus']} CPUs, Kafka {results['kafka_version']}, "
        f"mirror {results['mirror_commit']}, {results['started']}.",
    ]
    warmed = results.get("warm_up")
    if warmed:
        lines += ["", _warm_up_line(warmed, results["steady_many"])]
    played = results.get("rounds", [])
    if played:
        orders = "; ".join(f"{index}: {', '.join(r['order'])}" for index, r in enumerate(played, 1))
        lines += [
            "",
            f"Medians of {len(played)} rounds, the contenders' order alternating (round {orders}); "
            "each round's own figures follow.",
        ]
    lines += ["", *_tables(results, rows)]
    for index, round_ in enumerate(played, 1):
        lines += [
            "",
            f"Round {index}: {', '.join(round_['order'])}",
            "",
            *_tables(results, {row["name"]: row for row in round_["contenders"]}),
        ]
    return "\n".join(lines) + "\n"


def _tables(results: dict[str, Any], rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        *_catch_up_table(results, rows),
        "",
        "| contender | steady load | p50 ms | p99 ms | max ms | received | p99 vs MM2 "
        "| from source append: p50, p99 ms | its p99 vs MM2 | CPU s / M records "
        "| brokers' CPU s / M records: source, target | peak RSS MB | delivered in time "
        "| caught-up group: records re-read on target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, load in _steady_loads(results):
        lines += _steady_rows(rows, key, load)
    return lines


def _catch_up_table(results: dict[str, Any], rows: dict[str, dict[str, Any]]) -> list[str]:
    ceiling = rows.get("ceiling", {})
    lines = [
        "| contender | workload | records/s | MB/s | vs MM2 (same mode) | vs ceiling "
        "| start-up s | CPU s / M records | peak RSS MB | complete |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    unmeasured = []
    for name, row in rows.items():
        for workload, result in row.get("catch_up", {}).items():
            peer = rows.get(_peer(name), {}).get("catch_up", {}).get(workload, {})
            top = ceiling.get("catch_up", {}).get(workload, {})
            rate = result.get("records_per_second")
            cells = [
                row["label"],
                workload,
                _number(rate),
                _number(result.get("megabytes_per_second"), 1),
                "-" if name == "ceiling" else _ratio(rate, peer.get("records_per_second")),
                _ratio(rate, top.get("records_per_second")),
                _number(result.get("startup_seconds"), 1),
                _number(result.get("cpu_seconds_per_million"), 1),
                _number(result.get("peak_rss_megabytes")),
                _completeness(result),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        if name == "ceiling":
            # Workloads the perf tools cannot run (they take one topic each) get a row saying so.
            measured = row.get("catch_up", {})
            unmeasured = [w["name"] for w in results.get("workloads", []) if w["name"] not in measured]
            for workload in unmeasured:
                lines.append("| " + " | ".join([row["label"], workload, *["-"] * 7, "not measured"]) + " |")
    if unmeasured:
        lines += ["", f"No broker ceiling for {', '.join(unmeasured)}: the perf tools take one topic each."]
    return lines


def _steady_loads(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(key, results[where]) for key, where in _STEADY_LOADS if where in results]


def _steady_rows(rows: dict[str, dict[str, Any]], key: str, load: dict[str, Any]) -> list[str]:
    description = f"{load['rate']:,}/s x {load['seconds']} s"
    if "partitions" in load:
        description += f" over {load['partitions']:,} partitions"
    lines = []
    for name, row in rows.items():
        latency = row.get(key)
        if latency is None:
            error = row.get(f"{key}_error")
            if error is not None:  # the contender failed during the steady load: say so
                lines.append(
                    "| " + " | ".join([row["label"], description, *["-"] * 3, "failed", *["-"] * 8]) + " |"
                )
            continue
        peer = rows.get(_peer(name), {}).get(key) or {}
        translation = row.get("translation") or {}
        if not _translates(name) or key != "latency":
            re_read = "-"  # measured on the 8-partition steady topic of the replicators only
        elif translation.get("synced"):
            re_read = _number(translation.get("records_re_read"))
        else:
            re_read = "not synced"
        cells = [
            row["label"],
            description,
            _number(latency["p50_ms"], 1),
            _number(latency["p99_ms"], 1),
            _number(latency["max_ms"], 1),
            f"{latency['received']:,}/{latency['records']:,}",
            "-" if name == "ceiling" else _ratio(latency["p99_ms"], peer.get("p99_ms")),
            _from_append(latency),
            "-"
            if name == "ceiling"
            else _ratio(latency.get("from_append_p99_ms"), peer.get("from_append_p99_ms")),
            _number(latency.get("cpu_seconds_per_million"), 1),
            _broker_cost(latency),
            _number(latency.get("peak_rss_megabytes")),
            _delivered(latency),
            re_read,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _from_append(latency: dict[str, Any]) -> str:
    if "from_append_p99_ms" not in latency:
        return "-"  # a run from before it was measured
    return f"{_number(latency['from_append_p50_ms'], 1)}, {_number(latency['from_append_p99_ms'], 1)}"


def _broker_cost(latency: dict[str, Any]) -> str:
    """What the load cost the brokers meanwhile, and any full GC: a broker out of heap slows
    whichever contender meets it, so its figures say more about the broker than the contender."""
    if "source_broker_cpu_seconds_per_million" not in latency:
        return "-"  # a run from before the brokers were measured
    text = ", ".join(_number(latency.get(f"{side}_broker_cpu_seconds_per_million"), 1) for side in SIDES)
    full = {side: latency.get(f"{side}_broker_full_gcs", 0) for side in SIDES}
    gcs = [f"{side} {count:,}" for side, count in full.items() if count]
    return text + (f" (full GCs: {', '.join(gcs)})" if gcs else "")


def _delivered(latency: dict[str, Any]) -> str:
    """The share of the produced records that arrived within the wait, rounded down: 99.95% is not 100%."""
    if "delivered" not in latency:
        return "-"
    tenths = latency["delivered"] * 1000 // latency["records"]
    return f"{tenths // 10}.{tenths % 10}% in {latency['delivered_within_seconds']} s"


def _completeness(result: dict[str, Any]) -> str:
    verdict = result.get("verdict")
    if verdict is None:
        return "yes" if result.get("complete") else "NO"
    text = "yes" if result["complete"] else f"NO ({verdict['missing']:,} missing)"
    if verdict["duplicated"]:
        text += f", {verdict['duplicated']:,} duplicates"
    return text


def chart(results: dict[str, Any], path: Path) -> None:
    """Top row: catch-up MB/s per workload. Bottom row: p50 and p99 latency per steady load."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["contenders"]
    workloads = [w["name"] for w in results["workloads"]]
    loads = [(key, load) for key, load in _steady_loads(results) if any(row.get(key) for row in rows)]
    columns = max(len(workloads), len(loads), 1)
    figure, axes = plt.subplots(2, columns, figsize=(6 * columns, 10), squeeze=False)
    for axis, workload in zip(axes[0], workloads, strict=False):
        values = [row.get("catch_up", {}).get(workload, {}).get("megabytes_per_second", 0) for row in rows]
        axis.bar([_short(row["label"]) for row in rows], values, color=[_colour(row["name"]) for row in rows])
        axis.set_title(f"catch-up {workload} (MB/s, higher is better)")
        axis.tick_params(axis="x", labelsize=8)
    for axis, (key, load) in zip(axes[1], loads, strict=False):
        latency_rows = [row for row in rows if row.get(key)]
        positions = range(len(latency_rows))
        for offset, percentile in ((-0.2, "p50_ms"), (0.2, "p99_ms")):
            axis.bar(
                [p + offset for p in positions],
                [row[key][percentile] or 0 for row in latency_rows],
                width=0.4,
                label=percentile.removesuffix("_ms"),
            )
        axis.set_xticks(list(positions), [_short(row["label"]) for row in latency_rows], fontsize=8)
        over = f" over {load['partitions']:,} partitions" if "partitions" in load else ""
        axis.set_title(f"latency at {load['rate']:,} records/s{over} (ms, lower is better)")
        axis.legend()
    for axis in [*axes[0][len(workloads) :], *axes[1][len(loads) :]]:
        axis.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _short(label: str) -> str:
    return label.replace(" ", "\n", 1)


def _colour(name: str) -> str:
    return {"ceiling": "grey", "mm2-alo": "tab:orange", "mm2-eos": "tab:red"}.get(name, "tab:blue")


def write(results: dict[str, Any], directory: Path, stamp: str) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{stamp}.json", directory / f"{stamp}.md", directory / f"{stamp}.png"]
    paths[0].write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(results), encoding="utf-8")
    chart(results, paths[2])
    return paths
