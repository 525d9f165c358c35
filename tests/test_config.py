"""roles.tsv, the project root and the calling role (docs/protocol.md §1)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from handoffd.core import config
from tests.conftest import HANG, HOSTILE, SAID, Project, git, plant, roles_tsv

SOURCE = "/p/.swarmforge/roles.tsv"


def parse(*rows: tuple[str, ...]) -> dict[str, config.Role]:
    return config.parse_roles(roles_tsv(list(rows)), SOURCE)


def raised(call: Callable[..., object], *args: object) -> str:
    """The message of the ConfigError that `call(*args)` raises."""
    with pytest.raises(config.ConfigError) as caught:
        call(*args)
    return str(caught.value)


def config_error(text: str) -> str:
    return raised(config.parse_roles, text, SOURCE)


# --- parsing roles.tsv ------------------------------------------------------------------


def test_a_full_row_fills_every_field() -> None:
    role = parse(("coder", "wt", "/w/coder", "sess", "Coder", "claude", "batch"))["coder"]
    assert (role.name, role.worktree_name, role.worktree) == ("coder", "wt", "/w/coder")
    assert (role.session, role.display, role.agent, role.mode) == (
        "sess",
        "Coder",
        "claude",
        "batch",
    )


def test_receive_mode_empty_or_missing_means_task() -> None:
    roles = parse(("a", "a", "/w/a", "s", "A", "x", ""), ("b", "b", "/w/b"))
    assert roles["a"].mode == "task"
    assert roles["b"].mode == "task"


def test_a_roles_tsv_without_column_8_reads_as_before_every_role_on_this_host() -> None:
    roles = parse(("a", "a", "/w/a", "s", "A", "x", "batch"), ("b", "b", "/w/b", "", "", "", ""))
    assert roles["a"].mode == "batch"
    assert (roles["a"].host, roles["b"].host) == ("", "")
    assert roles["a"].agent_args == ""


FORMAT = "#handoffd-roles 2 hosts=gpu,laptop\n"


def test_column_8_is_the_host_and_the_agent_arguments_are_column_9_on() -> None:
    text = FORMAT + roles_tsv([
        ("a", "a", "/w/a", "s", "A", "x", "batch", "", "--model", "opus"),
        ("b", "b", "/r/b", "s", "B", "x", "task", "gpu"),
    ])  # fmt: skip
    roles = config.parse_roles(text, SOURCE)
    assert (roles["a"].host, roles["a"].agent_args) == ("", "--model opus")
    assert (roles["b"].host, roles["b"].agent_args) == ("gpu", "")


def test_a_roles_tsv_from_before_hosts_with_agent_arguments_in_column_8_says_run_init() -> None:
    """The older layout kept agent arguments in column 8: read now, they would name a host."""
    message = config_error(roles_tsv([("a", "a", "/w/a", "s", "A", "x", "task", "--model opus")]))
    assert message.startswith(f"{SOURCE}:1: column 8 of role 'a' holds '--model opus'")
    assert "run `handoffd init` to rewrite it" in message


def test_a_column_8_naming_no_declared_host_is_an_error_saying_run_init() -> None:
    text = FORMAT + roles_tsv([("a", "a", "/r/a", "s", "A", "x", "task", "ci")])
    message = config_error(text)
    assert message.startswith(f"{SOURCE}:2: role 'a' is on host 'ci', which swarmforge.conf")
    assert "(declared: gpu, laptop)" in message
    assert "run `handoffd init`" in message


def test_remote_roles_may_share_a_placeholder_worktree_local_roles_may_not() -> None:
    """One worktree per role is a rule of this host's inboxes; a remote role has none here."""
    text = FORMAT + roles_tsv([("a", "a", "/w/x", "", "", "", "", "gpu"), ("b", "b", "/w/x")])
    assert set(config.parse_roles(text, SOURCE)) == {"a", "b"}


def test_a_role_is_local_when_its_host_is_empty_or_this_host(tmp_path: Path) -> None:
    (tmp_path / ".swarmforge").mkdir()
    assert config.this_host(str(tmp_path)) == ""
    (tmp_path / ".swarmforge" / "host").write_text("gpu\n")
    here = config.this_host(str(tmp_path))
    assert here == "gpu"
    text = FORMAT + roles_tsv([("a", "a", "/w/a"), ("b", "b", "/r/b", "", "", "", "", "gpu"),
                               ("c", "c", "/r/c", "", "", "", "", "laptop")])  # fmt: skip
    roles = config.parse_roles(text, SOURCE)
    assert [n for n, r in roles.items() if config.is_local(r, here)] == ["a", "b"]


def test_blank_lines_and_comments_are_skipped_and_crlf_is_tolerated() -> None:
    text = "# a comment\n\n   \na\ta\t/w/a\ts\tA\tx\tbatch\r\n\n#b\tb\t/w/b\n"
    roles = config.parse_roles(text, SOURCE)
    assert list(roles) == ["a"]
    assert roles["a"].mode == "batch"


def test_roles_keep_file_order() -> None:
    assert list(parse(("b", "b", "/w/b"), ("a", "a", "/w/a"))) == ["b", "a"]


def test_handoff_directory_comes_from_the_worktree_column() -> None:
    role = parse(("a", "a", "/w/a"))["a"]
    assert role.handoffs == "/w/a/.swarmforge/handoffs"
    assert role.path(config.Box.NEW, "x.handoff") == "/w/a/.swarmforge/handoffs/inbox/new/x.handoff"


def test_two_roles_sharing_a_worktree_is_an_error_naming_both_and_the_line() -> None:
    message = config_error(roles_tsv([("coder", "c", "/w/shared"), ("cleaner", "c", "/w/shared/")]))
    assert message.startswith(f"{SOURCE}:2: ")
    assert "'coder'" in message
    assert "'cleaner'" in message
    assert "share the worktree" in message


@pytest.mark.parametrize(
    "name", ["has_underscore", "has.dot", "has/slash", "-leading-dash", "", "sp ace", "caf\u00e9"]
)
def test_an_invalid_role_name_is_an_error_naming_the_line(name: str) -> None:
    message = config_error(roles_tsv([("ok", "ok", "/w/ok"), (name, "x", "/w/x")]))
    assert message.startswith(f"{SOURCE}:2: invalid role name '{name}'")


@pytest.mark.parametrize("name", ["a", "QA", "coder-2", "9lives"])
def test_valid_role_names_are_accepted(name: str) -> None:
    assert name in parse((name, name, "/w/x"))


@pytest.mark.parametrize("path", ["relative/path", "./here", ""])
def test_a_relative_worktree_path_is_an_error_naming_the_line(path: str) -> None:
    message = config_error(roles_tsv([("a", "a", path)]))
    assert message.startswith(f"{SOURCE}:1: worktree path of role 'a' must be absolute")


def test_too_few_columns_is_an_error_naming_the_line() -> None:
    message = config_error("# header\na\ta\t/w/a\nb b /w/b\n")
    assert message.startswith(f"{SOURCE}:3: expected TAB-separated role")
    assert "got 1 field(s)" in message


def test_a_role_listed_twice_is_an_error_naming_the_line() -> None:
    message = config_error(roles_tsv([("a", "a", "/w/a"), ("a", "b", "/w/b")]))
    assert message == f"{SOURCE}:2: role 'a' is listed twice"


def test_load_roles_reports_a_missing_file(tmp_path: Path) -> None:
    message = raised(config.load_roles, str(tmp_path))
    assert message.startswith(f"cannot read {tmp_path}/.swarmforge/roles.tsv: ")


def test_load_roles_reports_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / ".swarmforge").mkdir()
    (tmp_path / ".swarmforge" / "roles.tsv").write_bytes(b"a\ta\t/w/\xff\n")
    message = raised(config.load_roles, str(tmp_path))
    assert message.startswith(f"cannot read {tmp_path}/.swarmforge/roles.tsv: ")


# --- finding the project root -----------------------------------------------------------


def test_root_is_found_from_the_root_itself(project: Project) -> None:
    assert config.find_root(str(project.root)) == str(project.root)


def test_root_is_found_from_deep_inside_a_worktree(project: Project) -> None:
    deep = project.worktrees["cleaner"] / "src" / "deep"
    deep.mkdir(parents=True)
    assert config.find_root(str(deep)) == str(project.root)


def test_root_is_found_through_git_from_a_worktree_outside_the_project(
    project: Project, tmp_path: Path
) -> None:
    outside = tmp_path.resolve() / "elsewhere" / "spare"
    git(project.root, "worktree", "add", "-q", str(outside), "-b", "spare")
    (outside / "sub").mkdir()
    assert config.find_root(str(outside / "sub")) == str(project.root)


def test_no_root_outside_any_project(tmp_path: Path) -> None:
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    assert raised(config.find_root, str(lonely)).split("\n") == [
        "Cannot find SwarmForge project root",  # the contract's exact first line
        f"Looked for .swarmforge/roles.tsv in {lonely} and every directory above it.",
        "Run `handoffd init` in the project's root to lay one out.",
    ]


def test_no_root_in_a_git_repository_names_its_main_checkout_too(tmp_path: Path) -> None:
    repo = tmp_path.resolve() / "repo"
    (repo / "src").mkdir(parents=True)
    git(repo, "init", "-q")
    message = raised(config.find_root, str(repo / "src"))
    assert message.split("\n")[1] == (
        f"Looked for .swarmforge/roles.tsv in {repo / 'src'} and every directory above it "
        f"and in its git repository's main checkout {repo}."
    )


# --- the calling role -------------------------------------------------------------------


def project_roles(project: Project) -> dict[str, config.Role]:
    return config.load_roles(str(project.root))


def test_the_environment_names_the_calling_role(project: Project) -> None:
    roles = project_roles(project)
    role = config.calling_role(roles, "QA", str(project.worktrees["cleaner"]))
    assert role.name == "QA"


def test_an_unknown_role_in_the_environment_is_reported(project: Project) -> None:
    roles = project_roles(project)
    with pytest.raises(config.UnknownRole) as caught:
        config.calling_role(roles, "nobody", str(project.root))
    assert (str(caught.value), caught.value.name) == (
        "Unknown role: nobody (known roles: QA, cleaner, coder)", "nobody",
    )  # fmt: skip


def test_without_the_environment_the_deepest_worktree_wins(project: Project) -> None:
    roles = project_roles(project)
    inside = project.worktrees["cleaner"] / "src"
    assert config.calling_role(roles, None, str(inside)).name == "cleaner"
    assert config.calling_role(roles, "", str(project.root / "src")).name == "coder"


def test_a_sibling_whose_name_starts_with_a_worktree_name_is_not_inside_it(
    project: Project,
) -> None:
    sibling = project.root / ".worktrees" / "cleaner-old"
    sibling.mkdir()
    assert config.role_for_directory(project_roles(project), str(sibling)) == "coder"


def test_a_worktree_reached_through_a_symlink_is_still_recognised(
    project: Project, tmp_path: Path
) -> None:
    link = tmp_path / "link-to-cleaner"
    os.symlink(project.worktrees["cleaner"], link)
    assert config.role_for_directory(project_roles(project), str(link / "src")) == "cleaner"


def test_outside_every_worktree_the_role_must_be_set(project: Project, tmp_path: Path) -> None:
    roles = project_roles(project)
    assert raised(config.calling_role, roles, None, str(tmp_path)) == "Set SWARMFORGE_ROLE."


def test_an_invalid_role_name_is_quoted_with_its_control_characters_escaped() -> None:
    """roles.tsv is a file like any other under .swarmforge/: its words never drive the
    terminal the error is printed on."""
    message = config_error(roles_tsv([("ok", "ok", "/w/ok"), ("x\033[2K\r", "x", "/w/x")]))
    assert message.startswith(f"{SOURCE}:2: invalid role name 'x\\x1b[2K\\r'")


# --- hostile files (docs/protocol.md Part II) -------------------------------------------------


@pytest.mark.parametrize("what", HOSTILE)
@pytest.mark.parametrize("command", [("ready_for_next",), ("handoffd", "status")])
def test_a_roles_tsv_that_is_no_regular_file_is_refused_by_name_at_once(
    project: Project, tmp_path: Path, what: str, command: tuple[str, ...]
) -> None:
    """A FIFO, a device or a link to something outside in place of roles.tsv: never waited
    on, read or followed; the command says what it found and how to get back."""
    path = project.root / ".swarmforge" / "roles.tsv"
    plant(path, what, tmp_path)
    result = project.run(*command, role="coder", timeout=HANG)
    assert (result.code, result.out) == (1, "")
    first, *rest = result.err.splitlines()
    assert first == f"cannot read {path}: {SAID[what]}, not a regular file; it was not " + (
        "followed" if what == "link" else "read"
    )
    assert rest == [config.REPAIR.strip()]


def test_a_roles_tsv_over_its_limit_is_refused_without_being_read_whole(project: Project) -> None:
    """1 MiB holds thousands of roles; past it the file is refused, not parsed."""
    path = project.root / ".swarmforge" / "roles.tsv"
    text = path.read_text()
    path.write_text(text + "#" * (config.ROLES_LIMIT - len(text)) + "\n")
    result = project.run("ready_for_next", role="coder", timeout=HANG)
    assert result.code == 1
    assert result.err.splitlines()[0] == (
        f"cannot read {path}: larger than the {config.ROLES_LIMIT}-byte limit; it was not read "
        "further"
    )


def test_the_project_is_found_by_a_roles_tsv_that_is_a_fifo_and_its_problem_named(
    project: Project,
) -> None:
    """From a worktree the root is found by name, so the error is about roles.tsv, not a
    missing project."""
    path = project.root / ".swarmforge" / "roles.tsv"
    plant(path, "fifo", project.root)
    result = project.run("ready_for_next", role="cleaner", timeout=HANG)
    assert result.code == 1 and result.err.startswith(f"cannot read {path}: a FIFO"), result.err


@pytest.mark.parametrize(
    ("typed", "known", "meant"),
    [("statsu", ["start", "status", "stop"], "status"),  # a swapped pair is one slip
     ("cleanr", ["QA", "cleaner", "coder"], "cleaner"),
     ("CLEANER", ["QA", "cleaner", "coder"], "cleaner"),
     ("qa", ["QA", "cleaner"], "QA"),
     ("stat", ["start", "status"], "start"),
     ("ghost", ["QA", "cleaner", "coder"], None),  # nothing that close: no guess
     ("x", [], None)],
)  # fmt: skip
def test_the_nearest_name_is_the_fewest_edits_away_within_a_third_of_the_word(
    typed: str, known: list[str], meant: str | None
) -> None:
    assert config.nearest(typed, known) == meant
