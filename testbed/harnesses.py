"""Real Claude Code and Codex CLI for the tests and the benchmark: where `.ci/harnesses`
installed them, and a fresh home for each, pointed at a scripted model server
(`testbed.models`), that starts with no question asked.

The versions are pinned in `testbed/harnesses.tsv`, read by `.ci/harnesses` too: each
harness's first row is its pinned release, a later row an older one also qualified.  The
cache is `$HANDOFFD_HARNESSES`, else `${XDG_CACHE_HOME:-~/.cache}/handoffd/harnesses`, one
`<name>-<version>` folder each.  Each harness gets a HOME of its own: two instances that
share one race on their settings files.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

PINS = Path(__file__).with_name("harnesses.tsv")
API_KEY = "sk-ant-scripted-0123456789abcdefghijKLMNOP"  # any key: the model is scripted
CODEX_KEY_ENV = "SCRIPTED_MODEL_KEY"


@dataclass(frozen=True)
class Pin:
    name: str
    package: str
    version: str
    program: str


def releases(name: str | None = None) -> list[Pin]:
    """Every row of `harnesses.tsv` (of harness `name` only, when given), in its order."""
    found = []
    for line in PINS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            pin = Pin(*line.split("\t"))
            if name is None or pin.name == name:
                found.append(pin)
    return found


def pins() -> dict[str, Pin]:
    """Each harness's pinned release: its first row."""
    found: dict[str, Pin] = {}
    for pin in releases():
        found.setdefault(pin.name, pin)
    return found


def older(name: str) -> list[str]:
    """The versions of harness `name` qualified besides its pinned one."""
    return [pin.version for pin in releases(name)[1:]]


def release(name: str, version: str | None = None) -> Pin:
    """The row of harness `name` at `version` (its pinned release when None)."""
    if version is None:
        return pins()[name]
    for pin in releases(name):
        if pin.version == version:
            return pin
    raise KeyError(f"{name} {version} is not in {PINS.name}")


def cache() -> Path:
    given = os.environ.get("HANDOFFD_HARNESSES")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "handoffd" / "harnesses"


def program(name: str, version: str | None = None) -> Path | None:
    """The installed program of harness `name` at `version` (else its pinned one), or None."""
    pin = release(name, version)
    path = cache() / f"{pin.name}-{pin.version}" / "node_modules" / ".bin" / pin.program
    return path if os.access(path, os.X_OK) else None


def missing(name: str, version: str | None = None) -> str | None:
    """Why harness `name` (at `version`, else its pinned one) cannot be driven here, or None."""
    if program(name, version) is None:
        pin = release(name, version)
        return f"{pin.package}@{pin.version} is not installed in {cache()} (run .ci/harnesses)"
    return None


def claude_home(home: Path, projects: list[Path]) -> None:
    """A HOME in which Claude Code starts at once: onboarding done, the key approved,
    permissions bypassed, every worktree trusted, no auto-mode dialog."""
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    state = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "bypassPermissionsModeAccepted": True,
        "projects": {str(p): {"hasTrustDialogAccepted": True} for p in projects},
    }
    (home / ".claude.json").write_text(json.dumps(state))
    (home / ".claude" / "settings.json").write_text(json.dumps({"disableAutoMode": "disable"}))


def codex_home(home: Path, projects: list[Path], url: str) -> None:
    """A HOME in which Codex starts at once, its model the scripted server at `url`."""
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    lines = [
        'model = "scripted"', 'model_provider = "scripted"', 'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"', "", "[model_providers.scripted]",
        'name = "scripted"', f'base_url = "{url}/v1"', f'env_key = "{CODEX_KEY_ENV}"',
        'wire_api = "responses"',
    ]  # fmt: skip
    for path in projects:
        lines += ["", f"[projects.{json.dumps(str(path))}]", 'trust_level = "trusted"']
    (home / ".codex" / "config.toml").write_text("\n".join(lines) + "\n")


def claude_command(home: Path, url: str, version: str | None = None) -> str:
    """The `up --agent` command line of Claude Code (at `version`, else its pinned one) in
    `home`, its model at `url`."""
    env = {"HOME": str(home), "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": API_KEY,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
           "IS_SANDBOX": "1"}  # fmt: skip
    return _command(env, "claude", version, "--dangerously-skip-permissions")


def codex_command(home: Path, version: str | None = None) -> str:
    """The `up --agent` command line of Codex (at `version`, else its pinned one) in `home`
    (its model in its config)."""
    return _command({"HOME": str(home), CODEX_KEY_ENV: "scripted"}, "codex", version)


def _command(env: dict[str, str], name: str, version: str | None, *args: str) -> str:
    found = program(name, version)
    assert found is not None, missing(name, version)
    words = ["env", *(f"{k}={v}" for k, v in env.items()), str(found), *args]
    return " ".join(shlex.quote(word) for word in words)


def login_profile(home: Path) -> None:
    """A login profile that resets PATH, as many do (Codex runs commands in a login shell)."""
    (home / ".profile").write_text("PATH=/usr/local/bin:/usr/bin:/bin\nexport PATH\n")
