"""The adapters of the table of operations: the console scripts, the click commands,
the MCP tools and the web board's forms, each made from the same declarations."""
