"""``loadtest ab``: the paired runs of two or more sides, their sweep and search, the
decision's inputs, and the deployments ab starts (side types).
"""
