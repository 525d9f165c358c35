#!/usr/bin/env bash
# Agents and prompts name this script; it runs the installed `ready_for_next_batch` command.
exec ready_for_next_batch "$@"
