"""The table of operations: every operation of docs/protocol.md §3, §4, §8, §10 to §14,
declared once.

The console scripts, the `handoffd` click commands, the MCP tools (their schemas
included) and the web board's forms are all made from these declarations
(`handoffd.adapters`), so a new operation is one entry here and one function.  This
module is data: helpers read it on every call, and it imports nothing but the spec and the
format's limits (`handoffd.core.handoff`, which every helper loads anyway).
"""

from __future__ import annotations

from handoffd.core import limits
from handoffd.core.handoff import REASON_LIMIT
from handoffd.ops.spec import CHOICE, DRAFT, FLAG, FLOAT, INT, NAMES, STR, TEXT, Op, Param

# --- parameters many operations share ---------------------------------------------------

ROOT = Param("root", STR, "Project root (default: found from the working directory).",
             metavar="DIRECTORY", tool=False)  # fmt: skip
# Not a tool's: an MCP server acts for its own role only (docs/protocol.md §12, §15).
ROLE = Param("role", STR, "Act for this role (default: the calling role).", tool=False)
AGENT = Param("agent", STR, "Agent name (default: $SWARMFORGE_AGENT, else roles.tsv).")
CONVERSATION = Param("conversation", STR, "Conversation (default: $SWARMFORGE_CONVERSATION).")
WHO = (ROLE, AGENT, CONVERSATION)
ID = Param("id", STR, "A handoff id (as its file name spells it, or its card). Default: the "
           "work in process.", positional=True, metavar="[ID]")  # fmt: skip
JSON = Param("json", FLAG, "The command's --json output as the text.", default=False)
WINDOW = Param("window", FLOAT, "A claim is live while its heartbeat is younger than this.",
               default=limits.LIVENESS_WINDOW / 60, minimum=0, open_minimum=True,
               metavar="MINUTES")  # fmt: skip
INVALID_REASON = "INVALID_REASON"  # a reason's refusal (the other texts': INVALID_ARGUMENTS)


def reason(help: str, required: bool = False) -> Param:
    """A reason: one line of at most the format's `REASON_LIMIT` characters."""
    return Param("reason", STR, help, limit=REASON_LIMIT, token=INVALID_REASON, required=required)


REPORT_LIMIT = 64 * 1024
REPORT_TOO_LARGE = "REPORT_TOO_LARGE: more than {limit} bytes; at most {limit}"

# --- sending (docs/protocol.md §3, §10) ---------------------------------------------------

SEND_FIELDS = (
    Param("type", CHOICE, "git_handoff (work on a commit), note (one line) or packet (a brief).",
          choices=("git_handoff", "note", "packet"), required=True),
    Param("to", NAMES, "Recipient roles, in order: 'cleaner', 'architect,QA' or a list.",
          required=True),
    Param("priority", STR, "Two digits, 00 (first) to 99: '50' (a number is written as it reads).",
          required=True, schema={"type": ["string", "integer"]}),
    Param("task", STR, "git_handoff and packet: a short stable task name (≤ 80 characters)."),
    Param("commit", STR, "git_handoff: the commit, `git rev-parse --short=10 HEAD` of your "
          "worktree."),
    Param("message", STR, "note: the note, one line of at most 80 characters."),
    Param("depends_on", NAMES, "Ids of existing handoffs this one depends on (any type)."),
    Param("blocked_reason", STR, "Filed blocked from the start: why (one line, ≤ "
          f"{REASON_LIMIT} characters)."),
    Param("objective", STR, "packet: one sentence on one line."),
    Param("decisions_made", STR, "packet: choices already made, not to be re-litigated."),
    Param("ruled_out_paths", STR, "packet: approaches tried and why they failed."),
    Param("target_scope", STR, "packet: the files and areas to change, and what to leave alone."),
    Param("hard_constraints", STR, "packet: what must not break or change."),
    Param("verification", STR, "packet: the commands that show the work is done."),
    Param("if_blocked", STR, "packet: what to do when stuck."),
    Param("idempotency_key", STR, "Makes a retry safe: a second call with this key and the "
          "same fields returns the first call's path and queues nothing (for 24 hours at "
          "least); the same key with other fields is refused (IDEMPOTENCY_CONFLICT). Use a new "
          "key for each handoff.", schema={"minLength": 1, "maxLength": 200}),
)  # fmt: skip
DRAFT_FILE = Param("draft", DRAFT, "The draft file: header lines (a packet adds its sections).",
                   positional=True, required=True, metavar="DRAFT", tool=False)  # fmt: skip

# --- what the tools' structured results look like ----------------------------------------

ITEMS = {"type": "object", "properties": {"items": {"type": "array"}}, "required": ["items"]}
RESUME_OUT = {
    "type": "object",
    "properties": {
        "source": {"enum": ["live_file", "queue", "git", "cold_start"]},
        "role": {"type": "string"},
        "branch": {"type": "string"},
        "open_question": {"type": ["string", "null"]},
        "state": {"type": ["string", "null"]},
        "next_step": {"type": ["string", "null"]},
        "answer": {"type": ["string", "null"]},
        "reopened": {"type": ["string", "null"]},
        "lines": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["source", "role", "branch", "open_question", "state", "next_step", "lines"],
}
DIGEST_OUT = {
    "type": "object",
    "properties": {
        "markdown": {"type": "string"},
        "receipt": {"type": "object"},
        "gaps": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["markdown", "receipt", "gaps"],
}

# --- an operator's actions (docs/protocol.md §13) -------------------------------------------

CARD = Param("card", STR, "The card, <id>@<role>, as the board names it.", positional=True,
             required=True, metavar="CARD")  # fmt: skip
BY = Param("by", STR, "Who acts (default: $USER, else operator).")
ANSWER_LIMIT = 16 * 1024
INVALID_ANSWER = "INVALID_ANSWER"
ANSWER_TOO_LARGE = INVALID_ANSWER + ": more than {limit} bytes; at most {limit}"
ANSWER_TEXT = f"The answer, Markdown (1 byte to {ANSWER_LIMIT // 1024} KiB)."

# --- the operator as a sender and a mailbox (docs/protocol.md §18) --------------------------

SEND_LIMIT = 16 * 1024
SEND_USAGE = (
    "Usage: handoffd send TO [TEXT | --file F|-] [--task NAME] [--priority NN] "
    "[--depends-on ID]... [--blocked REASON] [--commit SHA] [--by NAME] [--root ROOT]\n"
    "TO: roles and pools, comma-separated, or all. Without --commit a note (its message the "
    "text's first line); with --task and --commit a git_handoff."
)
SEND_TOO_LARGE = ("HANDOFF INVALID: handoffd send\n\nErrors:\n- The text is more than "
                  "{limit} bytes, over the limit of {limit}.")  # fmt: skip
WORK_TEXT = f"The work, as text (1 byte to {SEND_LIMIT // 1024} KiB); its first line is the note."
REPLY_TEXT = f"The reply, as text (1 byte to {SEND_LIMIT // 1024} KiB)."
SAID = "The text, inline (or give --file)."
MAILBOX = "handoffd.ops.mailbox:"
OPERATOR_CARD = Param("card", STR, "The card, <id>@operator, as `handoffd inbox` names it.",
                      positional=True, required=True, metavar="CARD")  # fmt: skip


def text_params(help: str) -> tuple[Param, Param]:
    """The text of an operator's handoff: inline, or from `--file F|-`."""
    said = Param("said", STR, SAID, positional=True, metavar="[TEXT]", tool=False,
                 token="HANDOFF INVALID")  # fmt: skip
    return said, Param("text", TEXT, help, limit=SEND_LIMIT, over=SEND_TOO_LARGE, default="",
                       token="HANDOFF INVALID")  # fmt: skip


QUEUE = "handoffd.ops.queue:"
CLAIMS = "handoffd.ops.claims:"
VIEWS = "handoffd.ops.views:"
OPERATOR = "handoffd.ops.operator:"

OPS = (
    Op("send-handoff", QUEUE + "send", "Check a draft and queue it (as swarm_handoff does).",
       (DRAFT_FILE, *WHO, ROOT), tool_params=SEND_FIELDS,
       unknown_role="Unknown sender role: {}",
       about="Send work to other roles: checks the draft these fields make and queues it, "
       "exactly as swarm_handoff.sh does with a draft file. git_handoff needs to, priority, "
       "task and commit; note needs to, priority and message; packet needs to, priority, "
       "task and all seven sections. Prints 'HANDOFF QUEUED: <path>'; a bad draft is refused "
       "with every error listed ('HANDOFF INVALID'): fix the fields and send again. Give an "
       "idempotency_key to retry safely after a lost reply."),
    Op("ready-for-next", QUEUE + "take", "Take the next work in the role's receive mode.",
       (*WHO, ROOT), tool_params=(),
       about="Take your next work (as ready_for_next.sh): prints a TASK block (task mode) or a "
       "BATCH block (batch mode) with the payload to act on, the same block again if you "
       "already hold work, or NO_TASK when your inbox is empty (with NOT_READY when what "
       "waits is blocked or waits on other handoffs). An operator's answer to your blocked "
       "question shows as its ANSWER and ANSWER_FILE lines: read that file."),
    Op("ready-for-next-task", QUEUE + "take_task", "Take the next task (task mode).",
       (*WHO, ROOT), tool=False),
    Op("ready-for-next-batch", QUEUE + "take_batch", "Take the next batch (batch mode).",
       (*WHO, ROOT), tool=False),
    Op("done-with-current", QUEUE + "finish", "Finish the work in process, then take the next.",
       (*WHO, ROOT), tool_params=(),
       about="Finish the work you hold (as done_with_current.sh): prints COMPLETED: <path> per "
       "file, then takes and prints your next work (or NO_TASK). Send your results with "
       "send_handoff first. Refused with NO_CURRENT_TASK when you hold nothing."),
    Op("done-with-current-task", QUEUE + "finish_task", "Finish the task in process (task mode).",
       (*WHO, ROOT), tool=False),
    Op("done-with-current-batch", QUEUE + "finish_batch",
       "Finish the batch in process (batch mode).", (*WHO, ROOT), tool=False),
    Op("heartbeat", CLAIMS + "heartbeat", "Renew the role's heartbeat: its claims stay live.",
       (*WHO, ROOT),
       about="Show you are alive on long work: your claims stay live (yellow on the board). "
       "Every other tool that acts for you renews it too."),
    Op("idle", CLAIMS + "idle",
       "Mark the role idle: its next wake-up is typed at once (an end-of-turn hook).",
       (*WHO, ROOT),
       about="Say your turn is over and you are waiting: the daemon may type your next "
       "wake-up at once instead of waiting for your pane to go quiet. Call it last in a "
       "turn (an agent harness's end-of-turn hook runs `handoffd idle`)."),
    Op("release", CLAIMS + "release",
       "Put the work in process (a whole batch, whichever file ID names) back into new/.",
       (ID, *WHO, ROOT),
       about="Give back the work you hold (or the work holding id): it returns to your inbox's "
       "new/ for a later take, unclaimed. Prints RELEASED: <path> per file.",
       form="release", offer=("in_process",)),
    Op("block", CLAIMS + "block",
       "Set blocked_reason on the role's copy of ID (default: the work in process).",
       (ID, reason(f"Why it is blocked: one line, 1 to {REASON_LIMIT} characters.",
                   required=True), *WHO, ROOT),
       about="Mark your work in process (or the handoff id in your inbox) blocked, with the "
       "reason the operator sees in red on the board. Undo with unblock.",
       form="block", offer=("open",)),
    Op("unblock", CLAIMS + "unblock",
       "Remove blocked_reason from the role's copy of ID (default: the work in process).",
       (ID, *WHO, ROOT),
       about="Remove the blocked reason from your work in process (or from the handoff id).",
       form="unblock", offer=("blocked",)),
    Op("report", CLAIMS + "report",
       "Store a report on the work in process (or on ID) and act on its status.",
       (ID,
        Param("status", CHOICE, "RUNNING renews the claim (taking work if none is in process); "
              "BLOCKED sets the reason; DONE finishes the work as done_with_current does.",
              choices=("RUNNING", "BLOCKED", "DONE"), required=True),
        Param("text", TEXT, f"The report, Markdown (at most {REPORT_LIMIT // 1024} KiB).",
              limit=REPORT_LIMIT, over=REPORT_TOO_LARGE, default=""),
        reason("For BLOCKED (default: the report's first 'Blockers:' line)."),
        *WHO, ROOT),
       about="Report on your work in Markdown. RUNNING: progress (takes work first if you hold "
       "none); BLOCKED: sets the blocked reason (reason, else the report's first 'Blockers:' "
       "line); DONE: stores the report, then finishes as done_with_current."),
    Op("note", VIEWS + "note", "Add to the agent's sections of the live file HANDOFF.md.",
       (Param("decision", STR, "Add a choice not to be re-litigated to Decisions."),
        Param("ruled_out", STR, "Add '<approach>: <why it failed>' to Ruled Out."),
        Param("verify", STR, "Set the command that checks the work (Verify)."),
        ROLE, ROOT),
       about="Record in your live file HANDOFF.md what the next session must not redo: a "
       "decision, a ruled-out approach ('<approach>: <why it failed>') or the command that "
       "verifies the work. Give at least one."),
    Op("status", VIEWS + "status",
       "The board: every open card in its colour, red first (docs/protocol.md §8).",
       (Param("role", STR, "Only the cards of role R.", metavar="R"),
        Param("all", FLAG, "Completed (green) cards too.", default=False),
        Param("json", FLAG, "The cards as a JSON list.", default=False),
        WINDOW,
        Param("all_hosts", FLAG, "Every host's open cards, each with its host (a swarm over "
              "several machines).", default=False),
        Param("roles", FLAG, "The roles instead of the cards: each one's pane (idle, busy, "
              "gone, unknown), last wake-up and last take.", default=False),
        ROOT),
       needs="project", root_positional=True, watch=True, output=ITEMS,
       about="The board: every open card (red blocked or failed, yellow claimed, orange "
       "waiting) with its detail; structuredContent.items holds one object per card."),
    Op("stats", VIEWS + "stats",
       "The swarm's numbers per role over a window: delivered, taken, completed, waits, work.",
       (Param("since", STR, "The window: the last SPAN (30m, 24h, 7d, 2w).", default="24h",
              metavar="SPAN"),
        Param("role", STR, "Only role R (a pool, or operator).", metavar="R"),
        Param("json", FLAG, "The rows as one JSON object.", default=False),
        ROOT),
       needs="project", tool=False),
    Op("metrics", VIEWS + "metrics",
       "The swarm's numbers as Prometheus text (what `handoffd web` serves at /metrics).",
       (ROOT,), needs="project", tool=False),
    Op("resume", VIEWS + "resume",
       "Where were we: the role's state and next step, in at most five lines.",
       (ROLE, Param("json", FLAG, "One JSON object instead of lines.", default=False), ROOT),
       output=RESUME_OUT,
       about="Where were we: your role's state and next step, from the live file, the queue "
       "or git, in at most five lines (COLD_START when there is no history). Call it first in "
       "a new session."),
    Op("digest", VIEWS + "digest",
       "A thread written by the machine from the queue, its reports and git, with receipts.",
       (Param("id", STR, "A handoff id: its task's thread (or the handoff alone).",
              positional=True, metavar="[ID]"),
        Param("task", STR, "Digest every handoff with this task header."),
        Param("max_lines", INT, "At most this many lines (8 or more); the receipt is never "
              "dropped.", default=60),
        Param("json", FLAG, "markdown, receipt and gaps as JSON.", default=False),
        ROOT),
       needs="project", output=DIGEST_OUT,
       about="A thread's history written from the files (handoffs, commits, files, reports), "
       "every line citing its source, with a receipt of the ids it covers. Give id or task."),
    Op("carry-forward", VIEWS + "carry_forward",
       "The latest threads, newest activity first, each a digest with its receipt.",
       (Param("n", INT, "How many threads.", default=5, minimum=1, flag="-n"),
        Param("since", STR, "Only threads active since this ISO 8601 time."),
        Param("role", STR, "Only threads this role sent or received in."),
        Param("json", FLAG, "A list of digest objects.", default=False),
        ROOT),
       needs="project", root_positional=True, output=ITEMS,
       about="What happened here recently: the latest threads, newest activity first, each as "
       "a compact digest with its receipt. structuredContent.items holds the digests."),
    # A tool: an agent acting as lead may answer another agent.
    Op("answer", OPERATOR + "answer",
       "Answer an agent on an open card: stored with its reports, its block lifted, it is woken.",
       (CARD,
        Param("said", STR, "The answer, inline (or give --file).", positional=True,
              metavar="[TEXT]", tool=False, token=INVALID_ANSWER),
        Param("text", TEXT, ANSWER_TEXT, limit=ANSWER_LIMIT,
              over=ANSWER_TOO_LARGE, default="", token=INVALID_ANSWER),
        BY, ROOT),
       needs="project", form="answer", offer=("red",),
       tool_params=(CARD, Param("text", STR, ANSWER_TEXT, required=True, token=INVALID_ANSWER),
                    BY),
       about="Answer another agent's open card (as `handoffd answer`): the text is stored as "
       "an ANSWER report on it, its blocked reason is removed, and its role is woken to read "
       "the answer in its TASK block. Prints ANSWERED: <report path>."),
    # retry, dismiss and reopen: a person's decisions about what the queue holds, not an
    # agent's about its own work, so no tool offers them (an agent that could dismiss a
    # refusal could hide its own failed handoff from the board).
    Op("retry", OPERATOR + "retry",
       "Move a refused original (failed/) back into its sender's outbox to be checked again.",
       (CARD, Param("force", FLAG, "Move it even when it would be refused again "
                    "(STILL_INVALID).", default=False), ROOT),
       needs="project", tool=False, form="retry", offer=("failed",)),
    Op("dismiss", OPERATOR + "dismiss",
       "Put a refused original aside in failed/dismissed/: a green card, off the open board.",
       (CARD, reason("Why (default: dismissed)."), BY, ROOT),
       needs="project", tool=False, form="dismiss", offer=("failed",)),
    Op("reopen", OPERATOR + "reopen",
       "Move a completed copy back into its role's new/ (orange until taken); wake the role.",
       (CARD, reason("Why it is reopened (kept as reopened_reason)."), BY, ROOT),
       needs="project", tool=False, form="reopen", offer=("completed",)),
    # The operator's own: a person gives work and answers what agents hand to a person.
    # No tool offers them: an agent that could send as the operator could forge its word.
    Op("send", MAILBOX + "send",
       "Give the swarm work: a note (or git handoff) from the operator to roles, pools or all.",
       (Param("to", STR, "Recipients: roles and pools, comma-separated, or all.",
              positional=True, required=True, metavar="TO"),
        *text_params(WORK_TEXT),
        Param("task", STR, "A task name (at most 80 characters): the thread it is filed under."),
        Param("priority", STR, "Two digits, 00 (first) to 99.", default="50", metavar="NN"),
        Param("depends_on", NAMES, "An id of an existing handoff this work waits for "
              "(repeat for more).", metavar="ID"),
        Param("blocked", STR, "Filed blocked from the start: why (one line).", metavar="REASON"),
        Param("commit", STR, "With --task: a git_handoff of this commit of the main checkout.",
              metavar="SHA"),
        BY, ROOT),
       needs="project", tool=False),
    Op("inbox", MAILBOX + "inbox",
       "What agents handed to the operator (<id>@operator), oldest first.",
       (Param("all", FLAG, "The completed cards too.", default=False),
        Param("json", FLAG, "The cards as a JSON list.", default=False), ROOT),
       needs="project", tool=False, output=ITEMS),
    Op("reply", MAILBOX + "reply",
       "Reply to a card of the operator's inbox: a note back to its sender; the card is done.",
       (OPERATOR_CARD, *text_params(REPLY_TEXT), BY, ROOT),
       needs="project", tool=False, form="reply", offer=("for_you",)),
    Op("ack", MAILBOX + "ack",
       "Acknowledge a card of the operator's inbox without a reply: the card is done.",
       (OPERATOR_CARD, BY, ROOT),
       needs="project", tool=False, form="ack", offer=("for_you",)),
)  # fmt: skip

# --- the daemon's options: `run`, `start`, `up` and `demo` (docs/protocol.md §14, §17) ----

DAEMON = (
    Param("renotify_after", FLOAT, "Seconds before re-waking a role that has mail waiting and "
          "nothing in process (doubles each time, up to 16 minutes).",
          default=limits.RENOTIFY_AFTER, minimum=0.1),
    Param("idle_after", FLOAT, "Seconds a pane must stay unchanged before a wake-up is typed "
          "into it (0: at once).", default=limits.IDLE_AFTER, minimum=0.0),
    Param("idle_wait", FLOAT, "Seconds after which a wake-up is typed into a pane that never "
          "goes quiet (logged wake_forced).", default=limits.IDLE_WAIT, minimum=0.0),
    Param("stall_wakes", INT, "Unanswered wake-ups after which a waiting card turns red.",
          default=limits.STALL_WAKES, minimum=1),
    Param("reclaim_after", FLOAT, "Seconds without a heartbeat after which a pool member's "
          "claim goes back to its pool (the liveness window).", default=limits.RECLAIM_AFTER,
          minimum=1.0),
)  # fmt: skip

BY_NAME = {op.name: op for op in OPS}
TOOLS = {op.tool_name: op for op in OPS if op.tool}
