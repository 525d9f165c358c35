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
