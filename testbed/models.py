"""A scripted model server on loopback: what real Claude Code and real Codex CLI talk to in
the tests and the benchmark.  The harness is the real program; only the model is scripted.

It speaks the two wire protocols the harnesses call, streamed as server-sent events:
Anthropic Messages (`POST /v1/messages`, Claude Code) and OpenAI Responses
(`POST /v1/responses`, Codex).  The model is stateless: each request is answered from the
conversation it carries.  The newest user text in the current turn that a `Rule` matches
picks the rule; the tool results after that text say how many of its commands already
ran; the next one is asked for as a shell tool call, and when all ran the model says the
rule's last words and ends its turn.  A text no rule matches gets a short answer.

Every request is recorded (`requests`, and a JSON-lines file when asked), so a test can
show that the harness made a model request, what it carried, and when.  A harness also
asks the model things of its own — a title for the session, whether a prompt starts a new
topic, which files a command touched (Claude Code asks those of a small model), a warm-up
of a sub-agent — that are not turns of the agent: `side_request` tells them apart, they are
answered with a fixed JSON text, never by a rule, and `turns` leaves them out.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC, OPENAI = "anthropic", "openai"
REPLY = "Nothing to do."  # the answer to a text no rule matches
CLAUDE_SHELL = "Bash"  # Claude Code's shell tool
CODEX_SHELL = "exec_command"  # Codex's shell tool (0.171.0: `cmd`, run in the user's shell)
# The shell tools an agent's turn offers the model, by wire protocol (Codex 0.150 and 0.171
# both call theirs `exec_command`; older ones `shell`)
SHELLS = {ANTHROPIC: (CLAUDE_SHELL,), OPENAI: (CODEX_SHELL, "shell")}
WARMUP = "Warmup"  # the whole prompt of Claude Code's sub-agent warm-ups (2.0)
SIDE_ANSWERS = {  # what a side request is answered: the JSON each asks for, or near it
    ANTHROPIC: json.dumps({"isNewTopic": False, "title": "Handoff work"}),
    OPENAI: json.dumps({"title": "Handoff work"}),
}


@dataclass(frozen=True)
class Usage:
    """The tokens one model response says it spent (what a harness records of it)."""

    input: int = 10
    output: int = 5
    cache_read: int = 0
    cache_write: int = 0


@dataclass(frozen=True)
class Call:
    """A call of a tool other than the shell: its name and input (for Codex, the tool's
    namespace too, as an MCP server's tools are grouped)."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    namespace: str | None = None


@dataclass
class Rule:
    """When a user text holds `when`: run each of `commands` in turn (one tool call per
    model request: a shell command, or a `Call`), then say `say` and end the turn.
    `delay` holds every answer of this rule back that many seconds first (a model
    thinking: the harness shows itself busy); `api`, when given, limits the rule to one
    wire protocol (one harness: Claude Code speaks `anthropic`, Codex `openai`)."""

    when: str
    commands: list[str | Call] = field(default_factory=list)
    say: str = "Done."
    delay: float = 0.0
    api: str | None = None
    usage: Usage = field(default_factory=Usage)  # what each of its answers says it spent
    preface: str = ""  # said in a text block before each tool call: one message, two blocks


@dataclass
class Request:
    """One model request as the server saw it: which wire protocol, when, the user texts of
    the current turn, the tool outputs after the text that picked the rule, and the body."""

    api: str
    at: float
    texts: list[str]
    outputs: list[str]
    body: dict[str, Any]
    rule: str | None = None  # the `when` of the rule that answered, if any
    side: bool = False  # a request of the harness's own (`side_request`), not a turn
    done_at: float | None = None  # when its answer was sent whole

    def holds(self, text: str) -> bool:
        """Whether `text` is in anything this request carried (texts, outputs, the system
        and developer prompts)."""
        return text in json.dumps(self.body, ensure_ascii=False)


class Turn:
    """What one request says of the conversation: the user texts of its current turn, and
    for each the tool outputs that follow it."""

    def __init__(self, texts: list[str], outputs_after: list[list[str]]) -> None:
        self.texts = texts
        self.outputs_after = outputs_after

    def pick(self, rules: Iterable[Rule]) -> tuple[Rule | None, list[str]]:
        """The rule for the newest text one matches, and the outputs after that text."""
        rules = list(rules)
        for index in range(len(self.texts) - 1, -1, -1):
            for rule in rules:
                if rule.when in self.texts[index]:
                    return rule, self.outputs_after[index]
        return None, []


def _text_of(content: object) -> str:
    """The text of a message's content, whichever shape it has (a string or blocks)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, dict) and isinstance(block.get("content"), str | list):
            parts.append(_text_of(block["content"]))
    return "\n".join(parts)


def anthropic_turn(body: dict[str, Any]) -> Turn:
    """The current turn of a Messages request: the messages after the last assistant
    message that asked for no tool (the end of the previous turn)."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    start = 0
    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and not _blocks(message, "tool_use"):
            start = index + 1
    texts: list[str] = []
    after: list[list[str]] = []
    for message in messages[start:]:
        if message.get("role") != "user":
            continue
        results = _blocks(message, "tool_result")
        for result in results:
            for outputs in after:
                outputs.append(_text_of(result.get("content")))
        words = [b for b in _content(message) if b.get("type") == "text"]
        if words:
            texts.append(_text_of(words))
            after.append([])
    return Turn(texts, after)


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _blocks(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [b for b in _content(message) if b.get("type") == kind]


def openai_turn(body: dict[str, Any]) -> Turn:
    """The current turn of a Responses request: the items after the last assistant
    message."""
    items = [i for i in body.get("input", []) if isinstance(i, dict)]
    start = 0
    for index, item in enumerate(items):
        if item.get("type") == "message" and item.get("role") == "assistant":
            start = index + 1
    texts: list[str] = []
    after: list[list[str]] = []
    for item in items[start:]:
        if item.get("type") == "function_call_output":
            output = item.get("output")
            for outputs in after:
                outputs.append(output if isinstance(output, str) else json.dumps(output))
        elif item.get("type") == "message" and item.get("role") == "user":
            texts.append(_text_of(item.get("content")))
            after.append([])
    return Turn(texts, after)


class ModelServer:
    """The scripted model on 127.0.0.1, one port for both protocols.  `rules` may change
    while it runs (a test scripts each step as it goes)."""

    def __init__(
        self, rules: Iterable[Rule] = (), log: str | None = None, bodies: bool = False
    ) -> None:
        self.rules = list(rules)
        self.requests: list[Request] = []
        self.log = log
        self.bodies = bodies  # the log holds each request's whole body too
        self._lock = threading.Condition()
        self._calls = 0
        # message ids unique across servers: a harness's records count a message once by id
        self._prefix = secrets.token_hex(4)
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    def script(self, *rules: Rule) -> None:
        """Add rules; a later rule for the same text comes first."""
        with self._lock:
            self.rules[:0] = rules

    def turns(self, api: str | None = None) -> list[Request]:
        """The requests that were turns of an agent (not the harness's side requests)."""
        with self._lock:
            return [r for r in self.requests if not r.side and (api is None or r.api == api)]

    def wait(self, found: Callable[[Request], bool], timeout: float, what: str) -> Request:
        """The first request (already seen or to come) for which `found` holds; raises
        `TimeoutError` naming `what` at the deadline."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for request in self.requests:
                    if found(request):
                        return request
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no model request {what} in {timeout}s")
                self._lock.wait(left)

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)
            self._lock.notify_all()
        if self.log:
            line = {"api": request.api, "at": request.at, "texts": request.texts,
                    "outputs": request.outputs, "rule": request.rule,
                    "side": request.side}  # fmt: skip
            if self.bodies:
                line["body"] = request.body
            with open(self.log, "a", encoding="utf-8") as file:
                file.write(json.dumps(line) + "\n")

    def answer(
        self, api: str, body: dict[str, Any]
    ) -> tuple[Request, Rule | None, str | Call | None]:
        """Record the request; the rule answering it and the command to call (None: say
        the rule's words, or the fallback reply, and end the turn)."""
        turn = anthropic_turn(body) if api == ANTHROPIC else openai_turn(body)
        with self._lock:
            rule, outputs = turn.pick(r for r in self.rules if r.api in (None, api))
            self._calls += 1
        side = side_request(api, body)
        if side:
            rule, outputs = None, []
        request = Request(api, time.time(), turn.texts, outputs, body,
                          rule.when if rule else None, side)  # fmt: skip
        self.record(request)
        if rule is None or len(outputs) >= len(rule.commands):
            return request, rule, None
        return request, rule, rule.commands[len(outputs)]

    def call_id(self) -> str:
        with self._lock:
            return f"call_{self._prefix}_{self._calls:06d}"


def side_request(api: str, body: dict[str, Any]) -> bool:
    """Whether a request is the harness's own, not a turn of the agent.  An agent's turn
    always offers the model its shell tool and asks for no schema; the harness's own
    requests offer none (Claude Code's titles, topic and file-path checks on its small
    model; Codex's title, which also asks for a JSON schema), or are a sub-agent's warm-up,
    whose one message is `Warmup`."""
    if api == OPENAI and _schema(body) is not None:
        return True
    if not set(SHELLS.get(api, ())) & set(_tool_names(body)):
        return True
    return api == ANTHROPIC and _warmup(body)


def _tool_names(body: dict[str, Any]) -> list[str]:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return []
    return [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]


def _warmup(body: dict[str, Any]) -> bool:
    messages = body.get("messages")
    if not isinstance(messages, list) or len(messages) != 1 or not isinstance(messages[0], dict):
        return False
    return _text_of(messages[0].get("content")).strip() == WARMUP


def _schema(body: dict[str, Any]) -> object:
    """The JSON schema a Responses request asks its answer to follow: Codex's title
    request has one; an agent's turn has none."""
    text = body.get("text")
    return text.get("format") if isinstance(text, dict) else None


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: object) -> None:
            pass  # the requests are recorded; the console stays quiet

        def do_GET(self) -> None:
            self._empty(404)

        def do_HEAD(self) -> None:
            self._empty(404)

        def do_POST(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(size))
            except ValueError:
                self._empty(400)
                return
            path = self.path.split("?")[0]
            if path.endswith("/messages"):
                self._reply(ANTHROPIC, body, _anthropic_events)
            elif path.endswith("/responses"):
                self._reply(OPENAI, body, _openai_events)
            else:
                self._empty(404)

        def _reply(self, api: str, body: dict[str, Any], events: Events) -> None:
            request, rule, command = server.answer(api, body)
            if rule is not None and rule.delay:
                time.sleep(rule.delay)
            words = (rule.say if rule else REPLY) if command is None else ""
            if request.side:
                words = SIDE_ANSWERS[api]
            said = Said(words, command, server.call_id(), rule.usage if rule else Usage(),
                        rule.preface if rule and command is not None else "")  # fmt: skip
            self._stream(events(body, said))
            request.done_at = time.time()

        def _stream(self, events: list[tuple[str, dict[str, Any]]]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            try:
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
            except OSError:
                pass  # the harness hung up (interrupted): nothing more to say
            self.close_connection = True

        def _empty(self, code: int) -> None:
            self.send_response(code)
            self.send_header("content-length", "0")
            self.end_headers()

    return Handler


@dataclass(frozen=True)
class Said:
    """One answer: its words or its tool call, the call's id, what it spent, and a text
    said before the call in the same message."""

    words: str
    command: str | Call | None
    call: str
    usage: Usage
    preface: str = ""


Events = Callable[[dict[str, Any], Said], list[tuple[str, dict[str, Any]]]]


def _tool(command: str | Call, shell: str, key: str) -> Call:
    """A shell command as a call of the harness's shell tool."""
    if isinstance(command, Call):
        return command
    arguments: dict[str, Any] = {key: command}
    if shell == CLAUDE_SHELL:
        arguments["description"] = "Run a handoff command"
    return Call(shell, arguments)


def _anthropic_events(body: dict[str, Any], said: Said) -> list[tuple[str, dict[str, Any]]]:
    """A Messages stream: one text block, or one tool_use block (`Bash` for a command),
    after a text block when the answer has a preface; its usage as the API reports it (the
    input side at the start, the output at the end)."""
    spent = said.usage
    usage = {"input_tokens": spent.input, "output_tokens": 1,
             "cache_read_input_tokens": spent.cache_read,
             "cache_creation_input_tokens": spent.cache_write}  # fmt: skip
    message = {"id": f"msg_{said.call}", "type": "message", "role": "assistant",
               "model": body.get("model", "scripted"), "content": [], "stop_reason": None,
               "stop_sequence": None, "usage": usage}  # fmt: skip
    blocks: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if said.preface:
        blocks.append(({"type": "text", "text": ""},
                       {"type": "text_delta", "text": said.preface}))  # fmt: skip
    if said.command is None:
        blocks.append(({"type": "text", "text": ""}, {"type": "text_delta", "text": said.words}))
        stop = "end_turn"
    else:
        tool = _tool(said.command, CLAUDE_SHELL, "command")
        use = {"type": "tool_use", "id": f"toolu_{said.call}", "name": tool.name, "input": {}}
        blocks.append((use, {"type": "input_json_delta", "partial_json": json.dumps(tool.input)}))
        stop = "tool_use"
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message})
    ]
    for index, (block, delta) in enumerate(blocks):
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index,
                                     "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": index,
                                     "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]  # fmt: skip
    return [
        *events,
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": spent.output}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip


def _openai_events(body: dict[str, Any], said: Said) -> list[tuple[str, dict[str, Any]]]:
    """A Responses stream: one assistant message, or one function call (`exec_command`
    for a command); its usage as the API reports it (cached input counted in the input)."""
    del body
    call = said.call
    if said.command is None:
        text = [{"type": "output_text", "text": said.words}]
        item: dict[str, Any] = {"type": "message", "role": "assistant", "id": f"msg_{call}",
                                "content": text}  # fmt: skip
    else:
        tool = _tool(said.command, CODEX_SHELL, "cmd")
        item = {"type": "function_call", "id": f"fc_{call}", "call_id": call,
                "name": tool.name, "arguments": json.dumps(tool.input)}  # fmt: skip
        if tool.namespace:
            item["namespace"] = tool.namespace
    spent = said.usage
    usage = {"input_tokens": spent.input + spent.cache_read,
             "input_tokens_details": {"cached_tokens": spent.cache_read},
             "output_tokens": spent.output, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": spent.input + spent.cache_read + spent.output}  # fmt: skip
    response = {"id": f"resp_{call}"}
    return [
        ("response.created", {"type": "response.created", "response": response}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done",
                                       "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed",
                                "response": {**response, "usage": usage}}),
    ]  # fmt: skip
