"""Throwaway handoffd projects, for the tests and the benchmark alike.

`make_project` lays out a real one: a git repository with a worktree per role and a
roles.tsv naming them; `Project` runs the helpers in it and lays handoff files in its
folders, the way swarm_handoff names them and the daemon stamps them.  Neither pytest nor
the benchmark is imported here: tests/conftest.py and benchmarks/ both build on this
package, and neither pulls the other in.  It ships in no wheel.
"""

from testbed.files import handoff_id, queue_note, queued, queued_name, stamped, write
from testbed.project import (
    BIN,
    GIT_ENV,
    GitError,
    Project,
    Result,
    Seat,
    git,
    helper_env,
    make_project,
    roles_tsv,
    run_command,
)

__all__ = [
    "BIN",
    "GIT_ENV",
    "GitError",
    "Project",
    "Result",
    "Seat",
    "git",
    "handoff_id",
    "helper_env",
    "make_project",
    "queue_note",
    "queued",
    "queued_name",
    "roles_tsv",
    "run_command",
    "stamped",
    "write",
]
