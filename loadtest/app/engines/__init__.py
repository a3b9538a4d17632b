"""Real engines loadtest starts and fits: llama.cpp, vLLM, the early-exit draft, and the
simulator twin fitted to a run.
"""
