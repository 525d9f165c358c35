"""The scripted model server of the real-harness tests (testbed/models.py): a harness's own
side requests — titles, topic and file-path checks on a small model, sub-agent warm-ups —
are told from the agent's turns for both harnesses, answered with a fixed JSON text (never
by a rule) and left out of `turns`.  The bodies are shaped as Claude Code 2.0.77 and
2.1.332 and Codex 0.150.0 and 0.171.0 sent them (offline, 2026-12-07)."""

from __future__ import annotations

import http.client
import json
from typing import Any

from testbed.models import ANTHROPIC, OPENAI, ModelServer, Rule, side_request

WAKE = "You have new handoff mail. If idle, run ready_for_next.sh."
SYSTEM = [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."}]
CLAUDE_TOOLS = [{"name": name, "input_schema": {}} for name in ("Bash", "Glob", "Read")]


def claude(text: str, tools: list[dict[str, Any]], model: str = "claude-sonnet-4-5") -> dict:
    message = {"role": "user", "content": [{"type": "text", "text": text}]}
    return {"model": model, "system": SYSTEM, "tools": tools, "stream": True,
            "messages": [message]}  # fmt: skip


def codex(text: str, tools: list[str], schema: bool = False) -> dict:
    body: dict[str, Any] = {
        "model": "scripted", "instructions": "…", "stream": True,
        "tools": [{"type": "function", "name": name} for name in tools],
        "input": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": text}]}],
    }  # fmt: skip
    if schema:
        body["text"] = {"format": {"type": "json_schema", "name": "title", "schema": {}}}
    return body


SIDE = {
    "a title on the small model": (ANTHROPIC, claude(f"Analyze if this message indicates a new "
                                                     f"topic: {WAKE}", [], "claude-haiku-4-5")),
    "the files a command touched": (ANTHROPIC, claude("Command: ls\nOutput: a\n", [],
                                                      "claude-haiku-4-5")),
    "a sub-agent's warm-up": (ANTHROPIC, claude("Warmup", CLAUDE_TOOLS)),
    "Codex's title": (OPENAI, codex(f"Generate a concise title.\nUser prompt:\n{WAKE}",
                                    ["skills"], schema=True)),
}  # fmt: skip
TURNS = {
    "Claude Code's turn": (ANTHROPIC, claude(WAKE, CLAUDE_TOOLS)),
    "Codex 0.150's turn": (OPENAI, codex(WAKE, ["exec_command", "write_stdin", "update_plan"])),
    "an older Codex's turn": (OPENAI, codex(WAKE, ["shell", "update_plan"])),
}


def test_each_harnesss_side_requests_are_told_from_its_turns() -> None:
    assert {what: side_request(*request) for what, request in SIDE.items()} == dict.fromkeys(
        SIDE, True)  # fmt: skip
    assert {what: side_request(*request) for what, request in TURNS.items()} == dict.fromkeys(
        TURNS, False)  # fmt: skip


def post(url: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of the server's streamed answer."""
    host = url.removeprefix("http://")
    connection = http.client.HTTPConnection(host, timeout=10)
    connection.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    text = connection.getresponse().read().decode()
    connection.close()
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_a_side_request_carrying_a_rules_text_gets_json_words_and_is_no_turn() -> None:
    """Claude Code's topic check carries the prompt typed (the wake-up): it used to be
    answered by the wake-up's rule with a shell call, and counted as the agent's turn."""
    with ModelServer([Rule(WAKE, ["ready_for_next.sh"], say="Took it.")]) as server:
        events = post(server.url, "/v1/messages", SIDE["a title on the small model"][1])
        deltas = [e["delta"] for e in events if e.get("type") == "content_block_delta"]
        assert [d["type"] for d in deltas] == ["text_delta"]
        assert json.loads(deltas[0]["text"])["isNewTopic"] is False
        events = post(server.url, "/v1/responses", SIDE["Codex's title"][1])
        [item] = [e["item"] for e in events if e.get("type") == "response.output_item.done"]
        assert json.loads(item["content"][0]["text"]) == {"title": "Handoff work"}
        assert server.turns() == [] and len(server.requests) == 2

        events = post(server.url, "/v1/messages", TURNS["Claude Code's turn"][1])
        [block] = [e["content_block"] for e in events if e.get("type") == "content_block_start"]
        assert block["name"] == "Bash"  # the rule's first command
        [turn] = server.turns()
        assert (turn.api, turn.rule) == (ANTHROPIC, WAKE)
