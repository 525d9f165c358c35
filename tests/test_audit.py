"""The audit of a project at rest (`handoffd.daemon.audit`), on hand-made files: what it expects
of an original is what the daemon delivers from it (docs/protocol.md §2, §3)."""

from __future__ import annotations

from handoffd.core import config
from handoffd.daemon.audit import audit
from tests.conftest import Project

IDENT = "20260101T000000Z_000009_from_coder"
NAME = f"50_{IDENT}_to_cleaner_QA.handoff"


def test_a_hand_written_list_of_recipients_expects_a_copy_at_each_role_it_names(
    project: Project,
) -> None:
    """`to: cleaner, QA`, spaced as a person writes it (`.swarmforge/` is anyone's to
    write): one copy is expected at QA, none at a role named " QA"."""
    project.put("coder", NAME, box="sent", id=IDENT, to="cleaner, QA")
    for role in ("cleaner", "QA"):
        project.put(role, NAME, id=IDENT, to="cleaner, QA", recipient=role,
                    enqueued_at="2026-01-01T00:00:01Z")  # fmt: skip
    report = audit(str(project.root), config.load_roles(str(project.root)))
    assert report.ok, report.problems
    assert report.expected == {IDENT: ["cleaner", "QA"]}
