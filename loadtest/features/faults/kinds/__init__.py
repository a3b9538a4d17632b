"""loadtest's own fault kinds, one module each, registered as plugins (``loadtest.faults``).

pyproject.toml lists them as entry points, the way a third-party package lists its own
(docs/plugins.md); ``loadtest.features.faults.registry`` finds them by name.
"""
