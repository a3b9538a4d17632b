"""Typed records and results.

``record``: one request (``RequestRecord``). ``summary``: the ``summary.json`` document
(``Summary`` and its blocks). ``verdict``: fault verdicts, SLO checks, driver health and
the four verdict states. ``sweep``: ``capacity.json``. ``io``: ``load_summary`` (every
reader's way in), ``dump_summary`` and the JSON Schema (``docs/summary.schema.json``).
``json``: ``JsonObject``, for free-form JSON from outside.
"""
