#!/usr/bin/env bash
# Agents and prompts name this script; it runs the installed `done_with_current` command.
exec done_with_current "$@"
