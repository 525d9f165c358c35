"""`handoffd init`: the swarm configuration and the layout it makes (docs/protocol.md §1)."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
from pathlib import Path

import pytest

from handoffd.core import config, project
from handoffd.core.project import SwarmConfigError
from tests.conftest import HANG, HOSTILE, SAID, git, plant
from tests.swarm_support import BARE_GIT_ENV, handoffd

SAMPLE_ROLES = {"coder": ("master", "task"), "cleaner": ("cleaner", "batch")}
BOXES = (
    "outbox",
    "outbox/tmp",
    "sent",
    "failed",
    "inbox/new",
    "inbox/in_process",
    "inbox/completed",
)


@pytest.fixture(autouse=True)
def newcomer_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """git as on a fresh machine: no global configuration, so no user identity."""
    for key, value in BARE_GIT_ENV.items():
        monkeypatch.setenv(key, value)


def init_sample(root: Path) -> list[str]:
    return project.init(str(root), project.parse(project.sample_text(), "sample"))


def parse_error(text: str) -> str:
    with pytest.raises(SwarmConfigError) as caught:
        project.parse(text, "swarm.conf")
    return str(caught.value)


def tree_state(root: Path) -> dict[str, tuple[str, int, bytes | None]]:
    """Every entry below `root`, .git included: kind, mtime and, for files, content."""
    state: dict[str, tuple[str, int, bytes | None]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        key = str(path.relative_to(root))
        if stat.S_ISREG(info.st_mode):
            state[key] = ("file", info.st_mtime_ns, path.read_bytes())
        else:
            state[key] = (stat.filemode(info.st_mode)[0], info.st_mtime_ns, None)
    return state


# --- parsing the configuration ------------------------------------------------------------


def test_the_sample_is_a_coder_in_task_mode_and_a_cleaner_in_batch_mode() -> None:
    windows = project.parse(project.sample_text(), "sample")
    assert {w.role: (w.worktree, w.mode) for w in windows} == SAMPLE_ROLES
    assert all(w.agent == "shell" for w in windows)


def test_the_repository_sample_is_the_packaged_sample() -> None:
    checkout = Path(__file__).resolve().parent.parent
    assert (checkout / ".swarmforge" / "swarmforge.conf").read_text() == project.sample_text()


def test_a_line_without_mode_is_task_mode_and_extra_words_are_agent_arguments() -> None:
    windows = project.parse(
        "window a claude wa\nwindow b codex wb batch --model 'big one' -q\n"
        "window c claude wc --flag\n",
        "swarm.conf",
    )
    assert [(w.role, w.agent, w.worktree, w.mode, w.args) for w in windows] == [
        ("a", "claude", "wa", "task", ()),
        ("b", "codex", "wb", "batch", ("--model", "big one", "-q")),
        ("c", "claude", "wc", "task", ("--flag",)),
    ]


def test_comments_and_blank_lines_are_skipped() -> None:
    windows = project.parse("# a swarm\n\n   \n  # indented\nwindow a shell wa\n", "swarm.conf")
    assert [w.role for w in windows] == ["a"]


def test_a_trailing_comment_is_not_an_agent_argument() -> None:
    windows = project.parse("window a shell wa batch --x  # the cleaner\n", "swarm.conf")
    assert (windows[0].mode, windows[0].args) == ("batch", ("--x",))


def test_the_display_column_keeps_the_role_names_capitals(tmp_path: Path) -> None:
    text = project.roles_tsv(project.parse("window QA shell qa\nwindow coder shell c\n", "s"), "/p")
    assert [line.split("\t")[4] for line in rows_of(text)] == ["QA", "Coder"]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("window a_b shell wa\n", 1, "invalid role name 'a_b'"),
        ("# c\nwindow a.b shell wa\n", 2, "invalid role name 'a.b'"),
        ("window a/b shell wa\n", 1, "invalid role name 'a/b'"),
        ("window -a shell wa\n", 1, "invalid role name '-a'"),
        ("window a shell wa\n\nwindow a shell wb\n", 3, "role 'a' is defined twice"),
        ("window a shell wa\nwindow b shell wa\n", 2, "share the worktree 'wa'"),
        ("window a shell w/x\n", 1, "worktree name 'w/x'"),
        ("window a shell .\n", 1, "worktree name '.'"),
        ("window a shell ..\n", 1, "worktree name '..'"),
        ("window a shell -wa\n", 1, "worktree name '-wa'"),
        ("window a shell wa\nwindows b shell wb\n", 2, "expected 'window <role>"),
        ("role a shell wa\n", 1, "expected 'window <role>"),
        ("window a shell\n", 1, "expected 'window <role>"),
        ("window a shell 'wa\n", 1, "No closing quotation"),
    ],
)
def test_each_configuration_error_names_its_line(text: str, line: int, words: str) -> None:
    message = parse_error(text)
    assert message.startswith(f"swarm.conf:{line}: ")
    assert words in message


@pytest.mark.parametrize(
    "name", ["-x", "x..y", "a b", "w.lock", "HEAD", ".hidden", "a:b", "a~1", "a^", "a?", "a*",
             "a[", "a\\b", "end.", "a@{b"],
)  # fmt: skip
def test_a_worktree_name_git_refuses_as_a_branch_is_an_error_naming_its_line(name: str) -> None:
    refused = subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True)
    assert refused.returncode != 0, "git accepts it: the rule is stricter than git"
    message = parse_error(f"window a shell wa\nwindow b shell {shlex.quote(name)}\n")
    assert message.startswith("swarm.conf:2: ")
    assert f"worktree name '{name}'" in message


@pytest.mark.parametrize("name", ["feature-1", "v1.2", "a_b", "a@b", "ünïcode"])
def test_a_worktree_name_git_accepts_becomes_a_worktree_on_that_branch(
    tmp_path: Path, name: str
) -> None:
    root = tmp_path / "p"
    project.init(str(root), project.parse(f"window a shell {name}\n", "swarm.conf"))
    assert git(root / ".worktrees" / name, "branch", "--show-current") == name


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_a_configuration_without_roles_is_an_error(text: str) -> None:
    assert "no roles" in parse_error(text)


# --- roles.tsv and the socket -------------------------------------------------------------


def rows_of(text: str) -> list[str]:
    """roles.tsv's role lines, without its comments."""
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_roles_tsv_has_the_seven_protocol_columns_and_a_swarmforge_session_per_role() -> None:
    windows = project.parse(project.sample_text(), "sample")
    rows = [line.split("\t") for line in rows_of(project.roles_tsv(windows, "/p"))]
    assert rows == [
        ["coder", "master", "/p", "swarmforge-coder", "Coder", "shell", "task"],
        ["cleaner", "cleaner", "/p/.worktrees/cleaner", "swarmforge-cleaner", "Cleaner",
         "shell", "batch"],
    ]  # fmt: skip


def test_agent_arguments_go_in_a_ninth_column_that_reads_back_as_shell_words() -> None:
    windows = project.parse("window a codex wa batch --model 'big one'\n", "swarm.conf")
    text = project.roles_tsv(windows, "/p")
    assert rows_of(text)[0].split("\t")[7:] == ["", "--model 'big one'"]
    roles = config.parse_roles(text, "roles.tsv")
    assert roles["a"].mode == "batch"
    assert roles["a"].agent_args == "--model 'big one'"


def test_roles_tsv_starts_with_the_format_line_naming_the_declared_hosts() -> None:
    text = "host gpu\nwindow a codex wa\nhost ci\nwindow b codex wb\n"
    nats = "project p\nnats nats://127.0.0.1:4222\n"
    swarm = project.parse_swarm(nats + text, "swarm.conf")
    first = project.roles_tsv(swarm.windows, "/p", "gpu", swarm.hosts).splitlines()[0]
    assert first == "#handoffd-roles 2 hosts=gpu,ci"


def test_the_socket_path_is_short_and_private_to_this_user_and_this_project(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 90) / ("e" * 90) / "project"
    socket = project.socket_path(str(deep))
    assert len(socket.encode()) < 100
    assert os.path.basename(os.path.dirname(socket)) == f"handoffd-{os.getuid()}"
    assert socket == project.socket_path(str(deep))
    assert socket != project.socket_path(str(tmp_path / "other"))


# --- init ---------------------------------------------------------------------------------


def test_init_in_an_empty_directory_creates_a_repository_with_a_first_commit(
    tmp_path: Path,
) -> None:
    root = tmp_path / "new"
    init_sample(root)
    assert git(root, "rev-parse", "--show-toplevel") == str(root)
    assert git(root, "rev-list", "--count", "HEAD") == "1"


def test_init_adds_a_worktree_per_role_and_master_is_the_checkout_itself(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    init_sample(root)
    worktrees = git(root, "worktree", "list", "--porcelain")
    assert f"worktree {root}\n" in worktrees + "\n"
    assert f"worktree {root}/.worktrees/cleaner\n" in worktrees
    assert git(root / ".worktrees" / "cleaner", "branch", "--show-current") == "cleaner"
    assert not (root / ".worktrees" / "master").exists()


def test_init_creates_every_handoff_folder_of_every_role(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    init_sample(root)
    roles = config.load_roles(str(root))
    assert roles["coder"].worktree == str(root)
    assert roles["cleaner"].worktree == str(root / ".worktrees" / "cleaner")
    for role in roles.values():
        for box in BOXES:
            assert os.path.isdir(role.path(box)), (role.name, box)


def test_init_writes_roles_tsv_with_receive_modes_and_sessions(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    init_sample(root)
    lines = rows_of((root / ".swarmforge" / "roles.tsv").read_text())
    assert all(len(line.split("\t")) == 7 for line in lines)
    roles = config.load_roles(str(root))
    assert {name: (r.worktree_name, r.mode) for name, r in roles.items()} == SAMPLE_ROLES
    assert {name: r.session for name, r in roles.items()} == {
        "coder": "swarmforge-coder",
        "cleaner": "swarmforge-cleaner",
    }


def test_init_writes_the_socket_path_and_two_projects_get_different_sockets(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    init_sample(first)
    init_sample(second)
    sockets = [(p / ".swarmforge" / "tmux-socket").read_text() for p in (first, second)]
    assert sockets[0] == project.socket_path(str(first)) + "\n"
    assert sockets[0] != sockets[1]
    assert all(len(s.strip().encode()) < 100 for s in sockets)


def test_init_keeps_runtime_state_out_of_git(tmp_path: Path) -> None:
    root = tmp_path / "new"
    init_sample(root)
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    cleaner = root / ".worktrees" / "cleaner"
    assert git(cleaner, "status", "--porcelain", "--untracked-files=all") == ""


def test_the_live_file_of_every_worktree_stays_out_of_git(tmp_path: Path) -> None:
    root = tmp_path / "new"
    init_sample(root)
    cleaner = root / ".worktrees" / "cleaner"
    for worktree in (root, cleaner):
        (worktree / ".swarmforge").mkdir(exist_ok=True)
        (worktree / ".swarmforge" / "HANDOFF.md").write_text("# HANDOFF — now\n")
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(cleaner, "status", "--porcelain", "--untracked-files=all") == ""


def test_init_twice_changes_nothing_on_disk(tmp_path: Path) -> None:
    root = tmp_path / "new"
    assert init_sample(root)
    before = tree_state(root)
    assert init_sample(root) == []
    assert tree_state(root) == before


def test_init_in_an_existing_repository_keeps_its_history(tmp_path: Path) -> None:
    root = tmp_path / "existing"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "app.txt").write_text("code\n")
    git(root, "add", "app.txt")
    git(root, "commit", "-q", "-m", "first")
    (root / "app.txt").write_text("more code\n")
    git(root, "commit", "-q", "-am", "second")
    head = git(root, "rev-parse", "HEAD")
    changes = init_sample(root)
    assert not any("git repository" in c or "first commit" in c for c in changes)
    assert git(root, "rev-parse", "HEAD") == head
    assert git(root, "log", "--format=%s") == "second\nfirst"
    assert git(root, "branch", "--show-current") == "main"
    assert git(root / ".worktrees" / "cleaner", "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""


def test_init_adds_a_role_added_to_the_configuration_later(tmp_path: Path) -> None:
    root = tmp_path / "p"
    init_sample(root)
    grown = project.sample_text() + "window QA shell qa task\n"
    changes = project.init(str(root), project.parse(grown, "swarm.conf"))
    assert any(".worktrees/qa" in change for change in changes)
    assert set(config.load_roles(str(root))) == {"coder", "cleaner", "QA"}
    assert os.path.isdir(root / ".worktrees" / "qa" / ".swarmforge" / "handoffs" / "inbox" / "new")


# --- the command --------------------------------------------------------------------------


def test_the_init_command_lays_out_the_sample_and_a_second_run_reports_no_changes(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    first = handoffd("init", str(root))
    assert first.returncode == 0, first.stderr
    assert "created" in first.stdout
    assert "coder (task), cleaner (batch)" in first.stdout
    again = handoffd("init", str(root))
    assert again.returncode == 0, again.stderr
    assert "created" not in again.stdout
    assert "already up to date" in again.stdout


def test_init_says_created_for_a_new_roles_tsv_and_updated_with_the_roles_it_adds_or_drops(
    tmp_path: Path,
) -> None:
    root, conf = tmp_path / "p", tmp_path / "swarm.conf"
    tsv = root / ".swarmforge" / "roles.tsv"
    first = handoffd("init", str(root))
    assert f"created {tsv}\n" in first.stdout and "run handoffd up" not in first.stdout
    conf.write_text(project.sample_text() + "window QA shell qa task\n")
    grown = handoffd("init", "--config", str(conf), str(root))
    assert f"updated {tsv} (+QA)\n" in grown.stdout
    assert grown.stdout.endswith("run handoffd up to start QA\n")
    conf.write_text(project.sample_text().replace("window cleaner", "window tidy"))
    shrunk = handoffd("init", "--config", str(conf), str(root))
    assert f"updated {tsv} (+tidy, -cleaner, -QA)\n" in shrunk.stdout


def test_the_init_command_prefers_the_projects_own_configuration(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / ".swarmforge").mkdir(parents=True)
    (root / ".swarmforge" / "swarmforge.conf").write_text("window solo shell master\n")
    result = handoffd("init", str(root))
    assert result.returncode == 0, result.stderr
    assert list(config.load_roles(str(root))) == ["solo"]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("window coder shell master\nwindow a_b shell x\n", 2, "invalid role name 'a_b'"),
        ("window coder shell master\nwindow coder shell x\n", 2, "defined twice"),
        ("window coder shell x\nwindow cleaner shell x\n", 2, "share the worktree"),
        ("window coder shell ../x\n", 1, "worktree name '../x'"),
        ("window coder shell -x\n", 1, "worktree name '-x'"),
        ("wndow coder shell master\n", 1, "expected 'window <role>"),
        ("# nothing\n", None, "no roles"),
    ],
)
def test_the_init_command_reports_a_bad_configuration_by_line_without_a_traceback(
    tmp_path: Path, text: str, line: int | None, words: str
) -> None:
    conf = tmp_path / "swarm.conf"
    conf.write_text(text)
    result = handoffd("init", "--config", str(conf), str(tmp_path / "p"))
    assert result.returncode != 0
    where = f"{conf}:{line}: " if line else f"{conf}: "
    assert where in result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_configuration_lays_nothing_out(tmp_path: Path) -> None:
    conf = tmp_path / "swarm.conf"
    conf.write_text("window coder shell master\nwindow a_b shell x\n")
    handoffd("init", "--config", str(conf), str(tmp_path / "p"))
    assert not (tmp_path / "p").exists()


def test_a_configuration_that_is_not_utf8_is_reported_without_a_traceback(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "swarm.conf"
    conf.write_bytes(b"window coder shell master\nwindow \xff shell x\n")
    result = handoffd("init", "--config", str(conf), str(tmp_path / "p"))
    assert result.returncode == 1
    assert str(conf) in result.stderr
    assert "Traceback" not in result.stderr


# --- init keeps what it was given (a newcomer's first hour) --------------------------------

DEVQA = "window dev shell master task\nwindow qa shell qa batch\n"


def init_in(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`handoffd init` run from `cwd`, as a person types it."""
    from tests.swarm_support import HANDOFFD, command_env

    return subprocess.run(
        [HANDOFFD, "init", *args], cwd=cwd, env=command_env(), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip


def test_init_keeps_the_configuration_it_was_given_and_a_plain_init_keeps_its_roles(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "devqa.conf"
    conf.write_text(DEVQA)
    root = tmp_path / "p"
    assert handoffd("init", "--config", str(conf), str(root)).returncode == 0
    assert (root / ".swarmforge" / "swarmforge.conf").read_text() == DEVQA
    roles_before = (root / ".swarmforge" / "roles.tsv").read_text()
    again = handoffd("init", str(root))
    assert again.returncode == 0, again.stderr
    assert again.stdout.endswith("dev (task), qa (batch) — already up to date\n")
    assert (root / ".swarmforge" / "roles.tsv").read_text() == roles_before
    assert not (root / ".worktrees" / "cleaner").exists()


def test_init_without_a_configuration_never_replaces_existing_roles_with_the_sample(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "devqa.conf"
    conf.write_text(DEVQA)
    root = tmp_path / "p"
    assert handoffd("init", "--config", str(conf), str(root)).returncode == 0
    (root / ".swarmforge" / "swarmforge.conf").unlink()  # as a project laid out before the fix
    roles_before = (root / ".swarmforge" / "roles.tsv").read_text()
    again = handoffd("init", str(root))
    assert again.returncode == 0, again.stderr
    assert again.stdout == (
        f"{root}: kept roles.tsv (dev, qa); to change the roles, write "
        f"{root}/.swarmforge/swarmforge.conf or pass --config\n"
    )
    assert (root / ".swarmforge" / "roles.tsv").read_text() == roles_before
    assert not (root / ".worktrees" / "cleaner").exists()


def test_a_mistyped_receive_mode_is_an_error_naming_the_line(tmp_path: Path) -> None:
    conf = tmp_path / "swarm.conf"
    conf.write_text("window coder shell master task\nwindow cleaner shell cleaner bacth\n")
    result = handoffd("init", "--config", str(conf), str(tmp_path / "p"))
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: {conf}:2: receive mode 'bacth' must be task or batch "
        "(agent arguments that do not start with '-' go after the mode)\n"
    )
    assert not (tmp_path / "p").exists()


def test_init_from_a_subdirectory_of_a_project_finds_the_project(tmp_path: Path) -> None:
    root = tmp_path / "p"
    assert handoffd("init", str(root)).returncode == 0
    deep = root / ".worktrees" / "cleaner" / "src"
    deep.mkdir()
    result = init_in(deep)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{root}: coder (task), cleaner (batch) — already up to date\n"
    assert not (deep / ".swarmforge").exists()


def test_init_of_a_root_inside_a_project_refuses_and_says_where_the_project_is(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    assert handoffd("init", str(root)).returncode == 0
    inner = root / "src"
    result = handoffd("init", str(inner))
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: {inner} is inside the handoffd project {root}; run `handoffd init` in "
        f"{root} (or from any directory below it without a ROOT)\n"
    )
    assert not inner.exists()


# --- hostile files (docs/protocol.md Part II) -------------------------------------------------


@pytest.mark.parametrize("what", HOSTILE)
def test_init_refuses_a_kept_configuration_that_is_no_regular_file_in_one_line(
    tmp_path: Path, what: str
) -> None:
    """The configuration kept under .swarmforge/ is read the careful way: a FIFO, a device
    or a link outside is named, never waited on, read or followed."""
    root = tmp_path / "p"
    kept = root / ".swarmforge" / "swarmforge.conf"
    plant(kept, what, tmp_path)
    result = handoffd("init", str(root), timeout=HANG)
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: cannot read {kept}: {SAID[what]}, not a regular file; it was not "
        f"{'followed' if what == 'link' else 'read'}; replace it with the swarm configuration "
        "(or pass --config)\n"
    )


@pytest.mark.parametrize("what", HOSTILE)
@pytest.mark.parametrize("name", ["roles.tsv", "tmux-socket"])
def test_init_replaces_a_roles_tsv_or_socket_file_that_is_no_regular_file(
    tmp_path: Path, name: str, what: str
) -> None:
    """What init writes is first compared with what stands there; a FIFO, a device or a
    link is never opened for that, and is replaced (the link itself, not its target)."""
    root = tmp_path / "p"
    (root / ".swarmforge").mkdir(parents=True)
    (root / ".swarmforge" / "swarmforge.conf").write_text("window solo shell master\n")
    target = plant(root / ".swarmforge" / name, what, tmp_path)
    result = handoffd("init", str(root), timeout=HANG)
    assert result.returncode == 0, result.stderr
    assert list(config.load_roles(str(root))) == ["solo"]
    path = root / ".swarmforge" / name
    assert stat.S_ISREG(path.lstat().st_mode) and path.read_text().endswith("\n")
    assert target is None or stat.S_ISFIFO(target.lstat().st_mode)


# --- hosts (docs/protocol.md §15) -----------------------------------------------------------

TWO_HOSTS = """project demo
nats nats://127.0.0.1:{port}
window lead shell lead
host a
window coder shell master task
host b
window cleaner shell cleaner batch
"""


def test_every_window_after_a_host_line_lives_on_that_host_and_before_any_on_this_one() -> None:
    swarm = project.parse_swarm(TWO_HOSTS.format(port=4222), "swarm.conf")
    assert [(w.role, w.host) for w in swarm.windows] == [
        ("lead", ""), ("coder", "a"), ("cleaner", "b"),
    ]  # fmt: skip
    assert swarm.hosts == ["a", "b"]
    assert swarm.urls == ["nats://127.0.0.1:4222"]
    assert [w.role for w in swarm.remote_windows("a")] == ["cleaner"]


def test_two_hosts_may_each_use_the_checkout_itself_as_a_worktree() -> None:
    text = "host a\nwindow coder shell master\nhost b\nwindow cleaner shell master\n"
    assert [w.worktree for w in project.parse(text, "swarm.conf")] == ["master", "master"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("nats nats://h:4222\nwindow a shell master\n", "a `nats` line needs a `project <name>`"),
        ("project x.y\nwindow a shell master\n", "project name 'x.y' must be letters"),
        ("host a\nhost a\nwindow a shell master\n", "host 'a' is declared twice"),
        ("host a b\nwindow a shell master\n", "expected 'host <name>'"),
        ("project p\nnats h:4222\nwindow a shell master\n", "'h:4222' is not a NATS server URL"),
        ("nats-creds a b\nwindow a shell master\n", "expected 'nats-creds <file>'"),
        ("project p\nproject q\nwindow a shell master\n", "'project' is given twice"),
    ],
)
def test_each_network_line_error_names_its_line(text: str, words: str) -> None:
    assert words in parse_error(text)


def test_init_for_one_host_lays_out_its_roles_and_a_placeholder_for_the_others(
    tmp_path: Path,
) -> None:
    root = tmp_path.resolve() / "a"
    swarm = project.parse_swarm(TWO_HOSTS.format(port=4222), "swarm.conf")
    project.init(str(root), swarm.windows, None, "a", swarm.hosts)
    roles = config.load_roles(str(root))
    assert (roles["coder"].host, roles["coder"].worktree) == ("", str(root))
    assert roles["cleaner"].host == "b"
    placeholder = Path(roles["cleaner"].worktree)
    assert placeholder == root / ".swarmforge" / "remote" / "b" / "cleaner"
    assert not placeholder.exists()
    assert not (root / ".worktrees" / "cleaner").exists()
    assert (root / ".swarmforge" / "host").read_text() == "a\n"
    assert ".swarmforge/host" in (root / ".git" / "info" / "exclude").read_text().splitlines()


def write_conf(root: Path, text: str) -> Path:
    conf = root / "swarm.conf"
    root.mkdir(parents=True, exist_ok=True)
    conf.write_text(text)
    return conf


def test_init_refuses_a_configuration_with_hosts_when_this_host_is_not_named(
    tmp_path: Path,
) -> None:
    conf = write_conf(tmp_path / "a", TWO_HOSTS.format(port=4222))
    done = handoffd("init", "--config", str(conf), str(tmp_path / "a"))
    assert done.returncode == 1
    assert "declares hosts a, b, but this machine's host is not named" in done.stderr
    assert "handoffd init --host NAME" in done.stderr
    assert not (tmp_path / "a" / ".swarmforge" / "roles.tsv").exists()


def test_init_refuses_a_host_name_the_configuration_does_not_declare(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "a", TWO_HOSTS.format(port=4222))
    done = handoffd("init", "--host", "c", "--config", str(conf), str(tmp_path / "a"))
    assert done.returncode == 1
    assert "this machine is host 'c' (.swarmforge/host), which" in done.stderr
    assert "(declared: a, b)" in done.stderr


def test_init_refuses_a_remote_role_without_nats_naming_the_role(tmp_path: Path) -> None:
    text = "host a\nwindow coder shell master\nhost b\nwindow cleaner shell cleaner\n"
    conf = write_conf(tmp_path / "a", text)
    done = handoffd("init", "--host", "a", "--config", str(conf), str(tmp_path / "a"))
    assert done.returncode == 1
    assert "role 'cleaner' is on host b, but there is no `nats <url>` line" in done.stderr


def test_init_says_when_the_nats_servers_cannot_be_reached(tmp_path: Path) -> None:
    from handoffd.remote.server import free_port

    conf = write_conf(tmp_path / "a", TWO_HOSTS.format(port=free_port()))
    done = handoffd("init", "--host", "a", "--config", str(conf), str(tmp_path / "a"))
    assert done.returncode == 1
    assert "cannot reach the NATS servers nats://127.0.0.1:" in done.stderr
    assert "then run `handoffd init` again" in done.stderr
