"""`handoffd web`: serve the board over HTTP (docs/protocol.md §9).

The socket is bound here, before uvicorn starts, so `--port 0` can print the port the
system chose and a port already in use is a one-line error, not a traceback.
"""

from __future__ import annotations

import ipaddress
import socket
import sys

import click

from handoffd.adapters.commands import project_of, root_argument
from handoffd.board import cards


def is_loopback(host: str) -> bool:
    """Is `host` this machine only (127.0.0.0/8, ::1, `localhost`)?"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host`:`port` (0: a free port the system picks)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host.strip("[]"), port, type=socket.SOCK_STREAM
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


@click.command("web")
@root_argument
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option(
    "--window",
    type=click.FloatRange(min=0, min_open=True),
    default=cards.WINDOW_S / 60,
    show_default=True,
    metavar="MINUTES",
    help="A claim is live while its heartbeat is younger than this.",
)
@click.option("--all-hosts", is_flag=True, help="Every host's open cards (docs/protocol.md §15).")
def web(root: str | None, host: str, port: int, window: float, all_hosts: bool) -> None:
    """Serve the board in a browser: open cards live, the archive, each card's reports."""
    project = project_of(root)
    try:
        import uvicorn

        from handoffd.board.web.app import create_app
    except ImportError as error:
        raise click.ClickException(
            f"the web board needs its extra ({error.name} is missing): pip install 'handoffd[web]'"
        ) from None
    if not is_loopback(host):
        click.echo(
            f"handoffd web: WARNING: listening on {host}, not on loopback: anyone who can "
            "reach it reads the swarm's mail (every handoff and report).",
            err=True,
        )
    try:
        sock = bind(host, port)
    except OSError as error:
        raise click.ClickException(f"cannot listen on {host}:{port}: {error.strerror}") from None
    app = create_app(project, window_s=window * 60, host=host, port=sock.getsockname()[1],
                     all_hosts=all_hosts)  # fmt: skip
    config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False,
                            server_header=False, timeout_graceful_shutdown=2)  # fmt: skip
    click.echo(f"handoffd web: {project} on {url(sock)} (Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it has already handled
        pass
    click.echo("handoffd web: stopped", err=True)
