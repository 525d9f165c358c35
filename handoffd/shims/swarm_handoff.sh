#!/usr/bin/env bash
# Agents and prompts name this script; it runs the installed `swarm_handoff` command.
exec swarm_handoff "$@"
