"""The operator as a sender and a mailbox (docs/protocol.md §18), through the installed
commands: `handoffd send` makes an original the daemon delivers as any other, agents hand
work to `operator`, and `inbox`, `reply` and `ack` close what they handed over."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoffd.core import config
from handoffd.core import handoff as hf
from handoffd.ops.mailbox import first_line
from testbed.project import make_pool_project
from tests.conftest import HANG, Project, plant, wait_for, without_daemon_warning
from tests.daemon_support import Tmux, events, handoffd, tmux_server, use_socket

OPERATOR_H = Path(".swarmforge") / "operator" / "handoffs"


def box(project: Project, where: str) -> list[Path]:
    return sorted((project.root / OPERATOR_H / where).glob("*.handoff"))


def send(project: Project, *args: str, user: str = "") -> tuple[int, str, str]:
    """`handoffd send …` from the project's root, no role in the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("SWARMFORGE_ROLE", "USER")}
    if user:
        env["USER"] = user
    command = [handoffd_bin(), "send", *args, "--root", str(project.root)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60,
                          check=False)  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def handoffd_bin() -> str:
    from tests.daemon_support import HANDOFFD

    return HANDOFFD


def op(project: Project, *args: str) -> tuple[int, str, str]:
    done = handoffd(*args, "--root", str(project.root))
    return done.returncode, done.stdout, done.stderr


def deliver(project: Project) -> None:
    assert handoffd("run", "--once", str(project.root)).returncode == 0


def from_agent(project: Project, role: str, message: str, priority: str = "50") -> str:
    """`role` hands a note to the operator with swarm_handoff; the queued path."""
    text = f"type: note\nto: operator\npriority: {priority}\nmessage: {message}\n"
    done = project.run("swarm_handoff", str(project.draft(text)), role=role)
    assert done.code == 0, done.err
    return done.out.split("HANDOFF QUEUED: ")[1].strip()


# --- sending work ---------------------------------------------------------------------


def test_send_queues_an_original_from_the_operator_that_the_daemon_delivers(
    project: Project,
) -> None:
    text = 'Parse quoted commas.\n\nA field in quotes may hold a comma: "a,b" is one field.\n'
    code, out, err = send(project, "coder,QA", text, "--by", "alice")
    assert code == 0, err
    assert out.startswith("HANDOFF QUEUED: ")
    [original] = box(project, "outbox")
    assert out.strip() == f"HANDOFF QUEUED: {original}"
    assert original.name.endswith("_from_operator_to_coder_QA.handoff")
    handoff = hf.parse(original.read_bytes(), original.name)
    assert [k for k, _ in handoff.headers] == [
        "id", "from", "to", "priority", "type", "message", "sent_by", "created_at"
    ]  # fmt: skip
    assert (handoff.get("from"), handoff.get("to"), handoff.get("type")) == (
        "operator", "coder,QA", "note"
    )  # fmt: skip
    assert handoff.get("message") == "Parse quoted commas."
    assert handoff.get("sent_by") == "alice"
    assert handoff.body == "Re-read your role and constitution.\n\n" + text  # the whole text
    [line] = events(project, "operator_sent")
    assert (line["by"], line["to"], line["file"]) == ("alice", ["coder", "QA"], original.name)

    deliver(project)
    assert box(project, "sent") and not box(project, "outbox")  # as any original
    taken = project.run("ready_for_next", role="coder")
    assert taken.out.splitlines()[1:5] == [
        "FROM: operator", "TYPE: note", "PRIORITY: 50", "SENT_BY: alice"
    ]  # fmt: skip
    assert taken.out.endswith(handoff.body)
    copy = next((project.handoffs("QA") / "inbox" / "new").glob("*.handoff"))
    headers = hf.read(str(copy))
    assert headers.get("recipient") == "QA" and headers.get("enqueued_at")
    board = project.run("handoffd", "status", role=None, cwd=project.root).out
    assert "operator (alice)" in board


def test_the_sender_is_by_else_user_else_operator(project: Project) -> None:
    assert send(project, "coder", "one", user="bob")[0] == 0
    assert send(project, "coder", "two")[0] == 0
    names = [hf.parse(p.read_bytes(), p.name).get("sent_by") for p in box(project, "outbox")]
    assert names == ["bob", "operator"]


def test_a_task_makes_a_note_named_for_it_and_task_with_commit_a_git_handoff(
    project: Project,
) -> None:
    assert send(project, "cleaner", "Tidy the imports.", "--task", "tidy-imports",
                "--priority", "20")[0] == 0  # fmt: skip
    commit = project.commit("coder")
    code, _, err = send(project, "QA", "Check this build.", "--task", "build-7", "--commit", commit)
    assert code == 0, err
    note, git_handoff = (hf.parse(p.read_bytes(), p.name) for p in box(project, "outbox"))
    assert (note.get("type"), note.get("task"), note.get("priority")) == (
        "note",
        "tidy-imports",
        "20",
    )
    assert (git_handoff.get("type"), git_handoff.get("task")) == ("git_handoff", "build-7")
    assert git_handoff.get("commit") == commit and git_handoff.get("role") == "operator"
    assert git_handoff.body.endswith("\n\nCheck this build.\n")
    deliver(project)
    taken = project.run("ready_for_next", role="cleaner").out
    assert "TASK_NAME: tidy-imports\nSENT_BY: operator\n" in taken


def test_all_is_every_role_and_each_pool_once_not_its_members(tmp_path: Path) -> None:
    project = make_pool_project(tmp_path.resolve() / "p", size=2, others=("coder", "QA"))
    code, _, err = send(project, "all", "Everyone: read the new style guide.")
    assert code == 0, err
    [original] = box(project, "outbox")
    assert hf.parse(original.read_bytes(), original.name).get("to") == "coder,QA,cleaner"


def test_the_message_is_the_first_line_cut_at_a_word() -> None:
    long = "Rewrite the tokenizer so that every quoted field keeps its inner commas intact today"
    assert len(long) > 80
    cut = first_line("\n  " + long + "\nmore")
    assert cut.endswith("…") and len(cut) <= 80 and long.startswith(cut[:-1])
    assert cut[:-1] == long[: len(cut) - 1] and long[len(cut) - 1] == " "  # at a word
    assert first_line("short\tline\nnext") == "short line"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["nobody", "work"], "- Unknown recipient role 'nobody'."),
        (["coder", "work", "--priority", "5"],
         "- Header 'priority' must be two digits from 00 to 99; got '5'."),
        (["coder", "   "], "- The text is empty: give the work (1 byte to 16 KiB)."),
        (["coder", "work", "--commit", "abcdef0123"],
         "- Missing required header 'task' for git_handoff."),
        (["coder", "work", "--task", "t" * 81],
         "- Header 'task' must be no longer than 80 characters; got 81."),
        (["coder", "work", "--depends-on", "20260101T000000Z_000009_from_coder"],
         "- Unknown dependency '20260101T000000Z_000009_from_coder'."),
        (["coder,coder", "work"], "- Duplicate recipient 'coder'."),
        (["coder", "work", "--task", "a\nb"], "- Header 'task' must be one line."),
        (["coder", "x" * (16 * 1024 + 1)], "- The text is 16385 bytes, over the limit of 16384."),
    ],
)  # fmt: skip
def test_every_refusal_is_handoff_invalid_exit_2_and_queues_nothing(
    project: Project, args: list[str], said: str
) -> None:
    code, out, err = send(project, *args)
    assert (code, out) == (2, "")
    assert err.startswith("HANDOFF INVALID: handoffd send\n\nErrors:\n"), err
    assert said in err.splitlines(), err
    assert "Usage: handoffd send TO" in err
    assert box(project, "outbox") == []
    assert not events(project, "operator_sent")


def test_a_text_from_a_file_over_the_limit_or_not_utf8_is_refused(
    project: Project, tmp_path: Path
) -> None:
    big, bad = tmp_path / "big.txt", tmp_path / "bad.txt"
    big.write_bytes(b"x" * (16 * 1024 + 1))
    bad.write_bytes(b"caf\xe9\n")
    for path in (big, bad):
        code, _, err = send(project, "coder", "--file", str(path))
        assert code == 2 and err.startswith("HANDOFF INVALID"), err
    good = tmp_path / "good.txt"
    good.write_text("From a file.\n")
    assert send(project, "coder", "--file", str(good))[0] == 0
    assert len(box(project, "outbox")) == 1


def test_operator_is_reserved_in_roles_tsv_and_in_the_configuration(
    project: Project, tmp_path: Path
) -> None:
    text = (project.root / config.ROLES_FILE).read_text()
    (project.root / config.ROLES_FILE).write_text(
        text + f"operator\toperator\t{tmp_path}\toperator\toperator\tagent\ttask\n"
    )
    code, _, err = op(project, "status")
    assert code == 1 and "'operator' is a reserved name" in err, err
    conf = tmp_path / "swarm.conf"
    conf.write_text("window coder shell master\nwindow operator shell ops\n")
    done = handoffd("init", "--config", str(conf), str(tmp_path / "new"))
    assert done.returncode != 0 and "'operator' is a reserved name" in done.stderr, done.stderr


def test_an_agent_cannot_act_as_the_operator(project: Project) -> None:
    text = "type: note\nto: coder\npriority: 50\nmessage: forged\n"
    draft = str(project.draft(text))
    done = project.run("swarm_handoff", draft, role="operator", cwd=project.root)
    assert done.code == 1 and box(project, "outbox") == []


# --- the operator's inbox ---------------------------------------------------------------


def test_work_handed_to_the_operator_is_listed_and_replied_to_in_its_thread(
    project: Project,
) -> None:
    from_agent(project, "cleaner", "Needs human review: is the parser API right?", "40")
    deliver(project)
    [copy] = box(project, "inbox/new")
    card = f"{hf.path_id(str(copy))}@operator"
    status = project.run("handoffd", "status", role=None, cwd=project.root).out.splitlines()
    assert status[1].startswith("for the operator: 1 waiting (oldest ")
    assert not any(line.startswith("operator ") for line in status)  # no pane line for it
    code, out, _ = op(project, "inbox")
    assert code == 0
    assert out.split()[:2] == [card, "cleaner"] and "is the parser API right?" in out
    listed = json.loads(op(project, "inbox", "--json")[1])
    assert [c["card"] for c in listed] == [card]

    code, out, err = op(project, "reply", card, "Yes, go on.", "--by", "alice")
    assert code == 0, err
    queued, completed = out.splitlines()
    assert queued.startswith("HANDOFF QUEUED: ") and completed.startswith("COMPLETED: ")
    reply = Path(queued.removeprefix("HANDOFF QUEUED: "))
    sent = hf.parse(reply.read_bytes(), reply.name)
    assert (sent.get("to"), sent.get("in_reply_to"), sent.get("priority")) == (
        "cleaner", hf.path_id(str(copy)), "40"
    )  # fmt: skip
    done = Path(completed.removeprefix("COMPLETED: "))
    closed = hf.read(str(done))
    assert done.parent.name == "completed"
    assert closed.get("replied_by") == "alice" and closed.get("completed_at")
    assert op(project, "inbox")[1] == "nothing waiting for the operator\n"
    assert card in op(project, "inbox", "--all")[1]
    again = op(project, "reply", card, "twice")
    assert again[0] == 2 and again[2] == f"UNKNOWN_CARD: {card}\n"
    assert len(box(project, "outbox")) == 1  # nothing queued by the refusal

    deliver(project)
    taken = project.run("ready_for_next", role="cleaner").out
    assert "FROM: operator\n" in taken and "SENT_BY: alice\n" in taken
    assert taken.endswith("Yes, go on.\n")
    assert "from operator (alice)" in project.run("resume", role="cleaner").out
    digest = op(project, "digest", hf.path_id(str(reply)))[1]
    assert hf.path_id(str(copy)) in digest.split("receipt: ")[1]  # the thread it answers
    assert " operator (alice) → cleaner note" in digest
    back = op(project, "digest", hf.path_id(str(copy)))[1]  # and the card finds its reply
    assert hf.path_id(str(reply)) in back.split("receipt: ")[1]


def test_ack_closes_a_card_without_a_reply(project: Project) -> None:
    from_agent(project, "QA", "FYI: the nightly run is green.")
    deliver(project)
    [copy] = box(project, "inbox/new")
    card = f"{hf.path_id(str(copy))}@operator"
    code, out, err = op(project, "ack", card, "--by", "bob")
    assert code == 0, err
    [line] = out.splitlines()
    done = Path(line.removeprefix("COMPLETED: "))
    assert hf.read(str(done)).get("acked_by") == "bob" and box(project, "outbox") == []
    for wrong in (card, "nope@operator", f"{hf.path_id(str(copy))}@QA", "garbage"):
        assert op(project, "ack", wrong) == (2, "", f"UNKNOWN_CARD: {wrong}\n")


def test_mail_for_the_operator_wakes_no_pane(project: Project) -> None:
    from_agent(project, "coder", "Look at this.")
    deliver(project)
    assert box(project, "inbox/new")
    assert all(e.get("role") != "operator" for e in events(project, "wake"))
    assert all(e.get("role") != "operator" for e in events(project, "wake_failed"))


# --- hostile files -----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["outbox", "inbox", "handoffs"])
def test_an_operator_folder_behind_a_link_is_never_written_through(
    project: Project, tmp_path: Path, where: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    handoffs = project.root / OPERATOR_H
    target = handoffs if where == "handoffs" else handoffs / where
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.rmdir()
    target.symlink_to(outside, target_is_directory=True)
    code, _, err = send(project, "coder", "work")
    if where == "inbox":
        assert code == 0, err  # queueing needs the outbox alone
        from_agent(project, "coder", "for you")
        deliver(project)
        assert list(outside.rglob("*.handoff")) == []  # never delivered through the link
        assert op(project, "ack", "x@operator")[0] == 2
    else:
        assert code == 2 and "LINKED_FOLDER" in err, err
        assert list(outside.rglob("*")) == []


@pytest.mark.parametrize("what", ["fifo", "link", "huge", "binary"])
def test_a_hostile_file_in_the_operators_inbox_never_hangs_or_breaks_the_views(
    project: Project, tmp_path: Path, what: str
) -> None:
    new = project.root / OPERATOR_H / "inbox" / "new"
    new.mkdir(parents=True, exist_ok=True)
    name = "50_20260101T000000Z_000001_from_coder_to_operator.handoff"
    if what in ("fifo", "link"):
        plant(new / name, what, tmp_path)
    elif what == "huge":
        (new / name).write_bytes(b"id: x\n" + b"a" * (2 * 1024 * 1024))
    else:
        (new / name).write_bytes(b"id: \xff\xfe\n\n\x00body")
    started = time.monotonic()
    for args in (("inbox",), ("inbox", "--json"), ("status",)):
        done = handoffd(*args, "--root", str(project.root), timeout=HANG)
        assert done.returncode == 0, done.stderr
    assert op(project, "ack", "20260101T000000Z_000001_from_coder@operator")[0] in (0, 2)
    assert time.monotonic() - started < HANG


# --- on real tmux, with the daemon running ---------------------------------------------------


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


def test_a_round_trip_operator_to_coder_and_back_on_tmux(project: Project, tmux: Tmux) -> None:
    """The operator gives work, the coder's pane is woken, the coder hands its answer to the
    operator (no pane woken for it), the operator replies, the coder is woken again."""
    use_socket(project, tmux.socket)
    tmux.session("coder")
    assert handoffd("start", "--idle-after", "0", str(project.root)).returncode == 0
    try:
        code, _, err = send(project, "coder", "Add a --verbose flag.", "--by", "alice")
        assert code == 0 and without_daemon_warning(err) == "", err
        wait_for(lambda: tmux.wakes("coder") == 1, what="coder woken")
        taken = project.run("ready_for_next", role="coder")
        assert "SENT_BY: alice" in taken.out
        from_agent(project, "coder", "Done: is the flag name right?")
        assert project.run("done_with_current", role="coder").code == 0
        wait_for(lambda: box(project, "inbox/new"), what="the operator's copy")
        [copy] = box(project, "inbox/new")
        card = f"{hf.path_id(str(copy))}@operator"
        assert op(project, "reply", card, "Yes, keep it.")[0] == 0
        wait_for(lambda: tmux.wakes("coder") == 2, what="coder woken for the reply")
        again = project.run("ready_for_next", role="coder")
        assert again.out.endswith("Yes, keep it.\n") and "SENT_BY: " in again.out
    finally:
        handoffd("stop", str(project.root))
    assert all(e.get("role") != "operator" for e in events(project, "wake"))
    assert box(project, "sent") and box(project, "inbox/completed")


def test_an_agent_hands_work_to_the_operator_through_send_handoff_and_the_mcp_tool(
    project: Project, tmp_path: Path
) -> None:
    from tests.mcp_support import agent, text

    draft = project.draft("type: note\nto: operator\npriority: 50\nmessage: by command\n")
    done = project.run("handoffd", "send-handoff", str(draft), role="QA")
    assert done.code == 0, done.err
    with agent(project, "cleaner", tmp_path / "mcp.log") as cleaner:
        said = cleaner.call("send_handoff", type="note", to="operator", priority="50",
                            message="by tool")  # fmt: skip
        assert not said.is_error and text(said).startswith("HANDOFF QUEUED: "), text(said)
        names = {tool.name for tool in cleaner.tools()}
        assert not names & {"send", "inbox", "reply", "ack"}  # an agent never acts as one
    deliver(project)
    listed = op(project, "inbox")[1]
    assert "by command" in listed and "by tool" in listed


@pytest.mark.parametrize("what", ["fifo", "link", "huge", "binary"])
def test_a_hostile_file_in_the_operators_outbox_is_refused_or_skipped_never_followed(
    project: Project, tmp_path: Path, what: str
) -> None:
    outbox = project.root / OPERATOR_H / "outbox"
    outbox.mkdir(parents=True, exist_ok=True)
    name = "50_20260101T000000Z_000001_from_operator_to_coder.handoff"
    if what in ("fifo", "link"):
        plant(outbox / name, what, tmp_path)
    elif what == "huge":
        (outbox / name).write_bytes(b"id: x\nfrom: operator\n\n" + b"a" * (128 * 1024))
    else:
        (outbox / name).write_bytes(b"id: \xff\nfrom: operator\nto: coder\n\nbody\n")
    done = handoffd("run", "--once", str(project.root), timeout=HANG)
    assert done.returncode == 0, done.stderr
    assert list((project.handoffs("coder") / "inbox" / "new").glob("*.handoff")) == []
    if what in ("huge", "binary"):
        assert box(project, "failed") and (project.root / OPERATOR_H / "failed" / f"{name}.error")
    assert handoffd("status", "--root", str(project.root), timeout=HANG).returncode == 0
