"""A round trip between two real harnesses through the real helpers (docs/protocol.md §16):
the coder (Claude Code) hands work to the cleaner (Codex), which hands it back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.real_support import HOOK_REASON, WAKE, Rule, real, real_swarm, turn, wait

pytestmark = [pytest.mark.slow, real("claude", "codex")]


def send(to: str, message: str) -> str:
    """A shell command that queues a note to `to` through `swarm_handoff.sh`."""
    return (f"d=$(mktemp) && printf 'type: note\\nto: {to}\\npriority: 50\\nmessage: {message}\\n'"
            f' > "$d" && swarm_handoff.sh "$d"')  # fmt: skip


# The coder passes work from QA on to the cleaner, and finishes what comes back; the
# cleaner finishes what it gets and hands it back.
CODER = ['out=$(ready_for_next.sh); echo "$out"; case "$out" in *"FROM: QA"*) '
         + send("cleaner", "tidy this") + ";; esac", "done_with_current.sh"]  # fmt: skip
CLEANER = ["ready_for_next.sh", send("coder", "tidied"), "done_with_current.sh"]
RULES = [
    Rule(WAKE, CODER, say="Passed on.", api="anthropic"),
    Rule(HOOK_REASON, CODER, say="Passed on.", api="anthropic"),
    Rule(WAKE, CLEANER, say="Tidied.", api="openai"),
]


def test_a_round_trip_from_claude_code_to_codex_and_back_is_delivered_exactly_once(
    tmp_path: Path,
) -> None:
    """Every handoff of the trip is delivered once and taken once, each harness's model is
    told once per handoff, and no wake-up is left unsubmitted or forced."""
    with real_swarm(tmp_path, ("coder", "cleaner"), rules=RULES) as swarm:
        start = swarm.send("coder", "start the trip")
        wait(lambda: len(swarm.completed("coder")) == 2, 120, "the work to come back")
        swarm.wait_idle("coder")
        swarm.wait_idle("cleaner")
        [passed] = swarm.completed("cleaner")
        assert start in swarm.completed("coder") and "_from_coder_to_cleaner" in passed
        delivered = [line["file"] for line in swarm.log("delivered")]
        assert len(delivered) == 3 and len(set(delivered)) == 3, delivered
        told = {api: [r for r in swarm.server.turns(api) if not r.outputs]
                for api in ("anthropic", "openai")}  # fmt: skip
        assert (len(told["anthropic"]), len(told["openai"])) == (2, 1), told
        assert swarm.log("wake_unsubmitted") == [] and swarm.log("wake_forced") == []
        assert all("command not found" not in out for r in swarm.server.turns()
                   for out in r.outputs)  # fmt: skip
        turn(swarm.server, "openai", lambda r: any("HANDOFF QUEUED" in o for o in r.outputs),
             "the cleaner's handoff back", timeout=1)  # fmt: skip
