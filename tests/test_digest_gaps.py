"""What a digest does not know is a gap (docs/protocol.md §11), never padding: each gap
from a project that lacks exactly that fact, and the history index behind `--task`."""

from __future__ import annotations

import json

from tests.conftest import Project, roles_tsv
from tests.digest_support import report, run, send

NAME = "50_20260101T000000Z_000009_from_{sender}_to_cleaner.handoff"


def digest_json(project: Project, *args: str) -> dict:
    result = run("digest", project, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def put_git_handoff(project: Project, sender: str, task: str, commit: str, box: str) -> str:
    """A delivered git_handoff in cleaner's folder `box`; its id."""
    name = NAME.format(sender=sender)
    ident = name.split("_", 1)[1].rsplit("_to_", 1)[0]
    project.put(
        "cleaner",
        name,
        box=box,
        id=ident,
        **{"from": sender, "to": "cleaner", "type": "git_handoff", "task": task},
        commit=commit,
        created_at="2026-01-01T00:00:00Z",
        recipient="cleaner",
        enqueued_at="2026-01-01T00:00:01Z",
    )
    return ident


def test_a_note_alone_has_no_commit_header_and_no_reports_and_no_padding(project):
    ident = send(project, "coder", "QA", "a note")
    out = digest_json(project, ident)
    assert out["gaps"] == ["no_commit_header", "no_reports"]
    lines = out["markdown"].splitlines()
    assert lines[0].startswith(f"# Handoff {ident} · coder, QA · ")
    assert lines[1].startswith("**Outcome** waiting in QA's inbox since ")
    assert [line for line in lines if line.startswith("## ")] == [
        "## Handoffs (1)",
        "## Not in this handoff",
    ]
    assert len(lines) == 9


def test_a_commit_git_does_not_have(project):
    put_git_handoff(project, "coder", "ghost", "deadbeef00", "inbox/new")
    out = digest_json(project, "--task", "ghost")
    assert "commit_not_found" in out["gaps"]
    assert "## Commits" not in out["markdown"]
    assert "deadbeef00 — waiting in cleaner's inbox" in out["markdown"]


def test_a_sender_whose_worktree_is_not_a_repository_is_git_unavailable(project, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    extra = roles_tsv([("docs", "docs", str(plain), "docs", "Docs", "shell", "task")])
    roles = (project.root / ".swarmforge" / "roles.tsv").read_text() + extra
    project.write_roles(roles)
    put_git_handoff(project, "docs", "docs-task", "0123456789", "inbox/new")
    assert "git_unavailable" in digest_json(project, "--task", "docs-task")["gaps"]


def test_a_sender_not_in_roles_tsv_is_worktree_unknown(project):
    put_git_handoff(project, "ghost", "orphan", "0123456789", "inbox/completed")
    out = digest_json(project, "--task", "orphan")
    assert "worktree_unknown" in out["gaps"]
    assert "completed by cleaner" in out["markdown"]


def test_fifty_reports_on_one_handoff_may_be_history_truncated(project):
    ident = put_git_handoff(project, "coder", "busy", project.commit(), "inbox/in_process")
    for second in range(50):
        report(project, "cleaner", ident, "RUNNING", f"Step {second}.", 1e9 + second)
    out = digest_json(project, "--task", "busy")
    assert "history_truncated" in out["gaps"] and "no_reports" not in out["gaps"]
    assert "## Reports (50)" in out["markdown"]


def test_a_delivered_original_whose_copy_is_gone(project):
    ident = send(project, "coder", "QA", "gone", project.commit())
    for copy in project.box("QA", "inbox/new").iterdir():
        copy.unlink()
    out = digest_json(project, ident)
    assert "copy_not_found" in out["gaps"]
    assert "— no copy found at QA   [" in out["markdown"]


def test_an_unreadable_history_file_is_a_gap_not_a_crash(project):
    name = NAME.format(sender="coder")
    broken = project.box("cleaner", "inbox/completed") / name
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a header block")
    out = digest_json(project, name.split("_", 1)[1].rsplit("_to_", 1)[0])
    assert "unreadable_file" in out["gaps"]


def test_a_refused_handoff_shows_the_reason_from_its_error_file(project):
    name = NAME.format(sender="coder").replace("_to_cleaner", "_to_nobody")
    ident = name.split("_", 1)[1].rsplit("_to_", 1)[0]
    path = project.put("coder", name, box="failed", id=ident, to="nobody", task="refused")
    (path.parent / (name + ".error")).write_text("Unknown recipient role 'nobody'.\n")
    out = digest_json(project, "--task", "refused")
    assert "**Outcome** failed: Unknown recipient role 'nobody'." in out["markdown"]


def test_a_hand_written_list_of_recipients_names_no_role_it_does_not_have(project):
    """`to: cleaner, QA`, spaced as a person writes it: the digest reads the two roles the
    daemon delivered to, never a third named " QA" whose copy it cannot find."""
    ident = "20260101T000000Z_000009_from_coder"
    name = f"50_{ident}_to_cleaner_QA.handoff"
    headers = {
        "id": ident,
        "to": "cleaner, QA",
        "task": "spaced",
        "created_at": "2026-01-01T00:00:00Z",
    }
    project.put("coder", name, box="sent", **headers)
    for role in ("cleaner", "QA"):
        project.put(role, name, **headers, recipient=role, enqueued_at="2026-01-01T00:00:01Z")
    out = digest_json(project, "--task", "spaced")
    lines = out["markdown"].splitlines()
    assert lines[0].startswith("# Task spaced · coder, cleaner, QA · ")
    assert "copy_not_found" not in out["gaps"] and "no copy found" not in out["markdown"]
    assert "coder → cleaner, QA note — waiting in cleaner's inbox" in out["markdown"]
