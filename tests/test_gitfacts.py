"""Git facts for digests (docs/protocol.md §11) against a real repository."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from handoffd.digest import gitfacts
from tests.conftest import GIT_ENV, git


def commit_at(repo: Path, path: str, when: int, message: str) -> str:
    """Commit a change to `path` with committer and author date `when`; its sha10."""
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{message}\n")
    env = {**os.environ, **GIT_ENV, "GIT_COMMITTER_DATE": f"@{when} +0000"}
    env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"]
    subprocess.run(["git", "add", path], cwd=repo, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, env=env, check=True)
    return git(repo, "rev-parse", "--short=10", "HEAD")


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    return repo


def test_named_commits_and_the_commits_between_them(tmp_path):
    repo = make_repo(tmp_path)
    first = commit_at(repo, "a.txt", 1000, "first named")
    commit_at(repo, "b.txt", 1100, "between one")
    commit_at(repo, "src/c.txt", 1200, "between two")
    last = commit_at(repo, "a.txt", 1300, "second named")
    commit_at(repo, "d.txt", 1400, "after the last handoff")
    facts = gitfacts.Facts()
    gitfacts.thread_commits(str(repo), [first, last], facts)
    subjects = sorted(c.subject for c in facts.commits.values())
    assert subjects == ["between one", "between two", "first named", "second named"]
    by_subject = {c.subject: c for c in facts.commits.values()}
    assert by_subject["between two"].files == ("src/c.txt",)
    assert by_subject["between two"].committed_at == 1200
    assert by_subject["second named"].short == last
    assert facts.gaps == [] and facts.missing == []


def test_a_commit_git_does_not_have_is_reported_missing(tmp_path):
    repo = make_repo(tmp_path)
    known = commit_at(repo, "a.txt", 1000, "known")
    facts = gitfacts.Facts()
    gitfacts.thread_commits(str(repo), ["deadbeef00", known], facts)
    assert facts.missing == ["deadbeef00"]
    assert [c.subject for c in facts.commits.values()] == ["known"]


def test_a_worktree_that_is_not_a_repository_is_git_unavailable(tmp_path):
    facts = gitfacts.Facts()
    gitfacts.thread_commits(str(tmp_path), ["0123456789"], facts)
    assert facts.gaps == ["git_unavailable"] and not facts.commits


def test_a_worktree_that_is_gone_is_git_unavailable(tmp_path):
    facts = gitfacts.Facts()
    gitfacts.thread_commits(str(tmp_path / "gone"), ["0123456789"], facts)
    assert facts.gaps == ["git_unavailable"]


def test_last_commit_at_is_the_newest_committer_date_after_since(tmp_path):
    repo = make_repo(tmp_path)
    commit_at(repo, "a.txt", 1000, "old")
    assert gitfacts.last_commit_at(str(repo), since=1500) is None
    commit_at(repo, "a.txt", 2000, "new")
    assert gitfacts.last_commit_at(str(repo), since=1500) == 2000
