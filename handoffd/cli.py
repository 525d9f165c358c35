"""The `handoffd` command: thin click commands that parse options and hand off."""

from __future__ import annotations

import os

import click

from handoffd import config


def _root(value: str | None) -> str:
    """The project root given on the command line, or found from the working directory."""
    try:
        return os.path.abspath(value) if value else config.find_root()
    except config.ConfigError as error:
        raise click.ClickException(str(error)) from None


root_argument = click.argument("root", required=False, type=click.Path(file_okay=False))


@click.group()
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
def run(once: bool, renotify_after: float, root: str | None) -> None:
    """Run the daemon in the foreground."""
    from handoffd.daemon import serve

    raise SystemExit(serve(_project(root), once=once, renotify_after=renotify_after))


@main.command()
@renotify_option
@root_argument
def start(renotify_after: float, root: str | None) -> None:
    """Start the daemon in the background; returns once it runs."""
    from handoffd import lifecycle

    project = _project(root)
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
def stop(root: str | None) -> None:
    """Stop the daemon: TERM, up to 5 s, then KILL. Succeeds if none runs."""
    _stop(_root(root))


def _stop(project: str) -> None:
    from handoffd import lifecycle

    pid = lifecycle.stop(project)
    click.echo(f"handoffd stopped (pid {pid})" if pid else f"no handoffd was running for {project}")


@click.command()
@click.argument("root", type=click.Path(file_okay=False))
def stop_handoff_daemon(root: str) -> None:
    """Stop the handoffd daemon of ROOT (the older tool's command name)."""
    _stop(os.path.abspath(root))


@main.command(add_help_option=False, context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(args: tuple[str, ...]) -> None:
    """Measure drain, pickup latency, start-up and idle cost against this disk's limit."""
    from handoffd import bench as benchmark  # its options live there: `handoffd bench --help`

    benchmark.main.main(list(args), prog_name="handoffd bench")
