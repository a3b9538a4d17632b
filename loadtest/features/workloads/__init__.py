"""loadtest's own workload kinds, one module each (``features.workload_kinds``)."""
