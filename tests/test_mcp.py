"""`handoffd mcp` through the SDK's own stdio client against a real project (docs/protocol.md
§12): the tools and their schemas, a whole round trip through tools only that leaves the same
files as the helpers, every refusal as a tool error carrying the command's message, and
structured results equal to the commands' `--json`."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import MCPError

from tests.conftest import Project, make_project, run_command, snapshot
from tests.mcp_support import Agent, agent, cli_json, text, texts
from tests.test_helpers import imported_by

# Who runs it; never `role`: a server acts for its own role only (docs/protocol.md §12, §15).
ROLES_OPTIONS = {"agent", "conversation"}
SCHEMAS = {  # tool -> its arguments: the command's long options in snake_case, an ID as `id`
    "send_handoff": {
        "type", "to", "priority", "task", "commit", "message", "depends_on", "blocked_reason",
        "objective", "decisions_made", "ruled_out_paths", "target_scope", "hard_constraints",
        "verification", "if_blocked", "idempotency_key",
    },
    "ready_for_next": set(),
    "done_with_current": set(),
    "heartbeat": ROLES_OPTIONS,
    "idle": ROLES_OPTIONS,
    "release": {"id"} | ROLES_OPTIONS,
    "block": {"id", "reason"} | ROLES_OPTIONS,
    "unblock": {"id"} | ROLES_OPTIONS,
    "report": {"id", "status", "file", "text", "reason"} | ROLES_OPTIONS,
    "note": {"decision", "ruled_out", "verify"},
    "status": {"role", "all", "json", "window", "all_hosts", "roles"},
    "resume": {"json"},
    "digest": {"id", "task", "max_lines", "json"},
    "carry_forward": {"n", "since", "role", "json"},
    "answer": {"card", "text", "by"},
}  # fmt: skip
REQUIRED = {"send_handoff": ["type", "to", "priority"], "block": ["reason"], "report": ["status"],
            "answer": ["card", "text"]}  # fmt: skip
STRUCTURED = {"status", "resume", "digest", "carry_forward"}


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "server.log"


def test_the_server_lists_every_tool_with_its_arguments_schema_and_description(
    project: Project, log: Path
) -> None:
    with agent(project, "coder", log) as coder:
        tools = {tool.name: tool for tool in coder.tools()}
    assert set(tools) == set(SCHEMAS)
    for name, tool in tools.items():
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False, name
        assert set(schema["properties"]) == SCHEMAS[name], name
        assert schema.get("required", []) == REQUIRED.get(name, []), name
        assert all(p.get("description") for p in schema["properties"].values()), name
        assert tool.description and len(tool.description) > 60, name
        assert (tool.output_schema is not None) == (name in STRUCTURED), name
    assert tools["report"].input_schema["properties"]["status"]["enum"] == [
        "RUNNING", "BLOCKED", "DONE",
    ]  # fmt: skip


# --- a whole round trip, through tools only and through the helpers ----------------------

STAMP = re.compile(r"\d{8}T\d{6}(\.\d+)?Z|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def normal(value: str, project: Project) -> str:
    """Text with the project's path and every timestamp replaced: what two runs share."""
    return STAMP.sub("<ts>", value.replace(str(project.root), "<root>"))


def tree(project: Project) -> dict[str, str | None]:
    """Every role's .swarmforge/ (queue, reports, heartbeat, live file), normalised."""
    found: dict[str, str | None] = {}
    for role, worktree in sorted(project.worktrees.items()):
        for key, data in snapshot(worktree / ".swarmforge").items():
            if key.startswith(("handoffs/sequence.lock", "daemon")) or key == "roles.tsv":
                continue
            shown = None if data is None else normal(data.decode(), project)
            found[normal(f"{role}/{key}", project)] = shown
    return found


def deliver(project: Project) -> None:
    """The daemon, once: delivery is not a tool."""
    done = run_command("handoffd", "run", "--once", str(project.root), cwd=project.root, role=None)
    assert done.code == 0, done.err


def round_trip_by_tools(project: Project, log: Path) -> list[str]:
    """coder sends a git handoff to QA and a note to QA and cleaner; QA takes, reports and
    finishes both; cleaner takes and finishes its batch.  Returns what each step printed."""
    printed = []
    with (
        agent(project, "coder", log) as coder,
        agent(project, "QA", log) as qa,
        agent(project, "cleaner", log) as cleaner,
    ):
        head = project.commit("coder")
        for args in (
            {"type": "git_handoff", "to": "QA", "priority": "40", "task": "t1", "commit": head},
            {"type": "note", "to": ["QA", "cleaner"], "priority": "50", "message": "hi"},
        ):
            printed.append(text(ok(coder.call("send_handoff", **args))))
        deliver(project)
        steps: list[tuple[Agent, str, dict[str, Any]]] = [
            (qa, "ready_for_next", {}),
            (qa, "report", {"status": "RUNNING", "text": "On it.\nI will run the suite.\n"}),
            (qa, "done_with_current", {}),
            (cleaner, "ready_for_next", {}),
            (cleaner, "done_with_current", {}),
            (qa, "done_with_current", {}),
        ]
        for who, name, args in steps:
            printed.append(text(ok(who.call(name, **args))))
    return printed


def round_trip_by_helpers(project: Project) -> list[str]:
    """The same round trip with the helpers and commands an agent runs in its shell."""
    head = project.commit("coder")
    printed = []
    for draft in (
        f"type: git_handoff\nto: QA\npriority: 40\ntask: t1\ncommit: {head}\n",
        "type: note\nto: QA,cleaner\npriority: 50\nmessage: hi\n",
    ):
        sent = project.run("swarm_handoff", str(project.draft(draft)), role="coder")
        printed.append(sent.out + sent.err)
    deliver(project)
    report = project.draft("On it.\nI will run the suite.\n", name="report.md")
    for role, *command in (
        ("QA", "ready_for_next"),
        ("QA", "handoffd", "report", "--status", "RUNNING", "--file", str(report)),
        ("QA", "done_with_current"),
        ("cleaner", "ready_for_next"),
        ("cleaner", "done_with_current"),
        ("QA", "done_with_current"),
    ):
        done = project.run(command[0], *command[1:], role=role)
        assert done.code == 0, done.err
        printed.append(done.out + done.err)
    return printed


def ok(result: Any) -> Any:
    assert not result.is_error, text(result)
    return result


def test_a_round_trip_through_tools_leaves_the_files_and_prints_the_text_of_the_helpers(
    tmp_path: Path, log: Path
) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    by_tools, by_helpers = make_project(tmp_path / "a"), make_project(tmp_path / "b")
    tool_text = [normal(t, by_tools) for t in round_trip_by_tools(by_tools, log)]
    helper_text = [normal(t, by_helpers) for t in round_trip_by_helpers(by_helpers)]
    assert tool_text == helper_text
    assert "COMPLETED: <root>/.worktrees/QA/.swarmforge/handoffs/inbox/completed/" in tool_text[4]
    assert tool_text[-1].endswith("NO_TASK\n")
    assert tree(by_tools) == tree(by_helpers)
    completed = by_tools.box("QA", "inbox/completed")
    assert len([p for p in completed.iterdir() if p.suffix == ".handoff"]) == 2
    assert not any(by_tools.box("coder", "outbox/tmp").iterdir())  # no draft left behind


# --- refusals: tool errors carrying the command's message ---------------------------------


def test_ready_for_next_gives_the_plain_block_then_commit_missing_as_a_second_text(
    project: Project, log: Path
) -> None:
    """A commit not in the repository (docs/protocol.md §15): the tool's first text is
    the helper's stdout, §4's block byte for byte; the `COMMIT_MISSING` line, the
    helper's stderr, is a text of its own after it, and the call is no error."""
    from tests.test_helpers import MISSING, git_handoff, plain_block

    path = git_handoff(project, "deadbeef00")
    with agent(project, "coder", log) as coder:
        taken = coder.call("ready_for_next")
    block = plain_block(project.box("coder", "inbox/in_process") / path.name, "deadbeef00")
    assert not taken.is_error and texts(taken) == [block, MISSING]


def refusal(result: Any) -> tuple[int, str]:
    """A refused call: its exit code and its message (the last text block, the stderr)."""
    assert result.is_error, text(result)
    assert result.structured_content is None
    return result.meta["exit_code"], texts(result)[-1]


def cli(project: Project, role: str | None, *command: str, cwd: Path | None = None) -> tuple:
    done = project.run(command[0], *command[1:], role=role, cwd=cwd)
    assert done.code != 0, done.out
    return done.code, done.err


def test_every_refusal_is_a_tool_error_with_the_commands_exit_code_and_message(
    project: Project, log: Path, tmp_path: Path
) -> None:
    big = project.worktrees["QA"] / "big.md"  # a tool reads files in its worktree only
    big.write_text("x" * (64 * 1024 + 1))
    missing = str(project.worktrees["QA"] / "missing.md")
    taken = "50_20260101T000000Z_000001_from_coder_to_QA.handoff"
    cases: list[tuple[str, str, dict[str, Any], tuple[str, ...]]] = [
        ("QA", "done_with_current", {}, ("done_with_current",)),
        ("cleaner", "done_with_current", {}, ("done_with_current",)),
        ("QA", "release", {}, ("handoffd", "release")),
        ("QA", "block", {"reason": "x"}, ("handoffd", "block", "--reason", "x")),
        ("QA", "unblock", {}, ("handoffd", "unblock")),
        ("QA", "report", {"status": "DONE"}, ("handoffd", "report", "--status", "DONE")),
        ("QA", "note", {}, ("handoffd", "note")),
        ("QA", "digest", {"id": "nope"}, ("handoffd", "digest", "nope")),
        ("QA", "digest", {"task": "nope"}, ("handoffd", "digest", "--task", "nope")),
    ]
    in_process = [  # with work in process for QA
        ("QA", "release", {"id": "nope"}, ("handoffd", "release", "nope")),
        ("QA", "block", {"id": "nope", "reason": "x"},
         ("handoffd", "block", "nope", "--reason", "x")),
        ("QA", "block", {"reason": " "}, ("handoffd", "block", "--reason", " ")),
        ("QA", "unblock", {"id": "nope"}, ("handoffd", "unblock", "nope")),
        ("QA", "report", {"status": "BLOCKED", "text": "stuck"},
         ("handoffd", "report", "--status", "BLOCKED")),
        ("QA", "report", {"status": "DONE", "id": "nope"},
         ("handoffd", "report", "nope", "--status", "DONE")),
        ("QA", "report", {"status": "RUNNING", "file": str(big)},
         ("handoffd", "report", "--status", "RUNNING", "--file", str(big))),
        ("QA", "report", {"status": "RUNNING", "file": missing},
         ("handoffd", "report", "--status", "RUNNING", "--file", missing)),
        ("QA", "digest", {"id": "nope", "max_lines": 5},
         ("handoffd", "digest", "nope", "--max-lines", "5")),
    ]  # fmt: skip
    with agent(project, "QA", log) as qa, agent(project, "cleaner", log) as cleaner:
        sessions = {"QA": qa, "cleaner": cleaner}
        for number, (role, tool, args, command) in enumerate(cases + in_process):
            if number == len(cases):
                project.put("QA", taken, box="inbox/in_process")
            got = refusal(sessions[role].call(tool, **args))
            assert got == cli(project, role, *command), (tool, args)
        for other in (qa, cleaner):
            assert other.call("status").is_error is False  # a refusal never ends the server


def test_a_bad_draft_is_refused_with_every_message_of_swarm_handoff(
    project: Project, log: Path
) -> None:
    drafts = [
        ({"type": "note", "to": "QA,ghost,QA", "priority": 5, "message": "x" * 81},
         "type: note\nto: QA,ghost,QA\npriority: 5\nmessage: " + "x" * 81 + "\n"),
        ({"type": "git_handoff", "to": "QA", "priority": "50", "task": "t", "commit": "zz",
          "depends_on": ["nope"]},
         "type: git_handoff\nto: QA\npriority: 50\ntask: t\ncommit: zz\ndepends_on: nope\n"),
        ({"type": "packet", "to": "QA", "priority": "50", "task": "t",
          "objective": "Do it. Then more.", "decisions_made": "TODO"},
         "type: packet\nto: QA\npriority: 50\ntask: t\n\n## Objective\nDo it. Then more.\n"
         "## Decisions Made\nTODO\n"),
    ]  # fmt: skip
    with agent(project, "coder", log) as coder:
        for args, draft in drafts:
            code, message = refusal(coder.call("send_handoff", **args))
            path = project.draft(draft)
            cli_code, cli_message = cli(project, "coder", "swarm_handoff", str(path))
            # the same messages; the draft is named by the tool instead of by a file
            assert (code, message) == (cli_code, cli_message.replace(str(path), "send_handoff"))
            assert message.startswith("HANDOFF INVALID: send_handoff\n\nErrors:\n- ")
    assert not any(project.box("coder", "outbox").glob("*.handoff"))


def test_a_role_the_server_cannot_resolve_is_the_helpers_refusal(
    project: Project, log: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    root = ("--root", str(project.root))
    with agent(project, None, log, cwd=outside, args=root) as nobody:
        got = refusal(nobody.call("heartbeat"))
        assert got == cli(project, None, "handoffd", "heartbeat", *root, cwd=outside)
        assert got == (1, "Set SWARMFORGE_ROLE.\n")
        assert not nobody.call("status").is_error  # the board needs no role
    with agent(project, "ghost", log) as ghost:
        sent = refusal(ghost.call("send_handoff", type="note", to="QA", priority="50", message="x"))
        assert sent == (1, "Unknown sender role: ghost\n")
        ready = cli(project, "ghost", "ready_for_next", cwd=project.root)
        assert refusal(ghost.call("ready_for_next")) == ready


# --- a server acts for its own role only (docs/protocol.md §12, §15, Part III) ----------------


def test_no_tool_acts_for_a_role_a_call_names_or_whose_card_it_gives(
    project: Project, log: Path
) -> None:
    """QA's server, asked to report DONE for cleaner (its `role` argument) or to release,
    block or unblock a card of cleaner's (`<id>@cleaner`), refuses with the tool's error
    and leaves cleaner's batch as it was; naming its own role changes nothing."""
    batch = "batch_20260101T000000Z_000001"
    held = f"{batch}/50_20260101T000000Z_000001_from_coder_to_cleaner.handoff"
    project.put("cleaner", held, box="inbox/in_process", id="20260101T000000Z_000001_from_coder")
    card = "20260101T000000Z_000001_from_coder@cleaner"
    before = snapshot(project.handoffs("cleaner"))
    calls = [("report", {"role": "cleaner", "status": "DONE"}),
             ("heartbeat", {"role": "cleaner"}), ("resume", {"role": "cleaner"}),
             ("note", {"role": "cleaner", "decision": "keep it"}),
             ("release", {"id": card}), ("block", {"id": card, "reason": "stop"}),
             ("unblock", {"id": card})]  # fmt: skip
    with agent(project, "QA", log) as qa:
        for tool, args in calls:
            code, message = refusal(qa.call(tool, **args))
            assert code == 2 and message.startswith("INVALID_ARGUMENTS: "), (tool, message)
            assert "this server acts for QA, never for" in message, (tool, message)
        assert not qa.call("heartbeat", role="QA").is_error  # its own: as if not given
    assert snapshot(project.handoffs("cleaner")) == before
    assert (project.handoffs("cleaner") / "inbox/in_process" / held).exists()


def test_an_agents_answer_says_which_role_gave_it(project: Project, log: Path) -> None:
    """The `answer` tool, given no `by`, records the server's role as who answered (not the
    operator's $USER: an agent's answer is never shown as a person's)."""
    project.put("cleaner", "50_20260101T000000Z_000002_from_coder_to_cleaner.handoff",
                box="inbox/new", blocked_reason="which parser?",
                id="20260101T000000Z_000002_from_coder")  # fmt: skip
    with agent(project, "QA", log) as qa:
        done = qa.call("answer", card="20260101T000000Z_000002_from_coder@cleaner", text="the new")
    assert not done.is_error, text(done)
    [stored] = (project.handoffs("cleaner") / "reports").rglob("*_ANSWER.md")
    assert "\nagent: QA\n" in stored.read_text()


def test_arguments_outside_the_schema_are_a_tool_error_naming_them(
    project: Project, log: Path
) -> None:
    with agent(project, "QA", log) as qa:
        code, message = refusal(qa.call("block", reason=5, colour="red"))
        assert code == 2 and message.startswith("INVALID_ARGUMENTS: ")
        assert "5 is not of type 'string'" in message and "'colour'" in message
        assert refusal(qa.call("report"))[1] == (
            "INVALID_ARGUMENTS: report: 'status' is a required property\n"
        )
        note = {"type": "note", "to": "coder", "priority": "50"}
        assert refusal(qa.call("send_handoff", **note, message="a\ntask: x")) == (
            2, "INVALID_ARGUMENTS: 'message' must be one line.\n",
        )  # fmt: skip
        code, message = refusal(qa.call("send_handoff", **note, message="m", objective="O."))
        assert code == 2 and message.startswith("INVALID_ARGUMENTS: 'objective' is a section")
        both = refusal(qa.call("report", status="RUNNING", text="a", file="b"))
        assert both == (2, "INVALID_ARGUMENTS: give the report as 'text' or as 'file', not both.\n")
        assert "no stdin" in refusal(qa.call("report", status="RUNNING", file="-"))[1]
    assert not any(project.box("QA", "outbox").glob("*.handoff"))
    assert not (project.handoffs("QA") / "reports").exists()  # a refused report stores nothing


# --- structured results: the commands' --json -------------------------------------------------


def without_clock(value: Any) -> Any:
    """A --json value less what moves with the clock between two calls."""
    if isinstance(value, dict):
        skip = {"age_s", "generated_at", "queue_read_at"}
        return {k: without_clock(v) for k, v in value.items() if k not in skip}
    if isinstance(value, list):
        return [without_clock(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"\d+", "<n>", value)  # ages in details, the receipt's times
    return value


def busy(project: Project) -> None:
    """A queue with something of every kind: a blocked card, a claim with a report, a
    completed thread with a commit, a card waiting."""
    head = project.commit("coder")
    drafts = [
        f"type: git_handoff\nto: QA\npriority: 40\ntask: t1\ncommit: {head}\n",
        "type: note\nto: cleaner\npriority: 50\nmessage: waiting\nblocked_reason: needs QA\n",
        "type: note\nto: QA\npriority: 60\nmessage: later\n",
    ]
    for draft in drafts:
        assert project.run("swarm_handoff", str(project.draft(draft)), role="coder").code == 0
    deliver(project)
    assert project.run("ready_for_next", role="QA").code == 0
    report = project.draft("Halfway.\nI decided to keep the old parser for now.\n", name="r.md")
    done = project.run(
        "handoffd", "report", "--status", "RUNNING", "--file", str(report), role="QA"
    )
    assert done.code == 0, done.err
    assert project.run("done_with_current", role="QA").code == 0


def test_status_resume_digest_and_carry_forward_structures_equal_the_commands_json(
    project: Project, log: Path
) -> None:
    busy(project)
    with agent(project, "QA", log) as qa:
        for args, command in (({}, ("status",)), ({"all": True}, ("status", "--all"))):
            got = ok(qa.call("status", **args)).structured_content
            assert without_clock(got["items"]) == without_clock(cli_json(project, "QA", *command))
            assert len(got["items"]) == (3 if args else 2)  # green only with all
        resumed = ok(qa.call("resume")).structured_content
        assert resumed == cli_json(project, "QA", "resume")
        assert resumed["source"] in ("queue", "live_file")
        thread = ok(qa.call("digest", task="t1")).structured_content
        assert without_clock(thread) == without_clock(
            cli_json(project, None, "digest", "--task", "t1")
        )
        assert "# Task t1" in thread["markdown"]
        recent = ok(qa.call("carry_forward", n=2)).structured_content
        assert without_clock(recent["items"]) == without_clock(
            cli_json(project, None, "carry-forward", "-n", "2")
        )
        assert len(recent["items"]) == 2


def test_the_text_of_a_structured_tool_is_what_the_command_prints(
    project: Project, log: Path
) -> None:
    busy(project)
    with agent(project, "QA", log) as qa:
        resumed = ok(qa.call("resume"))
        plain = project.run("handoffd", "resume", role="QA")
        assert text(resumed) == plain.out
        assert json.loads(text(ok(qa.call("resume", json=True)))) == resumed.structured_content
        board = text(ok(qa.call("status", all=True)))
        shown = project.run("handoffd", "status", "--all", role="QA").out
        assert without_clock(board) == without_clock(shown)
        assert "\033[" not in board  # never colour codes: a tool's text is not a terminal
        thread = ok(qa.call("digest", task="t1", json=True))
        assert json.loads(text(thread)) == thread.structured_content


def test_a_tools_json_text_carries_control_characters_as_json_escapes(
    project: Project, log: Path
) -> None:
    """A reason holding a C1 CSI and a right-to-left override, as a hand-made file may: the
    text of `status` and `resume` as JSON holds neither raw, and parses to the same data."""
    reason = "wait\x9b2J for \u202eQA"
    name = "50_20260101T000000Z_000001_from_coder_to_QA.handoff"
    project.put("QA", name, box="inbox/in_process", id=name[3:37], blocked_reason=reason)
    with agent(project, "QA", log) as qa:
        for tool in ("status", "resume"):
            shown = ok(qa.call(tool, json=True))
            assert "\x9b" not in text(shown) and "\u202e" not in text(shown)
            data = shown.structured_content
            assert json.loads(text(shown)) == (data["items"] if tool == "status" else data)
            assert reason in json.dumps(data, ensure_ascii=False)


# --- what the server costs everything else -----------------------------------------------


@pytest.mark.parametrize("name", ["ready_for_next", "done_with_current", "swarm_handoff"])
def test_the_helpers_never_import_the_mcp_sdk(project: Project, name: str) -> None:
    project.put("coder", "50_a.handoff")
    project.run("ready_for_next", role="coder")  # done_with_current has work to finish
    args = (str(project.draft(project.note_draft())),) if name == "swarm_handoff" else ()
    loaded = imported_by(project, name, *args)
    assert "handoffd.queue.inbox" in loaded
    sdk = sorted(m for m in loaded if m.split(".")[0] in {"mcp", "mcp_types", "anyio", "pydantic"})
    assert sdk == [] and "handoffd.adapters.mcp" not in loaded


def test_only_handoffd_mcp_imports_the_sdk(project: Project) -> None:
    probe = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from handoffd.cli import main\n"
        "for args in (['--help'], ['status'], ['resume'], ['heartbeat']):\n"
        "    assert CliRunner().invoke(main, args).exit_code == 0, args\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))\n"
    )
    done = run_command(sys.executable, "-c", probe, cwd=project.root, role="coder")
    assert done.code == 0, done.err
    assert done.out.strip() == "[]"
    assert os.path.exists(Path(sys.executable).parent / "handoffd")


PACKET = {
    "objective": "Wire the parser into the CLI.",
    "decisions_made": "- Keep the old flag names.",
    "ruled_out_paths": "- argparse subcommands: they break the shims.",
    "target_scope": "- handoffd/cli.py\n- tests/test_cli.py",
    "hard_constraints": "- No new dependency.",
    "verification": "`.venv/bin/python -m pytest -q tests/test_cli.py`",
    "if_blocked": "Report BLOCKED with what failed.",
}


def test_a_packet_from_its_sections_queues_what_swarm_handoff_queues_from_its_draft(
    project: Project, log: Path
) -> None:
    with agent(project, "coder", log) as coder:
        head = {"type": "packet", "to": "QA", "priority": "30", "task": "cli-wiring"}
        ok(coder.call("send_handoff", **head, **PACKET))
    sections = "".join(f"## {title}\n{PACKET[key]}\n" for key, title in packet_sections())
    draft = "type: packet\nto: QA\npriority: 30\ntask: cli-wiring\n\n" + sections
    assert project.run("swarm_handoff", str(project.draft(draft)), role="coder").code == 0
    by_tool, by_helper = sorted(project.box("coder", "outbox").glob("*.handoff"))
    unstamped = re.compile(r"^(id|created_at): .*$", re.M)
    assert unstamped.sub("", by_tool.read_text()) == unstamped.sub("", by_helper.read_text())
    assert "## If Blocked\nReport BLOCKED with what failed.\n" in by_tool.read_text()


def test_an_unknown_tool_is_a_protocol_error_and_the_server_goes_on(
    project: Project, log: Path
) -> None:
    with agent(project, "QA", log) as qa:
        with pytest.raises(MCPError, match="Unknown tool: nope"):
            qa.call("nope")
        assert ok(qa.call("ready_for_next")).content[0].text == "NO_TASK\n"


def test_mcp_outside_a_project_exits_1_before_serving(tmp_path: Path) -> None:
    done = run_command("handoffd", "mcp", cwd=tmp_path, role="coder")
    assert done.code == 1 and done.out == ""
    assert "Cannot find SwarmForge project root" in done.err


def packet_sections() -> list[tuple[str, str]]:
    """(argument name, section title) in the contract's order, spelled out here so the
    tool's own table is checked rather than reused."""
    titles = ["Objective", "Decisions Made", "Ruled-Out Paths", "Target Scope",
              "Hard Constraints", "Verification", "If Blocked"]  # fmt: skip
    return [(title.lower().replace("-", "_").replace(" ", "_"), title) for title in titles]


# --- safe for a sandboxed agent (docs/protocol.md §12, Part II) --------------------------------

OUTSIDE = "INVALID_ARGUMENTS: file must be inside the worktree\n"
TAKEN = "50_20260101T000000Z_000001_from_coder_to_QA.handoff"
HANG = 10.0  # seconds: a tool that blocks fails the test here


def reports_of(project: Project, role: str = "QA") -> list[str]:
    folder = project.handoffs(role) / "reports"
    return (
        sorted(str(p.relative_to(folder)) for p in folder.rglob("*.md")) if folder.exists() else []
    )


def test_report_reads_its_file_only_inside_the_worktree_through_no_link(
    project: Project, log: Path, tmp_path: Path
) -> None:
    worktree = project.worktrees["QA"]
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "r.md").write_text("TOP-SECRET\n")
    (worktree / "link.md").symlink_to(secret)
    (worktree / "notes").symlink_to(tmp_path / "outside")
    os.mkfifo(worktree / "fifo.md")
    (worktree / "folder.md").mkdir()
    refused = ["/etc/passwd", "/proc/self/environ", "/dev/zero", str(secret), "link.md",
               str(worktree / "notes" / "r.md"), "notes/r.md", "fifo.md", "folder.md",
               str(worktree / ".." / ".." / "README"), "../../README", str(worktree)]  # fmt: skip
    project.put("QA", TAKEN, box="inbox/in_process")
    with agent(project, "QA", log) as qa:
        qa.timeout = HANG
        for file in refused:
            result = qa.call("report", status="RUNNING", file=file)
            assert result.is_error and texts(result) == [OUTSIDE], file
        assert reports_of(project) == []
        (worktree / "ok").mkdir()
        (worktree / "ok" / "report.md").write_text("Half way.\n")
        for file in ("ok/report.md", str(worktree / "ok" / "report.md")):
            result = qa.call("report", status="RUNNING", file=file)
            assert not result.is_error, text(result)
    assert len(reports_of(project)) == 2


def test_a_refused_tool_answers_one_line_never_a_traceback_nor_a_protocol_error(
    project: Project, log: Path
) -> None:
    live = project.worktrees["QA"] / ".swarmforge" / "HANDOFF.md"
    live.mkdir(parents=True)  # a folder where the live file should be
    with agent(project, "QA", log) as qa:
        qa.timeout = HANG
        result = qa.call("note", decision="keep the parser")
        assert result.is_error
        [line] = texts(result)
        assert line.startswith("NOTE_NOT_WRITTEN: ") and line.count("\n") == 1, line
        assert "a directory" in line
        assert qa.call("status").is_error is False  # the server goes on
    printed = project.run("handoffd", "note", "--decision", "keep the parser", role="QA")
    assert (printed.code, printed.err) == (1, line)


def test_tools_answer_with_fifos_where_the_roles_files_should_be(
    project: Project, log: Path
) -> None:
    handoffs = project.handoffs("QA")
    project.put("QA", TAKEN, box="inbox/in_process", id=TAKEN[3:-17], task="t-1")
    handoffs.joinpath("reports", TAKEN[3:-17]).mkdir(parents=True)
    os.mkfifo(handoffs / "reports" / TAKEN[3:-17] / "20260101T000001.000000Z_RUNNING.md")
    os.mkfifo(handoffs / "heartbeat")
    os.mkfifo(project.worktrees["QA"] / ".swarmforge" / "HANDOFF.md")
    with agent(project, "QA", log) as qa:
        qa.timeout = HANG
        for tool, args in [("status", {}), ("resume", {}), ("heartbeat", {}),
                           ("digest", {"task": "t-1"}), ("carry_forward", {}),
                           ("ready_for_next", {}), ("report", {"status": "RUNNING"}),
                           ("note", {"verify": "make test"})]:  # fmt: skip
            assert not qa.call(tool, **args).is_error, tool


def test_an_unexpected_exception_in_a_tool_is_a_one_line_tool_error(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Belt and braces: a bug below a tool still answers the agent as a tool error."""
    from handoffd.adapters import mcp
    from handoffd.ops.spec import Op
    from handoffd.ops.table import TOOLS

    TOOLS["broken"] = Op("broken", "tests.test_mcp:broken", "Always fails.", needs="project")
    try:
        result = mcp.call(str(project.root), "broken", {})
    finally:
        del TOOLS["broken"]
    assert result.is_error is True
    [block] = result.content
    assert block.text == "INTERNAL_ERROR: broken failed: ValueError: a bug over two lines\n"
    assert "Traceback" in capsys.readouterr().err  # the server's log keeps the detail


def broken(context: Any) -> Any:
    """An operation with a bug in it (the test above)."""
    raise ValueError("a bug\nover two lines")


# --- what the SDK cannot encode ------------------------------------------------------------


def wire(project: Project, role: str, *lines: str) -> list[dict[str, Any]]:
    """The server's replies to raw JSON-RPC `lines` (what a client that escapes a lone
    surrogate as `\\ud800`, as JSON allows, sends), each awaited at most HANG seconds."""
    import select
    import subprocess

    from tests.conftest import BIN, helper_env

    server = subprocess.Popen(
        [str(Path(BIN) / "handoffd"), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=helper_env(role), cwd=project.worktrees[role],
    )  # fmt: skip
    assert server.stdin is not None and server.stdout is not None
    replies = []
    try:
        for line in lines:
            server.stdin.write(line.encode() + b"\n")
            server.stdin.flush()
            if '"id"' not in line:  # a notification: no reply
                continue
            ready, _, _ = select.select([server.stdout], [], [], HANG)
            assert ready, f"no reply within {HANG}s to {line}"
            replies.append(json.loads(server.stdout.readline()))
    finally:
        server.kill()
        server.wait(HANG)
    return replies


INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"}}})  # fmt: skip
INITIALIZED = '{"jsonrpc": "2.0", "method": "notifications/initialized"}'


def test_a_line_nested_past_the_parsers_depth_never_ends_the_server(project: Project) -> None:
    """A line of 100 000 `[`: the SDK's parser refuses it, and Python's, asked again, raises
    RecursionError rather than ValueError; the server goes on and answers the next call."""
    listing = '{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}'
    _, listed = wire(project, "QA", INITIALIZE, INITIALIZED, "[" * 100_000, listing)
    assert listed["id"] == 2 and any(t["name"] == "report" for t in listed["result"]["tools"])


def test_a_lone_surrogate_in_a_tools_argument_is_answered_with_the_commands_refusal(
    project: Project,
) -> None:
    """Valid JSON (`"\\ud800"`) that the SDK's own parser refuses, and would drop without a
    reply (the client waiting for ever), is answered: the tool's refusal; the server goes on."""
    project.put("coder", TAKEN, box="inbox/in_process", id=TAKEN[3:-14], task="t-1")
    card = f"{TAKEN[3:-14]}@coder"  # the id its name spells (docs/protocol.md §2)
    arguments = {"name": "answer", "arguments": {"card": card, "text": "lone HERE surrogate"}}
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": arguments}
    call = json.dumps(request).replace("HERE", "\\ud800")  # JSON's escape of U+D800
    again = call.replace('"id": 2', '"id": 3').replace("\\ud800", "ok")
    _, refused, answered = wire(project, "QA", INITIALIZE, INITIALIZED, call, again)
    assert refused["id"] == 2 and refused["result"]["isError"] is True
    assert refused["result"]["content"][0]["text"] == (
        "INVALID_ANSWER: 'text' is not UTF-8 (it holds a lone surrogate \\ud800); give it as "
        "UTF-8 text\n"
    )
    assert answered["id"] == 3 and answered["result"]["isError"] is False


def test_a_result_holding_a_name_that_is_not_utf8_is_sent_with_it_escaped() -> None:
    """A file name that is not UTF-8 (`os` gives it as a lone surrogate) in a tool's text
    or structure: the SDK cannot encode it, and a reply it cannot encode is never sent."""
    from handoffd.adapters import mcp
    from handoffd.core.outcome import Result
    from handoffd.ops.table import TOOLS

    name = os.fsdecode(b"50_\xff.handoff")
    outcome = Result(0, f"TASK: /h/{name}\n", data=[{"path": f"/h/{name}"}])
    sent = json.loads(mcp.result(TOOLS["status"], outcome).model_dump_json(by_alias=True))
    assert sent["content"][0]["text"] == "TASK: /h/50_\\udcff.handoff\n"
    assert sent["structuredContent"] == {"items": [{"path": "/h/50_\\udcff.handoff"}]}


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_a_number_that_is_not_finite_is_refused_naming_the_argument(
    project: Project, token: str
) -> None:
    """`NaN` and `Infinity` on the wire (JSON as Python reads it) pass every bound of the
    schema, NaN compares false with all: `status` with `window: NaN` counted every claim
    as stale.  The tool refuses it as the command line refuses `--window nan`."""
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "status", "arguments": {"window": 12345.5}}}  # fmt: skip
    call = json.dumps(request).replace("12345.5", token)
    _, refused = wire(project, "QA", INITIALIZE, INITIALIZED, call)
    assert refused["id"] == 2 and refused["result"]["isError"] is True
    said = refused["result"]["content"][0]["text"]
    assert said.startswith("INVALID_ARGUMENTS: window: ") and "is not a finite number" in said
