"""A delivery pass (docs/protocol.md §5.1-5.4): what a recipient's copy looks like, where the
original goes, and how every hostile outbox entry is refused without harming good mail.

The daemon runs in-process, stepped once per pass, its wake-ups recorded.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from handoffd.delivery import journal
from handoffd.delivery.delivery import BATCH_LIMIT, JOURNAL
from handoffd.queue import checks
from tests.conftest import HANG, SAID, Project, plant, snapshot
from tests.daemon_support import (
    HANDOFFD,
    events,
    handoff_bytes,
    handoff_name,
    inbox,
    open_daemon,
    queue,
    stood_still,
)

ROLES = ("coder", "cleaner", "QA")
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"


def all_inbox_entries(project: Project) -> dict[str, list[str]]:
    """Every entry of every role's new/, hidden working files included."""
    result = {}
    for role in ROLES:
        directory = project.box(role, "inbox/new")
        result[role] = sorted(os.listdir(directory)) if directory.is_dir() else []
    return result


# --- the delivered copy ---------------------------------------------------------------


def test_copy_keeps_name_and_headers_adds_recipient_and_enqueued_at_and_keeps_body_bytes(
    project: Project,
) -> None:
    body = "Re-read your role.\n\nkey: not a header\n\n\n  trailing  \nünïcode ✓ no final newline"
    name = handoff_name("coder", ["cleaner"])
    original = handoff_bytes(name, "coder", "cleaner", body=body)
    queue(project, "coder", ["cleaner"], name=name, data=original)
    daemon = open_daemon(project)

    daemon.step(1000.0)

    copy = (project.box("cleaner", "inbox/new") / name).read_bytes()
    head, _, _ = original.partition(b"\n\n")
    pattern = re.escape(head) + rb"\nrecipient: cleaner\nenqueued_at: " + STAMP.encode()
    pattern += rb"\n\n" + re.escape(body.encode())
    assert re.fullmatch(pattern, copy), copy


def test_original_moves_unchanged_to_senders_sent(project: Project) -> None:
    path = queue(project, "coder", ["cleaner"])
    original = path.read_bytes()
    daemon = open_daemon(project)

    daemon.step(1000.0)

    assert not path.exists()
    assert (project.box("coder", "sent") / path.name).read_bytes() == original


def test_each_recipient_of_a_multi_recipient_handoff_gets_exactly_one_copy(
    project: Project,
) -> None:
    path = queue(project, "coder", ["cleaner", "QA"])
    daemon = open_daemon(project)

    daemon.step(1000.0)
    daemon.step(1001.0)  # a second pass must not deliver again

    for role in ("cleaner", "QA"):
        assert inbox(project, role) == [path.name]
        text = (project.box(role, "inbox/new") / path.name).read_text()
        assert text.count("recipient: ") == 1 and f"\nrecipient: {role}\n" in text
    assert inbox(project, "coder") == []
    assert os.listdir(project.box("coder", "sent")) == [path.name]
    delivered = events(project, "delivered")
    assert [(e["file"], e["recipients"]) for e in delivered] == [(path.name, ["cleaner", "QA"])]


def test_a_pass_returns_the_roles_that_got_mail_and_asks_one_wake_up_each(
    project: Project,
) -> None:
    for _ in range(3):
        queue(project, "coder", ["cleaner", "QA"])
    queue(project, "QA", ["cleaner"])
    daemon = open_daemon(project)

    daemon.step(1000.0)

    assert len(inbox(project, "cleaner")) == 4
    assert sorted(daemon.waker.woken()) == ["QA", "cleaner"]  # type: ignore[attr-defined]


def test_drafts_in_outbox_tmp_hidden_files_and_other_names_are_never_delivered(
    project: Project,
) -> None:
    outbox = project.box("coder", "outbox")
    (outbox / "tmp").mkdir(parents=True, exist_ok=True)
    for path in (
        outbox / "tmp" / handoff_name("coder", ["QA"]),
        outbox / f".{handoff_name('coder', ['QA'])}",
        outbox / "notes.txt",
    ):
        path.write_bytes(handoff_bytes(handoff_name("coder", ["QA"]), "coder", "QA"))
    daemon = open_daemon(project)

    daemon.step(1000.0)

    assert inbox(project, "QA") == []
    assert list(project.box("coder", "failed").glob("*")) == []  # ignored, not refused


def test_a_recipient_whose_worktree_is_missing_defers_and_is_retried_later(
    project: Project, tmp_path: Path
) -> None:
    ghost = tmp_path / "ghost-worktree"
    with open(project.root / ".swarmforge" / "roles.tsv", "a") as roles:
        roles.write(f"ghost\tghost\t{ghost}\tghost\n")
    path = queue(project, "coder", ["ghost"])
    daemon = open_daemon(project)

    daemon.step(1000.0)
    assert path.exists()
    deferred = events(project, "deferred")
    assert [e["file"] for e in deferred] == [path.name] and deferred[0]["reason"]

    ghost.mkdir()
    daemon.step(1000.1)  # not due yet: no second try
    assert path.exists() and len(events(project, "deferred")) == 1
    daemon.step(1001.0)
    assert not path.exists()
    assert (ghost / ".swarmforge/handoffs/inbox/new" / path.name).exists()


# --- hostile entries ------------------------------------------------------------------


def fifo(path: Path) -> None:
    os.mkfifo(path)


def directory(path: Path) -> None:
    path.mkdir()
    (path / "inner.handoff").write_bytes(b"id: x\n\nbody\n")


def oversized(path: Path) -> None:
    data = handoff_bytes(path.name, "coder", "QA")
    path.write_bytes(data + b"x" * (checks.MAX_BYTES + 1 - len(data)))


def invalid_utf8(path: Path) -> None:
    path.write_bytes(handoff_bytes(path.name, "coder", "QA") + b"\xff\xfe\n")


def nul_byte(path: Path) -> None:
    path.write_bytes(handoff_bytes(path.name, "coder", "QA", body="a\0b\n"))


def spoofed_from(path: Path) -> None:
    path.write_bytes(handoff_bytes(path.name, "coder", "QA", **{"from": "cleaner"}))


def unknown_recipient_among_good(path: Path) -> None:
    path.write_bytes(handoff_bytes(path.name, "coder", "cleaner,ghost,QA"))


def duplicate_recipient(path: Path) -> None:
    path.write_bytes(handoff_bytes(path.name, "coder", "QA,cleaner,QA"))


def missing_required_headers(path: Path) -> None:
    data = handoff_bytes(path.name, "coder", "QA")
    path.write_bytes(data.replace(b"priority: 50\n", b"").replace(b"type: note\n", b""))


def no_header_block(path: Path) -> None:
    path.write_bytes(b"just a body, no headers\n")


HOSTILE: dict[str, Callable[[Path], None]] = {
    "fifo": fifo,
    "directory": directory,
    "oversized": oversized,
    "invalid_utf8": invalid_utf8,
    "nul_byte": nul_byte,
    "spoofed_from": spoofed_from,
    "unknown_recipient_among_good": unknown_recipient_among_good,
    "duplicate_recipient": duplicate_recipient,
    "missing_required_headers": missing_required_headers,
    "no_header_block": no_header_block,
}


def step_guarded(daemon: object, now: float, fifos: list[Path]) -> None:
    """Step on a thread; if it hangs (e.g. blocked opening a FIFO), unblock it and fail."""
    thread = threading.Thread(target=daemon.step, args=(now,))  # type: ignore[attr-defined]
    thread.start()
    thread.join(timeout=10)
    if thread.is_alive():
        for path in fifos:
            for candidate in (path, *path.parent.parent.glob(f"failed/{path.name}*")):
                try:
                    os.close(os.open(candidate, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass
        thread.join(timeout=10)
        pytest.fail("the pass hung on an outbox entry")


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_entry_is_refused_into_failed_with_a_reason_while_good_mail_is_delivered(
    project: Project, kind: str
) -> None:
    good_before = queue(project, "coder", ["QA"], name=handoff_name("coder", ["QA"], "10"))
    bad = project.box("coder", "outbox") / handoff_name("coder", ["QA"], "50")
    HOSTILE[kind](bad)
    stood_still(bad)
    good_after = queue(project, "coder", ["cleaner"], name=handoff_name("coder", ["cleaner"], "90"))
    daemon = open_daemon(project)

    step_guarded(daemon, 1000.0, [bad] if kind == "fifo" else [])

    assert inbox(project, "QA") == [good_before.name]
    assert inbox(project, "cleaner") == [good_after.name]
    assert all_inbox_entries(project) == {
        "coder": [],
        "cleaner": [good_after.name],
        "QA": [good_before.name],
    }  # nothing, not even a hidden temp file, for the refused entry
    failed = project.box("coder", "failed")
    assert sorted(os.listdir(failed)) == [bad.name, bad.name + ".error"]
    reason = (failed / (bad.name + ".error")).read_text()
    assert reason.endswith("\n") and "\n" not in reason[:-1] and reason.strip()
    assert not os.path.lexists(bad)
    [event] = events(project, "failed")
    assert event["file"] == bad.name and event["reason"] == reason.strip()
    assert sorted(os.listdir(project.box("coder", "sent"))) == sorted(
        [good_before.name, good_after.name]
    )


@pytest.mark.parametrize(
    ("tail", "to", "why"),
    [
        ("_from_QA_to_cleaner_from_coder_to_cleaner", "cleaner", "is not of the form"),
        ("_from_QA_to_cleaner_from_coder_to_QA", "cleaner", "says it is from 'QA'"),
        ("_from_coder_to_cleaner_QA", "cleaner", "addressed to (cleaner, QA)"),
    ],
    ids=["another-sender-first", "another-sender-first-distinct", "more-recipients"],
)
def test_a_name_that_says_other_than_its_headers_is_refused_and_nobody_gets_a_copy(
    project: Project, tail: str, to: str, why: str
) -> None:
    """A name is parsed by §2's one rule, never searched for `_from_<sender>_to_`
    (docs/protocol.md §5.1): coder's original named to say QA sent it first is refused,
    so no Stop hook, board or digest ever reads the forged sender off a delivered copy."""
    name = f"00_20260101T000000Z_000001{tail}.handoff"
    bad = queue(project, "coder", [to], name=name)
    open_daemon(project).step(1000.0)
    assert all_inbox_entries(project) == {"coder": [], "cleaner": [], "QA": []}
    failed = project.box("coder", "failed")
    assert sorted(os.listdir(failed)) == [bad.name, bad.name + ".error"]
    reason = (failed / (bad.name + ".error")).read_text()
    assert why in reason and reason.count("\n") == 1
    [event] = events(project, "failed")
    assert (event["file"], event["reason"]) == (bad.name, reason.strip())


def test_symlink_to_a_file_outside_is_refused_without_reading_or_moving_its_target(
    project: Project, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.handoff"
    content = handoff_bytes(handoff_name("coder", ["QA"]), "coder", "QA", body="SECRET\n")
    secret.write_bytes(content)
    os.chmod(secret, 0o600)
    before = os.stat(secret)
    link = project.box("coder", "outbox") / handoff_name("coder", ["QA"])
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(secret)
    good = queue(project, "coder", ["QA"])
    daemon = open_daemon(project)

    daemon.step(1000.0)

    assert inbox(project, "QA") == [good.name]
    assert b"SECRET" not in (project.box("QA", "inbox/new") / good.name).read_bytes()
    moved = project.box("coder", "failed") / link.name
    assert moved.is_symlink() and os.readlink(moved) == str(secret)
    assert (project.box("coder", "failed") / (link.name + ".error")).read_text().strip()
    after = os.stat(secret)
    assert secret.read_bytes() == content
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert after.st_atime_ns == before.st_atime_ns  # never opened for reading


def test_a_file_of_exactly_64_KiB_is_delivered(project: Project) -> None:
    name = handoff_name("coder", ["QA"])
    data = handoff_bytes(name, "coder", "QA")
    data += b"x" * (checks.MAX_BYTES - len(data))
    queue(project, "coder", ["QA"], name=name, data=data)
    daemon = open_daemon(project)

    daemon.step(1000.0)

    assert inbox(project, "QA") == [name]


def test_a_refused_name_already_in_failed_gets_a_distinct_name_and_overwrites_nothing(
    project: Project,
) -> None:
    name = handoff_name("coder", ["ghost"])
    failed = project.box("coder", "failed")
    failed.mkdir(parents=True)
    (failed / name).write_bytes(b"the first one\n")
    (failed / (name + ".error")).write_bytes(b"the first reason\n")
    queue(project, "coder", ["ghost"], name=name)
    daemon = open_daemon(project)

    daemon.step(1000.0)

    assert (failed / name).read_bytes() == b"the first one\n"
    assert (failed / (name + ".error")).read_bytes() == b"the first reason\n"
    others = sorted(set(os.listdir(failed)) - {name, name + ".error"})
    assert len(others) == 2 and others[1] == others[0] + ".error"
    assert "/" not in others[0] and ":" not in others[0]
    assert b"to: ghost" in (failed / others[0]).read_bytes()
    assert "ghost" in (failed / others[1]).read_text()


def test_a_delivered_name_already_in_sent_is_archived_under_a_distinct_name(
    project: Project,
) -> None:
    name = handoff_name("coder", ["QA"])
    sent = project.box("coder", "sent")
    sent.mkdir(parents=True)
    (sent / name).write_bytes(b"the first one\n")
    original = queue(project, "coder", ["QA"], name=name).read_bytes()
    daemon = open_daemon(project)

    daemon.step(1000.0)

    assert inbox(project, "QA") == [name]
    assert (sent / name).read_bytes() == b"the first one\n"
    [other] = sorted(set(os.listdir(sent)) - {name})
    assert "/" not in other and ":" not in other
    assert (sent / other).read_bytes() == original


def test_an_error_file_left_alone_in_failed_is_not_overwritten_by_a_newcomer(
    project: Project,
) -> None:
    name = handoff_name("coder", ["ghost"])
    failed = project.box("coder", "failed")
    failed.mkdir(parents=True)
    (failed / (name + ".error")).write_bytes(b"the first reason\n")  # its file was taken away
    queue(project, "coder", ["ghost"], name=name)
    daemon = open_daemon(project)

    daemon.step(1000.0)

    assert (failed / (name + ".error")).read_bytes() == b"the first reason\n"
    [other] = [n for n in os.listdir(failed) if n.endswith(".handoff")]
    assert other != name and "ghost" in (failed / (other + ".error")).read_text()


def test_a_refusal_that_cannot_move_its_file_leaves_no_reason_behind_and_retries(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An `.error` with no file beside it would mislead the operator reading failed/."""
    import errno

    original = queue(project, "coder", ["ghost"])
    failed = project.box("coder", "failed")
    real_rename = os.rename

    def rename(source: str, target: str) -> None:
        if os.path.dirname(target) == str(failed):
            raise OSError(errno.EIO, "injected I/O error")
        real_rename(source, target)

    monkeypatch.setattr(os, "rename", rename)
    daemon = open_daemon(project)
    daemon.step(0)

    assert original.exists() and os.listdir(failed) == []
    assert [e["file"] for e in events(project, "deferred")] == [original.name]
    monkeypatch.setattr(os, "rename", real_rename)
    daemon.step(100)
    assert sorted(os.listdir(failed)) == [original.name, original.name + ".error"]


# --- one stuck entry, fairness, fresh roles, same names (issue 8) ----------------------


def test_a_sender_whose_sent_is_unusable_holds_up_only_its_own_entry(project: Project) -> None:
    """coder's sent/ is a plain file: its copy arrives once, its original stays queued and
    is retried with backoff, while QA's handoff and later mail keep flowing."""
    sent = project.box("coder", "sent")
    sent.rmdir() if sent.is_dir() else None
    sent.parent.mkdir(parents=True, exist_ok=True)
    sent.write_text("not a folder\n")
    stuck = queue(project, "coder", ["cleaner"])
    other = queue(project, "QA", ["cleaner"])
    daemon = open_daemon(project)

    for now in (0.0, 0.1, 5.0, 100.0):
        daemon.step(now)
    later = queue(project, "QA", ["cleaner"])
    daemon.step(200.0)

    assert inbox(project, "cleaner") == sorted([stuck.name, other.name, later.name])
    assert stuck.exists() and not other.exists() and not later.exists()
    assert [e["file"] for e in events(project, "delivered")].count(stuck.name) == 1
    assert {e["file"] for e in events(project, "publish_stuck")} == {stuck.name}
    assert daemon.courier.next_retry() is not None  # the stuck entry keeps a backoff timer
    sent.unlink()
    daemon.step(10_000.0)
    assert not stuck.exists() and (sent / stuck.name).exists()
    assert inbox(project, "cleaner") == sorted([stuck.name, other.name, later.name])
    assert journal.load(str(project.root / JOURNAL)) is None
    assert daemon.courier.next_retry() is None


def test_a_flood_from_one_role_does_not_starve_another_role_in_the_same_pass(
    project: Project,
) -> None:
    """Queue order alone would take only coder's flood (priority 00 < 50) this pass."""
    for _ in range(BATCH_LIMIT + 50):
        queue(project, "coder", ["cleaner"], name=handoff_name("coder", ["cleaner"], "00"))
    lone = queue(project, "QA", ["cleaner"], name=handoff_name("QA", ["cleaner"], "50"))
    daemon = open_daemon(project)

    daemon.step(0.0)

    assert lone.name in inbox(project, "cleaner")
    assert len(inbox(project, "cleaner")) == BATCH_LIMIT and daemon.courier.backlog


def test_a_role_appended_to_roles_tsv_in_place_gets_its_first_mail(
    project: Project, tmp_path: Path
) -> None:
    """The daemon's view is older than the file (an in-place append has not settled):
    before calling a recipient unknown it reads roles.tsv again."""
    daemon = open_daemon(project)
    daemon.step(0.0)
    worktree = tmp_path / "newbie"
    worktree.mkdir()
    with open(project.root / ".swarmforge" / "roles.tsv", "a", encoding="utf-8") as file:
        file.write(f"newbie\tnewbie\t{worktree}\tnewbie\n")
    project.worktrees["newbie"] = worktree
    path = queue(project, "coder", ["newbie", "QA"])

    daemon.step(0.1)

    assert inbox(project, "newbie") == [path.name] and inbox(project, "QA") == [path.name]
    assert not events(project, "failed")
    assert sorted(daemon.waker.woken()) == ["QA", "newbie"]  # type: ignore[attr-defined]


def test_an_unknown_recipient_is_still_refused_after_the_re_read(project: Project) -> None:
    path = queue(project, "coder", ["ghost"])
    daemon = open_daemon(project)

    daemon.step(0.0)

    assert (project.box("coder", "failed") / path.name).exists()
    assert "ghost" in events(project, "failed")[0]["reason"]


def test_a_different_file_under_a_name_still_unread_is_delivered_under_a_distinct_name(
    project: Project,
) -> None:
    name = handoff_name("coder", ["QA"])
    queue(project, "coder", ["QA"], name=name, data=handoff_bytes(name, "coder", "QA", body="1\n"))
    daemon = open_daemon(project)
    daemon.step(0.0)
    # A sequence reset within the same second: same name, different handoff.
    queue(project, "coder", ["QA"], name=name, data=handoff_bytes(name, "coder", "QA", body="2\n"))

    daemon.step(1.0)

    names = inbox(project, "QA")
    assert len(names) == 2 and name in names
    [second] = [n for n in names if n != name]
    assert second.endswith(".handoff") and second.startswith(name[: -len(".handoff")])
    bodies = {(project.box("QA", "inbox/new") / n).read_bytes().split(b"\n\n", 1)[1] for n in names}
    assert bodies == {b"1\n", b"2\n"}
    assert not events(project, "duplicate_skipped")


def test_the_same_copy_presented_again_while_unread_is_skipped(project: Project) -> None:
    name = handoff_name("coder", ["QA"])
    data = handoff_bytes(name, "coder", "QA")
    queue(project, "coder", ["QA"], name=name, data=data)
    daemon = open_daemon(project)
    daemon.step(0.0)
    queue(project, "coder", ["QA"], name=name, data=data)  # put back by hand, say

    daemon.step(1.0)

    assert inbox(project, "QA") == [name]
    assert [e["file"] for e in events(project, "duplicate_skipped")] == [
        str(project.box("QA", "inbox/new") / name)
    ]


def test_a_fifo_planted_in_new_under_the_arriving_name_is_never_opened(project: Project) -> None:
    """The duplicate check reads the file already in `new/` with the careful reader: a FIFO
    there is not the same copy (it is never opened, so the pass never waits on it), and the
    copy lands under a distinct name beside it."""
    name = handoff_name("coder", ["QA"])
    queue(project, "coder", ["QA"], name=name)
    new = project.box("QA", "inbox/new")
    new.mkdir(parents=True, exist_ok=True)
    os.mkfifo(new / name)
    daemon = open_daemon(project)

    step_guarded(daemon, 0.0, [new / name])

    [arrived] = [n for n in inbox(project, "QA") if n != name]
    assert arrived.startswith(name[: -len(".handoff")]) and arrived.endswith(".handoff")
    assert not events(project, "duplicate_skipped")


def test_refused_senders_names_the_senders_failed_in_the_last_pass_only(project: Project) -> None:
    queue(project, "coder", ["ghost"])
    queue(project, "QA", ["coder"])
    daemon = open_daemon(project)

    daemon.step(0.0)
    assert daemon.courier.refused_senders == {"coder"}
    queue(project, "QA", ["ghost"])
    daemon.step(1.0)
    assert daemon.courier.refused_senders == {"QA"}
    daemon.step(2.0)
    assert daemon.courier.refused_senders == set()


# --- names close to the filesystem's limit (issue 8) -----------------------------------


def long_name(sender: str, to: str, size: int = 255) -> str:
    """A queue name of exactly `size` bytes, the §2 name of a handoff to `to` with a dotted
    tail (read as an archived duplicate's is: role names hold no `.`)."""
    head = handoff_name(sender, [to])[: -len(".handoff")] + "."
    return head + "x" * (size - len(head) - len(".handoff")) + ".handoff"


def test_a_name_of_255_bytes_is_delivered_and_archived_whole(project: Project) -> None:
    """Temp names derived from it must not pass the limit (they did: deferred forever)."""
    name = long_name("coder", "QA")
    queue(project, "coder", ["QA"], name=name, data=handoff_bytes(name, "coder", "QA"))
    daemon = open_daemon(project)

    daemon.step(0.0)

    assert inbox(project, "QA") == [name]
    assert (project.box("coder", "sent") / name).exists()
    assert not events(project, "deferred")


def test_a_refused_255_byte_name_gets_a_shortened_name_beside_its_error(project: Project) -> None:
    name = long_name("coder", "ghost")
    queue(project, "coder", ["ghost"], name=name, data=handoff_bytes(name, "coder", "ghost"))
    daemon = open_daemon(project)

    daemon.step(0.0)

    [kept] = [n for n in os.listdir(project.box("coder", "failed")) if n.endswith(".handoff")]
    assert kept.endswith(".handoff") and len((kept + ".error").encode()) <= 255
    assert "ghost" in (project.box("coder", "failed") / (kept + ".error")).read_text()
    assert not (project.box("coder", "outbox") / name).exists()


def test_a_255_byte_name_already_in_sent_is_archived_under_a_shortened_distinct_name(
    project: Project,
) -> None:
    name = long_name("coder", "QA")
    sent = project.box("coder", "sent")
    sent.mkdir(parents=True, exist_ok=True)
    (sent / name).write_bytes(b"an older namesake\n")
    queue(project, "coder", ["QA"], name=name, data=handoff_bytes(name, "coder", "QA"))
    daemon = open_daemon(project)

    daemon.step(0.0)

    assert (sent / name).read_bytes() == b"an older namesake\n"
    assert len(os.listdir(sent)) == 2 and not (project.box("coder", "outbox") / name).exists()
    assert not events(project, "publish_stuck")


@pytest.mark.parametrize("code", ["ENAMETOOLONG", "EINVAL"])
def test_an_error_retrying_cannot_cure_fails_the_handoff_instead_of_deferring_it(
    project: Project, monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    import errno

    path = queue(project, "coder", ["QA"])
    new = str(project.box("QA", "inbox/new"))
    real_open = os.open

    def refusing_open(target: str, *args: object, **kwargs: object) -> int:
        if os.path.dirname(os.fsdecode(target)) == new:
            raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)), target)
        return real_open(target, *args, **kwargs)  # type: ignore[arg-type]

    daemon = open_daemon(project)
    monkeypatch.setattr(os, "open", refusing_open)
    daemon.step(0.0)
    monkeypatch.undo()

    assert (project.box("coder", "failed") / path.name).exists()
    assert code in (project.box("coder", "failed") / (path.name + ".error")).read_text()
    assert not events(project, "deferred") and daemon.courier.next_retry() is None


# --- start-up ---------------------------------------------------------------------------


def test_start_up_sweeps_the_daemons_own_temps_and_dead_senders_but_nothing_else(
    project: Project,
) -> None:
    """A kill -9 or a power cut between writing a temp and renaming it leaves it behind:
    the pid file's and the journal's in daemon/ (only the daemon holding the lock writes
    those), and a sender's in its handoff folder; start-up removes them, and leaves every
    file someone else may own."""
    folder = project.root / ".swarmforge" / "daemon"
    folder.mkdir(parents=True)
    stale = [folder / ".handoffd.pid.4242.0.tmp", folder / ".handoffd.journal.4242.3.tmp"]
    drafts = project.handoffs("QA") / "outbox" / "tmp"
    drafts.mkdir(parents=True)
    stale.append(drafts / ".50_x_to_coder.handoff.4242.1.tmp")
    others = [folder / ".web.key.4242.0.tmp", folder / "notes.txt", drafts / "draft.txt"]
    for path in stale + others:
        path.write_text("x")
    open_daemon(project)
    assert [p.name for p in stale if p.exists()] == []
    assert all(p.exists() for p in others)


# --- folders behind a link (docs/protocol.md Part II) ------------------------------------------


def link_folder(project: Project, role: str, box: str, outside: Path) -> Path:
    """Put a link to `outside` where `role`'s folder `box` should be."""
    folder = project.box(role, box)
    if folder.is_dir():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    outside.mkdir(exist_ok=True)
    folder.symlink_to(outside)
    return folder


def run_once(project: Project) -> None:
    done = subprocess.run(
        [HANDOFFD, "run", "--once", str(project.root)],
        capture_output=True, text=True, timeout=HANG, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("box", ["outbox", "sent", "failed"])
def test_a_sender_whose_outbox_sent_or_failed_is_behind_a_link_is_not_taken_from(
    project: Project, tmp_path: Path, box: str
) -> None:
    """Taking from a linked outbox reads files from outside the project; archiving into a
    linked sent/ or failed/ carries them out.  The daemon does neither, says so once, and
    every other sender's mail goes on."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    name = handoff_name("coder", ["cleaner" if box != "failed" else "ghost"])
    planted = outside / name if box == "outbox" else project.box("coder", "outbox") / name
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_bytes(handoff_bytes(name, "coder", "ghost" if box == "failed" else "cleaner"))
    stood_still(planted)
    folder = link_folder(project, "coder", box, outside)
    other = queue(project, "QA", ["cleaner"])
    before = snapshot(outside)

    run_once(project)

    assert inbox(project, "cleaner") == [other.name]
    assert snapshot(outside) == before
    assert planted.exists()
    assert [(e["role"], e["folder"]) for e in events(project, "linked_folder")] == [
        ("coder", str(folder))
    ]


def test_mail_for_a_recipient_whose_new_is_behind_a_link_waits_for_every_recipient(
    project: Project, tmp_path: Path
) -> None:
    """No copy written through the link, and none to the other recipient either (every
    copy or none); once the folder is real again, both arrive."""
    outside = tmp_path / "elsewhere"
    folder = link_folder(project, "QA", "inbox/new", outside)
    path = queue(project, "coder", ["cleaner", "QA"])

    run_once(project)
    assert path.exists() and os.listdir(outside) == [] and inbox(project, "cleaner") == []

    folder.unlink()
    folder.mkdir()
    run_once(project)
    assert not path.exists()
    assert inbox(project, "cleaner") == inbox(project, "QA") == [path.name]


@pytest.mark.parametrize("where", ["handoffs", ".swarmforge"])
def test_a_recipient_whose_handoff_directory_or_swarmforge_is_a_link_gets_nothing_through_it(
    project: Project, tmp_path: Path, where: str
) -> None:
    """Every path that writes refuses a folder behind a link (docs/protocol.md §15, Part
    III), the handoff directory and `.swarmforge/` of the worktree included: only the
    worktree roles.tsv names is trusted."""
    handoffs = project.handoffs("QA")
    handoffs.mkdir(parents=True, exist_ok=True)
    folder = handoffs if where == "handoffs" else handoffs.parent
    outside = tmp_path / "elsewhere"
    shutil.move(folder, outside)
    folder.symlink_to(outside)
    before = snapshot(outside)
    path = queue(project, "coder", ["QA"])
    run_once(project)
    assert path.exists() and snapshot(outside) == before
    assert [e["folder"] for e in events(project, "linked_folder")] == [str(folder)]


def test_a_linked_folder_is_logged_once_while_it_stays_and_again_once_relinked(
    project: Project, tmp_path: Path
) -> None:
    folder = link_folder(project, "QA", "inbox", tmp_path / "elsewhere")
    daemon = open_daemon(project)
    for now in (0.0, 1.0, 2.0):
        daemon.step(now)
    assert len(events(project, "linked_folder")) == 1
    folder.unlink()
    daemon.step(3.0)
    folder.symlink_to(tmp_path / "elsewhere")
    daemon.step(4.0)
    assert [e["folder"] for e in events(project, "linked_folder")] == [str(folder)] * 2


@pytest.mark.parametrize("box", ["inbox/new", "failed"])
def test_the_start_up_sweep_never_deletes_through_a_linked_folder(
    project: Project, tmp_path: Path, box: str
) -> None:
    """A name that looks like one of our temps, in a folder outside the project, is not
    ours to remove."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    theirs = outside / ".50_x_to_QA.handoff.4242.1.tmp"
    theirs.write_text("someone else's\n")
    link_folder(project, "QA", box, outside)
    run_once(project)
    assert theirs.read_text() == "someone else's\n"


# --- the journal is a file under .swarmforge/ too ----------------------------------------------


@pytest.mark.parametrize("what", ["fifo", "link"])
def test_a_journal_that_is_no_regular_file_is_set_aside_and_delivery_goes_on(
    project: Project, tmp_path: Path, what: str
) -> None:
    """A FIFO there would hold every pass (each reads the journal first); a link would be
    read outside the project.  Neither is opened: set aside like a corrupt journal."""
    journal_path = project.root / JOURNAL
    target = plant(journal_path, what, tmp_path)
    path = queue(project, "coder", ["QA"])
    run_once(project)
    assert inbox(project, "QA") == [path.name]
    [corrupt] = events(project, "journal_corrupt")
    assert f"{SAID[what]}, not a regular file" in corrupt["error"]
    assert target is None or stat.S_ISFIFO(target.lstat().st_mode)


def test_a_planted_journal_naming_paths_outside_the_queue_moves_nothing(
    project: Project, tmp_path: Path
) -> None:
    """A committed journal is an order to rename: one naming files outside the roles'
    outboxes, sent/ and new/ folders (anyone can write a token that matches) is refused
    whole and set aside, and nothing it names is touched."""
    outside = tmp_path / "elsewhere"
    (outside / "sent").mkdir(parents=True)
    precious, original = outside / ".precious.tmp", outside / "50_x_from_coder_to_QA.handoff"
    precious.write_text("not mail\n")
    original.write_text("not mail either\n")
    before = snapshot(outside)
    planted = journal.Entry(
        "coder", str(original), (0, 0), str(outside / "sent"),
        [(str(precious), str(outside / "taken.handoff"))], ["QA"],
    )  # fmt: skip
    (project.root / JOURNAL).parent.mkdir(parents=True, exist_ok=True)
    journal.commit(str(project.root / JOURNAL), [planted])
    run_once(project)
    assert snapshot(outside) == before
    [corrupt] = events(project, "journal_corrupt")
    assert "is not in its sender's outbox" in corrupt["error"]


@pytest.mark.parametrize("what", ["fifo", "link"])
def test_a_fifo_or_link_under_the_copys_name_in_new_is_never_opened_the_copy_lands_beside(
    project: Project, tmp_path: Path, what: str
) -> None:
    """Before publishing, a name already in new/ is compared with the copy (the same copy
    presented again is dropped): a FIFO there would hold the pass for good, a link would
    be read outside.  It is no copy of ours, so ours gets a distinct name."""
    name = handoff_name("coder", ["QA"])
    planted = project.box("QA", "inbox/new") / name
    target = plant(planted, what, tmp_path)
    queue(project, "coder", ["QA"], name=name)
    run_once(project)
    assert inbox(project, "QA") == [name.replace(".handoff", ".2.handoff"), name]
    assert planted.is_symlink() or stat.S_ISFIFO(planted.lstat().st_mode)
    assert target is None or stat.S_ISFIFO(target.lstat().st_mode)


# --- names (docs/protocol.md §15, Part III) ---------------------------------------------


def test_a_name_with_a_control_character_is_refused_under_a_plain_name_and_never_printed(
    project: Project,
) -> None:
    """A queue file whose name holds an escape sequence: refused to `failed/` before it is
    read (nobody gets a copy, so no agent's TASK line ever holds it), archived under its
    name with each control character as its escape (`.error` beside it, both plain), and
    the daemon's console shows the name escaped, never obeyed."""
    name = handoff_name("coder", ["QA"]).replace("_to_QA", "_to_QA\x1b[2J\x07")
    queue(project, "coder", ["QA"], name=name)
    done = subprocess.run([HANDOFFD, "run", "--once", str(project.root)], capture_output=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    plain = name.replace("\x1b", "\\x1b").replace("\x07", "\\x07")
    assert sorted(os.listdir(project.box("coder", "failed"))) == [plain, f"{plain}.error"]
    reason = (project.box("coder", "failed") / f"{plain}.error").read_text()
    assert reason == "its file name holds a control character (\\x1b)\n"
    assert inbox(project, "QA") == []
    assert b"\x1b" not in done.stderr and b"\x07" not in done.stderr
    assert b"\\x1b[2J" in done.stderr  # the console names it, escaped
    [refused] = events(project, "failed")
    assert refused["file"] == name  # the JSON line keeps it, as JSON escapes it
