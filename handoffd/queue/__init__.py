"""The queue's state machine and its folders: queueing, taking and finishing, refusals, reports,
pools, heartbeats, one role's scan.
"""
