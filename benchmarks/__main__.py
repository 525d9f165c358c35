"""`python -m benchmarks` from the repository's root: the same as `handoffd bench`."""

from benchmarks.command import main

main(prog_name="python -m benchmarks")
