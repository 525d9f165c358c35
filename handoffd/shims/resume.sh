#!/usr/bin/env bash
# Agents and prompts name this script; it runs the installed `resume` command (`handoffd resume`).
exec resume "$@"
