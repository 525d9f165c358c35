"""Packets (docs/protocol.md §10): every check with its own message naming the section, the
limits, placeholder text, and the round trip draft → queue → inbox → PAYLOAD, byte for byte."""

from __future__ import annotations

import pytest

from handoffd.queue import draft, packet
from tests.conftest import Project

ROLES = {"coder", "cleaner", "QA"}
HEAD = "type: packet\nto: cleaner\npriority: 40\ntask: parser-slice-3\n"
SECTIONS = {
    "Objective": "Make the parser accept trailing commas in argument lists.",
    "Decisions Made": "- Keep the hand-written parser; no generator.",
    "Ruled-Out Paths": "- A regex pre-pass: it breaks on nested strings.",
    "Target Scope": "- src/parser.py\n- tests/test_parser.py",
    "Hard Constraints": "- MUST NOT change the public `parse(text)` signature.",
    "Verification": "`pytest -q tests/test_parser.py`",
    "If Blocked": "- Block the card with the failing input and hand it back to coder.",
}


def body(**changes: str | None) -> str:
    """A packet with the seven sections; a change replaces a section (None drops it)."""
    sections = {**SECTIONS, **changes}
    return "".join(f"## {name}\n{text}\n" for name, text in sections.items() if text is not None)


def errors_of(text: str) -> list[str]:
    result = draft.check(HEAD + "\n" + text, ROLES, lambda c: (c, None))
    assert isinstance(result, list), "expected the packet to be refused"
    return result


def test_a_good_packet_is_a_draft_whose_body_is_the_packet_verbatim() -> None:
    result = draft.check(HEAD + "\n" + body(), ROLES, lambda c: (c, None))
    assert isinstance(result, draft.Draft)
    assert result.body == body()
    assert result.headers["task"] == "parser-slice-3"


BIG = body(**{"Target Scope": "- " + "é" * 4000})  # 8000 bytes of 4000 characters
ERRORS = [
    ("missing-section", body(**{"If Blocked": None}), ["Missing section '## If Blocked'."]),
    (
        "empty-section",
        body(**{"Target Scope": "\n  \n"}),
        ["Section '## Target Scope' is empty."],
    ),
    (
        "unknown-section",
        body() + "## Notes\nmore\n",
        ["Unknown section '## Notes'."],
    ),
    (
        "duplicate-section",
        body() + "## Verification\n`make test`\n",
        ["Duplicate section '## Verification'."],
    ),
    (
        "out-of-order",
        body(**{"Decisions Made": None}) + "## Decisions Made\n- one\n",
        [
            "Section '## Ruled-Out Paths' is out of order; the order is Objective, Decisions "
            "Made, Ruled-Out Paths, Target Scope, Hard Constraints, Verification, If Blocked."
        ],
    ),
    (
        "text-before",
        "Hello there\n" + body(),
        ["Text before '## Objective': a packet starts with its sections."],
    ),
    (
        "objective-two-lines",
        body(Objective="Fix the parser.\nAnd the lexer."),
        ["Section '## Objective' must be one line; got 2."],
    ),
    (
        "objective-two-sentences",
        body(Objective="Fix the parser. Then the lexer."),
        ["Section '## Objective' must be one sentence."],
    ),
    (
        "objective-question",
        body(Objective="Why? Fix it."),
        ["Section '## Objective' must be one sentence."],
    ),
    *(
        (case, body(**{section: text}), [f"Section '## {section}' holds placeholder text '{x}'."])
        for case, section, text, x in [
            ("todo", "Target Scope", "- TODO", "TODO"),
            ("tbd", "If Blocked", "- ask, TBD", "TBD"),
            ("fixme", "Decisions Made", "- FIXME: decide", "FIXME"),
            ("xxx", "Ruled-Out Paths", "- XXX", "XXX"),
            ("template-bracket", "Verification", "`<cmd>` or <exact command>", "<exact command>"),
            ("ellipsis-line", "Hard Constraints", "- none\n...", "..."),
            ("unicode-ellipsis", "Hard Constraints", "…", "…"),
        ]
    ),
    (
        "too-many-lines",
        body(**{"Target Scope": "\n".join(f"- src/f{i}.py" for i in range(60))}),
        ["The packet must be at most 60 lines; got 73."],
    ),
    (
        "too-many-bytes",
        BIG,
        [f"The packet must be at most 8 KiB (8192 bytes); got {len(BIG.encode())} bytes."],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), [p[1:] for p in ERRORS], ids=[p[0] for p in ERRORS])
def test_every_packet_error_has_its_own_message(text: str, expected: list[str]) -> None:
    assert errors_of(text) == expected


def test_a_packet_draft_without_a_packet_says_what_to_write() -> None:
    assert errors_of("") == [packet.MISSING]
    assert "'## Objective'" in packet.MISSING and "'## If Blocked'" in packet.MISSING


def test_a_packet_needs_a_task_and_takes_no_message_or_commit() -> None:
    no_task = "type: packet\nto: cleaner\npriority: 40\nmessage: m\ncommit: abc\n\n" + body()
    result = draft.check(no_task, ROLES, lambda c: (c, None))
    assert result == [
        "Header 'message' is not allowed for type 'packet'.",
        "Header 'commit' is not allowed for type 'packet'.",
        "Missing required header 'task' for packet.",
        "Header 'commit' is only allowed for git_handoff.",
        "Header 'message' is only allowed for note.",
    ]


def test_other_drafts_still_refuse_a_body_and_a_task_on_a_note() -> None:
    text = "type: note\nto: cleaner\npriority: 40\nmessage: m\ntask: t\n\n## Objective\n"
    result = draft.check(text, ROLES, lambda c: (c, None))
    assert isinstance(result, list)
    assert "Header 'task' is only allowed for git_handoff." in result
    assert any("draft handoffs may contain headers only" in e for e in result)


@pytest.mark.parametrize(
    "line",
    [
        "Use `Vec<u8>` and List<String> here.",
        "Compare a < b > c and x <= y.",
        "See <https://example.org/doc> or <ops@example.org>.",
        "A todo list app; xxx-large is a size.",
    ],
)
def test_ordinary_text_is_not_taken_for_a_placeholder(line: str) -> None:
    assert packet.placeholder(line) is None


def test_a_packet_travels_byte_for_byte_to_the_payload(project: Project) -> None:
    text = body(Objective="Ünïcode, tabs\tand trailing spaces survive.  ") + "\n\n"
    path = project.draft(HEAD + "\n" + text)
    queued = project.run("swarm_handoff", str(path), role="coder")
    assert queued.code == 0, queued.err
    outbox_file = queued.out.split(": ", 1)[1].strip()
    with open(outbox_file, "rb") as file:
        raw = file.read()
    assert raw.endswith(b"\n\nRe-read your role and constitution.\n\n" + text.encode())
    project.deliver(outbox_file, "QA")
    taken = project.run("ready_for_next", role="QA")
    assert taken.code == 0, taken.err
    assert "TYPE: packet\n" in taken.out and "TASK_NAME: parser-slice-3\n" in taken.out
    payload = taken.raw.split(b"PAYLOAD:\n", 1)[1]
    assert payload == b"Re-read your role and constitution.\n\n" + text.encode()


def test_a_bad_packet_is_refused_with_exit_2_and_the_draft_kept(project: Project) -> None:
    path = project.draft(HEAD + "\n" + body(Objective="TBD"))
    result = project.run("swarm_handoff", str(path), role="coder")
    assert result.code == 2
    assert "- Section '## Objective' holds placeholder text 'TBD'.\n" in result.err
    assert "## Hard Constraints" in result.err  # the packet's usage follows
    assert path.exists()
    assert not list(project.box("coder", "outbox").glob("*.handoff"))


def test_sixty_lines_and_8_kib_exactly_are_within_the_limits() -> None:
    sixty = body(**{"Target Scope": "\n".join(f"- src/f{i}.py" for i in range(47))})
    assert len(sixty.splitlines()) == 60
    assert packet.check(sixty) == []
    filler = 8192 - len(body(**{"Target Scope": "- "}).encode())
    exact = body(**{"Target Scope": "- " + "y" * filler})
    assert len(exact.encode()) == 8192
    assert packet.check(exact) == []


def test_compose_builds_the_packet_from_the_tool_interfaces_field_names() -> None:
    texts = {packet.field(name): text for name, text in SECTIONS.items()}
    assert sorted(texts) == sorted([
        "objective", "decisions_made", "ruled_out_paths", "target_scope", "hard_constraints",
        "verification", "if_blocked",
    ])  # fmt: skip
    assert packet.compose(texts) == body()
    assert packet.check(packet.compose({**texts, "if_blocked": "\n"})) == [
        "Section '## If Blocked' is empty."
    ]
    del texts["verification"]
    assert packet.check(packet.compose(texts)) == ["Missing section '## Verification'."]


def test_a_packet_task_with_a_control_character_is_refused() -> None:
    """A packet's task is the same thread key as a git handoff's: no tab, no escape."""
    tabbed = HEAD.replace("parser-slice-3", "parser\tslice-3") + "\n" + body()
    result = draft.check(tabbed, ROLES, lambda c: (c, None))
    assert result == ["Header 'task' must not contain control characters."]
