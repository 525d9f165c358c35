"""`python -m handoffd`: the `handoffd` console script, hooks' short path included."""

from handoffd.entry import main

main()
