#!/usr/bin/env bash
# Agents and prompts name this script; it runs `handoffd resume` (docs/protocol.md §10).
exec handoffd resume "$@"
