"""The daemon (`handoffd run`): its loop, what it runs for other hosts, reclaiming a pool's work,
`up` and `down`, and the audit of what it promises.
"""
