"""Real Claude Code driven by `handoffd up` (docs/protocol.md §16), its model scripted on
loopback: every assertion rests on a request the harness itself made to the model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from handoffd.adapters.hooks import CONTINUE
from handoffd.core import handoff as hf
from testbed.models import Call
from tests.real_support import (
    HOOK_REASON,
    RULES,
    SLOW,
    WAKE,
    RealSwarm,
    Request,
    Rule,
    a_persons_text,
    idle_in_status,
    no_line_typed_into,
    outputs_hold,
    real,
    real_swarm,
    releases,
    round_trips,
    sent_while_busy,
    turn,
    typed_exactly,
    wait,
)

TYPED = ("typed", True, False)  # a wake-up's via, submitted and forced
pytestmark = [pytest.mark.slow, real("claude")]
CLAUDE = "anthropic"


def ident(name: str) -> str:
    parsed = hf.parse_name(name)
    assert parsed is not None
    return parsed.id


def settled(swarm: RealSwarm, name: str) -> None:
    """The role took `name` and finished it, and its harness is idle again."""
    wait(lambda: name in swarm.completed("coder"), 60, f"{name} completed")
    swarm.wait_idle("coder")


@pytest.mark.parametrize("version", releases("claude"))
def test_each_claude_code_release_starts_under_up_and_takes_mail_once(
    tmp_path: Path, version: str
) -> None:
    """`up` starts the release and installs its hooks; mail queued before `up` makes
    exactly one round trip, typed once its screen shows it idle (every release from 2.0
    draws the box the profile reads), and `status` shows the role idle."""
    queued: dict[str, str] = {}

    def before_up(swarm: RealSwarm) -> None:
        queued["name"] = swarm.send("coder", "queued before up")

    with real_swarm(tmp_path, ("coder",), before_up, versions={"coder": version}) as swarm:
        assert f"release: coder: claude {version}" in swarm.up_output, swarm.up_output
        assert "hooks: coder: changed: " in swarm.up_output
        [wake] = round_trips(swarm, "coder", CLAUDE, [queued["name"]])
        assert wake["via"] == "typed"
        assert all(typed_exactly(r, WAKE) for r in swarm.server.turns(CLAUDE) if r.rule == WAKE
                   and not r.outputs)  # fmt: skip
        idle_in_status(swarm, "coder", 30)


def test_claude_code_takes_mail_queued_before_up_each_idle_wake_up_resume_and_mcp(
    tmp_path: Path,
) -> None:
    """The start-up race: mail waiting when `up` starts the swarm reaches the model once
    the harness is ready.  A wake-up into an idle pane is submitted (no C-j: no newline
    before it) and leaves the box empty.  SessionStart gives a cleared conversation
    `resume`'s lines.  `up --mcp` gives the model handoffd's tools for its role."""
    queued: dict[str, str] = {}
    rules = [*RULES, Rule("AFTER-CLEAR", [], say="Fresh start."),
             Rule("CALL-MCP", [Call("mcp__handoffd__heartbeat")], say="Called.")]  # fmt: skip

    def before_up(swarm: RealSwarm) -> None:
        queued["name"] = swarm.send("coder", "queued before up")

    with real_swarm(tmp_path, ("coder",), before_up, ("--mcp",), rules) as swarm:
        server = swarm.server
        assert "hooks: coder: changed: " in swarm.up_output
        took = turn(server, CLAUDE, lambda r: outputs_hold(r, queued["name"]),
                    "taking the mail queued before up")  # fmt: skip
        assert typed_exactly(took, WAKE), took.texts[-1][-300:]
        assert server.turns(CLAUDE)[0].holds(CONTINUE)  # the SessionStart hook at launch
        settled(swarm, queued["name"])

        idle = swarm.send("coder", "sent while idle")
        turn(server, CLAUDE, lambda r: outputs_hold(r, idle), "taking the mail sent while idle")
        settled(swarm, idle)
        assert swarm.look("coder") == ("idle", "")
        wakes = swarm.wakes("coder")
        assert [(w["via"], w["submitted"], w["forced"]) for w in wakes] == [TYPED] * 2
        assert swarm.log("wake_unsubmitted") == [] and swarm.log("wake_forced") == []
        assert all(typed_exactly(r, WAKE) for r in server.turns(CLAUDE) if r.rule == WAKE)

        lines = swarm.helper("coder", "resume").stdout.splitlines()
        assert lines and lines[0].startswith("RESUMING: coder")
        swarm.type("coder", "/clear", command=True)
        swarm.wait_idle("coder")
        swarm.type("coder", "AFTER-CLEAR")
        fresh = turn(server, CLAUDE, lambda r: any("AFTER-CLEAR" in t for t in r.texts),
                     "the first prompt after /clear")  # fmt: skip
        assert all(fresh.holds(line) for line in [*lines, CONTINUE]), lines

        swarm.wait_idle("coder")
        swarm.type("coder", "CALL-MCP")
        beat = swarm.handoffs("coder") / "heartbeat"
        called = turn(server, CLAUDE, lambda r: outputs_hold(r, f"HEARTBEAT: {beat}"),
                      "the answer of handoffd's heartbeat tool")  # fmt: skip
        assert called.holds("search for") and called.holds("mcp__handoffd__ready_for_next")


def test_mail_for_a_busy_claude_code_is_never_typed_in_and_its_stop_hook_tells_of_it_once(
    tmp_path: Path,
) -> None:
    """Mail arriving while the harness works is never typed into it, not even after
    --idle-wait (1 s here): once its Stop hook has run, the role is hooked, and that hook
    tells the agent of the mail at the end of the turn.  A file the agent does not take
    is told of once, never in a loop, and the telling counts as a wake-up `via: hook`."""
    with real_swarm(tmp_path, ("coder",), options=("--idle-wait", "1")) as swarm:
        server = swarm.server
        busy, told = told_while_busy(swarm)
        assert not any(WAKE in t for t in told.texts)
        settled(swarm, busy)
        assert no_line_typed_into(server, SLOW, WAKE)
        assert [w for w in swarm.wakes("coder") if w.get("via") == "typed"] == []
        wait(lambda: [w for w in swarm.wakes("coder") if w.get("via") == "hook"], 10,
             "the daemon to count the hook's telling as a wake-up")  # fmt: skip

        swarm.type("coder", f"{SLOW} again")
        turn(server, CLAUDE, lambda r: any(f"{SLOW} again" in t for t in r.texts), "slow again")
        ignored = swarm.send("coder", "left waiting")
        server.script(Rule(ident(ignored), [], say="Not now."))  # the agent does not take it
        told = turn(server, CLAUDE, lambda r: any(ident(ignored) in t for t in r.texts),
                    "the hook telling of the file the agent leaves")  # fmt: skip
        idle_mark = swarm.handoffs("coder") / "idle"
        wait(lambda: os.stat(idle_mark).st_mtime > told.at, 30, "the Stop hook after 'Not now.'")
        swarm.wait_idle("coder")
        assert sum(any(ident(ignored) in t for t in r.texts) for r in server.turns(CLAUDE)) == 1
        assert ignored in os.listdir(swarm.handoffs("coder") / "inbox" / "new")
        assert swarm.log("wake_forced") == []
        wait(lambda: len([w for w in swarm.wakes("coder") if w.get("via") == "hook"]) == 2, 10,
             "the daemon to count the second telling")  # fmt: skip
        status = json.loads(swarm.handoffd("status", "--json", str(swarm.root)).stdout)
        card = next(c for c in status if c["card"].startswith(ident(ignored)))
        assert card["wakes"]["via"] == "hook"


def test_a_persons_half_sentence_in_the_box_of_claude_code_is_never_sent_with_a_wake_up(
    tmp_path: Path,
) -> None:
    """Text in the box that handoffd did not type is a person at work: the wake-up waits,
    --idle-wait or not, until they empty it (tests/real_support.py `a_persons_text`)."""
    with real_swarm(tmp_path, ("coder",), options=("--idle-wait", "1")) as swarm:
        a_persons_text(swarm, "coder")


def test_the_stop_hooks_mail_notice_is_shown_as_feedback_not_as_a_problem(
    tmp_path: Path,
) -> None:
    """Claude Code 2.1.332 shows the Stop hook's `additionalContext` as `Stop hook says: …`
    and goes on with it; the block form it showed as `Stop hook reported a problem`, with
    `stop hook problem` in its footer (docs/protocol.md §16).  What a person sees is the
    pane itself."""
    with real_swarm(tmp_path, ("coder",), options=("--idle-wait", "1")) as swarm:
        busy, _ = told_while_busy(swarm)
        settled(swarm, busy)
        swarm.wait_idle("coder")
        shown = swarm.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t",
                           f"={swarm.session('coder')}:")  # fmt: skip
        assert "Stop hook says: You have 1 handoff(s) waiting" in shown, shown
        assert "reported a problem" not in shown and "stop hook problem" not in shown, shown


def told_while_busy(swarm: RealSwarm) -> tuple[str, Request]:
    """Mail sent to a hooked coder during a slow turn (`sent_while_busy`); its name and the
    request in which the Stop hook told the agent of it."""
    busy = sent_while_busy(swarm, "coder")
    told = turn(swarm.server, CLAUDE, lambda r: any(HOOK_REASON in t and ident(busy) in t
                                                    for t in r.texts),
                "the Stop hook's reason")  # fmt: skip
    return busy, told
