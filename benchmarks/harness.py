"""`--harness`: real Claude Code and Codex CLI in a swarm `handoffd up` started
(docs/protocol.md §16), their model scripted on loopback (`testbed.models`).

- Idle: a handoff is queued for a harness waiting at its prompt; the latency runs from
  `HANDOFF QUEUED` to the model request that carries the typed wake-up.
- Busy: the harness is in a turn (its model's answers held back) when the handoff is
  queued; the latency runs from the end of that turn (its last answer sent whole) to the
  next model request (Claude Code: its Stop hook's reason; Codex: the wake-up typed once
  its notify has run and its screen shows the turn over).
- Lines typed into a busy harness: requests of a busy turn that carry a mail line (a line
  typed in joins the turn, or is queued behind it), and forced wake-ups: must be 0.
- Status lag: how long `status` (the daemon's `panes.json`, which it reads) is behind the
  pane in a slow turn typed in with no mail waiting: from its first model request (the
  harness busy) to `busy` there, and from its last answer sent to `idle` there (polled
  every 20 ms); a state never shown in time is counted as missed.
- The Stop hook's wall time, `handoffd hook stop` run as Claude Code runs it, half of the
  runs with mail waiting (it tells of it) and half without, the package byte-compiled.
- The Stop hook's wall time with a 50 MB transcript (docs/protocol.md §19): the turn it
  ends is read, not the file — and the first sight of such a file reads a bounded part of
  it (the rest at the next turns); the tokens it records are checked against the file's.
"""

from __future__ import annotations

import compileall
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import handoffd
from benchmarks import table
from benchmarks.scenario import BenchError, Report, Scenario, Target, progress
from benchmarks.table import percentile
from handoffd.wakeups.wake import TEXT as WAKE
from testbed import harnesses
from testbed.models import ModelServer, Request
from testbed.realswarm import AGENTS, BIN, HOOK_REASON, SLOW, RealSwarm, rules

API = {"coder": "anthropic", "cleaner": "openai"}
HOOK_TARGET_MS = 100.0  # the Stop hook's p99: what it may add to an agent's turn
HOOK_LIMIT_MS = 1000.0  # what a hook may take at all (docs/protocol.md §16)
TRANSCRIPT_MB = 50  # the long conversation's transcript the hook reads the last turn of
SLOW_ANSWER = 1.5  # seconds each answer of a busy turn is held back
WAIT = 90.0  # seconds any one step may take before the benchmark gives up
LAG_LIMIT = 15.0  # seconds after a turn's end by which `status` must say idle, or missed
NOTES = (
    "idle: HANDOFF QUEUED -> the model request carrying the typed wake-up (--idle-after 2",
    "  does not apply: a known harness is idle at once when its own markers say so).",
    "busy: the end of the turn (its last answer sent) -> the next model request; Claude",
    "  Code by its Stop hook, Codex by the wake-up typed when its turn is over.",
    "typed into busy: mail lines found in a busy turn's requests, and forced wake-ups.",
    "status lag: a slow turn typed in (no mail waits); its first model request -> `busy`",
    "  in what status reads, its last answer sent -> `idle` there; missed: never shown.",
    "Stop hook: `handoffd hook stop` wall time, stdin JSON, half with mail waiting, the",
    "  package byte-compiled; a bare interpreter's start-up measured beside it.",
    f"{TRANSCRIPT_MB} MB transcript: the hook at the end of a turn of a conversation that",
    "  long (its tokens checked); first sight: the hook's first read of such a file.",
)


@dataclass
class HarnessSizes:
    idle_samples: int = 10
    busy_samples: int = 5
    hook_runs: int = 60
    lag_samples: int = 5


@dataclass
class Measured:
    idle_ms: dict[str, list[float]] = field(default_factory=dict)
    busy_ms: dict[str, list[float]] = field(default_factory=dict)
    to_busy_ms: dict[str, list[float]] = field(default_factory=dict)  # status behind a pane
    to_idle_ms: dict[str, list[float]] = field(default_factory=dict)
    missed: dict[str, int] = field(default_factory=dict)  # state -> samples status never saw
    typed_into_busy: int = 0
    forced: int = 0
    hook_ms: list[float] = field(default_factory=list)
    python_ms: list[float] = field(default_factory=list)  # `python -c pass`, interleaved
    long_ms: list[float] = field(default_factory=list)  # the hook, a 50 MB transcript
    first_ms: float = 0.0  # its first read of that transcript


class Built:
    def __init__(self, base: str) -> None:
        self.base = Path(base)


class HarnessScenario(Scenario[HarnessSizes, Built, Measured]):
    name, key = "harness", "harness"
    full, quick = (
        HarnessSizes(),
        HarnessSizes(idle_samples=2, busy_samples=1, hook_runs=6, lag_samples=1),
    )
    tunable = ("idle_samples", "busy_samples", "hook_runs", "lag_samples")

    def build(self, base: str, sizes: HarnessSizes) -> Built:
        missing = [why for name in ("claude", "codex") if (why := harnesses.missing(name))]
        if missing:
            raise BenchError("; ".join(missing))
        return Built(base)

    def measure(self, built: Built, sizes: HarnessSizes) -> Measured:
        measured = Measured()
        compileall.compile_dir(os.path.dirname(handoffd.__file__), quiet=1)
        with ModelServer(rules(SLOW_ANSWER)) as server:
            swarm = RealSwarm(built.base / "swarm", server, tuple(AGENTS))
            swarm.base.mkdir()
            try:
                swarm.init()
                swarm.up("--idle-after", "2")
                for role in AGENTS:
                    swarm.wait_idle(role, WAIT)
                    progress(f"{role} ({AGENTS[role]}): {sizes.idle_samples} idle samples")
                    measured.idle_ms[role] = [idle(swarm, role) for _ in range(sizes.idle_samples)]
                    progress(f"{role} ({AGENTS[role]}): {sizes.lag_samples} status-lag samples")
                    for n in range(sizes.lag_samples):
                        lag(swarm, role, n, measured)
                    progress(f"{role} ({AGENTS[role]}): {sizes.busy_samples} busy samples")
                    measured.busy_ms[role] = [busy(swarm, role, n)
                                              for n in range(sizes.busy_samples)]  # fmt: skip
                measured.typed_into_busy = typed_into_busy(server)
                measured.forced = len(swarm.log("wake_forced"))
            finally:
                swarm.down()
            progress(f"the Stop hook, {sizes.hook_runs} runs")
            measured.hook_ms, measured.python_ms = stop_hook(swarm, sizes.hook_runs)
            progress(f"the Stop hook at the end of a turn of a {TRANSCRIPT_MB} MB transcript")
            measured.first_ms, measured.long_ms = long_transcript(swarm, sizes.hook_runs)
        return measured

    def figures(self, measured: Measured, sizes: HarnessSizes) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for role, harness in AGENTS.items():
            for kind, samples in (("idle", measured.idle_ms[role]),
                                  ("busy", measured.busy_ms[role])):  # fmt: skip
                found[f"{harness}_{kind}_p50_ms"] = percentile(samples, 0.5)
                found[f"{harness}_{kind}_p99_ms"] = percentile(samples, 0.99)
            for kind, samples in (("to_busy", measured.to_busy_ms.get(role, [])),
                                  ("to_idle", measured.to_idle_ms.get(role, []))):  # fmt: skip
                found[f"{harness}_status_{kind}_p50_ms"] = percentile(samples, 0.5)
                found[f"{harness}_status_{kind}_p99_ms"] = percentile(samples, 0.99)
        found["status_missed_busy"] = measured.missed.get("busy", 0)
        found["status_missed_idle"] = measured.missed.get("idle", 0)
        found["typed_into_busy"] = measured.typed_into_busy
        found["forced"] = measured.forced
        found["stop_hook_p50_ms"] = percentile(measured.hook_ms, 0.5)
        found["stop_hook_p99_ms"] = percentile(measured.hook_ms, 0.99)
        found["python_p50_ms"] = percentile(measured.python_ms, 0.5)
        found["python_p99_ms"] = percentile(measured.python_ms, 0.99)
        found["stop_hook_50mb_p50_ms"] = percentile(measured.long_ms, 0.5)
        found["stop_hook_50mb_p99_ms"] = percentile(measured.long_ms, 0.99)
        found["stop_hook_50mb_first_ms"] = measured.first_ms
        return found

    def targets(self, figures: Any) -> list[Target]:
        return [
            Target("typed_into_busy", figures["typed_into_busy"], "<=", 0, " lines", "g"),
            Target("forced", figures["forced"], "<=", 0, " wake-ups", "g"),
            Target("stop_hook_p50", figures["stop_hook_p50_ms"], "<=", HOOK_TARGET_MS, " ms"),
            Target("stop_hook_p99", figures["stop_hook_p99_ms"], "<=", HOOK_TARGET_MS, " ms"),
            Target("stop_hook_50mb_p99", figures["stop_hook_50mb_p99_ms"], "<=", HOOK_TARGET_MS,
                   " ms"),
            Target("stop_hook_50mb_first", figures["stop_hook_50mb_first_ms"], "<=",
                   HOOK_LIMIT_MS, " ms"),
        ]  # fmt: skip

    def render(self, report: Report) -> str:
        m, row = report.figures, table.Rows(report)
        rows = []
        for harness in ("claude", "codex"):
            for kind in ("idle", "busy"):
                rows.append(row(f"{harness} {kind}: mail to model, p50 / p99",
                                f"{m[f'{harness}_{kind}_p50_ms']:.0f} / "
                                f"{m[f'{harness}_{kind}_p99_ms']:.0f} ms"))  # fmt: skip
        for harness in ("claude", "codex"):
            for kind, word in (("to_busy", "busy"), ("to_idle", "idle")):
                rows.append(row(f"{harness}: status shows {word} after the pane, p50 / p99",
                                f"{m[f'{harness}_status_{kind}_p50_ms']:.0f} / "
                                f"{m[f'{harness}_status_{kind}_p99_ms']:.0f} ms"))  # fmt: skip
        rows.append(
            row(
                "turns status never showed busy / idle",
                f"{m['status_missed_busy']} / {m['status_missed_idle']}",
            )
        )
        rows += [
            row("lines typed into a busy harness", f"{m['typed_into_busy']}", "typed_into_busy"),
            row("wake-ups forced", f"{m['forced']}", "forced"),
            row("Stop hook wall time, p50", f"{m['stop_hook_p50_ms']:.1f} ms", "stop_hook_p50"),
            row("Stop hook wall time, p99", f"{m['stop_hook_p99_ms']:.1f} ms", "stop_hook_p99"),
            row(
                "  python -c pass beside it, p50 / p99",
                f"{m['python_p50_ms']:.1f} / {m['python_p99_ms']:.1f} ms",
            ),
            row(f"Stop hook, {TRANSCRIPT_MB} MB transcript, p50 / p99",
                f"{m['stop_hook_50mb_p50_ms']:.1f} / {m['stop_hook_50mb_p99_ms']:.1f} ms",
                "stop_hook_50mb_p99"),
            row("  its first sight of the transcript", f"{m['stop_hook_50mb_first_ms']:.1f} ms",
                "stop_hook_50mb_first"),
        ]  # fmt: skip
        return table.render(report, rows, NOTES)


def idle(swarm: RealSwarm, role: str) -> float:
    """One idle sample (ms): queued to the model request of the typed wake-up."""
    name = swarm.send(role, "idle sample")
    sent = time.time()
    woken = wait_turn(swarm.server, API[role], lambda r: r.at >= sent and woken_by(r, WAKE),
                      "the typed wake-up")  # fmt: skip
    settle(swarm, role, name)
    return (woken.at - sent) * 1000


def lag(swarm: RealSwarm, role: str, n: int, measured: Measured) -> None:
    """One status-lag sample: a slow turn typed in (no mail: the daemon has no reason of
    its own to look), from its first model request to `busy` in what `status` reads, and
    from its last answer sent to `idle` there.  A state the daemon never saw in time (a
    whole turn passing between two of its reads) is counted as missed."""
    prompt = f"{SLOW} lag {role} {n}"
    swarm.type(role, prompt)
    first = wait_turn(swarm.server, API[role], lambda r: any(prompt in t for t in r.texts),
                      "the slow turn")  # fmt: skip
    seen = status_lag(swarm, role, "busy", first.at, until=lambda: _ended(swarm, role, prompt))
    _record(measured.to_busy_ms.setdefault(role, []), measured.missed, "busy", seen)
    done = None
    deadline = time.monotonic() + WAIT
    while done is None and time.monotonic() < deadline:
        done = _ended(swarm, role, prompt)
        time.sleep(0.01)
    if done is None:
        raise BenchError(f"{role}'s slow turn never ended")
    seen = status_lag(swarm, role, "idle", done, until=lambda: time.time() - done > LAG_LIMIT)
    _record(measured.to_idle_ms.setdefault(role, []), measured.missed, "idle", seen)
    swarm.wait_idle(role, WAIT)


def _record(samples: list[float], missed: dict[str, int], state: str, seen: float | None) -> None:
    if seen is None:
        missed[state] = missed.get(state, 0) + 1
    else:
        samples.append(seen)


def _ended(swarm: RealSwarm, role: str, prompt: str) -> float | None:
    """When the slow turn `prompt` started had its last answer sent whole, if it has."""
    turn = [r for r in swarm.server.turns(API[role]) if any(prompt in t for t in r.texts)]
    last = turn[-1] if turn else None
    if last is not None and last.done_at is not None and last.outputs:
        return last.done_at
    return None


def status_lag(swarm: RealSwarm, role: str, state: str, since: float, until: Any) -> float | None:
    """Ms from `since` (wall clock) until what `status` reads of `role`'s pane says `state`
    (a change at or after `since`), polled every 20 ms; None once `until()` holds first."""
    from handoffd.wakeups import panes

    while True:
        row = panes.load(str(swarm.root)).get(role, {})
        at = row.get("since")
        if row.get("pane") == state and isinstance(at, float) and at >= since - 0.5:
            return max(0.0, time.time() - since) * 1000
        if until():
            return None
        time.sleep(0.02)


def busy(swarm: RealSwarm, role: str, n: int) -> float:
    """One busy sample (ms): the end of a busy turn to the next model request."""
    prompt = f"{SLOW} {role} {n}"
    swarm.type(role, prompt)
    wait_turn(swarm.server, API[role], lambda r: any(prompt in t for t in r.texts), "busy turn")
    name = swarm.send(role, "busy sample")
    line = HOOK_REASON if AGENTS[role] == "claude" else WAKE
    told = wait_turn(swarm.server, API[role], lambda r: woken_by(r, line) and not r.outputs
                     and _after(swarm, r, prompt), "the mail after the busy turn")  # fmt: skip
    last = [r for r in swarm.server.turns(API[role]) if any(prompt in t for t in r.texts)][-1]
    settle(swarm, role, name)
    if last.done_at is None:
        raise BenchError("the busy turn's last answer was never sent")
    return (told.at - last.done_at) * 1000


def _after(swarm: RealSwarm, request: Request, prompt: str) -> bool:
    """Whether `request` comes after every request of the turn `prompt` started."""
    turn = [r.at for r in swarm.server.turns() if any(prompt in t for t in r.texts)]
    return bool(turn) and request.at > max(turn)


def woken_by(request: Request, line: str) -> bool:
    return any(line in text for text in request.texts)


def settle(swarm: RealSwarm, role: str, name: str) -> None:
    deadline = time.monotonic() + WAIT
    while name not in swarm.completed(role):
        if time.monotonic() > deadline:
            raise BenchError(f"{role} never finished {name}:\n{swarm.screen(role)}")
        time.sleep(0.05)
    swarm.wait_idle(role, WAIT)


def wait_turn(server: ModelServer, api: str, found: Any, what: str) -> Request:
    try:
        return server.wait(lambda r: r.api == api and not r.side and found(r), WAIT, what)
    except TimeoutError as error:
        raise BenchError(str(error)) from None


def typed_into_busy(server: ModelServer) -> int:
    """Requests of a busy turn that also carry a mail line."""
    return sum(
        1 for r in server.turns()
        if any(SLOW in t for t in r.texts) and any(WAKE in t or HOOK_REASON in t for t in r.texts)
    )  # fmt: skip


def stop_hook(swarm: RealSwarm, runs: int) -> tuple[list[float], list[float]]:
    """The wall time (ms) of `handoffd hook stop` in the coder's worktree, as Claude Code
    runs it (the swarm down: nothing else moves the mail): half the runs with nothing
    waiting, half with mail waiting and nothing in process (it tells of it, and writes
    H/announced the first time); and, interleaved, a bare `python -c pass`: on a loaded
    machine the interpreter's own start-up is most of a hook's time."""
    command = [os.path.join(BIN, "handoffd"), "hook", "stop", "--root", str(swarm.root)]
    data = json.dumps({"hook_event_name": "Stop", "stop_hook_active": False,
                       "cwd": str(swarm.worktree("coder"))}).encode()  # fmt: skip
    env = {**swarm.env, "SWARMFORGE_ROLE": "coder"}
    times, python = [], []
    for n in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        python.append((time.perf_counter() - started) * 1000)
        if n == runs // 2:  # mail waits from now on
            swarm.helper("QA", "swarm_handoff", str(_draft(swarm)))
            swarm.handoffd("run", "--once", str(swarm.root))
        started = time.perf_counter()
        said = subprocess.run(command, cwd=swarm.worktree("coder"), env=env, input=data,
                              capture_output=True, timeout=10, check=True)  # fmt: skip
        times.append((time.perf_counter() - started) * 1000)
        if n == runs // 2 and b'"decision": "block"' not in said.stdout:
            raise BenchError(f"the Stop hook did not tell of the mail: {said.stdout!r}")
    return times, python


def _draft(swarm: RealSwarm) -> Path:
    draft = swarm.base / "hook-draft.txt"
    draft.write_text("type: note\nto: coder\npriority: 50\nmessage: for the hook\n")
    return draft


def long_transcript(swarm: RealSwarm, runs: int) -> tuple[float, list[float]]:
    """The wall time (ms) of `handoffd hook stop` given a transcript of TRANSCRIPT_MB
    megabytes: its first read of it (bounded: the rest follows at the next turns), then
    `runs` turns' ends, each after one more turn written.  What the hook recorded must be
    every token the transcript holds, each message once."""
    transcript = swarm.base / "long-session.jsonl"
    written = write_transcript(transcript, TRANSCRIPT_MB * 1024 * 1024)
    command = [os.path.join(BIN, "handoffd"), "hook", "stop", "--root", str(swarm.root)]
    data = json.dumps({"hook_event_name": "Stop", "stop_hook_active": False,
                       "transcript_path": str(transcript),
                       "cwd": str(swarm.worktree("coder"))}).encode()  # fmt: skip
    env = {**swarm.env, "SWARMFORGE_ROLE": "coder"}
    records = swarm.handoffs("coder") / "usage.jsonl"
    before = len(records.read_text().splitlines()) if records.exists() else 0

    def hook() -> float:
        started = time.perf_counter()
        subprocess.run(command, cwd=swarm.worktree("coder"), env=env, input=data,
                       capture_output=True, timeout=10, check=True)  # fmt: skip
        return (time.perf_counter() - started) * 1000

    first = hook()
    for _ in range(16):  # caught up: the whole file read
        if _offset(swarm) >= transcript.stat().st_size:
            break
        hook()
    times = []
    for _ in range(runs):
        written = [a + b for a, b in zip(written, write_transcript(transcript, 0, turns=1),
                                         strict=True)]  # fmt: skip
        times.append(hook())
    lines = [json.loads(line) for line in records.read_text().splitlines()[before:]]
    got = [sum(int(line[kind]) for line in lines)
           for kind in ("input", "output", "cache_read", "cache_write")]  # fmt: skip
    if got != written:
        raise BenchError(f"the Stop hook recorded {got} tokens; the transcript holds {written}")
    return first, times


def _offset(swarm: RealSwarm) -> int:
    path = swarm.handoffs("coder") / "usage.offset"
    return int(json.loads(path.read_text())["offset"]) if path.exists() else 0


def write_transcript(path: Path, size: int, turns: int = 0) -> list[int]:
    """Append Claude Code's lines of turns to `path` until it is `size` bytes (or `turns`
    turns more): a tool's result, then a message of two blocks written as two lines of one
    id; the tokens they hold (input, output, cache read, cache write), each message once."""
    spent = {"input_tokens": 3, "output_tokens": 200, "cache_read_input_tokens": 40_000,
             "cache_creation_input_tokens": 500}  # fmt: skip
    total, done = [0, 0, 0, 0], 0
    length = path.stat().st_size if path.exists() else 0
    with path.open("a", encoding="utf-8") as file:
        while (length < size) if not turns else done < turns:
            ident = f"msg_{length}_{done}"
            result = {"type": "tool_result", "tool_use_id": ident, "content": "x" * 8000}
            lines = [{"type": "user", "message": {"role": "user", "content": [result]}}]
            said = {"type": "text", "text": "y" * 600}
            call = {"type": "tool_use", "id": ident, "name": "Bash", "input": {}}
            for block in (said, call):
                message = {"id": ident, "role": "assistant", "content": [block], "usage": spent}
                lines.append({"type": "assistant", "requestId": ident, "message": message})
            text = "".join(json.dumps(line) + "\n" for line in lines)
            file.write(text)
            length += len(text)
            done += 1
            total = [t + n for t, n in zip(total, spent.values(), strict=True)]
    return total
