"""Queueing: the queued file's exact content, and the sequence number under a lock that a
killed process cannot leave held (docs/protocol.md §2, §3)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from handoffd.queue import outbox
from handoffd.queue.draft import Draft
from tests import crashstates, crashtrace
from tests.conftest import (
    BIN,
    HANG,
    HOSTILE,
    Project,
    helper_env,
    plant,
    without_daemon_warning,
)
from tests.crashtrace import Step
from tests.fault_support import strace_problem

NOW = 1781532331.482113  # 2026-06-15T14:05:31.482113Z


def git_draft() -> Draft:
    headers = {
        "type": "git_handoff",
        "to": "cleaner, QA",
        "priority": "50",
        "task": "t-1",
        "commit": "A1B2C3D9E8",
    }
    return Draft(headers, ["cleaner", "QA"], "a1b2c3d9e8")


def note_draft() -> Draft:
    headers = {"type": "note", "to": "QA", "priority": "70", "message": "Waiting on QA result."}
    return Draft(headers, ["QA"], None)


def test_compose_a_git_handoff_names_and_orders_everything_as_the_protocol_says() -> None:
    name, content = outbox.compose(git_draft(), "coder", 42, NOW)
    assert name == "50_20260615T140531Z_000042_from_coder_to_cleaner_QA.handoff"
    assert content.render().decode() == (
        "id: 20260615T140531Z_000042_from_coder\n"
        "from: coder\n"
        "to: cleaner,QA\n"
        "priority: 50\n"
        "type: git_handoff\n"
        "role: coder\n"
        "task: t-1\n"
        "commit: a1b2c3d9e8\n"
        "created_at: 2026-06-15T14:05:31.482113Z\n"
        "\n"
        "Re-read your role and constitution.\n"
        "\n"
        "merge_and_process coder a1b2c3d9e8\n"
    )


def test_compose_a_note_carries_the_message_in_header_and_body() -> None:
    name, content = outbox.compose(note_draft(), "cleaner", 7, NOW)
    assert name == "70_20260615T140531Z_000007_from_cleaner_to_QA.handoff"
    assert content.render().decode() == (
        "id: 20260615T140531Z_000007_from_cleaner\n"
        "from: cleaner\n"
        "to: QA\n"
        "priority: 70\n"
        "type: note\n"
        "message: Waiting on QA result.\n"
        "created_at: 2026-06-15T14:05:31.482113Z\n"
        "\n"
        "Re-read your role and constitution.\n"
        "\n"
        "Waiting on QA result.\n"
    )


def test_sequence_numbers_count_up_in_a_six_digit_file(tmp_path: Path) -> None:
    handoffs = tmp_path / "handoffs"
    assert [outbox.next_sequence(str(handoffs)) for _ in range(3)] == [1, 2, 3]
    assert (handoffs / "sequence").read_text() == "000003\n"


def test_an_existing_sequence_file_is_continued(tmp_path: Path) -> None:
    (tmp_path / "sequence").write_text("000041\n")
    assert outbox.next_sequence(str(tmp_path)) == 42


def test_a_garbled_sequence_file_restarts_the_count(tmp_path: Path) -> None:
    (tmp_path / "sequence").write_text("not a number\n")
    assert outbox.next_sequence(str(tmp_path)) == 1


def test_a_leftover_lock_directory_of_the_older_tool_is_ignored(project: Project) -> None:
    (project.handoffs("coder") / "sequence.lock").mkdir(parents=True)
    draft = project.draft(project.note_draft())
    result = project.run("swarm_handoff", str(draft), role="coder")
    assert (result.code, without_daemon_warning(result.err)) == (0, "")
    assert "_000001_from_coder_" in result.out


# --- leftovers of a killed or powered-off queue ------------------------------------------


def leftovers(handoffs: Path) -> tuple[list[Path], list[Path]]:
    """Temps a dead `queue` left, and files an agent keeps in outbox/tmp/ itself."""
    drafts = handoffs / "outbox" / "tmp"
    drafts.mkdir(parents=True, exist_ok=True)
    stale = [handoffs / ".sequence.4242.0.tmp", drafts / ".50_x_to_QA.handoff.4242.1.tmp"]
    # a live writer's fresh heartbeat temp (this process's): nobody's to sweep
    own = [drafts / "draft.txt", drafts / ".notes.tmp", handoffs / f".heartbeat.{os.getpid()}.tmp"]
    for path in stale + own:
        path.write_text("x")
    return stale, own


def test_queueing_sweeps_the_temps_a_dead_queue_left_and_nothing_else(project: Project) -> None:
    """Every writer of those temps holds the queueing lock while they exist, so any found
    under it are a killed or powered-off sender's: gone at the next send."""
    stale, own = leftovers(project.handoffs("coder"))
    draft = project.draft(project.note_draft())
    assert project.run("swarm_handoff", str(draft), role="coder").code == 0
    assert [p.exists() for p in stale] == [False, False]
    assert all(p.exists() for p in own)


def test_the_sweep_leaves_the_temps_alone_while_someone_is_queueing(tmp_path: Path) -> None:
    """A busy lock means a live sender: its temps are in use, and a later sweep will do."""
    import fcntl

    stale, _ = leftovers(tmp_path)
    holder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        outbox.sweep(str(tmp_path))
        assert all(p.exists() for p in stale)
    finally:
        os.close(holder)
    outbox.sweep(str(tmp_path))
    assert not any(p.exists() for p in stale)
    outbox.sweep(str(tmp_path / "missing"))  # a role with no handoff directory yet


# --- processes ------------------------------------------------------------------------

SENDERS, CALLS = 8, 10

SENDER = textwrap.dedent(
    """\
    import os, subprocess, sys
    where = sys.argv[1]
    for n in range(int(sys.argv[2])):
        draft = os.path.join(where, f"draft-{os.getpid()}-{n}")
        with open(draft, "w") as file:
            file.write("type: note\\nto: cleaner\\npriority: 50\\nmessage: hello\\n")
        done = subprocess.run(["swarm_handoff", draft], capture_output=True, text=True)
        print(done.returncode, done.stdout.strip(), done.stderr.strip(), flush=True)
    """
)


def test_concurrent_senders_in_one_worktree_get_distinct_sequence_numbers(
    project: Project, tmp_path: Path
) -> None:
    drafts = tmp_path / "drafts"
    drafts.mkdir()
    senders = [
        subprocess.Popen(
            [sys.executable, "-c", SENDER, str(drafts), str(CALLS)],
            cwd=project.root,
            env=helper_env("coder"),
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(SENDERS)
    ]
    lines = [line for sender in senders for line in sender.communicate(timeout=300)[0].splitlines()]
    assert all(line.startswith("0 HANDOFF QUEUED: ") for line in lines), lines
    queued = sorted(os.listdir(project.box("coder", "outbox")))
    queued.remove("tmp")
    sequences = {name.split("_")[2] for name in queued}
    assert len(lines) == len(queued) == len(sequences) == SENDERS * CALLS
    assert sequences == {f"{n:06d}" for n in range(1, SENDERS * CALLS + 1)}
    assert os.listdir(project.box("coder", "outbox/tmp")) == []


LOCK_HOLDER = textwrap.dedent(
    """\
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(600)
    """
)


def test_a_lock_holder_killed_with_sigkill_does_not_block_the_next_call(project: Project) -> None:
    handoffs = project.handoffs("coder")
    handoffs.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(handoffs)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "locked\n"
        assert not try_lock(handoffs), "the holder should hold the lock now"
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    draft = project.draft(project.note_draft())
    result = project.run("swarm_handoff", str(draft), role="coder")  # times out if blocked
    assert (result.code, without_daemon_warning(result.err)) == (0, "")
    assert result.out.startswith("HANDOFF QUEUED: ")


def try_lock(directory: Path) -> bool:
    """Whether another process could take the sequence lock right now (without waiting)."""
    probe = "import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\n"
    probe += "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    result = subprocess.run([sys.executable, "-c", probe, str(directory)], capture_output=True)
    return result.returncode == 0


def test_a_name_over_the_filesystems_limit_is_named_as_a_draft_error() -> None:
    """A queued name that could not be created is refused up front, never queued or stuck."""
    fits = Draft(note_draft().headers, ["QA"], None)
    many = [f"reviewer-{n:02d}-with-a-long-role-name" for n in range(8)]
    too_long = Draft(note_draft().headers, many, None)
    assert outbox.name_problem(fits, "coder") is None
    problem = outbox.name_problem(too_long, "coder")
    assert problem is not None
    assert "over the filesystem's limit of 255" in problem and "fewer recipients" in problem


def test_swarm_handoff_refuses_a_draft_whose_queued_name_would_be_too_long(
    project: Project,
) -> None:
    """Issue: ten recipients made a 245+ byte name the daemon deferred forever; now the draft
    is refused (exit 2, kept) with the other draft errors' format, and nothing is queued."""
    many = [f"reviewer-{n:02d}-with-a-long-role-name" for n in range(8)]
    rows = []
    for name in many:
        worktree = project.root / ".worktrees" / name
        worktree.mkdir(parents=True)
        rows.append("\t".join((name, name, str(worktree), name, name, "shell", "task")))
    roles = project.root / ".swarmforge" / "roles.tsv"
    roles.write_text(roles.read_text() + "\n".join(rows) + "\n")
    draft = project.draft(f"type: note\nto: {','.join(many)}\npriority: 50\nmessage: hi\n")
    result = project.run("swarm_handoff", str(draft), role="coder")
    assert result.code == 2, result.err
    assert result.err.startswith(f"HANDOFF INVALID: {draft}\n\nErrors:\n- The queued file name")
    assert draft.exists()
    outbox_dir = project.box("coder", "outbox")
    assert not outbox_dir.exists() or not [p for p in outbox_dir.iterdir() if p.is_file()]


# --- hostile files (docs/protocol.md Part II) -------------------------------------------------


@pytest.mark.parametrize("what", HOSTILE)
def test_a_sequence_file_that_is_no_regular_file_is_replaced_never_waited_on_or_followed(
    project: Project, tmp_path: Path, what: str
) -> None:
    """Counted as 0, like a garbled one, and replaced by the rewrite: the link itself,
    never its target, which stays as it was (a FIFO nobody opened)."""
    sequence = project.handoffs("coder") / outbox.SEQUENCE_FILE
    target = plant(sequence, what, tmp_path)
    draft = project.draft(project.note_draft())
    sent = project.run("swarm_handoff", str(draft), role="coder", timeout=HANG)
    assert sent.code == 0 and "_000001_from_coder_" in sent.out, sent.err
    assert sequence.read_text() == "000001\n" and not sequence.is_symlink()
    assert target is None or stat.S_ISFIFO(target.lstat().st_mode)


@pytest.mark.parametrize("box", ["outbox", "outbox/tmp"])
def test_an_outbox_behind_a_link_is_refused_and_nothing_is_written_through_it(
    project: Project, tmp_path: Path, box: str
) -> None:
    """What a sender queues through a link lands outside the project (and a daemon taking
    from it would read outside): swarm_handoff refuses, keeping the draft."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    folder = project.handoffs("coder") / box
    if folder.is_dir():
        folder.rmdir()
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(outside)
    draft = project.draft(project.note_draft())
    sent = project.run("swarm_handoff", str(draft), role="coder", timeout=HANG)
    assert (sent.code, sent.out) == (2, "")
    assert sent.err == (
        f"LINKED_FOLDER: {folder} is a symbolic link, not a folder; handoffd never follows "
        "it (nothing was queued). Replace it with a real folder and run this again.\n"
    )
    assert os.listdir(outside) == [] and draft.exists()


def test_the_start_up_sweep_never_deletes_through_a_linked_drafts_folder(
    project: Project, tmp_path: Path
) -> None:
    """A temp name in a folder outside the project is not ours to remove."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    theirs = outside / ".50_x_to_QA.handoff.4242.1.tmp"
    theirs.write_text("someone else's\n")
    drafts = project.handoffs("coder") / "outbox" / "tmp"
    drafts.parent.mkdir(parents=True, exist_ok=True)
    drafts.symlink_to(outside)
    once = subprocess.run(
        [os.path.join(BIN, "handoffd"), "run", "--once", str(project.root)],
        capture_output=True, text=True, timeout=HANG, check=False,
    )  # fmt: skip
    assert once.returncode == 0, once.stderr
    assert theirs.read_text() == "someone else's\n"


# --- the sequence across a power cut ---------------------------------------------------------


def test_no_name_is_published_with_a_number_a_power_cut_could_hand_out_again(
    tmp_path: Path,
) -> None:
    """After a cut at any instant of two sends, every number in a queued name is one the
    sequence file still holds (or passed): the next send cannot take it again, so no two
    handoffs share a name and an id even when the reboot lands in the same second."""
    problem = strace_problem()
    if problem:
        pytest.skip(problem)
    base = tmp_path / "r0000000"
    worktree = base / "proj" / "wt" / "coder"
    worktree.mkdir(parents=True)
    (base / "proj" / ".swarmforge").mkdir()
    (base / "proj" / ".swarmforge" / "roles.tsv").write_text(f"coder\tcoder\t{worktree}\tcoder\n")
    (tmp_path / "traces").mkdir()
    steps = []
    for n in (1, 2):  # the drafts lie outside the recorded tree: their removal is no state
        draft = tmp_path / f"d{n}"
        draft.write_text(f"type: note\nto: coder\npriority: 50\nmessage: n{n}\n")
        argv = [os.path.join(BIN, "swarm_handoff"), str(draft)]
        steps.append(Step(f"send {n}", argv, str(worktree), helper_env("coder")))
    recorded = crashtrace.record(steps, str(base), str(tmp_path / "traces"), _ignored)
    assert [out.count(b"HANDOFF QUEUED: ") for out in recorded.outputs] == [1, 1]
    result = crashstates.explore(recorded, _numbers_kept, [])
    assert not result.findings, result.report()


def _ignored(rel: str) -> bool:
    """Files nothing reads back to decide a number: the heartbeat and the live file."""
    return os.path.basename(rel).lstrip(".").startswith(("heartbeat", "HANDOFF.md"))


def _numbers_kept(tree: crashtrace.Tree, heard: list[crashtrace.Op]) -> list[str]:
    handoffs = "proj/wt/coder/.swarmforge/handoffs/"
    held = tree.get(handoffs + outbox.SEQUENCE_FILE) or b""
    try:
        number = int(held.strip() or b"0")
    except ValueError:  # a torn file counts as 0 (outbox._read_number)
        number = 0
    published = [p for p in tree if p.startswith(handoffs + "outbox/") and p.endswith(".handoff")]
    return [
        f"{os.path.basename(p)} is published, but the sequence file says {number}"
        for p in published
        if int(os.path.basename(p).split("_")[2]) > number
    ]


def test_a_held_queueing_lock_is_waited_on_for_5_seconds_then_refused(project: Project) -> None:
    """Another process holds the lock `swarm_handoff` numbers its handoff under (a hung
    helper of the role, or one holding it on purpose): the send waits 5 s at most, then
    refuses `OUTBOX_BUSY` (exit 2) with nothing queued and the draft kept; it used to
    wait for ever (docs/protocol.md §3, §15)."""
    from tests.test_operator import HOLD

    handoffs = project.handoffs("coder")
    handoffs.mkdir(parents=True, exist_ok=True)
    draft = project.draft(project.note_draft(to="QA"))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(handoffs)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        sent = project.run("swarm_handoff", str(draft), role="coder", timeout=30)
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert sent.code == 2 and sent.out == ""
    assert sent.err.startswith(f"OUTBOX_BUSY: {handoffs} is locked by another process; "), sent.err
    assert draft.exists() and not list(project.box("coder", "outbox").glob("*.handoff"))
    again = project.run("swarm_handoff", str(draft), role="coder")
    assert again.code == 0 and again.out.startswith("HANDOFF QUEUED: "), again.err
