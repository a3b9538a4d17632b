"""A run over worker processes or Ray tasks: the split, the coordinator, each worker's
main, and the merge of their results.
"""
