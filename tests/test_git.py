"""Commit canonicalisation against a real git repository."""

from __future__ import annotations

import hashlib
import itertools
import subprocess
from pathlib import Path

from handoffd.core import git
from tests.conftest import Project
from tests.conftest import git as run_git


def blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def two_blobs_sharing_a_prefix(length: int) -> tuple[bytes, bytes, str]:
    """Two blob contents whose object ids share their first `length` hex digits."""
    seen: dict[str, bytes] = {}
    for n in itertools.count():
        content = b"%d\n" % n
        prefix = blob_id(content)[:length]
        if prefix in seen:
            return seen[prefix], content, prefix
        seen[prefix] = content
    raise AssertionError("unreachable")


def write_blob(cwd: Path, content: bytes) -> str:
    result = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=cwd, input=content, capture_output=True
    )
    return result.stdout.decode().strip()


def test_an_uppercase_abbreviation_canonicalises_to_lowercase_ten_digits(project: Project) -> None:
    full = run_git(project.root, "rev-parse", "HEAD")
    assert any(c in "abcdef" for c in full[:10]), "the fixed commit needs hex letters"
    assert git.resolve_commit(str(project.root), full[:10].upper()) == (full[:10], None)


def test_a_shorter_abbreviation_canonicalises_to_ten_digits(project: Project) -> None:
    full = run_git(project.root, "rev-parse", "HEAD")
    assert git.resolve_commit(str(project.root), full[:7]) == (full[:10], None)


def test_a_tree_is_not_a_commit(project: Project) -> None:
    tree = run_git(project.root, "rev-parse", "--short=10", "HEAD^{tree}")
    assert git.resolve_commit(str(project.root), tree) == (
        None,
        f"Header 'commit' must resolve to a commit; '{tree}' resolves to 'tree'.",
    )


def test_a_blob_is_not_a_commit(project: Project) -> None:
    blob = run_git(project.root, "rev-parse", "--short=10", "HEAD:README")
    _, error = git.resolve_commit(str(project.root), blob)
    assert error == f"Header 'commit' must resolve to a commit; '{blob}' resolves to 'blob'."


def test_an_ambiguous_prefix_reports_how_many_objects_it_matched(project: Project) -> None:
    first, second, prefix = two_blobs_sharing_a_prefix(4)
    assert write_blob(project.root, first)[:4] == write_blob(project.root, second)[:4] == prefix
    matches = run_git(project.root, "rev-parse", f"--disambiguate={prefix}").split()
    assert git.resolve_commit(str(project.root), prefix) == (
        None,
        f"Header 'commit' must resolve to exactly one Git object; '{prefix}' matched "
        f"{len(matches)}.",
    )
    assert len(matches) >= 2


def test_an_unknown_commit_matched_nothing(project: Project) -> None:
    _, error = git.resolve_commit(str(project.root), "0000000000")
    assert error == (
        "Header 'commit' must resolve to exactly one Git object; '0000000000' matched 0."
    )
