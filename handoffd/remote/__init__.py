"""One swarm across machines (docs/protocol.md §15): daemons that pass copies to each other
through NATS JetStream.  Only a project whose swarmforge.conf names `nats` servers imports
the client (`link`, and what uses it); `settings` is plain data."""
