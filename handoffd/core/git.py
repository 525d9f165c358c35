"""The few git questions handoffd asks, answered by the `git` command.

`swarm_handoff` imports this module for every draft, and only a git handoff's commit
asks git anything: `subprocess` (which brings `re`, `enum` and threads with it) is
imported when git is run, not before."""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: swarm_handoff imports this module
if TYPE_CHECKING:
    import subprocess


def run(cwd: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `git <args>` in `cwd`, capturing text output; never raises on a git error."""
    import subprocess

    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def resolve_commit(worktree: str, commit: str) -> tuple[str | None, str | None]:
    """Canonicalise an abbreviated commit: (its `--short=10` form, None) or (None, the error).

    `--disambiguate` lists every object the prefix matches, so an ambiguous prefix is
    reported with its count instead of being silently resolved to one of them.
    """
    matches = run(worktree, "rev-parse", f"--disambiguate={commit}").stdout.split()
    if len(matches) != 1:
        return None, (
            f"Header 'commit' must resolve to exactly one Git object; "
            f"'{commit}' matched {len(matches)}."
        )
    kind = run(worktree, "cat-file", "-t", matches[0]).stdout.strip()
    if kind != "commit":
        return None, f"Header 'commit' must resolve to a commit; '{commit}' resolves to '{kind}'."
    return run(worktree, "rev-parse", "--short=10", matches[0]).stdout.strip(), None


HEX = frozenset("0123456789abcdef")
CHECK_TIMEOUT = 5.0  # seconds for one object look-up: a wedged repository never holds a take


def has_commit(worktree: str, commit: str) -> bool | None:
    """Whether the repository of `worktree` holds the commit `commit` (a §3 abbreviation):
    one `git cat-file -e`; None when git cannot say (no repository there, no git, a git
    that hangs).  A value that is not 4 to 40 hex digits is no commit of any repository,
    and is never handed to git (a header is untrusted: `--output=…` is no object name)."""
    if not 4 <= len(commit) <= 40 or not HEX.issuperset(commit):
        return False
    import subprocess

    try:
        done = subprocess.run(
            ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=worktree,
            capture_output=True, text=True, check=False, timeout=CHECK_TIMEOUT,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode == 0:
        return True
    return None if "not a git repository" in done.stderr else False
