"""A JSON settings file in a worktree, merged by key: Claude Code's
`.claude/settings.local.json` (handoffd's hooks) and `.mcp.json` (its MCP server).

A worktree is the agent's: what stands at those paths is hostile input (docs/protocol.md
Part II).  The folder is opened without following a link and every read and write goes
through its descriptor, so a link planted at `.claude` or at the file is never followed
(nor swapped in between a check and the write); a FIFO, a device, a huge file or a file
that is not a JSON object is never changed: `Unusable` says what stands there, and the
person keeps their file.  A write is a new file created exclusively beside the old one,
fsynced, then renamed over it (never written through a hard link), keeping the old
file's mode, 0600 for a file made new.  Other tools' settings are never touched: only
handoffd's own keys and hook entries change.
"""

from __future__ import annotations

import json
import os
import stat

from handoffd.core import durable, safeio

LIMIT = 1024 * 1024  # bytes: a settings file larger than this is left alone
NEW_FILE_MODE = 0o600  # settings may hold keys: a file handoffd makes is the owner's alone
NEW_FOLDER_MODE = 0o755  # as Claude Code makes `.claude/`


class Unusable(Exception):
    """A settings file handoffd leaves as it is; the message says where and why."""


def update(worktree: str, relative: str, change: object) -> bool:
    """Apply `change` (settings dict -> None, in place) to the JSON object at `relative`
    under `worktree`, made if absent (with its folder); True if the file changed.  Raises
    `Unusable` for anything but a regular file holding a JSON object, or a folder on the
    way that is a link or no folder."""
    folder_name, name = os.path.split(relative)
    path = os.path.join(worktree, relative)
    folder = _open_folder(worktree, folder_name)
    try:
        settings, mode = _read(folder, name, path)
        before = json.dumps(settings, sort_keys=True)
        change(settings)  # type: ignore[operator]
        if json.dumps(settings, sort_keys=True) == before and mode is not None:
            return False
        _write(folder, name, (json.dumps(settings, indent=2) + "\n").encode(), mode)
        return True
    finally:
        os.close(folder)


def _open_folder(worktree: str, relative: str) -> int:
    """The folder the file lives in (the worktree, or a folder of it made if missing),
    never through a link."""
    top = os.open(worktree, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # roles.tsv names it
    if not relative:
        return top
    try:
        try:
            os.mkdir(relative, NEW_FOLDER_MODE, dir_fd=top)
        except FileExistsError:
            pass
        try:
            return safeio.open_dir(relative, dir_fd=top)
        except OSError as error:
            shown = os.path.join(worktree, relative)
            raise Unusable(f"{shown}: {_what(error)}; left alone") from None
    finally:
        os.close(top)


def _what(error: OSError) -> str:
    return error.why if isinstance(error, safeio.Refused) else error.strerror or str(error)


def _read(folder: int, name: str, path: str) -> tuple[dict[str, object], int | None]:
    """The settings and the file's mode (None: no file yet)."""
    try:
        fd = safeio.open_regular(name, dir_fd=folder)
    except FileNotFoundError:
        return {}, None
    except OSError as error:
        raise Unusable(f"{path}: {_what(error)}; left alone") from None
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        data = safeio.read_fd(fd, LIMIT + 1)
    finally:
        os.close(fd)
    if len(data) > LIMIT:
        raise Unusable(f"{path} is larger than {LIMIT} bytes; left alone")
    try:
        settings = json.loads(data.decode("utf-8")) if data.strip() else {}
    except ValueError as error:
        raise Unusable(f"{path} is not valid JSON ({error}); left alone") from None
    except RecursionError:
        raise Unusable(f"{path} is nested too deep to read; left alone") from None
    if not isinstance(settings, dict):
        raise Unusable(f"{path} holds no JSON object; left alone")
    return settings, mode


def _write(folder: int, name: str, data: bytes, mode: int | None) -> None:
    durable.replace_at(folder, name, data, NEW_FILE_MODE if mode is None else mode)
