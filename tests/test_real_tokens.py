"""What real Claude Code and real Codex spent (docs/protocol.md §19), read by handoffd from
the harnesses' own records at each turn's end: the scripted model reports known usage, and
the sums handoffd records are exactly what the model said, each message once, on the card
in process — through `status --json` and the card's tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from handoffd.core import handoff as hf
from handoffd.core import usage
from testbed.models import Usage
from testbed.realswarm import AGENTS
from tests.real_support import WAKE, RealSwarm, Rule, real, real_swarm, wait

pytestmark = [pytest.mark.slow, real("claude", "codex")]
SPENT = Usage(input=100, output=20, cache_read=300, cache_write=40)
# woken, the agent takes its mail and ends its turn holding it: two model answers, the
# first a text block and a tool call in one message (Claude Code writes it as two lines)
RULES = [Rule(WAKE, ["ready_for_next.sh"], say="Took it; working on it.", usage=SPENT,
              preface="Taking the mail now.")]  # fmt: skip


def recorded(swarm: RealSwarm, role: str) -> list[dict[str, object]]:
    path = swarm.handoffs(role) / usage.FILE
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_each_harness_records_exactly_what_its_model_reported_on_the_card_in_process(
    tmp_path: Path,
) -> None:
    """Claude Code: two messages of usage (100, 20, 300, 40), the first written as two
    transcript lines sharing its id: counted once, 200/40/600/80.  Codex: the same two
    answers (its cached input inside its input, no cache writes reported): 200/40/600/0;
    its title request, a thread of its own, is not counted."""
    with real_swarm(tmp_path, ("coder", "cleaner"), rules=RULES) as swarm:
        cards = {}
        for role in ("coder", "cleaner"):
            name = swarm.send(role, f"work for {role}")
            parsed = hf.parse_name(name)
            assert parsed is not None
            cards[role] = f"{parsed.id}@{role}"
        want = {"coder": (200, 40, 600, 80), "cleaner": (200, 40, 600, 0)}
        kinds = ("input", "output", "cache_read", "cache_write")

        def summed(role: str) -> tuple[int, ...]:
            lines = recorded(swarm, role)
            return tuple(sum(int(line[k]) for line in lines) for k in kinds)  # type: ignore[call-overload]

        for role, counts in want.items():
            # the turns' records add up to it (a Stop hook's feedback may split the work
            # over two turns); one counted twice would pass it and never match
            try:
                wait(lambda role=role, counts=counts: summed(role) == counts, 45,
                     f"{role}'s turns recorded")  # fmt: skip
            except pytest.fail.Exception:
                one = (SPENT.input, SPENT.output, SPENT.cache_read, SPENT.cache_write)
                if role == "coder" and summed(role) == one:  # never more, never another sum
                    pytest.xfail(
                        "Claude Code wrote the turn's last message more than 0.5 s "
                        "after its Stop hook ran: it is counted at the next turn's end"
                    )
                raise
            lines = recorded(swarm, role)
            assert {line["card"] for line in lines} == {cards[role]}
            assert {line["harness"] for line in lines} == {AGENTS[role]}
        shown = json.loads(swarm.handoffd("status", "--json", str(swarm.root)).stdout)
        by_card = {card["card"]: card["tokens"] for card in shown}
        assert by_card[cards["coder"]]["cache_write"] == 80
        assert by_card[cards["cleaner"]]["input"] == 200
        transcript = next((swarm.homes["coder"] / ".claude" / "projects").rglob("*.jsonl"))
        ids = [json.loads(line)["message"]["id"] for line in transcript.read_text().splitlines()
               if '"type":"assistant"' in line or '"type": "assistant"' in line]  # fmt: skip
        assert len(ids) == 3 and len(set(ids)) == 2  # the split message the count saw once
