"""Live outputs: a run's figures where operators look while it runs (docs/live.md).

Nothing is imported here: the command line reads the registered kinds' flags
(``live.kinds``) on every start, and the servers' libraries load only when a flag asks.
"""
