"""The benchmark suite's report: a table of each measurement against its same-run reference, and a figure."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

__all__ = ["ms", "plot", "table"]


def ms(seconds: float) -> str:
    value = seconds * 1000
    return f"{value:.2f} ms" if abs(value) < 1 else f"{value:.1f} ms"


_SHORT = {
    "waiting_for_slot": "slot",
    "starting": "start",
    "thinking": "think",
    "running_code": "cell",
    "finishing": "finish",
}
"""The states of a fan-out child's timeline, as its row names them."""


def table(results: dict[str, Any]) -> Any:
    """The results as a rich `Table`: what, the measurement, and the same-run reference it is compared with."""
    from rich.table import Table

    rows = Table(title="freeact-sub benchmark", header_style="bold")
    rows.add_column("measure")
    rows.add_column("result", justify="right")
    rows.add_column("compared with", justify="right")
    names = {
        "kernel": "kernel, pool warm",
        "mcp": "kernel + 1 stdio MCP server, pools warm",
        "kernel_less": "kernel-less type, no pool",
    }
    if (waited := results.get("waits")) is not None:
        from bench.waits_bench import GOALS

        floor = statistics.median(waited["floor"]["wall"])
        for name, sample in waited.items():
            if name == "floor":
                continue
            wall = statistics.median(sample["wall"])
            cpu = f", {statistics.median(sample['cpu']):.2f} s CPU" if sample["cpu"] else ""
            wall_goal, cpu_goal = GOALS.get(name, (None, None))
            goals = [f"<= {wall_goal} s" if wall_goal is not None else "",
                     f"<= {cpu_goal} s CPU" if cpu_goal is not None else ""]
            met = (wall_goal is None or wall <= wall_goal) and (
                cpu_goal is None or (bool(sample["cpu"]) and statistics.median(sample["cpu"]) <= cpu_goal))
            goal = " and ".join(g for g in goals if g)
            rows.add_row(f"where a person waits: {name}", f"{wall:.2f} s{cpu}",
                         f"{wall / floor:.1f} x python's start; goal {goal}: {'met' if met else 'not met'}"
                         if goal else f"{wall / floor:.1f} x python's start")
    for kind, found in results["spawn"].items():
        rows.add_row(f"spawn: {names[kind]}", f"p50 {ms(found['p50'])} / p95 {ms(found['p95'])}", "")
    for row in results["fan_out"]:
        rows.add_row(
            f"fan-out: {row['children']} children x {row['cell']:g} s cell, bound {row['bound']}",
            f"{row['wall']:.2f} s",
            f"{row['ratio']:.2f} x the {row['floor']:.1f} s floor",
        )
        per_child = row["per_child"]
        where = " · ".join(
            f"{short} {per_child[state]:.2f}" for state, short in _SHORT.items() if per_child.get(state) is not None
        )
        rows.add_row("  per child, mean seconds", where, f"{row['lost']} children lost")
    if (budget := results.get("per_child")) is not None:
        from bench.child_budget import PHASES

        host, kernel = budget["host in all (main thread)"], budget["kernel side in all (kernels, zygote)"]
        floor = budget["floor host"] + budget["floor kernel side"]
        rows.add_row("per child, CPU ms (trivial cells): a child in all", f"{host + kernel:.1f} ms",
                     f"{(host + kernel) / floor:.2f} x a bare forked kernel's {floor:.1f} ms (goal <= 1.10 x)")
        rows.add_row("  host / kernel side", f"{host:.1f} / {kernel:.1f} ms",
                     f"floor {budget['floor host']:.1f} / {budget['floor kernel side']:.1f} ms")
        for name in PHASES:
            rows.add_row(f"  {name.strip()}" if not name.startswith(" ") else f"    {name.strip()}",
                         f"{budget[name]:.1f} ms", "")
    faulty = results["retries"]
    rows.add_row(
        f"fan-out over HTTP: {faulty['children']} children x {faulty['cell']:g} s cell, bound {faulty['bound']}, "
        "20 % 429 (Retry-After 0.2 s) + 5 % dropped streams",
        f"{faulty['wall']:.2f} s, {faulty['done']}/{faulty['children']} done",
        f"{faulty['ratio']:.2f} x the {faulty['clean_wall']:.2f} s without faults; {faulty['retries']} retries; "
        f"peak {faulty['peak_in_flight']} requests in flight (max {faulty['max_model_requests']})",
    )
    if (code := results.get("tasks_from_code")) is not None:
        rows.add_row(
            f"subagents from one cell (map_tasks): {code['children']} children x {code['cell']:g} s cell, "
            f"bound {code['bound']}",
            f"{code['code']['wall']:.2f} s, results ~{code['code']['results_tokens']:.0f} tokens",
            f"{code['wall_ratio']:.2f} x the wall and {code['token_ratio']:.2f} x the results tokens of "
            f"{code['children']} task calls ({code['calls']['wall']:.2f} s, ~{code['calls']['results_tokens']:.0f})",
        )
    if (traced := results.get("telemetry")) is not None:
        rows.add_row(
            f"fan-out with telemetry on: {traced['children']} children x {traced['cell']:g} s cell, "
            f"bound {traced['bound']}",
            f"{traced['on']['wall']:.2f} s, {traced['on']['cpu']:.2f} s host CPU",
            f"{traced['wall_ratio']:.3f} x the wall and {traced['cpu_ratio']:.3f} x the host CPU of telemetry off "
            f"({traced['off']['wall']:.2f} s, {traced['off']['cpu']:.2f} s); target <= 1.05",
        )
    approval = results["approval"]
    total, seen, started = (
        approval[key] for key in ("request_to_cell_start", "request_to_consumer", "decision_to_cell_start")
    )
    rows.add_row(
        "approval round trip: request -> decision -> cell starts",
        f"p50 {ms(total['p50'])} / p95 {ms(total['p95'])}",
        f"request to consumer {ms(seen['p50'])}, decision to cell start {ms(started['p50'])} (p50)",
    )
    cell = results["cell"]
    rows.add_row(
        "cell round trip (x = 1), our kernel client",
        ms(cell["ours"]),
        f"{cell['ratio']:.2f} x raw jupyter_client ({ms(cell['raw_jupyter_client'])})",
    )
    store = results["session"]
    rows.add_row(
        "agent round (model + cell), no session store",
        ms(store["round_without_store"]),
        f"{store['round_without_store'] / cell['ours']:.1f} x the bare cell",
    )
    share = store["in_store_per_round"] / store["round_without_store"]
    rows.add_row(
        "session store: its own time per round",
        ms(store["in_store_per_round"]),
        f"{share * 100:.1f} % of the round (with / without: {ms(store['round_with_store'])} / "
        f"{ms(store['round_without_store'])})",
    )
    rows.add_row(
        f"load a saved session of {store['load_messages']} messages",
        ms(store["load_history"]),
        f"as events: {ms(store['load_events'])}",
    )
    net = results["network"]
    if "skipped" in net:
        rows.add_row("sandbox proxy and limits", "not measured", net["skipped"])
        return rows
    rows.add_row(
        "50 MB download through the sandbox's proxy (plain HTTP / CONNECT tunnel)",
        f"{ms(net['proxy_download'])} / {ms(net['tunnel_download'])}",
        f"{net['proxy_download'] / net['direct_download']:.2f} / {net['tunnel_download'] / net['direct_download']:.2f}"
        f" x direct ({ms(net['direct_download'])})",
    )
    rows.add_row(
        "200 small requests through the sandbox's proxy",
        ms(net["proxy_small"]),
        f"{net['proxy_small'] / net['direct_small']:.2f} x direct ({ms(net['direct_small'])}); proxy CPU "
        f"{ms(net['proxy_cpu'])}",
    )
    rows.add_row(
        "spawn (forked, workspace) with its default limits",
        ms(net["spawn_with_limits"]),
        f"{(net['spawn_with_limits'] - net['spawn_without_limits']) * 1000:+.1f} ms over none",
    )
    return rows


def plot(results: dict[str, Any], path: Path) -> None:
    """One summary figure: spawn p50/p95, fan-out against its floor, approval round trip, per-cell overhead."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 3.4), layout="constrained")
    spawn_ax, fan_ax, approval_ax, cell_ax = fig.subplots(1, 4)
    kinds = list(results["spawn"])
    spawn_ax.bar(
        [k.replace("_", "-") for k in kinds],
        [results["spawn"][k]["p95"] * 1000 for k in kinds],
        color="#90caf9",
        label="p95",
    )
    spawn_ax.bar(
        [k.replace("_", "-") for k in kinds],
        [results["spawn"][k]["p50"] * 1000 for k in kinds],
        color="#1976d2",
        label="p50",
    )
    spawn_ax.set(title="spawn (ms)")
    spawn_ax.legend(frameon=False)
    rows = results["fan_out"]
    labels = [f"N={r['children']}" for r in rows]
    fan_ax.bar(labels, [r["wall"] for r in rows], color="#388e3c", label="wall")
    fan_ax.scatter(labels, [r["floor"] for r in rows], color="black", marker="_", s=400, label="floor", zorder=3)
    fan_ax.set(title="fan-out (s)")
    fan_ax.legend(frameon=False)
    approval = results["approval"]
    parts = ["request_to_consumer", "decision_to_cell_start", "request_to_cell_start"]
    approval_ax.bar(
        ["request\nto consumer", "decision\nto cell start", "request\nto cell start"],
        [approval[p]["p50"] * 1000 for p in parts],
        color="#f57c00",
    )
    approval_ax.set(title="approval round trip, p50 (ms)")
    cell, store = results["cell"], results["session"]
    cell_ax.bar(
        ["raw\nclient", "our\nclient", "agent\nround", "round\n+ store"],
        [
            cell["raw_jupyter_client"] * 1000,
            cell["ours"] * 1000,
            store["round_without_store"] * 1000,
            store["round_with_store"] * 1000,
        ],
        color=["#9e9e9e", "#00838f", "#00838f", "#00838f"],
    )
    cell_ax.set(title="per cell (ms)")
    load = results["machine"]["load"]
    fig.suptitle(f"freeact-sub benchmark — {results['machine']['cpus']} cores, load {load[0]:.1f} at the start")
    fig.savefig(path, dpi=110)
