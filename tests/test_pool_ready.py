"""A pool's `new/` under §13's ready rule and against hostile files (docs/protocol.md §17):
a pool file waiting on an open handoff is held wherever readiness is asked (the helpers in
both modes, the Stop hook, the daemon's re-notify, the board), its card looked up as
`<id>@<pool>`; and a file there that cannot be handed out is skipped by every member and
shown red with why, while a member's own `new/` keeps §4's refusal."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from handoffd.core import config
from handoffd.core import handoff as hf
from handoffd.daemon.daemon import _has_ready
from handoffd.ops.readiness import for_daemon
from testbed.files import queued, stamped, write
from testbed.project import Project, make_pool_project
from tests.daemon_support import events, open_daemon
from tests.daemon_support import queue as queue_original
from tests.test_hooks import stop
from tests.test_pool import pool_copy, run_as

NEW, IN_PROCESS, COMPLETED = "inbox/new", "inbox/in_process", "inbox/completed"
MEMBERS = ("cleaner-1", "cleaner-2", "cleaner-3")
OPEN_DEP = "20260101T000000Z_000090_from_cleaner-1"  # waits in coder's new/
NOT_READY_ONE = "NOT_READY: 1 waiting: 0 blocked, 1 on dependencies (see handoffd status)\n"


def dependency(proj: Project) -> Path:
    """A handoff still open: waiting in coder's `new/`."""
    return proj.put("coder", f"50_{OPEN_DEP}_to_coder.handoff", id=OPEN_DEP, recipient="coder")


def finish(path: Path) -> None:
    """The dependency done, as coder's `done_with_current` leaves it."""
    target = path.parent.parent / "completed" / path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(path, target)


def pool_file(proj: Project, n: int, priority: str = "50", **headers: str) -> Path:
    """A copy delivered to the pool, with extra headers (`depends_on`, `blocked_reason`)."""
    ident = f"20260101T00000{n}Z_{n:06d}_from_coder"
    name, handoff = queued(ident, "coder", ["cleaner"], f"task {n}\n", ("type", "note"),
                           ("message", f"m{n}"), *headers.items(), priority=priority)  # fmt: skip
    return Path(write(proj.box("cleaner", NEW) / name, stamped(handoff, "cleaner").render()))


# --- §13 for pool files -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_a_pool_file_on_an_open_dependency_is_held_then_taken_once_it_is_done(tmp_path, mode):
    proj = make_pool_project(tmp_path / "p", mode=mode)
    dep = dependency(proj)
    held = pool_file(proj, 1, depends_on=OPEN_DEP)
    assert run_as(proj, "cleaner-2", "ready_for_next") == (0, "NO_TASK\n", NOT_READY_ONE)
    assert held.exists() and not list(proj.box("cleaner-2", IN_PROCESS).rglob("*.handoff"))

    finish(dep)
    code, out, err = run_as(proj, "cleaner-2", "ready_for_next")
    assert (code, err) == (0, "")
    [taken] = proj.box("cleaner-2", IN_PROCESS).rglob("*.handoff")
    assert taken.name == held.name and not held.exists()
    assert f"DEPENDS_ON: {OPEN_DEP}@coder GREEN\nPAYLOAD:\n" in out


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_ready_pool_files_are_taken_past_one_that_waits(tmp_path, mode):
    proj = make_pool_project(tmp_path / "p", mode=mode)
    dependency(proj)
    held = pool_file(proj, 1, priority="10", depends_on=OPEN_DEP)
    ready = pool_file(proj, 2, priority="20")
    assert run_as(proj, "cleaner-1", "ready_for_next")[0] == 0
    assert held.exists() and not ready.exists()
    assert [p.name for p in proj.box("cleaner-1", IN_PROCESS).rglob("*.handoff")] == [ready.name]


def test_not_ready_counts_the_members_own_files_and_its_pools(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    dependency(proj)
    proj.put("cleaner-3", "50_x_to_cleaner-3.handoff", recipient="cleaner-3",
             blocked_reason="which schema?")  # fmt: skip
    pool_file(proj, 1, depends_on=OPEN_DEP)
    pool_file(proj, 2, blocked_reason="needs a key")
    assert run_as(proj, "cleaner-3", "ready_for_next") == (
        0, "NO_TASK\n",
        "NOT_READY: 3 waiting: 2 blocked, 1 on dependencies (see handoffd status)\n",
    )  # fmt: skip


def test_a_dependency_on_a_pool_card_holds_until_a_member_completes_it(tmp_path):
    """Open in the pool, then in a member's hands: not ready; completed by the member: its
    card `<id>@<pool>` is green, and the file that waited on it is taken."""
    proj = make_pool_project(tmp_path / "p")
    first = pool_file(proj, 1)
    ident = hf.name_id(first.name)
    proj.put("coder", "50_y_to_coder.handoff", id="y", recipient="coder", depends_on=ident)
    not_ready = (0, "NO_TASK\n", NOT_READY_ONE)
    assert run_as(proj, "coder", "ready_for_next") == not_ready  # waiting in the pool
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0
    assert run_as(proj, "coder", "ready_for_next") == not_ready  # in cleaner-2's hands
    assert run_as(proj, "cleaner-2", "done_with_current")[0] == 0
    code, out, _ = run_as(proj, "coder", "ready_for_next")
    assert code == 0 and out.startswith("TASK: ")
    assert f"DEPENDS_ON: {ident}@cleaner GREEN\n" in out


def test_status_says_what_a_pool_file_waits_on_and_never_paints_it_red_for_it(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    dependency(proj)
    held = pool_file(proj, 1, depends_on=OPEN_DEP)
    done = proj.run("handoffd", "status", "--json", role=None, cwd=proj.root)
    shown = {card["card"]: card for card in json.loads(done.out)}
    card = shown[f"{hf.name_id(held.name)}@cleaner"]
    assert card["color"] == "orange" and f"on {OPEN_DEP}@coder" in card["detail"]


def test_the_stop_hook_does_not_announce_a_pool_file_that_waits_on_a_dependency(tmp_path):
    proj = make_pool_project(tmp_path.resolve() / "p")
    dep = dependency(proj)
    pool_file(proj, 1, depends_on=OPEN_DEP)
    assert stop(proj, role="cleaner-1") == ""
    finish(dep)
    said = json.loads(stop(proj, role="cleaner-1"))
    assert (
        said["decision"] == "block"
        and "(first: 20260101T000001Z_000001_from_coder" in (said["reason"])
    )


def member_wakes(daemon: object, start: float, until: float) -> list[float]:
    """Step once a second from `start` to `until`; the times some member was woken."""
    times = []
    for second in range(int(start), int(until) + 1):
        before = _woken(daemon)
        daemon.step(float(second))  # type: ignore[attr-defined]
        if _woken(daemon) > before:
            times.append(float(second))
    return times


def _woken(daemon: object) -> int:
    return sum(1 for role in daemon.waker.woken() if role in MEMBERS)  # type: ignore[attr-defined]


def test_renotify_leaves_a_pool_whose_mail_waits_on_a_dependency_alone(tmp_path):
    proj = make_pool_project(tmp_path.resolve() / "p")
    dep = dependency(proj)
    queue_original(proj, "coder", ["cleaner"], depends_on=OPEN_DEP)
    daemon = open_daemon(proj, renotify_after=10)
    daemon.dependencies = for_daemon  # what `handoffd run` gives it
    try:
        assert member_wakes(daemon, 0, 80) == [0]  # the delivery's wake-up alone
        assert [e for e in events(proj, "renotify") if e["role"] != "coder"] == []
        finish(dep)
        times = member_wakes(daemon, 81, 100)
        assert times and times[0] <= 81 + 10 + daemon.rescan_every, times
    finally:
        daemon.close()


def test_the_dependency_check_finds_a_pool_copy_under_the_pools_card(tmp_path):
    """`ops/readiness` asked for a member (helper, hook) or for the pool (re-notify)."""
    proj = make_pool_project(tmp_path / "p")
    dependency(proj)
    held = pool_file(proj, 1, depends_on=OPEN_DEP)
    roles = config.load_roles(str(proj.root))
    check = for_daemon(str(proj.root), roles)
    for asker in ("cleaner", "cleaner-2"):
        assert check(asker, str(held), [OPEN_DEP]) is False, asker
    assert not _has_ready(roles["cleaner"], check)
    # A file the board does not show (it came after the scan) is never ready by default:
    # the open cards say; only a handoff found nowhere holds nothing back.
    unseen = str(proj.box("cleaner", NEW) / "50_later_to_cleaner.handoff")
    assert check("cleaner-1", unseen, [OPEN_DEP]) is False
    assert check("cleaner-1", unseen, ["20260101T000000Z_000099_from_nobody"]) is True


# --- one bad file stops no pool -----------------------------------------------------------

BAD = "10_20260101T000000Z_000001_from_coder_to_cleaner.handoff"  # first in queue order
UNFIT = {  # what is planted, and the why the board shows for it (None: no card at all)
    "huge": "cannot read: larger than the 1048576-byte limit; it was not read further",
    "headers": "header line 1 is not 'key: value': 'garbage'",
    "not_utf8": "not UTF-8 text (bad byte at offset 4)",
    "no_block": "no header block (header lines, then an empty line)",
    "fifo": None,
    "link": None,
}


def plant_bad(proj: Project, kind: str, target: Path) -> Path:
    path = proj.box("cleaner", NEW) / BAD
    if kind == "huge":  # 2 GiB of hole: never read whole
        path.write_bytes(b"id: x\n")
        os.truncate(path, 2 * 1024**3)
    elif kind == "headers":
        path.write_bytes(b"garbage\n\nbody\n")
    elif kind == "not_utf8":
        path.write_bytes(b"id: \xff\xfe\n\nbody\n")
    elif kind == "no_block":
        path.write_bytes(b"id: x\nfrom: coder\n")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(target)
    return path


@pytest.mark.parametrize("mode", ["task", "batch"])
@pytest.mark.parametrize("kind", list(UNFIT))
def test_a_bad_file_in_the_pools_new_is_skipped_and_the_files_behind_it_are_taken(
    tmp_path, kind, mode
):
    proj = make_pool_project(tmp_path / "p", mode=mode)
    goods = [pool_copy(proj, 2), pool_copy(proj, 3, priority="60")]
    bad = plant_bad(proj, kind, tmp_path / "outside")
    for member, good in zip(MEMBERS, goods, strict=False):
        code, out, err = run_as(proj, member, "ready_for_next")
        assert (code, err) == (0, ""), err
        taken = proj.box(member, IN_PROCESS)
        assert [p.name for p in taken.rglob("*.handoff")] == [good.name]
        assert out.startswith("BATCH: " if mode == "batch" else f"TASK: {taken / good.name}")
    assert run_as(proj, MEMBERS[2], "ready_for_next") == (0, "NO_TASK\n", "")
    assert os.path.lexists(bad)  # left where it is, for a person to see to


@pytest.mark.parametrize("kind", list(UNFIT))
def test_a_bad_pool_file_is_red_with_why_on_the_board_and_the_web_card(tmp_path, kind):
    from starlette.testclient import TestClient

    from handoffd.web import views
    from handoffd.web.app import create_app

    proj = make_pool_project(tmp_path / "p")
    plant_bad(proj, kind, tmp_path / "outside")
    done = proj.run("handoffd", "status", "--json", role=None, cwd=proj.root)
    assert done.code == 0, done.err
    shown = json.loads(done.out)
    why = UNFIT[kind]
    if why is None:  # a FIFO or a link is no queue item (§8): no card, nothing to take
        assert shown == []
        return
    [card] = shown
    assert (card["color"], card["detail"]) == ("red", f"cannot be handed out: {why}")
    web = TestClient(create_app(str(proj.root)), base_url="http://127.0.0.1:8765")
    page = web.get(views.card_url(card["card"]))
    assert page.status_code == 200
    assert f'data-card="{card["card"]}" data-color="red"' in page.text
    assert "cannot be handed out" in page.text


def test_a_members_own_bad_file_still_stops_it_with_invalid_handoff(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    pool_copy(proj, 2)
    own = proj.box("cleaner-1", NEW) / "10_z_to_cleaner-1.handoff"
    write(own, b"garbage\n\nbody\n")
    code, out, err = run_as(proj, "cleaner-1", "ready_for_next")
    assert (code, out) == (2, "") and err.startswith("INVALID_HANDOFF: ")
    assert "Move the file out of the inbox" in err and f"- {own}\n" in err
    assert run_as(proj, "cleaner-2", "ready_for_next")[1].startswith("TASK: ")  # others go on


def test_the_stop_hook_and_renotify_skip_a_bad_pool_file(tmp_path):
    proj = make_pool_project(tmp_path.resolve() / "p")
    plant_bad(proj, "huge", tmp_path / "outside")
    roles = config.load_roles(str(proj.root))
    assert stop(proj, role="cleaner-1") == ""
    assert not _has_ready(roles["cleaner"], None)
    good = pool_copy(proj, 2)
    said = json.loads(stop(proj, role="cleaner-1"))
    assert f"(first: {hf.name_id(good.name)} from coder)" in said["reason"]
    assert _has_ready(roles["cleaner"], None)
