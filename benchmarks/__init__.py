"""handoffd's benchmark: what this machine's disk allows and how close handoffd gets to it,
what the board, the web page and digests cost, and what an agent pays per helper call.

It lives beside the package, not in it: it runs from a checkout of the repository
(`handoffd bench`, or `python -m benchmarks`), ships in no wheel, and keeps its imports of
handoffd few (the operations' views, the file format, the durable write it measures
against).  Each scenario has one shape (`scenario.Scenario`): build its projects with
`testbed`, measure them, turn what it measured into figures judged by the targets it
declares, and render its table.
"""
