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
           "real", "real_swarm", "typed_exactly"]  # fmt: skip

RULES = rules()


def real(*names: str) -> pytest.MarkDecorator:
    """Skip unless every harness of `names` is installed; mark the test slow."""
    missing = [why for name in names if (why := harnesses.missing(name))]
    return pytest.mark.skipif(bool(missing), reason="; ".join(missing))


@contextmanager
def real_swarm(
    base: Path, roles: tuple[str, ...], before_up: Callable[[RealSwarm], None] | None = None,
    options: tuple[str, ...] = (), rules: list[Rule] | None = None,
) -> Iterator[RealSwarm]:  # fmt: skip
    """A swarm of `roles` (of coder: Claude Code, cleaner: Codex) and the sender's shell, up,
    with the model scripted by `rules`; `before_up` runs once the project is laid out."""
    with ModelServer(rules if rules is not None else RULES, log=str(base / "model.jsonl"),
                     bodies=True) as server:  # fmt: skip
        swarm = RealSwarm(base, server, roles)
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
