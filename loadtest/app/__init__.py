"""The application layer: use cases built on the engine, the features and the report.

``run`` (one run, planned and run here or scaled out), ``process`` (what one process
that sends load runs), ``scale`` (workers and Ray), ``capacity`` (``loadtest sweep``),
``ab`` (paired comparisons and the deployments they start) and ``engines`` (llama.cpp,
vLLM, the twin); ``options`` and ``deployment`` are shared by all of them. The
import-linter contracts in pyproject.toml hold the order between them.
"""
