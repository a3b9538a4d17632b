"""What one process that sends load runs: its hooks assembled, its event loop, its
console and live file.
"""
