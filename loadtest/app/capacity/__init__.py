"""``loadtest sweep``: the capacity grid and the capacity search over a sweep dimension."""
