"""The `handoffd` command: thin click commands that parse options and hand off.

Commands defined elsewhere (the board, continuity, MCP…) are registered by name in
`LAZY` and imported only when invoked, so `handoffd --help` and the daemon commands
never pay for the web stack or the MCP SDK.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from handoffd import config
from handoffd.outcome import Outcome

# name -> ("module:attribute" of a click command, its one-line help).  Imported on
# first use; `handoffd --help` shows the help line without importing anything.
LAZY: dict[str, tuple[str, str]] = {
    "status": ("handoffd.board.status:status", "The board: every open card in its colour."),
    "heartbeat": ("handoffd.board.commands:heartbeat", "Renew the role's heartbeat (its claim)."),
    "release": ("handoffd.board.commands:release", "Put the work in process back into new/."),
    "block": ("handoffd.board.commands:block", "Set a handoff's blocked reason."),
    "unblock": ("handoffd.board.commands:unblock", "Remove a handoff's blocked reason."),
    "report": ("handoffd.board.commands:report", "Report on the work: RUNNING, BLOCKED or DONE."),
    "resume": ("handoffd.continuity.commands:resume", "Where were we: state and next step."),
    "note": ("handoffd.continuity.commands:note", "Add a decision, ruled-out path or check."),
    "digest": ("handoffd.continuity.digest_commands:digest", "A thread's digest, with receipts."),
    "carry-forward": (
        "handoffd.continuity.digest_commands:carry_forward",
        "The latest threads, newest first, each a digest.",
    ),
    "mcp": ("handoffd.mcp:mcp", "Serve the commands as MCP tools on stdio."),
    "web": ("handoffd.board.web.command:web", "Serve the board in a browser, live."),
}


class LazyGroup(click.Group):
    """A click group whose commands in `LAZY` are imported only when run."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY and name not in self.commands:
            module, _, attribute = LAZY[name][0].partition(":")
            command = getattr(__import__(module, fromlist=[attribute]), attribute)
            self.add_command(command, name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            if name in LAZY and name not in self.commands:
                rows.append((name, LAZY[name][1]))
            elif (command := self.get_command(ctx, name)) and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width - 20)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def emit(outcome: Outcome) -> None:
    """Render an operation's outcome as a command: its text, then its exit code (the
    contract's, e.g. 2 for a refusal, never click's generic 1)."""
    if outcome.stdout:
        sys.stdout.write(outcome.stdout)
        sys.stdout.flush()
    if outcome.stderr:
        sys.stderr.write(outcome.stderr)
    raise SystemExit(outcome.code)


def root_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--root ROOT` (env HANDOFFD_ROOT): the project root, found from the working
    directory when absent.  Every command takes it."""
    return click.option(
        "--root",
        "root_opt",
        envvar="HANDOFFD_ROOT",
        type=click.Path(file_okay=False),
        help="Project root (default: found from the working directory).",
    )(function)


def _root(value: str | None) -> str:
    """The project root given on the command line, or found from the working directory."""
    try:
        return os.path.abspath(value) if value else config.find_root()
    except config.ConfigError as error:
        raise click.ClickException(str(error)) from None


def role_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--role R`, `--agent NAME`, `--conversation ID` (docs/protocol.md §8) and `--root`,
    handed to the command as one resolved `me` (a `helpers.Caller`): the role acted for
    (default: the calling role of §1) and who runs it (default: $SWARMFORGE_AGENT, else
    roles.tsv column 6; $SWARMFORGE_CONVERSATION)."""

    @functools.wraps(function)
    def command(
        role: str | None, agent: str | None, conversation: str | None, root_opt: str | None,
        **kwargs: Any,
    ) -> Any:  # fmt: skip
        return function(me=caller(root_opt, role, agent, conversation), **kwargs)

    options = (
        click.option("--role", help="Act for this role (default: the calling role)."),
        click.option("--agent", help="Agent name (default: $SWARMFORGE_AGENT, else roles.tsv)."),
        click.option("--conversation", help="Conversation (default: $SWARMFORGE_CONVERSATION)."),
        root_option,
    )  # fmt: skip
    wrapped: Callable[..., Any] = command
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped


def caller(root: str | None, role: str | None, agent: str | None, conversation: str | None) -> Any:
    """The `helpers.Caller` the options name; no project or no role is exit 1, as in §1."""
    from handoffd import helpers

    try:
        return helpers.resolve(_root(root) if root else None, role, agent, conversation)
    except config.ConfigError as error:
        emit(Outcome(1, "", f"{error}\n"))


root_argument = click.argument("root", required=False, type=click.Path(file_okay=False))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="handoffd")
def main() -> None:
    """handoffd: the post office between AI coding agents."""


def _project(value: str | None) -> str:
    """A root that is a handoffd project: it has a .swarmforge directory."""
    root = _root(value)
    if not os.path.isdir(os.path.join(root, config.SWARMFORGE)):
        raise click.ClickException(
            f"{root} is not a handoffd project (no {config.SWARMFORGE}/); "
            "run `handoffd init` there first, or pass the project root"
        )
    return root


renotify_option = click.option(
    "--renotify-after",
    type=click.FloatRange(min=0.1),
    default=120.0,
    show_default=True,
    help="Seconds before re-waking a role that has mail waiting and nothing in process "
    "(doubles each time, up to 16 minutes).",
)


@main.command()
@click.option("--once", is_flag=True, help="Deliver what is in the outboxes now, then exit.")
@renotify_option
@root_argument
@root_option
def run(once: bool, renotify_after: float, root: str | None, root_opt: str | None) -> None:
    """Run the daemon in the foreground."""
    from handoffd.daemon import serve

    project = _project(root or root_opt)
    raise SystemExit(serve(project, once=once, renotify_after=renotify_after))


@main.command()
@renotify_option
@root_argument
@root_option
def start(renotify_after: float, root: str | None, root_opt: str | None) -> None:
    """Start the daemon in the background; returns once it runs."""
    from handoffd import lifecycle

    project = _project(root or root_opt)
    try:
        pid = lifecycle.start(project, ["--renotify-after", str(renotify_after)])
    except lifecycle.AlreadyRunning as running:
        click.echo(f"handoffd is already running for {project} ({running})")
        return
    except RuntimeError as error:
        log = lifecycle.daemon_path(project, "handoffd.log")
        raise click.ClickException(f"{error}; see {log}") from None
    click.echo(f"handoffd started for {project} (pid {pid})")


@main.command()
@root_argument
@root_option
def stop(root: str | None, root_opt: str | None) -> None:
    """Stop the daemon: TERM, up to 5 s, then KILL. Succeeds if none runs."""
    _stop(_root(root or root_opt))


def _stop(project: str) -> None:
    from handoffd import lifecycle

    if not os.path.isdir(project):  # a typo must not read as "nothing was running"
        raise click.ClickException(f"no such directory: {project}")
    pid = lifecycle.stop(project)
    click.echo(f"handoffd stopped (pid {pid})" if pid else f"no handoffd was running for {project}")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@root_argument
def stop_handoff_daemon(root: str | None) -> None:
    """Stop the handoffd daemon of ROOT (default: the project of the working directory)."""
    _stop(_root(root))


@main.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Swarm configuration (default: ROOT/.swarmforge/swarmforge.conf, else the sample).",
)
@click.argument("root", required=False, type=click.Path(file_okay=False))
@root_option
def init(config_file: str | None, root: str | None, root_opt: str | None) -> None:
    """Lay out a project: git worktrees, handoff folders, roles.tsv, tmux socket."""
    from handoffd import project

    try:
        base = project.locate(root or root_opt, os.getcwd())
        chosen = project.configuration(base, config_file)
        if chosen is None:
            roles = ", ".join(config.load_roles(base))
            click.echo(
                f"{base}: kept roles.tsv ({roles}); to change the roles, write "
                f"{project.stored_configuration(base)} or pass --config"
            )
            return
        text, source = chosen
        windows = project.parse(text, source)
        changes = project.init(base, windows, remember=text)
    except (project.SwarmConfigError, config.ConfigError) as error:
        raise click.ClickException(str(error)) from None
    for change in changes:
        click.echo(f"created {change}")
    roles = ", ".join(f"{w.role} ({w.mode})" for w in windows)
    click.echo(f"{base}: {roles}" + ("" if changes else " — already up to date"))


@main.command()
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="NAME=COMMAND",
    help="The command line for an agent name in roles.tsv (repeatable). "
    "Built in: shell (your $SHELL), demo (the scripted demo agent).",
)
@click.option(
    "--check-after",
    type=click.FloatRange(min=0.0),
    default=1.0,
    show_default=True,
    help="Seconds after which each started session must still run (0: do not check).",
)
@click.option(
    "--mcp",
    "register_mcp",
    is_flag=True,
    help="Register `handoffd mcp` in each worktree's .mcp.json, for the role that works there.",
)
@renotify_option
@root_argument
@root_option
def up(
    agents: tuple[str, ...],
    check_after: float,
    register_mcp: bool,
    renotify_after: float,
    root: str | None,
    root_opt: str | None,
) -> None:
    """Start the swarm: a tmux session per role, and the daemon."""
    from handoffd import lifecycle, swarm

    project_root = _project(root or root_opt)
    commands = dict(_agent_pair(value) for value in agents)
    running = lifecycle.holder(project_root)
    try:
        if register_mcp:  # before the agents start: a harness reads it when it starts
            for role in config.load_roles(project_root).values():
                click.echo(f"mcp: {swarm.write_mcp_config(project_root, role)}")
        socket, started = swarm.up(
            project_root, commands, ("--renotify-after", str(renotify_after))
        )
        dead = swarm.died(socket, started, check_after)
        roles = config.load_roles(project_root)
    except (config.ConfigError, RuntimeError, OSError) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"swarm up for {project_root}; started: {', '.join(started) or 'nothing new'}")
    pid = lifecycle.holder(project_root)
    click.echo(f"daemon: {'already running' if running else 'started'} (pid {pid})")
    for role in roles.values():
        click.echo(f"  {role.name:<12} tmux -S {socket} attach -t ={role.session}")
    click.echo(f"log: {os.path.join(project_root, config.SWARMFORGE, 'daemon', 'handoffd.log')}")
    for session, how in dead.items():
        click.echo(f"DIED: {session}: its agent exited at once ({how})", err=True)
    if dead:
        raise click.ClickException(
            "some agents did not stay up; fix their command lines (--agent NAME=COMMAND), "
            "then run `handoffd up` again"
        )


def _agent_pair(value: str) -> tuple[str, str]:
    name, sep, command = value.partition("=")
    if not sep or not name or not command:
        raise click.BadParameter(f"expected NAME=COMMAND, got {value!r}", param_hint="--agent")
    return name, command


@main.command()
@root_argument
@root_option
def down(root: str | None, root_opt: str | None) -> None:
    """Stop the daemon and this project's tmux server, nothing else."""
    from handoffd import swarm

    pid, killed = swarm.down(_root(root or root_opt))
    click.echo(f"daemon: {'stopped pid ' + str(pid) if pid else 'was not running'}")
    click.echo(f"tmux server: {'stopped' if killed else 'was not running'}")


@main.command()
@click.option("--rounds", type=click.IntRange(min=1), default=20, show_default=True)
@click.option(
    "--miss-rate",
    type=click.FloatRange(0.0, 0.9),
    default=0.0,
    show_default=True,
    help="Share of wake-ups the scripted agents ignore; re-notify must carry the work.",
)
@click.option("--renotify-after", type=click.FloatRange(min=0.1), default=1.0, show_default=True)
@click.option("--keep", is_flag=True, help="Leave the swarm running to attach and watch.")
@click.option("--seed", type=int, default=1, show_default=True)
def demo(rounds: int, miss_rate: float, renotify_after: float, keep: bool, seed: int) -> None:
    """A live two-agent swarm in a throwaway directory, ending with a checked summary."""
    from handoffd import demo as demo_module

    summary = demo_module.run(rounds, miss_rate, renotify_after, keep, seed)
    click.echo(demo_module.render(summary))
    raise SystemExit(0 if summary.ok else 1)


@main.command(add_help_option=False, context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(args: tuple[str, ...]) -> None:
    """Measure drain, pickup latency, start-up and idle cost against this disk's limit."""
    from handoffd import bench as benchmark  # its options live there: `handoffd bench --help`

    benchmark.main.main(list(args), prog_name="handoffd bench")
