"""Support for the tests that drive real Claude Code and Codex (docs/protocol.md §16): a swarm
of them against a scripted model server, and what every such test asks of it.

They run only where `.ci/harnesses` installed the pinned harnesses (else they skip, saying
what to run), and each costs tens of seconds: few tests, each covering a whole story.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from handoffd.harness import profiles
from handoffd.wakeups.wake import TEXT as WAKE
from testbed import harnesses
from testbed.models import ModelServer, Request, Rule
from testbed.realswarm import AGENTS, HOOK_REASON, SLOW, RealSwarm, rules
from tests.conftest import wait_for

__all__ = ["HOOK_REASON", "SLOW", "WAKE", "RealSwarm", "Request", "Rule", "a_persons_text",
           "real", "real_swarm", "releases", "typed_exactly"]  # fmt: skip

RULES = rules()


def real(*names: str) -> pytest.MarkDecorator:
    """Skip unless every harness of `names` is installed at its pinned release."""
    missing = [why for name in names if (why := harnesses.missing(name))]
    return pytest.mark.skipif(bool(missing), reason="; ".join(missing))


def releases(name: str) -> list[Any]:
    """Parameters of a test run against each release of harness `name` in
    testbed/harnesses.tsv, its pinned one first: each skips unless it is installed."""
    found = []
    for pin in harnesses.releases(name):
        why = harnesses.missing(name, pin.version)
        skip = pytest.mark.skipif(bool(why), reason=why or "")
        found.append(pytest.param(pin.version, id=f"{name}-{pin.version}", marks=skip))
    return found


@contextmanager
def real_swarm(
    base: Path, roles: tuple[str, ...], before_up: Callable[[RealSwarm], None] | None = None,
    options: tuple[str, ...] = (), rules: list[Rule] | None = None,
    versions: dict[str, str] | None = None,
) -> Iterator[RealSwarm]:  # fmt: skip
    """A swarm of `roles` (of coder: Claude Code, cleaner: Codex) and the sender's shell, up,
    with the model scripted by `rules`; `before_up` runs once the project is laid out;
    `versions` runs a role's harness at another release than its pinned one."""
    with ModelServer(rules if rules is not None else RULES, log=str(base / "model.jsonl"),
                     bodies=True) as server:  # fmt: skip
        swarm = RealSwarm(base, server, roles, versions)
        try:
            swarm.init()
            if before_up is not None:
                before_up(swarm)
            swarm.up("--idle-after", "2", *options)
            yield swarm
        finally:
            swarm.down()


def turn(server: ModelServer, api: str, found: Callable[[Request], bool], what: str,
         timeout: float = 60.0) -> Request:  # fmt: skip
    """The first model request of harness `api` (`anthropic`, `openai`) for which `found`
    holds: the proof that the harness made it."""
    return server.wait(lambda r: r.api == api and not r.side and found(r), timeout, what)


def typed_exactly(request: Request, text: str) -> bool:
    """Whether the request carries `text` as a prompt of its own, exactly: no newline left
    before it by a C-j (docs/protocol.md §16)."""
    body = json.dumps(request.body, ensure_ascii=False)
    return f'"text": {json.dumps(text, ensure_ascii=False)}' in body


def outputs_hold(request: Request, text: str) -> bool:
    return any(text in output for output in request.outputs)


def api_of(role: str) -> str:
    return "anthropic" if AGENTS[role] == "claude" else "openai"


def no_line_typed_into(server: ModelServer, trigger: str, *lines: str) -> bool:
    """Whether no request of the turn `trigger` started also carries one of `lines`: a line
    typed into a busy harness joins its running turn (Codex) or is sent with it (Claude
    Code's queue)."""
    return not any(
        any(trigger in t for t in r.texts) and any(line in t for t in r.texts for line in lines)
        for r in server.turns()
    )


def sent_while_busy(swarm: RealSwarm, role: str) -> str:
    """A warm-up turn of `role` (its Stop hook or notify program runs: the role is hooked),
    then a slow turn, and mail sent while it runs; the mail's name."""
    server, api = swarm.server, api_of(role)
    swarm.wait_idle(role)
    swarm.type(role, "WARM-UP")
    turn(server, api, lambda r: any("WARM-UP" in t for t in r.texts), "the warm-up")
    wait(lambda: (swarm.handoffs(role) / "idle").exists(), 30, "the role's first hook run")
    swarm.wait_idle(role)
    swarm.type(role, SLOW)
    turn(server, api, lambda r: any(SLOW in t for t in r.texts), "the slow turn")
    return swarm.send(role, "sent while busy")


def wait(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """`wait_for`, polling a tenth as often: each look here reads a real harness's pane."""
    return wait_for(condition, timeout, what, every=0.1)


HALF = "please refactor the par"  # a person's half sentence


def a_persons_text(swarm: RealSwarm, role: str) -> None:
    """docs/protocol.md §17, a person's text is theirs: a half sentence typed into the idle
    box of `role`, not yet hooked (just after `up`), holds its wake-up past --idle-wait
    (1 s) — no request to the model carries the line, the box keeps exactly the person's
    text, `status` says so — and once the person empties the box the line is typed."""
    server, target = swarm.server, f"={swarm.session(role)}:"
    swarm.wait_idle(role)
    swarm.tmux("send-keys", "-t", target, "-l", "--", HALF)
    wait(lambda: swarm.look(role)[1] == HALF, 10, "the half sentence in the box")
    name = swarm.send(role, "sent while a person types")
    wait(lambda: swarm.wakes(role), 20, "the wake-up to be tried")
    time.sleep(3.0)  # three times --idle-wait: a line typed then has reached the model
    assert not any(request.holds(WAKE) for request in server.requests)
    assert swarm.look(role) == (profiles.HELD, HALF), swarm.screen(role)
    assert swarm.log("wake_forced") == []
    [held] = swarm.wakes(role)  # the attempt that waits: counted, nothing typed
    assert (held["held"], held["submitted"]) == (True, False)
    rows = json.loads(swarm.handoffd("status", "--roles", "--json", str(swarm.root)).stdout)
    assert next(row for row in rows if row["role"] == role)["box_holds_text"] is True
    lines = swarm.handoffd("status", str(swarm.root)).stdout.splitlines()
    assert any(line.startswith(f"{role} ") and "input box holds text" in line for line in lines)
    [card] = json.loads(swarm.handoffd("status", "--json", str(swarm.root)).stdout)
    assert card["wakes"]["box_holds_text"] is True and card["wakes"]["submitted"] is False

    swarm.tmux("send-keys", "-t", target, "C-u")  # the person empties the box
    took = turn(server, api_of(role), lambda r: outputs_hold(r, name),
                "taking the mail once the box was emptied")  # fmt: skip
    assert typed_exactly(took, WAKE)
    assert not any(request.holds(HALF) for request in server.requests)
    [typed] = [w for w in swarm.wakes(role) if w.get("after_held")]
    assert typed["submitted"] is True and typed["forced"] is False


def role_row(swarm: RealSwarm, role: str) -> dict[str, Any]:
    """The role's row of `status --roles --json`."""
    rows = json.loads(swarm.handoffd("status", "--roles", "--json", str(swarm.root)).stdout)
    return next(row for row in rows if row["role"] == role)


def round_trips(
    swarm: RealSwarm, role: str, api: str, names: list[str], exact: bool = True
) -> list[dict[str, Any]]:
    """Each mail of `names` made exactly one round trip: one wake-up each, submitted and not
    forced, one turn of the model started by each, each mail taken and finished once.  The
    role's wake-ups, in order.  Not `exact` (a pane driven as generic, whose quiet time is
    all it has to go on): a wake-up more may come, typed into the quiet pane, never one
    forced; each mail is still taken and finished exactly once."""
    wait(lambda: set(names) <= set(swarm.completed(role)), 150, f"{names} completed")
    wakes = wait(lambda: (lambda w: w if len(w) >= len(names) else None)(swarm.wakes(role)),
                 10, "the wake-ups logged")  # fmt: skip
    assert len(wakes) == len(names) or (not exact and len(wakes) == len(names) + 1), wakes
    assert all((w["submitted"], w["forced"]) == (True, False) for w in wakes), wakes
    started = [r for r in swarm.server.turns(api) if r.rule == WAKE and not r.outputs]
    assert len(started) == len(wakes), [r.texts for r in started]
    assert sorted(swarm.completed(role)) == sorted(names)
    return wakes


def idle_in_status(swarm: RealSwarm, role: str, timeout: float,
                   unrecognised: str | None = None) -> dict[str, Any]:  # fmt: skip
    """The role's `status` row once it shows the pane idle and, with `unrecognised`, says
    its screen is not recognised (else that it says nothing of the kind)."""

    def shown() -> dict[str, Any] | None:
        row = role_row(swarm, role)
        return row if (row["pane"], row.get("unrecognised")) == ("idle", unrecognised) else None

    return wait(shown, timeout, f"status to show {role} idle, unrecognised: {unrecognised}")
