"""The ground floor: the `.handoff` format, durable writes and the careful reader, results, the
configuration and the project's layout, the log, one daemon per project.
"""
