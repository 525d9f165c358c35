"""The messages a newcomer meets in the first hour: each says what did not happen and how to
fix it, after the contract's exact text where there is one (docs/protocol.md §1, §3, §5)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from handoffd.core import lifecycle
from handoffd.ops.queue import USAGE
from tests.conftest import NO_DAEMON, Project, run_command
from tests.swarm_support import command_env, handoffd


def queue_note(project: Project) -> tuple[int, str, str]:
    draft = project.draft(project.note_draft())
    result = project.run("swarm_handoff", str(draft), role="coder")
    return result.code, result.out, result.err


# --- swarm_handoff ------------------------------------------------------------------------


def test_swarm_handoff_without_a_daemon_queues_and_says_how_to_start_one(
    project: Project,
) -> None:
    code, out, err = queue_note(project)
    assert code == 0 and out.startswith("HANDOFF QUEUED: ")
    assert err == (
        f"{NO_DAEMON}{project.root}; this handoff waits in outbox/ until one does. "
        f"Start it with: handoffd start {project.root}\n"
    )


def test_swarm_handoff_with_a_daemon_running_says_nothing_more(project: Project) -> None:
    lock = lifecycle.Lock(str(project.root))  # the kernel lock is what a running daemon holds
    lock.acquire()
    try:
        code, out, err = queue_note(project)
    finally:
        lock.release()
    assert (code, err) == (0, "")
    assert out.startswith("HANDOFF QUEUED: ")


def test_swarm_handoff_help_prints_the_usage_and_succeeds(project: Project) -> None:
    for flag in ("--help", "-h"):
        result = project.run("swarm_handoff", flag, role="coder")
        assert (result.code, result.out, result.err) == (0, USAGE, "")


def test_an_unknown_recipient_is_reported_in_the_contract_exact_words(project: Project) -> None:
    """docs/protocol.md §3: agents repair drafts from these texts, so the line is exactly
    `Unknown recipient role '<r>'.` and nothing more."""
    draft = project.draft(project.note_draft(to="clenaer"))
    result = project.run("swarm_handoff", str(draft), role="coder")
    assert result.code == 2
    assert "\nErrors:\n- Unknown recipient role 'clenaer'.\n\n" in result.err


def test_an_unknown_recipient_ends_the_usage_with_the_known_roles(project: Project) -> None:
    """Issue 9: say how to fix it: the roles there are, after the usage text (the error line
    itself stays the contract's)."""
    draft = project.draft(project.note_draft(to="clenaer"))
    result = project.run("swarm_handoff", str(draft), role="coder")
    assert result.err.endswith(
        USAGE + "\nKnown roles: QA, cleaner, coder. Did you mean 'cleaner' for 'clenaer'?\n"
    )
    other = project.draft(project.note_draft(priority="5"), name="other.txt")
    assert "Known roles" not in project.run("swarm_handoff", str(other), role="coder").err


# --- a broken roles.tsv -------------------------------------------------------------------


def test_a_broken_roles_tsv_makes_every_helper_say_how_to_repair_or_regenerate_it(
    project: Project,
) -> None:
    roles = project.root / ".swarmforge" / "roles.tsv"
    roles.write_text(roles.read_text() + "reviewer\tonly-two-columns\n")
    for helper in ("swarm_handoff", "ready_for_next", "done_with_current_batch"):
        args = (str(project.draft(project.note_draft())),) if helper == "swarm_handoff" else ()
        result = project.run(helper, *args, role="coder")
        assert result.code == 1, helper
        first, second = result.err.splitlines()
        assert first.startswith(f"{roles}:5: expected TAB-separated role"), helper
        assert second == (
            "Repair roles.tsv by hand, or regenerate it from the swarm configuration with "
            "`handoffd init` in the project's root."
        )


# --- stopping -----------------------------------------------------------------------------


def test_handoffd_stop_of_a_directory_that_does_not_exist_is_an_error() -> None:
    result = handoffd("stop", "/no/such/dir")
    assert result.returncode == 1
    assert result.stderr == "Error: no such directory: /no/such/dir\n"


def test_stop_handoff_daemon_without_an_argument_stops_the_project_of_the_working_directory(
    project: Project,
) -> None:
    subdirectory = project.root / "src"
    result = run_command("stop_handoff_daemon", cwd=subdirectory, role=None)
    assert (result.code, result.err) == (0, "")
    assert result.out == f"no handoffd was running for {project.root}\n"


def test_stop_handoff_daemon_without_an_argument_outside_a_project_says_why(
    tmp_path: Path,
) -> None:
    result = run_command("stop_handoff_daemon", cwd=tmp_path, role=None)
    assert result.code == 1
    assert result.err.startswith("Cannot find SwarmForge project root\n")


# --- handoffd -h --------------------------------------------------------------------------


def test_handoffd_dash_h_is_the_same_as_help() -> None:
    short, long = handoffd("-h"), handoffd("--help")
    assert (short.returncode, long.returncode) == (0, 0)
    assert short.stdout == long.stdout
    assert "Usage: handoffd [OPTIONS] COMMAND [ARGS]..." in short.stdout


def test_the_swarm_handoff_shim_passes_help_through() -> None:
    """`swarm_handoff.sh --help`, as the agents' shim is called (docs/protocol.md §7)."""
    shim = os.path.join(os.path.dirname(__file__), "..", "scripts", "swarm_handoff.sh")
    result = subprocess.run(
        ["bash", shim, "--help"], env=command_env(), capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout) == (0, USAGE)


# --- names and help (docs/protocol.md §15, "What a person sees") ----------------------------


def test_help_shows_every_commands_whole_one_line_summary() -> None:
    from handoffd.ops.table import OPS

    listed = handoffd("--help").stdout.partition("Commands:")[2]
    shown = " ".join(listed.split())  # wrapped under the name, never cut
    for op in OPS:
        assert f"{op.name} {op.help}" in shown, op.name
    assert "down Stop the daemon and this project's tmux server, nothing else." in shown
    assert "up Start the swarm: a tmux session per role, and the daemon." in shown
    assert "..." not in shown


def test_an_unknown_command_suggests_the_nearest_one_a_swapped_pair_being_one_slip() -> None:
    for typed, meant in (("statsu", "status"), ("strt", "start"), ("reopne", "reopen")):
        result = handoffd(typed)
        assert result.returncode == 2
        assert result.stderr.endswith(f"Error: No such command '{typed}'. Did you mean "
                                      f"'{meant}'?\n"), result.stderr  # fmt: skip
    assert handoffd("xyzzy").stderr.endswith("Error: No such command 'xyzzy'.\n")


CLEANR = "Unknown role: cleanr (known roles: QA, cleaner, coder; did you mean cleaner?)"


def test_an_unknown_role_names_the_roles_and_the_nearest_wherever_a_role_is_given(
    project: Project,
) -> None:
    from tests.test_board_commands import run

    status = run(project, "status", "--role", "cleanr", role=None, cwd=project.root)
    assert (status.code, status.err) == (1, CLEANR + "\n")
    helper = project.run("ready_for_next", role="cleanr", cwd=project.root)
    assert (helper.code, helper.err) == (1, CLEANR + "\n")
    block = run(project, "block", "20260101T000000Z_000001_from_coder@cleanr", "--reason", "x",
                role=None, cwd=project.root)  # fmt: skip
    assert (block.code, block.err) == (1, CLEANR + "\n")


def test_a_card_whose_role_is_a_typo_says_so_under_the_contracts_token(project: Project) -> None:
    from tests.test_board_commands import run

    card = "20260101T000000Z_000001_from_coder@cleanr"
    for args, token in ((("answer", card, "yes"), "UNKNOWN_CARD"), (("retry", card), "NOT_FAILED"),
                        (("reopen", card), "NOT_COMPLETED")):  # fmt: skip
        done = run(project, *args, role=None, cwd=project.root)
        assert (done.code, done.err) == (2, f"{token}: {card}\n{CLEANR}\n"), args


def test_the_sender_roles_line_stays_the_contracts_alone(project: Project) -> None:
    """§3 step 4 is a fixed line agents match: no suggestion is added to it."""
    draft = project.draft(project.note_draft())
    result = project.run("swarm_handoff", str(draft), role="cleanr", cwd=project.root)
    assert (result.code, result.err) == (1, "Unknown sender role: cleanr\n")
