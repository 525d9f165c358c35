"""What a person sees of a pool's work (docs/protocol.md §17): the member that finished a
pool's card on its card page, in the archive, the board's detail, digests and
carry-forward; a pool refused as a sender."""

from __future__ import annotations

import time
from urllib.parse import quote

from starlette.testclient import TestClient

from handoffd.core import handoff as hf
from handoffd.web.app import create_app
from testbed.project import make_pool_project
from tests.test_pool import pool_copy, run_as


def finished(tmp_path):
    """A pool card that cleaner-2 took and finished."""
    proj = make_pool_project(tmp_path / "p")
    copy = pool_copy(proj, 1)
    assert run_as(proj, "cleaner-2", "ready_for_next")[0] == 0
    code, out, err = run_as(proj, "cleaner-2", "done_with_current")
    assert code == 0 and "COMPLETED" in out, err
    return proj, hf.name_id(copy.name)


def board(proj) -> TestClient:
    app = create_app(str(proj.root), clock=time.time)
    return TestClient(app, base_url="http://127.0.0.1:8765")


def test_the_card_page_and_the_archive_name_the_member_that_finished_it(tmp_path):
    proj, ident = finished(tmp_path)
    page = board(proj).get("/card/" + quote(f"{ident}@cleaner"))
    assert page.status_code == 200
    assert 'data-finished-by="cleaner-2"' in page.text and "of pool cleaner" in page.text
    archive = board(proj).get("/archive")
    assert archive.status_code == 200
    assert 'data-finished-by="cleaner-2"' in archive.text and "by cleaner-2" in archive.text


def test_status_all_says_which_member_completed_a_pools_card(tmp_path):
    proj, ident = finished(tmp_path)
    done = proj.run("handoffd", "status", "--all", role=None, cwd=proj.root)
    row = next(line for line in done.out.splitlines() if ident in line)
    assert row.startswith("GREEN") and row.endswith(" by cleaner-2"), row


def test_a_digest_and_carry_forward_find_the_pools_copy_at_its_member(tmp_path):
    proj, ident = finished(tmp_path)
    for args in (("digest", ident), ("carry-forward",)):
        done = proj.run("handoffd", *args, role=None, cwd=proj.root)
        assert done.code == 0, done.err
        assert "no copy found" not in done.out and "copy_not_found" not in done.out, done.out
        assert "completed by cleaner-2 of cleaner" in done.out, done.out


DRAFT = "type: note\nto: coder\npriority: 50\nmessage: from the pool itself\n"


def test_a_pool_is_refused_as_a_sender_by_send_handoff_and_swarm_handoff(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    draft = tmp_path / "draft"
    draft.write_text(DRAFT)
    done = proj.run("handoffd", "send-handoff", str(draft), "--role", "cleaner", role=None,
                    cwd=proj.root)  # fmt: skip
    assert done.code == 1 and done.out == "", done.out
    assert done.err.startswith("Unknown sender role: cleaner (cleaner is a pool"), done.err
    assert "cleaner-1, cleaner-2, cleaner-3" in done.err
    pool_folder = proj.root / ".swarmforge" / "pools" / "cleaner"
    done = proj.run("swarm_handoff", str(draft), role="cleaner", cwd=pool_folder)
    assert done.code == 1 and done.err.startswith("Unknown sender role: cleaner"), done.err
    assert draft.exists() and not (pool_folder / "outbox").exists()


def test_the_daemon_never_delivers_from_a_pools_outbox(tmp_path):
    proj = make_pool_project(tmp_path / "p")
    outbox = proj.root / ".swarmforge" / "pools" / "cleaner" / "outbox"
    outbox.mkdir(parents=True)
    name = "50_20260101T000001Z_000001_from_cleaner_to_coder.handoff"
    (outbox / name).write_text(
        "id: 20260101T000001Z_000001_from_cleaner\nfrom: cleaner\nto: coder\npriority: 50\n"
        "type: note\nmessage: planted\n\nRe-read your role and constitution.\n\nplanted\n"
    )
    run = proj.run("handoffd", "run", "--once", role=None, cwd=proj.root)
    assert run.code == 0, run.err
    assert (outbox / name).exists()
    assert not list(proj.box("coder", "inbox/new").glob("*.handoff"))


def test_the_web_board_shows_the_roles_as_status_does_with_the_pools_line(tmp_path):
    """The roles panel of `/` is `status`'s lines under its first one: the same rows of
    the same projection (docs/protocol.md §14, §17), each role marked by its pane."""
    import html
    import re

    from handoffd.board import status
    from handoffd.core import limits

    proj = make_pool_project(tmp_path / "p")
    now = time.time()
    app = create_app(str(proj.root), clock=lambda: now)
    page = TestClient(app, base_url="http://127.0.0.1:8765").get("/")
    assert page.status_code == 200
    shown = {
        role: (pane, html.unescape(glance))
        for role, pane, glance in re.findall(
            r'data-role="([^"]+)" data-pane="([^"]+)">.*?<span class="glance">(.*?)</span>',
            page.text,
        )
    }
    result = status.board(str(proj.root), None, False, limits.LIVENESS_WINDOW, now)
    lines = status.role_lines(status.roles(result.snapshot), now)
    assert [line.split()[0] for line in lines] == list(shown)
    for line in lines:
        role, _, glance = line.partition(" ")
        assert shown[role][1] == glance.strip(), (role, shown[role], glance)
    assert shown["cleaner"] == ("pool", "pool of 3: 0 busy, 0 idle, 3 unknown")
    assert shown["cleaner-2"][0] == "unknown"  # no daemon runs: no pane is known
