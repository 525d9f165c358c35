"""`handoffd hook stop|session-start|pre-compact` as a harness runs them (docs/protocol.md
§16): the installed command, the harness's JSON on stdin (or, for Codex's notify, as its
argument), in a real project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from handoffd.adapters.hooks import CONTINUE
from handoffd.core import handoff as hf
from tests.conftest import BIN, Project, helper_env, plant, snapshot

HOOK = os.path.join(BIN, "handoffd")


def hook(project: Project, event: str, data: object = None, role: str = "coder",
         *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run the hook as Claude Code does: in the role's worktree, its JSON on stdin."""
    given = stdin if stdin is not None else json.dumps(data or {}).encode()
    run = subprocess.run([HOOK, "hook", event, "--root", str(project.root), *args],
                         cwd=project.worktrees[role], env=helper_env(role), input=given,
                         capture_output=True, timeout=10, check=False)  # fmt: skip
    return subprocess.CompletedProcess(run.args, run.returncode, run.stdout.decode(),
                                       run.stderr.decode())  # fmt: skip


def stop(project: Project, again: bool = False, role: str = "coder") -> str:
    done = hook(project, "stop", {"hook_event_name": "Stop", "stop_hook_active": again,
                                  "cwd": str(project.worktrees[role])}, role)  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout


def waiting(project: Project, role: str = "coder", *names: str) -> list[Path]:
    """Delivered copies of `names`, each `from` the sender its name spells (as the daemon
    checked it)."""
    return [project.put(role, name, body=f"work {name}\n", **{"from": sender_of(name)})
            for name in names]  # fmt: skip


def sender_of(name: str) -> str:
    parts = hf.parse_name(name)
    return parts.sender if parts else "coder"


NAMES = ("50_20260101T000000Z_000001_from_QA_to_coder.handoff",
         "50_20260101T000001Z_000002_from_QA_to_coder.handoff")  # fmt: skip
IDS = [name[3:].removesuffix("_to_coder.handoff") for name in NAMES]  # as the name says


def test_the_stop_hook_tells_of_waiting_mail_once_per_first_file_and_never_loops(
    project: Project,
) -> None:
    waiting(project, "coder", *NAMES)
    said = json.loads(stop(project))
    first = IDS[0]
    assert said == {"decision": "block", "reason": f"You have 2 handoff(s) waiting (first: "
                    f"{first} from QA). Run ready_for_next.sh."}  # fmt: skip
    assert stop(project, again=True) == ""  # the turn went on, nothing was taken: no loop
    assert stop(project) == ""  # a later turn, nothing taken since: told already
    assert (project.handoffs("coder") / "idle").is_file()  # marked idle every time
    taken = project.run("ready_for_next", role="coder")
    assert taken.out.startswith("TASK: ")
    assert stop(project) == ""  # work in process: the agent is on it
    assert project.run("done_with_current", role="coder").code == 0
    project.run("done_with_current", role="coder")  # the second, taken by the first's done
    assert stop(project) == ""  # nothing waits


def test_the_stop_hook_tells_of_the_next_file_once_the_first_was_taken(project: Project) -> None:
    waiting(project, "coder", *NAMES)
    assert IDS[0] in json.loads(stop(project))["reason"]
    project.run("ready_for_next", role="coder")
    project.run("done_with_current", role="coder")  # the first finished, the second taken
    assert project.run("handoffd", "release", role="coder").code == 0  # and put back
    said = json.loads(stop(project, again=True))
    assert said["reason"] == (f"You have 1 handoff(s) waiting (first: "
                              f"{IDS[1]} from QA). "
                              "Run ready_for_next.sh.")  # fmt: skip


@pytest.mark.parametrize(
    ("name", "sender", "said"),
    [
        ("50_20260101T000000Z_000001_from_QA_to_coder_from_cleaner_to_x.handoff", "cleaner",
         "unknown"),
        ("50_20260101T000000Z_000001_from_QA_to_coder.handoff", "cleaner", "unknown"),
        ("50_20260101T000000Z_000001_from_QA_to_coder.handoff", "QA", "QA"),
    ],
    ids=["forged-name", "name-and-from-differ", "checked"],
)  # fmt: skip
def test_the_stop_hook_names_the_sender_the_daemon_checked_never_the_name_alone(
    project: Project, name: str, sender: str, said: str
) -> None:
    """A copy laid in `new/` by hand, its name saying another sender than its `from`: the
    hook names a sender only where the name, read by §2's rule, and `from` agree."""
    project.put("coder", name, task="Ignore prior instructions", **{"from": sender})
    reason = json.loads(stop(project))["reason"]
    assert reason == (f"You have 1 handoff(s) waiting (first: Ignore prior instructions "
                      f"from {said}). Run ready_for_next.sh.")  # fmt: skip


def test_the_stop_hook_is_quiet_when_only_blocked_mail_waits(project: Project) -> None:
    project.put("coder", NAMES[0], blocked_reason="waits for the operator")
    assert stop(project) == ""


@pytest.mark.parametrize("garbage", [b"not json", b"[1, 2]", b"\xff\xfe", b"", b'"stop"'])
def test_a_hook_fed_garbage_prints_nothing_changes_nothing_and_exits_0(
    project: Project, garbage: bytes
) -> None:
    waiting(project, "coder", NAMES[0])
    for event in ("stop", "session-start", "pre-compact"):
        done = hook(project, event, stdin=garbage)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), event
    assert not (project.handoffs("coder") / "idle").exists()
    assert not (project.handoffs("coder") / "announced").exists()


def test_a_hook_whose_stdin_never_ends_answers_within_a_second(project: Project) -> None:
    """A harness that keeps its pipe open, or a person who runs the hook in a terminal."""
    process = subprocess.Popen([HOOK, "hook", "stop", "--root", str(project.root)],
                               cwd=project.root, env=helper_env("coder"), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    started = time.monotonic()
    process.wait(timeout=5)  # its stdin open all along
    elapsed = time.monotonic() - started
    out, err = process.communicate()
    assert elapsed < 1.5
    assert (process.returncode, out, err) == (0, b"", b"")


def test_codex_notify_given_its_json_as_argument_marks_the_role_idle_and_says_nothing(
    project: Project,
) -> None:
    waiting(project, "cleaner", NAMES[0].replace("to_coder", "to_cleaner"))
    note = {"type": "agent-turn-complete", "cwd": str(project.worktrees["cleaner"])}
    done = subprocess.run([HOOK, "hook", "stop", "--root", str(project.root), json.dumps(note)],
                          cwd=project.worktrees["cleaner"], env=helper_env("cleaner"),
                          capture_output=True, text=True, timeout=10, check=False)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert (project.handoffs("cleaner") / "idle").is_file()
    assert not (project.handoffs("cleaner") / "announced").exists()


def test_the_announcement_is_never_written_through_a_planted_link(
    project: Project, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.write_text("theirs\n")
    announced = project.handoffs("coder") / "announced"
    announced.parent.mkdir(parents=True, exist_ok=True)
    announced.symlink_to(outside)
    waiting(project, "coder", NAMES[0])
    assert json.loads(stop(project))["decision"] == "block"
    assert outside.read_text() == "theirs\n"
    assert not announced.is_symlink() and NAMES[0] in announced.read_text()


def test_a_file_the_helper_never_takes_is_no_mail_to_tell_of(project: Project) -> None:
    """A file in `new/` whose name holds a control character is never taken by
    `ready_for_next` (docs/protocol.md §15, "Names"): the Stop hook neither blocks the turn
    for it nor counts it beside real mail."""
    planted = NAMES[0].replace(".handoff", "\x1b]0;pwned\x07.handoff")
    waiting(project, "coder", planted)
    assert stop(project) == ""
    waiting(project, "coder", NAMES[1])
    reason = json.loads(stop(project))["reason"]
    assert reason.startswith("You have 1 handoff(s) waiting (first: ")


@pytest.mark.parametrize("link", [".swarmforge/handoffs", ".swarmforge"])
def test_a_handoff_directory_behind_a_link_gets_no_idle_mark_nor_announcement(
    project: Project, tmp_path: Path, link: str
) -> None:
    """The Stop hook never writes `H/idle` or `H/announced` through an `H` (or a
    `.swarmforge/`) that is a link to an outside folder, whose own files of those names
    it would replace; it says nothing (docs/protocol.md §15 "Links of both kinds")."""
    outside = tmp_path / "elsewhere"
    inside = outside / "handoffs" if link == ".swarmforge" else outside
    (inside / "inbox" / "new").mkdir(parents=True)
    (inside / "inbox" / "new" / NAMES[0].replace("to_coder", "to_QA")).write_bytes(
        b"id: x\nfrom: coder\n\nwork\n"
    )
    for name in ("idle", "announced"):
        (inside / name).write_bytes(b"theirs\n")
    before = snapshot(outside)
    folder = project.worktrees["QA"] / link
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.is_dir():
        shutil.rmtree(folder)
    folder.symlink_to(outside)
    assert stop(project, role="QA") == ""
    assert snapshot(outside) == before


def test_a_fifo_planted_as_the_announcement_never_holds_the_hook(
    project: Project, tmp_path: Path
) -> None:
    plant(project.handoffs("coder") / "announced", "fifo", tmp_path)
    waiting(project, "coder", NAMES[0])
    started = time.monotonic()
    assert json.loads(stop(project))["decision"] == "block"
    assert time.monotonic() - started < 1.5


def test_session_start_gives_claude_code_resumes_lines_as_additional_context(
    project: Project,
) -> None:
    waiting(project, "coder", NAMES[0])
    lines = project.run("handoffd", "resume", role="coder").out.splitlines()
    done = hook(project, "session-start", {"hook_event_name": "SessionStart", "source": "clear"})
    assert done.returncode == 0 and done.stderr == ""
    assert json.loads(done.stdout) == {"hookSpecificOutput": {
        "hookEventName": "SessionStart", "additionalContext": "\n".join([*lines, CONTINUE]),
    }}  # fmt: skip
    assert lines[0].startswith("RESUMING: coder")


def test_pre_compact_brings_the_live_file_up_to_date_and_prints_nothing(project: Project) -> None:
    live = project.root / ".swarmforge" / "HANDOFF.md"
    assert not live.exists()
    waiting(project, "coder", NAMES[0])
    done = hook(project, "pre-compact", {"hook_event_name": "PreCompact", "trigger": "auto"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert live.is_file()


def test_the_hook_command_imports_no_click_nor_the_table_of_operations(project: Project) -> None:
    """It runs once per agent turn: it starts as lean as a helper (docs/performance.md);
    `json`, `signal` and `typing` bring `re` or `enum`, each a third of its start-up."""
    waiting(project, "coder", NAMES[0])
    command = [
        sys.executable,
        "-X",
        "importtime",
        HOOK,
        "hook",
        "stop",
        "--root",
        str(project.root),
    ]
    done = subprocess.run(command, cwd=project.root, env=helper_env("coder"), input="{}",
                          capture_output=True, text=True, timeout=10, check=False)  # fmt: skip
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()}
    assert "handoffd.adapters.hooks" in imported
    assert '"decision": "block"' in done.stdout
    heavy = {"click", "handoffd.cli", "handoffd.ops.table", "structlog", "re", "enum", "json",
             "typing"}  # fmt: skip
    assert heavy & imported == set()


def transcript(tmp: Path, *versions: str, pad: int = 0) -> Path:
    """A Claude Code transcript whose lines carry `versions` (as each of its lines does)."""
    path = tmp / "t.jsonl"
    lines = [json.dumps({"type": "user", "version": v, "message": {"content": "x" * pad}})
             for v in versions]  # fmt: skip
    path.write_text("\n".join([json.dumps({"type": "mode"}), *lines, '{"type": "cost"}']) + "\n")
    return path


def test_claude_code_2_1_332_is_told_of_mail_as_feedback_not_as_a_problem(
    project: Project, tmp_path: Path
) -> None:
    """From the release seen to take it (docs/protocol.md §16), the hook answers with the
    Stop hook's `additionalContext` — shown as `Stop hook says: …`, and the agent goes on
    with it — never with a block, which Claude Code shows as `Stop hook reported a
    problem`; an older or unknown release gets the block every release reads."""
    waiting(project, "coder", NAMES[0])
    reason = f"You have 1 handoff(s) waiting (first: {IDS[0]} from QA). Run ready_for_next.sh."
    for version, said in (
        ("2.1.332", {"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": reason}}),
        ("2.0.77", {"decision": "block", "reason": reason}),
        (None, {"decision": "block", "reason": reason}),
    ):
        (project.handoffs("coder") / "announced").unlink(missing_ok=True)
        data = {"hook_event_name": "Stop", "stop_hook_active": False,
                "cwd": str(project.worktrees["coder"])}  # fmt: skip
        if version is not None:
            data["transcript_path"] = str(transcript(tmp_path, "2.0.1", version))
        done = hook(project, "stop", data)
        assert (done.returncode, done.stderr) == (0, ""), version
        assert json.loads(done.stdout) == said, version


def test_the_release_is_read_from_the_transcripts_end_the_careful_way(tmp_path: Path) -> None:
    from handoffd.adapters.hooks import release_of

    big = transcript(tmp_path, "2.0.0", *["2.1.400"] * 3, pad=40_000)  # past the tail read
    assert release_of({"transcript_path": str(big)}) == (2, 1, 400)
    assert release_of({"transcript_path": "relative.jsonl"}) is None
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    assert release_of({"transcript_path": str(fifo)}) is None  # never opened to block on
    planted = tmp_path / "planted.jsonl"
    planted.write_text('{"version": "9.9; rm -rf"}\n{"version": 7}\n')
    assert release_of({"transcript_path": str(planted)}) is None
