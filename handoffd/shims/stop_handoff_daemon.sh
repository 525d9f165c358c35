#!/usr/bin/env bash
# Agents and prompts name this script; it runs the installed `stop_handoff_daemon` command.
exec stop_handoff_daemon "$@"
