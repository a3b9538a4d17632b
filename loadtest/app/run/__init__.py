"""One run as the command line asks for it: planned, then run in this process or scaled
out (``job``), and the trace export of a run folder.
"""
