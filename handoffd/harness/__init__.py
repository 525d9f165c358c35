"""Claude Code and Codex as they are (docs/protocol.md §16): what each harness shows, how a
line is typed into it, its hooks and its MCP configuration, one profile per harness."""
