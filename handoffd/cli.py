"""The `handoffd` command: the table's operations as click commands, and the commands
that run the daemon and the swarm (`run`, `start`, `init`, `up`…).

The operations' commands are made from their declarations (`handoffd.adapters.commands`)
when invoked; `web` and `mcp` import their stacks only when run, so `handoffd --help`
and the daemon commands never pay for the web stack or the MCP SDK.  Nothing imports
this module but `handoffd.entry`, the console script (`python -m handoffd` runs it too).
"""

from __future__ import annotations

import os

import click

from handoffd.adapters.commands import (
    Number,
    daemon_args,
    daemon_options,
    project_of,
    root_argument,
    root_of,
)
from handoffd.core import config
from handoffd.ops.table import BY_NAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from handoffd.remote.settings import Network

# commands defined elsewhere, imported on first use: name -> ("module:attribute", help)
LAZY: dict[str, tuple[str, str]] = {
    "web": ("handoffd.web.command:web", "Serve the board in a browser, live."),
}


class Group(click.Group):
    """The `handoffd` group: its own commands, the table's, and the `LAZY` ones."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *BY_NAME, *LAZY})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in BY_NAME:
            from handoffd.adapters.commands import command

            self.add_command(command(BY_NAME[name]), name)
        elif name not in self.commands and name in LAZY:
            module, _, attribute = LAZY[name][0].partition(":")
            self.add_command(getattr(__import__(module, fromlist=[attribute]), attribute), name)
        return super().get_command(ctx, name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, but an unknown name is matched against every command, made or not
        (click looks only among those made so far, the `run`, `start`… of this module),
        and the one nearest it is suggested (`statsu` → `status`)."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError:
            name = click.utils.make_str(args[0]) if args else ""
            near = config.nearest(name, self.list_commands(ctx))
            if not name or name in self.list_commands(ctx):
                raise
            said = f"No such command {name!r}." + (f" Did you mean {near!r}?" if near else "")
            raise click.UsageError(said, ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with its whole one-line summary: click shortens a help to fit one
        row (and a command made from the table has only its one line), so it is given
        whole here and wrapped under the name instead of cut."""
        rows = []
        for name in self.list_commands(ctx):
            # a command not made yet is shown by its one line, without importing it
            line = BY_NAME[name].help if name in BY_NAME else LAZY.get(name, ("", ""))[1]
            made = self.commands.get(name)
            rows.append((name, summary(made.help or "") if made is not None else line))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def summary(text: str) -> str:
    """A command's help up to its first blank line, as one line (`\\f` ends a help)."""
    first = text.split("\f")[0].strip().split("\n\n")[0]
    return " ".join(first.split())


@click.group(
    cls=Group,
    # a wide terminal gets wider help (click stops at 80 columns unless told)
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
)
@click.version_option(package_name="handoffd")
def main() -> None:
    """handoffd: the post office between AI coding agents."""


@main.command()
@click.option("--once", is_flag=True, help="Deliver what is in the outboxes now, then exit.")
@daemon_options()
@root_argument
def run(once: bool, root: str | None, **daemon: Any) -> None:
    """Run the daemon in the foreground."""
    from handoffd.daemon.daemon import serve
    from handoffd.ops.readiness import for_daemon

    raise SystemExit(serve(project_of(root), once, dependencies=for_daemon, **daemon))


@main.command()
@daemon_options()
@root_argument
def start(root: str | None, **daemon: Any) -> None:
    """Start the daemon in the background; returns once it runs."""
    from handoffd.core import lifecycle

    project = project_of(root)
    try:
        pid = lifecycle.start(project, daemon_args(daemon))
    except lifecycle.AlreadyRunning as running:
        click.echo(f"handoffd is already running for {project} ({running})")
        _say_nats(project)
        return
    except RuntimeError as error:
        log = lifecycle.daemon_path(project, "handoffd.log")
        raise click.ClickException(f"{error}; see {log}") from None
    click.echo(f"handoffd started for {project} (pid {pid})")
    _say_nats(project)


def _say_nats(project: str) -> None:
    """For a swarm over hosts: whether the daemon reached its NATS servers (§15), once it
    has tried them; nothing for a project without NATS."""
    from handoffd.remote import held, settings

    try:
        network = settings.load(project)
    except config.ConfigError:
        return  # the daemon logs it as config_error; init says it plainly
    if network is not None:
        click.echo(held.link_line(held.first_link(project), network.describe()))


@main.command()
@root_argument
def stop(root: str | None) -> None:
    """Stop the daemon: TERM, up to 5 s, then KILL. Succeeds if none runs."""
    _stop(root_of(root))


def _stop(project: str) -> None:
    from handoffd.core import lifecycle

    if not os.path.isdir(project):  # a typo must not read as "nothing was running"
        raise click.ClickException(f"no such directory: {project}")
    pid = lifecycle.stop(project)
    click.echo(f"handoffd stopped (pid {pid})" if pid else f"no handoffd was running for {project}")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@root_argument
def stop_handoff_daemon(root: str | None) -> None:
    """Stop the handoffd daemon of ROOT (default: the project of the working directory)."""
    _stop(root_of(root))


@main.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Swarm configuration (default: ROOT/.swarmforge/swarmforge.conf, else the sample).",
)
@click.option(
    "--host",
    "host",
    metavar="NAME",
    help="Name this machine as one of the configuration's hosts (kept in .swarmforge/host).",
)
@root_argument
def init(config_file: str | None, host: str | None, root: str | None) -> None:
    """Lay out a project: git worktrees, handoff folders, roles.tsv, tmux socket."""
    from handoffd.core import project

    try:
        base = project.locate(root, os.getcwd())
        chosen = project.configuration(base, config_file)
        if chosen is None:
            roles = ", ".join(config.load_roles(base))
            click.echo(
                f"{base}: kept roles.tsv ({roles}); to change the roles, write "
                f"{project.stored_configuration(base)} or pass --config"
            )
            return
        text, source = chosen
        swarm = project.parse_swarm(text, source)
        here = host if host is not None else config.this_host(base)
        project.check_hosts(swarm, here, source)
        for warning in project.host_warnings(swarm, source):
            click.echo(warning, err=True)
        before = project.role_names(base)
        changes = project.init(base, swarm.windows, text, here, swarm.hosts)
    except (project.SwarmConfigError, config.ConfigError) as error:
        raise click.ClickException(str(error)) from None
    for change in changes:
        click.echo(change)
    if swarm.urls:
        from handoffd.remote import settings

        network = settings.from_swarm(swarm, base, here)
        assert network is not None  # it has servers
        changes += _prepare_nats(network)
    roles = ", ".join(f"{w.role} ({w.mode}{'' if w.local(here) else ' on ' + w.host})"
                      for w in swarm.windows)  # fmt: skip
    click.echo(f"{base}: {roles}" + ("" if changes else " — already up to date"))
    added = [w.role for w in swarm.windows if w.local(here) and w.role not in (before or [])]
    if before is not None and added:  # a role added to a laid-out swarm has no session yet
        click.echo(f"run handoffd up to start {', '.join(added)}")


def _prepare_nats(network: Network) -> list[str]:
    """The stream and bucket of a swarm over several hosts, made if missing, else used as
    they are (or refused when the stream cannot hold this swarm's mail)."""
    try:
        from handoffd.remote import setup
    except ImportError as error:
        raise click.ClickException(
            f"this swarm uses NATS, whose client is missing ({error.name}): "
            "pip install 'handoffd[nats]'"
        ) from None
    try:
        prepared = setup.prepare(network)
    except ConnectionError as error:
        raise click.ClickException(
            f"cannot reach the NATS servers {network.describe()} ({error}); start them, or "
            "fix the `nats` line of swarmforge.conf, then run `handoffd init` again"
        ) from None
    if prepared.problem:
        raise click.ClickException(prepared.problem)
    for change in prepared.changes:
        click.echo(f"created {change}")
    found = prepared.found_line()
    if found:
        click.echo(found)
    for warning in prepared.warnings:
        click.echo(warning, err=True)
    return prepared.changes


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
    type=Number(),
    default=1.0,
    show_default=True,
    help="Seconds after which each started session must still run (0: do not check).",
)
@click.option(
    "--mcp",
    "register_mcp",
    is_flag=True,
    help="Register `handoffd mcp` for each role's agent: in its worktree's .mcp.json, and on "
    "Codex's command line.",
)
@daemon_options()
@root_argument
def up(
    agents: tuple[str, ...], check_after: float, register_mcp: bool, root: str | None,
    **daemon: Any,
) -> None:  # fmt: skip
    """Start the swarm: a tmux session per role, and the daemon."""
    from handoffd.core import lifecycle
    from handoffd.daemon import agents as kept
    from handoffd.daemon import swarm

    project_root = project_of(root)
    given = dict(_agent_pair(value) for value in agents)
    running = lifecycle.holder(project_root)
    try:
        here = config.this_host(project_root)
        reused = _kept_agents(project_root, given)  # what an earlier `up --agent` was given
        commands = {**reused, **given}
        if register_mcp:  # before the agents start: a harness reads it when it starts
            for role in config.load_roles(project_root).values():
                # another host's role has no worktree here; a pool's own row runs no agent
                if config.is_local(role, here) and not role.is_pool:
                    harness = swarm.harness_of(project_root, role, commands)
                    click.echo(f"mcp: {swarm.write_mcp_config(project_root, role, harness)}")
        options = daemon_args(daemon)
        said: list[str] = []
        socket, started = swarm.up(project_root, commands, tuple(options), mcp=register_mcp,
                                   said=said)  # fmt: skip
        for line in said:
            click.echo(line)
        woken = swarm.wake_waiting(project_root, started)
        dead = swarm.died(socket, started, check_after)
        roles = config.load_roles(project_root)
        if not dead:  # the next plain `up` starts them the same way
            kept.save(project_root, given)
    except (config.ConfigError, RuntimeError, OSError) as error:
        raise click.ClickException(str(error)) from None
    for role in roles.values():
        if role.session in started and role.agent in reused and role.agent not in given:
            click.echo(kept.said(role.name, reused[role.agent]))
    click.echo(f"swarm up for {project_root}; started: {', '.join(started) or 'nothing new'}")
    pid = lifecycle.holder(project_root)
    click.echo(f"daemon: {'already running' if running else 'started'} (pid {pid})")
    _say_nats(project_root)
    for role in roles.values():
        click.echo(f"  {role.name:<12} {_where(role, roles, here, socket)}")
    for name in woken:
        click.echo(f"{name}: mail is waiting; woken once its session is idle")
    click.echo(f"log: {os.path.join(project_root, config.SWARMFORGE, 'daemon', 'handoffd.log')}")
    for session, how in dead.items():
        click.echo(f"DIED: {session}: its agent exited at once ({how})", err=True)
    if dead:
        raise click.ClickException(
            "some agents did not stay up; fix their command lines (--agent NAME=COMMAND), "
            "then run `handoffd up` again"
        )


@main.command()
@click.argument("event", type=click.Choice(["stop", "session-start", "pre-compact"]))
@click.argument("given", required=False, metavar="[JSON]")
@click.option("--root", help="The project (default: the one of the working directory).")
def hook(event: str, given: str | None, root: str | None) -> None:
    """An agent harness's hook: the end of a turn, a new conversation, a compaction.

    Reads the harness's JSON on stdin (or as JSON, Codex's notify), prints only what the
    harness reads, and always exits 0.  `handoffd up` installs these; see `handoffd hooks`.
    """
    from handoffd.adapters.hooks import main as run_hook

    args = [event, *(["--root", root] if root else []), *([given] if given else [])]
    raise SystemExit(run_hook(args))


@main.command()
@click.option("--role", "only", metavar="ROLE", help="Only this role (default: every local one).")
@click.option("--remove", is_flag=True, help="Take handoffd's hooks out again.")
@root_argument
def hooks(only: str | None, remove: bool, root: str | None) -> None:
    """Install handoffd's hooks for the roles whose agent is Claude Code (Codex takes them
    on its command line: `handoffd up` starts it so)."""
    from handoffd.daemon import swarm

    project_root = project_of(root)
    try:
        here = config.this_host(project_root)
        roles = [r for r in config.load_roles(project_root).values() if config.is_local(r, here)]
        if only is not None:
            roles = [r for r in roles if r.name == only]
            if not roles:
                raise config.UnknownRole(only)
        commands = _kept_agents(project_root, {})  # a harness named by its command line
        kinds = {role.name: swarm.harness_of(project_root, role, commands) for role in roles}
        said = swarm.install_hooks(project_root, roles, kinds, remove)
    except (config.ConfigError, OSError) as error:
        raise click.ClickException(str(error)) from None
    for role in roles:
        if kinds[role.name] == "codex":
            said.append(f"hooks: {role.name}: Codex takes its notify program on its command "
                        "line: `handoffd up` starts it with it")  # fmt: skip
        elif kinds[role.name] == "generic":
            said.append(f"hooks: {role.name}: not Claude Code or Codex: nothing to install")
    for line in said:
        click.echo(line)


def _kept_agents(root: str, given: dict[str, str]) -> dict[str, str]:
    """The command lines an earlier `up --agent` kept, for the agents roles.tsv still
    names and this `up` was not given."""
    from handoffd.daemon import agents as kept

    named = {role.agent for role in config.load_roles(root).values()}
    return {name: cmd for name, cmd in kept.load(root).items() if name in named - set(given)}


def _where(role: config.Role, roles: dict[str, config.Role], here: str, socket: str) -> str:
    """How to reach a role's session (`tmux -S … attach -t =<session>`); a pool's own row
    and a row without a session have none to attach to (docs/protocol.md §17)."""
    if not config.is_local(role, here):
        return f"on host {role.host} (`handoffd up` there)"
    if role.is_pool:
        team = [n for n, r in roles.items() if r.pool == role.name and not r.is_pool]
        return f"pool of {len(team)}: attach to its members ({', '.join(team)})"
    if not role.session:
        return "no tmux session in roles.tsv: nothing to attach to"
    return f"tmux -S {socket} attach -t ={role.session}"


def _agent_pair(value: str) -> tuple[str, str]:
    name, sep, command = value.partition("=")
    if not sep or not name or not command:
        raise click.BadParameter(f"expected NAME=COMMAND, got {value!r}", param_hint="--agent")
    return name, command


@main.command()
@root_argument
def down(root: str | None) -> None:
    """Stop the daemon and this project's tmux server, nothing else."""
    from handoffd.daemon import swarm

    pid, killed = swarm.down(root_of(root))
    click.echo(f"daemon: {'stopped pid ' + str(pid) if pid else 'was not running'}")
    click.echo(f"tmux server: {'stopped' if killed else 'was not running'}")


@main.command()
@click.option("--rounds", type=click.IntRange(min=1), default=20, show_default=True)
@click.option(
    "--miss-rate",
    type=Number(0.0, 0.9),
    default=0.0,
    show_default=True,
    help="Share of wake-ups the scripted agents ignore; re-notify must carry the work.",
)
@daemon_options("renotify_after", "idle_after", "idle_wait", renotify_after=1.0, idle_after=0.5)
@click.option(
    "--busy-rate",
    type=Number(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="Share of tasks after which an agent prints on and on for 2 s: no wake-up may be "
    "typed into its pane meanwhile.",
)
@click.option(
    "--kill-agent",
    default=None,
    help="Kill this role's agent half-way through (coder or cleaner; with --pool, a member "
    "such as cleaner-2): its waiting card must show red, or its claim go back to the pool.",
)
@click.option("--keep", is_flag=True, help="Leave the swarm running to attach and watch.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--hosts",
    type=click.IntRange(1, 2),
    default=1,
    show_default=True,
    help="2: the coder and the cleaner on two hosts (two project roots here) over a local "
    "NATS server the demo starts and stops.",
)
@click.option(
    "--pool",
    type=click.IntRange(2, 32),
    default=None,
    help="The cleaner as a pool of this many scripted members sharing the coder's tasks "
    "(docs/protocol.md §17).",
)
def demo(
    rounds: int,
    miss_rate: float,
    renotify_after: float,
    busy_rate: float,
    kill_agent: str | None,
    idle_after: float,
    idle_wait: float,
    keep: bool,
    seed: int,
    hosts: int,
    pool: int | None,
) -> None:
    """A live two-agent swarm in a throwaway directory, ending with a checked summary."""
    from handoffd.board import status
    from handoffd.demos import demo as demo_module

    killable = ["coder", *(f"cleaner-{k}" for k in range(1, (pool or 0) + 1))] if pool else [
        "coder", "cleaner"]  # fmt: skip
    if kill_agent is not None and kill_agent not in killable:
        raise click.BadParameter(f"choose from {', '.join(killable)}", param_hint="--kill-agent")
    if pool:
        from handoffd.demos import demo_pool

        found = demo_pool.run(pool, rounds, kill_agent, seed, keep)
        click.echo(demo_pool.render(found))
        raise SystemExit(0 if found.ok else 1)
    if hosts > 1 and keep:
        raise click.UsageError("--keep is for one host; --hosts 2 always takes its swarm down")
    wakes = demo_module.Wakes(busy_rate, idle_after, idle_wait, kill_agent, status.unanswered)
    summary = demo_module.run(rounds, miss_rate, renotify_after, keep, seed, hosts=hosts,
                              wakes=wakes)  # fmt: skip
    click.echo(demo_module.render(summary))
    raise SystemExit(0 if summary.ok else 1)


BENCH_FROM_CHECKOUT = (
    "handoffd bench: the benchmark runs from a checkout of the repository, not from an "
    "installed package (in a checkout: `pip install -e .`, or `python -m benchmarks`)"
)


@main.command(add_help_option=False, context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(args: tuple[str, ...]) -> None:
    """Measure drain, pickup latency, start-up and idle cost against this disk's limit."""
    try:  # beside the package in a checkout (an editable install has its root on sys.path)
        from benchmarks import command  # type: ignore[import-not-found, unused-ignore]
    except ModuleNotFoundError as error:
        if error.name != "benchmarks":
            raise
        click.echo(BENCH_FROM_CHECKOUT, err=True)
        raise SystemExit(1) from None
    command.main.main(list(args), prog_name="handoffd bench")  # its options: `bench --help`


@main.command()
@root_argument
def mcp(root: str | None) -> None:
    """Serve the queue's commands as MCP tools on stdio, for the calling role
    ($SWARMFORGE_ROLE, else the working directory's)."""
    project = project_of(root)
    from handoffd.adapters import mcp as tools  # the SDK: only for this command

    tools.serve(project)


def resume() -> None:
    """The console script `resume`: `handoffd resume` under its own name (docs/protocol.md
    §10; the shim `resume.sh` runs it)."""
    from handoffd.adapters.commands import command

    command(BY_NAME["resume"]).main(prog_name="resume")
