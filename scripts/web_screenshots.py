"""Screenshots of the web board for the README: a live swarm, three pages, docs/*.png.

It lays out a throwaway project of three roles (`handoffd init`), starts the daemon,
and plays a short morning with the real helpers: handoffs with a dependency, work
taken and reported on (Markdown), a blocked card, a batch completed.  Then it serves
the board on a free loopback port and has headless Chromium (Debian's) shoot the open
cards, one card and the archive at a laptop's 1366x768.  Run from the checkout:

    .venv/bin/python scripts/web_screenshots.py [OUT_DIR]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

BIN = os.path.dirname(sys.executable)
CONF = """\
window lead    shell lead  task
window coder   shell coder task
window QA      shell qa    batch
"""


def run(*args: str, role: str | None = None, cwd: str | None = None, text: str = "") -> str:
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"]}
    env.pop("SWARMFORGE_ROLE", None)
    if role:
        env["SWARMFORGE_ROLE"] = role
        env["SWARMFORGE_AGENT"] = {"lead": "claude", "coder": "claude", "QA": "codex"}[role]
    done = subprocess.run(args, cwd=cwd, env=env, input=text, capture_output=True, text=True,
                          check=False, timeout=60)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: {done.stdout}{done.stderr}")
    return done.stdout


class Swarm:
    def __init__(self, root: str) -> None:
        self.root = root
        os.makedirs(os.path.join(root, ".swarmforge"))
        with open(os.path.join(root, ".swarmforge", "swarmforge.conf"), "w") as conf:
            conf.write(CONF)
        run("handoffd", "init", root)
        run("handoffd", "start", root)
        self.worktrees = {"lead": "lead", "coder": "coder", "QA": "qa"}

    def cwd(self, role: str) -> str:
        return os.path.join(self.root, ".worktrees", self.worktrees[role])

    def send(self, role: str, **headers: str) -> str:
        """Queue a handoff from `role`; its id."""
        commit = run("git", "rev-parse", "--short=10", "HEAD", cwd=self.cwd(role)).strip()
        fields = {"type": "git_handoff", "priority": "50", "commit": commit, **headers}
        if fields["type"] == "note":
            fields.pop("commit")
        draft = os.path.join(self.root, "draft.txt")
        with open(draft, "w") as file:
            file.write("".join(f"{key}: {value}\n" for key, value in fields.items()))
        queued = run("swarm_handoff", draft, role=role, cwd=self.cwd(role)).strip()
        name = os.path.basename(queued.split(": ", 1)[1])
        return name[3 : name.index("_to_")]

    def helper(self, role: str, *args: str, text: str = "") -> str:
        return run(*args, role=role, cwd=self.cwd(role), text=text)

    def delivered(self, count: int) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            cards = json.loads(run("handoffd", "status", "--json", "--all", "--root", self.root))
            if sum(card["state"] != "outbox" for card in cards) >= count:
                return
            time.sleep(0.1)
        raise SystemExit("the daemon did not deliver in time")


def morning(swarm: Swarm) -> str:
    """Play the swarm's morning; the card whose page is shot."""
    finished = [("QA", "smoke-test the 0.3 build", "Smoke test passed on 0.3.\n\n- 41 checks"),
                ("coder", "bump the version to 0.3", "Bumped; tagged v0.3.0."),
                ("QA", "triage issue 112", "Not a bug: documented in the FAQ."),
                ("coder", "parser: number literals", "Done, with hex and octal."),
                ("QA", "check the release notes", "Two typos fixed.")]  # fmt: skip
    for n, (role, task, report) in enumerate(finished, start=1):
        done = swarm.send("lead", to=role, task=task)
        swarm.delivered(n)
        swarm.helper(role, "ready_for_next")
        swarm.helper(role, "handoffd", "report", done, "--status", "DONE", "--file", "-",
                     text=report + "\n")  # fmt: skip
    lex = swarm.send("lead", to="coder", task="parser: tokenize string literals", depends_on=done)
    swarm.send("lead", to="coder", task="parser: error recovery", depends_on=lex)
    swarm.send("lead", to="QA", type="note", message="staging creds rotate at noon")
    swarm.send("lead", to="QA", task="fuzz the config loader", priority="70")
    schema = swarm.send("lead", to="coder", task="migrate the schema to v4", priority="60")
    swarm.send("lead", to="QA", task="integration tests for v4", depends_on=schema)
    swarm.send("coder", to="lead", task="review: CLI help texts")
    swarm.delivered(len(finished) + 7)
    swarm.helper("coder", "ready_for_next")
    swarm.helper("coder", "handoffd", "report", "--status", "RUNNING", "--file", "-",
                 text="Started: reading the lexer.\n")  # fmt: skip
    swarm.helper("coder", "handoffd", "report", "--status", "RUNNING", "--file", "-", text=(
        "## Tokenizer, half way\n\n"
        "- [x] plain and raw string literals\n- [ ] escapes (`\\u{…}`) next\n\n"
        "Tests: `pytest tests/test_lexer.py` — **18 passed**.\n\n"
        "<script>alert('reports are shown, never run')</script>\n"
    ))  # fmt: skip
    swarm.helper("coder", "handoffd", "block", schema,
                 "--reason", "needs the staging DB password from an operator")  # fmt: skip
    return f"{lex}@coder"


def shoot(url: str, card: str, out: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=["--no-sandbox"])  # fmt: skip
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        for path, name in (("/", "web-open"), ("/card/" + card, "web-card"),
                           ("/archive", "web-archive")):  # fmt: skip
            page.goto(url + path)
            page.screenshot(path=os.path.join(out, name + ".png"))
        browser.close()


def main() -> None:
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "docs")
    os.makedirs(out, exist_ok=True)
    base = tempfile.mkdtemp(prefix="handoffd-web-")
    root = os.path.join(base, "project")
    swarm = Swarm(root)
    web = None
    try:
        card = morning(swarm)
        web = subprocess.Popen([os.path.join(BIN, "handoffd"), "web", root, "--port", "0"],
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert web.stdout is not None
        url = web.stdout.readline().split(" on ", 1)[1].split()[0].rstrip("/")
        shoot(url, card, out)
        print(f"screenshots in {out}")
    finally:
        if web is not None:
            web.terminate()
            web.wait(10)
        run("handoffd", "stop", root)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
