"""The heartbeat file: two lines, rewritten only when they change, otherwise touched."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from handoffd.core import durable
from handoffd.queue import heartbeat
from handoffd.wakeups import wakeup
from tests.conftest import HANG, Project


def test_a_role_that_never_beat_has_no_heartbeat(tmp_path: Path) -> None:
    assert heartbeat.read(str(tmp_path)) is None


def test_renew_writes_agent_and_conversation(tmp_path: Path) -> None:
    heartbeat.renew(str(tmp_path), "claude", "c-42")
    assert (tmp_path / "heartbeat").read_text() == "agent: claude\nconversation: c-42\n"
    beat = heartbeat.read(str(tmp_path))
    assert beat is not None
    assert (beat.agent, beat.conversation) == ("claude", "c-42")


def test_an_empty_conversation_reads_back_empty(tmp_path: Path) -> None:
    heartbeat.renew(str(tmp_path), "codex", "")
    beat = heartbeat.read(str(tmp_path))
    assert beat is not None and (beat.agent, beat.conversation) == ("codex", "")


def test_same_content_only_touches_the_file(tmp_path: Path) -> None:
    heartbeat.renew(str(tmp_path), "claude", "c-1")
    path = tmp_path / "heartbeat"
    inode = path.stat().st_ino
    os.utime(path, (1_000_000, 1_000_000))
    heartbeat.renew(str(tmp_path), "claude", "c-1")
    assert path.stat().st_ino == inode  # not rewritten
    beat = heartbeat.read(str(tmp_path))
    assert beat is not None and beat.at > 1_000_000


def test_new_content_replaces_the_file_atomically(tmp_path: Path) -> None:
    heartbeat.renew(str(tmp_path), "claude", "c-1")
    inode = (tmp_path / "heartbeat").stat().st_ino
    heartbeat.renew(str(tmp_path), "claude", "c-2")
    assert (tmp_path / "heartbeat").stat().st_ino != inode  # a rename, not an in-place edit
    assert (tmp_path / "heartbeat").read_text() == "agent: claude\nconversation: c-2\n"
    assert sorted(os.listdir(tmp_path)) == ["heartbeat"]  # no temp file left


def test_at_is_the_files_mtime(tmp_path: Path) -> None:
    heartbeat.renew(str(tmp_path), "a", "")
    os.utime(tmp_path / "heartbeat", (1_700_000_000, 1_700_000_000))
    beat = heartbeat.read(str(tmp_path))
    assert beat is not None and beat.at == 1_700_000_000


def test_the_heartbeat_is_a_plain_readable_file_not_an_executable_one(tmp_path: Path) -> None:
    """Created like any data file (0644 before the umask), never with execute bits."""
    heartbeat.renew(str(tmp_path), "claude", "")
    assert (tmp_path / heartbeat.NAME).stat().st_mode & 0o111 == 0


# --- what a killed rewrite leaves ---------------------------------------------------------------

NO_PID = 4_194_305  # past the kernel's largest pid_max: no process ever has it


def test_a_rewrite_sweeps_a_killed_rewrites_temp_even_when_its_pid_is_reused(
    project: Project,
) -> None:
    """`.heartbeat.<pid>.tmp` is what a renewal killed between its write and its rename
    leaves.  The next rewrite removes it once its writer is gone: no process has that pid,
    or the temp is older than a minute, whoever has that pid now (pids are reused within
    minutes; pid 1 is always alive).  A live writer's fresh temp is left alone."""
    handoffs = project.handoffs("coder")
    handoffs.mkdir(parents=True, exist_ok=True)
    reused, dead, fresh = (handoffs / f".heartbeat.{pid}.tmp" for pid in (1, NO_PID, os.getpid()))
    for temp in (reused, dead, fresh):
        temp.write_text("agent: someone\n")
    old = time.time() - 10 * 60
    os.utime(reused, (old, old))
    beat = project.run("handoffd", "heartbeat", "--agent", "newcomer", role="coder", timeout=HANG)
    assert beat.code == 0, beat.err
    assert (handoffs / "heartbeat").read_text() == "agent: newcomer\nconversation:\n"
    assert sorted(n for n in os.listdir(handoffs) if n.startswith(".heartbeat.")) == [fresh.name]


def test_the_idle_mark_is_the_mtime_of_h_idle_and_a_link_there_is_no_mark(tmp_path: Path) -> None:
    assert heartbeat.idle_at(str(tmp_path)) is None
    target = tmp_path / "elsewhere"
    target.write_text("idle\n")
    (tmp_path / "idle").symlink_to(target)
    assert heartbeat.idle_at(str(tmp_path)) is None  # never followed

    before = time.time()
    path = heartbeat.mark_idle(str(tmp_path))  # replaces the link, never writes through it
    at = heartbeat.idle_at(str(tmp_path))
    assert path == str(tmp_path / "idle") and not os.path.islink(path)
    assert at is not None and at >= before - 1 and target.read_text() == "idle\n"


# --- H/wake: a line a command asks the daemon to type ---------------------------------------

LINE = "An operator answered you on parse. Run ready_for_next.sh to see it."


def wake_entries(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if "wake" in name)


@pytest.mark.parametrize(
    ("text", "why"),
    [("typed \x1b[2J then \x07", "empty, or a control character in it"),
     ("two\nlines", "empty, or a control character in it"), ("", "empty, or a control "
      "character in it"), ("x" * 600, "over 512 bytes"), ("lone \ud800", "not UTF-8")],
)  # fmt: skip
def test_a_request_the_daemon_would_not_type_is_refused_when_asked(
    tmp_path: Path, text: str, why: str
) -> None:
    """What `take_wake` would refuse is refused by `ask_wake` already, so the command that
    asks can say so (the daemon's refusal is a log line nobody at the command sees)."""
    with pytest.raises(wakeup.NotARequest) as refused:
        wakeup.ask_wake(str(tmp_path), text)
    assert str(refused.value) == f"{why}: not asked for"
    assert wake_entries(tmp_path) == []


def test_taking_a_request_tells_nothing_there_from_a_file_that_is_no_request(
    tmp_path: Path,
) -> None:
    """None is "nothing waits"; an oversized, a FIFO or a controlled line is `NotARequest`
    saying which (removed either way, never typed)."""
    assert wakeup.take_wake(str(tmp_path)) is None
    wakeup.ask_wake(str(tmp_path), LINE)
    taken = wakeup.take_wake(str(tmp_path))
    assert taken is not None and taken.text == LINE
    assert taken.at == pytest.approx(time.time(), abs=60)  # when it was asked
    assert wakeup.take_wake(str(tmp_path)) is None  # taken once
    control = "empty, or a control character in it"
    for planted, why in [(b"x" * 513 + b"\n", "over 512 bytes"), (b"rm -rf ~\x1b[2K\n", control)]:
        (tmp_path / "wake").write_bytes(planted)
        with pytest.raises(wakeup.NotARequest, match=re.escape(why)):
            wakeup.take_wake(str(tmp_path))
        assert wake_entries(tmp_path) == []
    os.mkfifo(tmp_path / "wake")
    with pytest.raises(wakeup.NotARequest, match="a FIFO, not a file"):
        wakeup.take_wake(str(tmp_path))
    assert wake_entries(tmp_path) == []


@pytest.mark.parametrize("planted", ["fifo", "link", "empty folder"])
def test_asking_over_a_planted_wake_file_replaces_it_never_following_it(
    tmp_path: Path, planted: str
) -> None:
    handoffs, outside = tmp_path / "H", tmp_path / "outside"
    handoffs.mkdir()
    if planted == "fifo":
        os.mkfifo(handoffs / "wake")
    elif planted == "link":
        (handoffs / "wake").symlink_to(outside)
    else:
        (handoffs / "wake").mkdir()
    wakeup.ask_wake(str(handoffs), LINE)
    assert (handoffs / "wake").read_text() == LINE + "\n" and not outside.exists()
    assert wake_entries(handoffs) == ["wake"]


def test_asking_over_a_folder_with_something_in_it_says_remove_it_and_leaves_no_temp(
    tmp_path: Path,
) -> None:
    (tmp_path / "wake" / "kept").mkdir(parents=True)
    with pytest.raises(wakeup.NotARequest) as refused:
        wakeup.ask_wake(str(tmp_path), LINE)
    assert (
        str(refused.value) == f"{tmp_path / 'wake'} is a folder, not a wake-up request: remove it"
    )
    assert wake_entries(tmp_path) == ["wake"] and os.listdir(tmp_path / "wake") == ["kept"]
    # the daemon's side leaves it too, and says nothing at each of its passes: the request
    # that meets it says where it is
    assert wakeup.take_wake(str(tmp_path)) is None
    assert wakeup.take_wake(str(tmp_path)) is None
    assert os.listdir(tmp_path / "wake") == ["kept"]


def test_a_rewrite_whose_rename_fails_leaves_no_temp(tmp_path: Path) -> None:
    """The heartbeat's way of writing (`_stamp`): a folder that appears where the file goes
    fails the rename, and the temp written for it is removed, not left for a sweep."""
    (tmp_path / "heartbeat" / "kept").mkdir(parents=True)
    with pytest.raises(IsADirectoryError):
        heartbeat.renew(str(tmp_path), "claude", "")
    assert sorted(os.listdir(tmp_path)) == ["heartbeat"]


# --- hard links (docs/protocol.md §15, Part III) ---------------------------------------------


@pytest.mark.parametrize("name", ["heartbeat", "idle", "wake"])
def test_a_rewrite_never_writes_through_a_hard_link_planted_under_its_temp_name(
    tmp_path: Path, name: str
) -> None:
    """The heartbeat, `H/idle` and `H/wake` are written beside their name and renamed: a
    hard link to a file outside planted under the temp's name (the writer's pid and a
    counter: easy to guess) is never opened for writing, so never emptied or written."""
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious\n")
    handoffs = tmp_path / "H"
    handoffs.mkdir()
    following = next(durable._counter) + 1
    for temp in [f".{name}.{os.getpid()}.tmp"] + [
        f".{name}.{os.getpid()}.{n}.tmp" for n in range(following, following + 3)
    ]:
        os.link(outside, handoffs / temp)
    if name == "heartbeat":
        heartbeat.renew(str(handoffs), "claude", "")
    elif name == "idle":
        heartbeat.mark_idle(str(handoffs))
    else:
        wakeup.ask_wake(str(handoffs), LINE)
    assert outside.read_bytes() == b"precious\n"
    assert (handoffs / name).exists() and os.stat(handoffs / name).st_nlink == 1


def test_a_hard_linked_heartbeat_is_replaced_never_touched_through(tmp_path: Path) -> None:
    """A heartbeat that shares its file with another name (holding the very bytes a renewal
    writes) is not touched in place, which would set the other file's time: it is replaced."""
    outside = tmp_path / "outside.txt"
    outside.write_bytes(heartbeat.content("claude", ""))
    old = time.time() - 3600
    os.utime(outside, (old, old))
    os.link(outside, tmp_path / "heartbeat")
    heartbeat.renew(str(tmp_path), "claude", "")
    assert outside.stat().st_mtime == old and os.stat(tmp_path / "heartbeat").st_nlink == 1


def test_a_heartbeat_more_than_a_minute_in_the_future_counts_as_none() -> None:
    """A clock stepped back, or `touch -d 2030…`, would otherwise look fresh for ever."""
    now = 1_000_000.0
    assert heartbeat.counted(now - 7200, now) == now - 7200
    assert heartbeat.counted(now + heartbeat.AHEAD, now) == now + heartbeat.AHEAD
    assert heartbeat.counted(now + heartbeat.AHEAD + 1, now) is None
    assert heartbeat.counted(None, now) is None
