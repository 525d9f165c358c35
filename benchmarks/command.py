"""`handoffd bench`, and `python -m benchmarks` from a checkout: the options, the scenario
they choose (the full run unless one is named), and what is printed — the scenario's table,
or with `--json-only` its JSON line; `--json FILE` also writes the JSON there."""

from __future__ import annotations

import json
from typing import Any

import click

from benchmarks.board import Board
from benchmarks.digest import Digest
from benchmarks.harness import HarnessScenario
from benchmarks.hosts import Hosts
from benchmarks.metrics import Metrics
from benchmarks.panes import Panes
from benchmarks.pool import Pool
from benchmarks.queue import Pickup, Queue
from benchmarks.scenario import BenchError, Scenario, run
from benchmarks.startup import StartupScenario
from benchmarks.swarm import IdleSwarm
from benchmarks.web import Web
from handoffd.adapters.commands import Number

ONE_OF = ("board", "digest", "web", "metrics", "pickup", "startup", "hosts", "panes", "harness",
          "pool", "swarm")  # fmt: skip
SCENARIOS: dict[str, type[Scenario[Any, Any, Any]]] = {
    "queue": Queue, "board": Board, "digest": Digest, "web": Web, "pickup": Pickup,
    "startup": StartupScenario, "hosts": Hosts, "panes": Panes, "harness": HarnessScenario,
    "pool": Pool, "metrics": Metrics, "swarm": IdleSwarm,
}  # fmt: skip


@click.command()
@click.option("--quick", is_flag=True, help="Tiny sizes: checks the benchmark runs, not speed.")
@click.option("--handoffs", type=click.IntRange(1), help="Backlog size (2 copies each) [1000].")
@click.option("--latency-samples", type=click.IntRange(1), help="Pickup samples [200].")
@click.option("--idle-seconds", type=Number(0.5), help="Idle window [15].")
@click.option("--startup-runs", type=click.IntRange(1), help="Runs of each command [20].")
@click.option(
    "--limit-files",
    type=click.IntRange(1),
    help="Files of each disk-limit loop, run before and after each drain [1000].",
)
@click.option(
    "--history",
    "histories",
    type=click.IntRange(1),
    multiple=True,
    help="History sizes for the growth runs, repeatable [10000, 50000].",
)
@click.option("--board-cards", type=click.IntRange(1), help="Open cards of section 7 [1000].")
@click.option("--board-history", type=click.IntRange(0), help="Its completed cards [50000].")
@click.option(
    "--swarm-size",
    "swarms",
    type=click.IntRange(1),
    multiple=True,
    help="Panes of each idle swarm of section 8, repeatable [2, 32].",
)
@click.option("--dir", "directory", type=click.Path(file_okay=False), help="Where to build.")
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, writable=True),
    help="Also write every figure as JSON to this file.",
)
@click.option("--json-only", is_flag=True, help="Print only the JSON (one line), no table.")
@click.option("--keep", is_flag=True, help="Keep the temp dir.")  # fmt: skip
@click.option("--board", is_flag=True, help="Only the board: status --json against its floor.")
@click.option("--digest", is_flag=True, help="Only the digest scenario (docs/protocol.md §11).")
@click.option("--web", is_flag=True, help="Only the web board: its page against status --json.")
@click.option("--metrics", is_flag=True,
              help="Only the swarm's numbers: /metrics against status --json.")  # fmt: skip
@click.option("--pickup", is_flag=True, help="Only section 3: pickup latency of both writers.")
@click.option("--startup", is_flag=True, help="Only section 4: helper start-up against python.")
@click.option(
    "--hosts",
    is_flag=True,
    help="Only the swarm across two hosts over a local nats-server (the nats extra): "
    "cross-host pickup beside local, the drain from one host to the other.",
)
@click.option(
    "--panes",
    is_flag=True,
    help="Only pickup latency with 10 busy panes against quiet ones (wake-ups wait for idle).",
)
@click.option(
    "--harness",
    is_flag=True,
    help="Only real Claude Code and Codex (installed by .ci/harnesses): mail-to-model "
    "latency idle and busy, lines typed into busy panes, the Stop hook's wall time.",
)
@click.option(
    "--pool",
    is_flag=True,
    help="Only pools (docs/protocol.md §17): 4 members draining 200 tasks against the ideal, "
    "claim conflicts and a lost race's cost, status with a pool of 32 against without.",
)
@click.option(
    "--swarm",
    is_flag=True,
    help="Only the idle swarm: the CPU a daemon and its tmux cost with 2 and 32 panes to "
    "watch, mail waiting in each.",
)
@click.option("--idle-samples", type=click.IntRange(1), help="--harness: idle samples [10].")
@click.option("--busy-samples", type=click.IntRange(1), help="--harness: busy samples [5].")
@click.option("--hook-runs", type=click.IntRange(2), help="--harness: Stop hook runs [60].")
@click.option("--lag-samples", type=click.IntRange(1), help="--harness: status-lag samples [5].")
def main(
    quick: bool,
    directory: str | None,
    json_path: str | None,
    json_only: bool,
    keep: bool,
    **given: Any,
) -> None:
    """Measure the disk's limit, drain, pickup latency, start-up, idle cost and growth.
    A run exits 1 when a figure misses its target; --quick gives no verdict."""
    named = [name for name in ONE_OF if given.pop(name)]
    if len(named) > 1:
        flags = ", ".join(f"--{name}" for name in ONE_OF)
        raise click.UsageError(f"give at most one of {flags}: each runs one scenario alone")
    scenario = SCENARIOS[named[0] if named else "queue"]()
    chosen = {key: value for key, value in given.items() if value not in (None, ())}
    for key in ("histories", "swarms"):
        if key in chosen:
            chosen[key] = tuple(chosen[key])
    try:
        report = run(scenario, scenario.sizes(quick, chosen), quick, directory, keep)
    except BenchError as error:
        raise click.ClickException(str(error)) from None
    data = json.dumps(report.as_json(), sort_keys=True)
    click.echo(data if json_only else scenario.render(report))
    if json_path:
        with open(json_path, "w", encoding="utf-8") as file:
            file.write(data + "\n")
        if not json_only:
            click.echo(f"JSON: {json_path}")
    if not quick and not report.all_pass:
        raise SystemExit(1)
