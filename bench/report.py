"""Results as JSON, a Markdown table with ratios, and a PNG chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Which MirrorMaker 2 row a contender is compared with.
_PEER = {"mirror-eos": "mm2-eos", "mirror-alo": "mm2-alo", "mm2-eos": "mm2-eos", "mm2-alo": "mm2-alo"}


def _ratio(value: float | None, reference: float | None) -> str:
    if value is None or not reference:
        return "-"
    return f"{value / reference:.2f}x"


def _number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def markdown(results: dict[str, Any]) -> str:
    rows = {row["name"]: row for row in results["contenders"]}
    ceiling = rows.get("ceiling", {})
    steady = results["steady"]
    lines = [
        f"Mode **{results['mode']}**, {results['machine']['cpus']} CPUs, Kafka {results['kafka_version']}, "
        f"mirror {results['mirror_commit']}, {results['started']}.",
        "",
        "| contender | workload | records/s | MB/s | vs MM2 (same mode) | vs ceiling "
        "| start-up s | CPU s / M records | peak RSS MB | complete |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, row in rows.items():
        for workload, result in row.get("catch_up", {}).items():
            peer = rows.get(_PEER.get(name, ""), {}).get("catch_up", {}).get(workload, {})
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
    lines += [
        "",
        "| contender | steady load | p50 ms | p99 ms | max ms | received | p99 vs MM2 | CPU s / M records "
        "| caught-up group: records re-read on target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        latency = row.get("latency")
        if latency is None:
            continue
        peer = rows.get(_PEER.get(name, ""), {}).get("latency", {})
        translation = row.get("translation") or {}
        if name == "ceiling":
            re_read = "-"
        elif translation.get("synced"):
            re_read = _number(translation.get("records_re_read"))
        else:
            re_read = "not synced"
        cells = [
            row["label"],
            f"{steady['rate']:,}/s x {steady['seconds']} s",
            _number(latency["p50_ms"], 1),
            _number(latency["p99_ms"], 1),
            _number(latency["max_ms"], 1),
            f"{latency['received']:,}/{latency['records']:,}",
            "-" if name == "ceiling" else _ratio(latency["p99_ms"], peer.get("p99_ms")),
            _number(latency.get("cpu_seconds_per_million"), 1),
            re_read,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _completeness(result: dict[str, Any]) -> str:
    verdict = result.get("verdict")
    if verdict is None:
        return "yes" if result.get("complete") else "NO"
    text = "yes" if result["complete"] else f"NO ({verdict['missing']:,} missing)"
    if verdict["duplicated"]:
        text += f", {verdict['duplicated']:,} duplicates"
    return text


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["contenders"]
    labels = [row["label"].replace(" ", "\n", 1) for row in rows]
    workloads = [w["name"] for w in results["workloads"]]
    figure, axes = plt.subplots(1, len(workloads) + 1, figsize=(6 * (len(workloads) + 1), 5))
    for axis, workload in zip(axes, workloads, strict=False):
        values = [row.get("catch_up", {}).get(workload, {}).get("megabytes_per_second", 0) for row in rows]
        axis.bar(labels, values, color=[_colour(row["name"]) for row in rows])
        axis.set_title(f"catch-up, {workload} values (MB/s, higher is better)")
        axis.tick_params(axis="x", labelsize=8)
    axis = axes[-1]
    latency_rows = [row for row in rows if row.get("latency")]
    positions = range(len(latency_rows))
    for offset, key in ((-0.2, "p50_ms"), (0.2, "p99_ms")):
        axis.bar(
            [p + offset for p in positions],
            [row["latency"][key] or 0 for row in latency_rows],
            width=0.4,
            label=key.removesuffix("_ms"),
        )
    axis.set_xticks(list(positions), [row["label"].replace(" ", "\n", 1) for row in latency_rows], fontsize=8)
    axis.set_title(f"end-to-end latency at {results['steady']['rate']:,} records/s (ms, lower is better)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _colour(name: str) -> str:
    return {"ceiling": "grey", "mm2-alo": "tab:orange", "mm2-eos": "tab:red"}.get(name, "tab:blue")


def write(results: dict[str, Any], directory: Path, stamp: str) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{stamp}.json", directory / f"{stamp}.md", directory / f"{stamp}.png"]
    paths[0].write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(results), encoding="utf-8")
    chart(results, paths[2])
    return paths
